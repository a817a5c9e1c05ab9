"""The toy command line's input files: JSON matrices, masks, vectors and sentences, each refused with one line
(and before it is parsed) when it is no legal input: not a regular file, too big, too many numbers.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable
from typing import Any, NoReturn

import torch

from ...basics.config import MAX_DIM, MAX_TOKENS, tokenize
from .common import UsageError

FLOAT32_MAX = torch.finfo(torch.float32).max
# The largest input matrix the limits allow is MAX_TOKENS rows of MAX_DIM numbers (512 x 4096: real
# embeddings of a 4096-wide model). json.dumps writes a float in at most 24 characters
# ("-2.2250738585072014e-308"), 30 with a comma and indent=2's line and spaces: 32 bytes a number holds any
# such file, so 64 MiB. A bigger file is no legal input (given weights can be larger for the package, but
# not as JSON text for the command line), and reading one could exhaust memory before anything is checked.
MAX_INPUT_BYTES = MAX_TOKENS * MAX_DIM * 32
# Sizes checked before any work, so that no input costs more than about a gigabyte or a few seconds to refuse.
# JSON parsed into Python costs ~32 bytes a number and ~60 a list, whatever the file's size says: a file is
# counted (its commas and brackets) before it is parsed. The largest input matrix (MAX_TOKENS x MAX_DIM) is the
# most numbers one file may hold; a batch holds at most MAX_BATCH sequences (each one compute and one write).
MAX_NUMBERS = MAX_TOKENS * MAX_DIM  # 2,097,152: 512 x 4096
MAX_BATCH = 1024
MAX_LISTS = MAX_BATCH * (MAX_TOKENS + 1) + 1  # rows and sequences of the largest batch of the longest sequences


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a number JSON allows")


def _kind(mode: int) -> str:
    """What a path that is not a regular file is, for an error message."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def _check_file(mode: int, size: int, path: str, flag: str) -> None:
    """Refuse what is not a regular file, or is too big to be a legal input."""
    if not stat.S_ISREG(mode):
        # a device can be endless (/dev/zero) and a FIFO blocks until a writer comes: neither is read
        todo = "save the text to a file and give its path" if stat.S_ISFIFO(mode) else "give the path of a JSON file"
        raise UsageError(f"{flag}: {path!r} is {_kind(mode)}: {todo}")
    if size > MAX_INPUT_BYTES:
        raise UsageError(
            f"{flag}: {path!r} is {math.ceil(size / 2**20)} MiB, but input files may be at most "
            f"{MAX_INPUT_BYTES >> 20} MiB of JSON: give a smaller matrix"
        )


def read_text(path: str, flag: str) -> str:
    """A regular file's text, at most MAX_INPUT_BYTES, UTF-8 with or without a byte-order mark."""
    try:
        info = os.stat(path)
        _check_file(info.st_mode, info.st_size, path, flag)  # before opening: opening a FIFO blocks
        # O_NONBLOCK: should the path become a FIFO after the stat, opening it still returns at once
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with open(fd, "rb") as f:
            info = os.fstat(fd)
            _check_file(info.st_mode, info.st_size, path, flag)
            data = f.read(MAX_INPUT_BYTES + 1)  # a size from stat can be wrong: /proc files say 0
    except (OSError, ValueError) as exc:  # ValueError: a NUL character in the path
        raise UsageError(f"{flag}: cannot read {path!r}: {getattr(exc, 'strerror', None) or exc}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise UsageError(f"{flag}: {path!r} is over {MAX_INPUT_BYTES >> 20} MiB: give a smaller matrix")
    try:
        return data.decode("utf-8-sig")  # editors on Windows start UTF-8 files with a byte-order mark
    except UnicodeDecodeError:
        raise UsageError(f"{flag}: {path!r} is not UTF-8 text") from None


def read_json(path: str, flag: str) -> Any:
    """The JSON value in a file; NaN and Infinity literals are refused, and so is a file of more numbers or lists
    than any input may hold (counted before it is parsed: parsing costs ~32 bytes a number)."""
    text = read_text(path, flag)
    numbers, lists = text.count(",") + 1, text.count("[")
    if numbers > MAX_NUMBERS:
        raise UsageError(f"{flag}: {path!r} holds about {numbers:,} numbers; an input may hold at most "
                         f"{MAX_NUMBERS:,} ({MAX_TOKENS} x {MAX_DIM})")  # fmt: skip
    if lists > MAX_LISTS:
        raise UsageError(f"{flag}: {path!r} holds {lists:,} lists (rows); an input may hold at most {MAX_LISTS:,} "
                         f"(a batch of {MAX_BATCH} sequences of {MAX_TOKENS} rows)")  # fmt: skip
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise UsageError(f"{flag}: {path!r} is nested too deeply") from None
    except ValueError as exc:  # json.JSONDecodeError, NaN/Infinity, integers with too many digits
        raise UsageError(f"{flag}: {path!r} is not valid JSON: {exc}") from None


def read_matrix(path: str, flag: str) -> list[list[float]]:
    """A rectangular JSON list of rows of finite numbers that fit a float32."""
    return _matrix_value(read_json(path, flag), path, flag)


def read_matrix_rows(value: list[list[Any]], path: str, flag: str) -> list[list[float]]:
    """The rows, checked: all as long as the first, each entry a number that fits a float32. A matrix that torch
    reads as one and whose numbers all fit is checked at once; any other is walked to say where it is wrong."""
    if _fits(value):
        return value
    for i, row in enumerate(value):
        if len(row) != len(value[0]):
            sizes = f"row 1 has {len(value[0])} numbers, row {i + 1} has {len(row)}"
            raise UsageError(f"{flag}: the matrix is not rectangular: {sizes}")
        for x in row:
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise UsageError(f"{flag}: row {i + 1} holds {json.dumps(x)[:40]}, not a number")
            if not (isinstance(x, int) or math.isfinite(x)) or abs(x) > FLOAT32_MAX:
                shown = str(x) if len(str(x)) <= 12 else str(x)[:9] + "..."
                raise UsageError(f"{flag}: {shown} in row {i + 1} does not fit a float32 (at most {FLOAT32_MAX:.3g})")
    return value


def _fits(value: list[list[Any]]) -> bool:
    """Whether the rows are a rectangular matrix of numbers (no true/false) that all fit a float32, checked in torch
    (a second a million numbers faster than walking them)."""
    try:
        t = torch.tensor(value, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        return False
    if t.dim() != 2 or not bool(torch.isfinite(t).all() and t.abs().max() <= FLOAT32_MAX):
        return False
    return not any(type(x) is bool for row in value for x in row)  # torch reads true as 1


def read_mask(path: str, flag: str = "--custom-mask") -> list[list[bool]]:
    """A T_q x T_k mask: rows of true/false or 1/0, bare or as {"mask": rows} (the dashboard's export)."""
    value = read_json(path, flag)
    if isinstance(value, dict):
        if "mask" not in value:
            raise UsageError(f'{flag}: {path!r} holds an object without a "mask" entry')
        value = value["mask"]
    if not isinstance(value, list) or not value or not all(isinstance(row, list) for row in value):
        raise UsageError(f"{flag}: {path!r} must hold a list of rows of true/false, e.g. [[true, false], [true, true]]")
    for i, row in enumerate(value):
        if not all(x is True or x is False or (type(x) is int and x in (0, 1)) for x in row):
            raise UsageError(f"{flag}: row {i + 1} must hold only true/false or 1/0")
    return [[bool(x) for x in row] for row in value]


def sentence_reader(name: str) -> Callable[[str], str]:
    """The reader of --sentence-file (name "sentence") or --cross-sentence-file: a file's text, or from a
    .json file a JSON string or an object's `name` entry (the mask editor's mask.json)."""
    flag = "--" + name.replace("_", "-") + "-file"

    def read(path: str) -> str:
        if not path.lower().endswith(".json"):
            return read_text(path, flag)
        value = read_json(path, flag)
        if isinstance(value, dict):
            if name not in value:
                raise UsageError(f'{flag}: {path!r} holds an object without a "{name}" entry')
            value = value[name]
        if not isinstance(value, str):
            raise UsageError(f'{flag}: {path!r} must hold a JSON string or an object with a "{name}" string')
        return value

    return read


def count_words(sentence: str | None) -> int:
    return len(tokenize(sentence)) if sentence else 0


def read_vector(path: str, flag: str) -> list[float]:
    """A JSON list of finite numbers that fit a float32 (a bias)."""
    value = read_json(path, flag)
    if not isinstance(value, list) or not value:
        raise UsageError(f"{flag}: {path!r} must hold a list of numbers, e.g. [0.5, -1]")
    return read_matrix_rows([value], path, flag)[0]


READERS: dict[str, Callable[[str, str], Any]] = {"matrix": read_matrix, "vector": read_vector, "mask": read_mask}
BATCHABLE = ("embeddings", "cross_embeddings")  # a (B, T, d) file of these: a batch (basics.core.compute_batch)


def read_inputs(path: str, flag: str) -> list:
    """Input rows: a (T, d) matrix, or a (B, T, d) batch of them, every sequence of one shape."""
    value = read_json(path, flag)
    if not (isinstance(value, list) and value and isinstance(value[0], list) and value[0]
            and isinstance(value[0][0], list)):  # fmt: skip
        return _matrix_value(value, path, flag)
    if len(value) > MAX_BATCH:
        raise UsageError(f"{flag}: {path!r} holds a batch of {len(value):,} sequences; at most {MAX_BATCH} are "
                         "computed at once: split the file")  # fmt: skip
    for b, sequence in enumerate(value):
        if not isinstance(sequence, list) or not sequence or not all(isinstance(r, list) and r for r in sequence):
            raise UsageError(f"{flag}: sequence {b + 1} of the batch in {path!r} is not a matrix (a list of rows)")
        if (len(sequence), len(sequence[0])) != (len(value[0]), len(value[0][0])):
            raise UsageError(
                f"{flag}: a batch is (B, T, d): sequence 1 is {len(value[0])}x{len(value[0][0])} but sequence "
                f"{b + 1} is {len(sequence)}x{len(sequence[0])}; pad them to one length"
            )
        read_matrix_rows(sequence, path, f"{flag} (sequence {b + 1})")
    return value


def _matrix_value(value: Any, path: str, flag: str) -> list[list[float]]:
    if not isinstance(value, list) or not value or not all(isinstance(row, list) and row for row in value):
        raise UsageError(f"{flag}: {path!r} must hold a matrix: a list of rows of numbers, e.g. [[1, 0], [0, 1]]")
    return read_matrix_rows(value, path, flag)


def is_batch(rows: Any) -> bool:
    """Whether read inputs are a (B, T, d) batch rather than one (T, d) matrix."""
    return rows is not None and isinstance(rows[0][0], list)
