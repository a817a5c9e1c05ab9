"""The command line: `python -m attention [--preset NAME] [--FIELD VALUE ...] [--format table|json|script]`.

Every Config field is a flag (`d_k` is `--d-k`), matrices are JSON files, and flags given override the
preset's values. Bad flags or values exit with status 2 and one line on stderr, never a traceback.

    python -m attention --list-presets
    python -m attention --preset chef-causal --format json
    python -m attention --sentence "the cat sat on the mat" --heads 2 --mask causal
    python -m attention --model minilm --layer 3 --head 1 --sentence "The animal didn't cross the street."
    python -m attention --embeddings batch.json --heads 2 --format json   # a (B, T, d) batch: {"batch": [...]}

With --model, the result is one head of a pretrained model (attention.models.minilm) on the sentence: `compute` of
its `head_config`, the model's subword tokens as labels; --layer and --head pick the head (they are not Config
settings), and --sentence is the only setting it takes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import stat
import sys
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import torch

from ...basics import presets
from ...basics.config import MAX_DIM, MAX_TOKENS, SETTINGS, Config, tokenize
from ...basics.core import Result, batch_results, compute
from ...basics.params import flag
from .. import export, script

PROG = "attention"
FLOAT32_MAX = torch.finfo(torch.float32).max
WEIGHT_FIELDS = tuple(name for name, s in SETTINGS.items() if s.when == ("init", "given"))  # w_* and b_*
# The largest input matrix the limits allow is MAX_TOKENS rows of MAX_DIM numbers (512 x 4096: real
# embeddings of a 4096-wide model). json.dumps writes a float in at most 24 characters
# ("-2.2250738585072014e-308"), 30 with a comma and indent=2's line and spaces: 32 bytes a number holds any
# such file, so 64 MiB. A bigger file is no legal input (given weights can be larger for the package, but
# not as JSON text for the command line), and reading one could exhaust memory before anything is checked.
MAX_INPUT_BYTES = MAX_TOKENS * MAX_DIM * 32
OVERFLOW = "the numbers overflow float32 (inputs or weights too large): scale them down"
OUT_OF_MEMORY = "not enough memory for these sizes: try fewer tokens or heads, or smaller d_model, d_k or d_v"
# Sizes checked before any work, so that no input costs more than about a gigabyte or a few seconds to refuse.
# JSON parsed into Python costs ~32 bytes a number and ~60 a list, whatever the file's size says: a file is
# counted (its commas and brackets) before it is parsed. The largest input matrix (MAX_TOKENS x MAX_DIM) is the
# most numbers one file may hold; a batch holds at most MAX_BATCH sequences (each one compute and one write).
MAX_NUMBERS = MAX_TOKENS * MAX_DIM  # 2,097,152: 512 x 4096
MAX_BATCH = 1024
MAX_LISTS = MAX_BATCH * (MAX_TOKENS + 1) + 1  # rows and sequences of the largest batch of the longest sequences
# --block-size keeps every tile's state (its scores, m, l and output so far) to show them: at most TILE_BYTES of
# them, and MAX_TILES tiles (each a line of output), with TILE_OVERHEAD bytes of Python objects each.
TILE_BYTES = 256 << 20
MAX_TILES = 1 << 14
TILE_OVERHEAD = 2048


MODELS = ("minilm", "smollm2")  # all-MiniLM-L6-v2 (attention.models.minilm); smollm2: attention.io.cli.smollm2
MODEL_VIEW = (3, 1)  # the layer and head --model shows by default: the Real model page's opening view


class UsageError(Exception):
    """A bad flag or value: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse whose own errors are one line, like ours, instead of usage text and a message."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parser() -> argparse.ArgumentParser:
    """The command line, one flag a declared setting (attention.basics.params): its kind gives the type, choices or
    file reader, its help the text, and a setting used only with another's value says that it implies it."""
    p = _Parser(
        prog=f"python -m {PROG}",
        description="Attention one step at a time: every intermediate of self-, masked, multi-head and "
        "cross-attention. Flags override the preset's values.",
        allow_abbrev=False,
    )
    p.add_argument("--list-presets", action="store_true", help="list the presets and exit")
    p.add_argument("--preset", metavar="NAME", help="start from a tutorial preset (see --list-presets)")
    p.add_argument(
        "--format", choices=("table", "json", "script"), default="table", help="table (default), json, or script"
    )
    how = p.add_argument_group("how LLMs run it (output modes, not Config settings)").add_argument
    how("--decode", action="store_true", help="generate the tokens one at a time with a KV cache: each step's "
        "one row of weights, its context, the cache size and the work; needs a causal or window mask (implies "
        "--mask causal when no mask is given)")  # fmt: skip
    how("--block-size", type=int, metavar="B", help="FlashAttention's tiled online softmax over blocks of B keys: "
        "every tile's running max m and sum l, and the largest difference from the ordinary softmax")  # fmt: skip
    p.add_argument(
        "--train",
        metavar="TASK",
        help="train a tiny transformer (induction, reverse, sort, previous_token) "
        "and print its snapshots; its own flags: python -m attention --train induction --help",
    )
    real = p.add_argument_group("a pretrained model's head (not Config settings)").add_argument
    real("--model", choices=tuple(MODELS), help="one head of all-MiniLM-L6-v2 on --sentence, instead of a toy; "
         "smollm2: SmolLM2-135M-Instruct (its own flags: python -m attention --model smollm2 --help)")  # fmt: skip
    real("--layer", type=int, metavar="N", help=f"with --model: the layer, from 0 (default {MODEL_VIEW[0]})")
    real("--head", type=int, metavar="N", help=f"with --model: the head, from 0 (default {MODEL_VIEW[1]})")
    add = p.add_argument_group("config (defaults: the Raschka tutorial)").add_argument
    for name, s in SETTINGS.items():
        text = s.help.replace("%", "%%")  # argparse formats help with %
        if s.when is not None:
            text += f" (implies {flag(s.when[0])} {s.when[1]})"
        if name in BATCHABLE:
            text += " A (B, T, d) list of such matrices is a batch: every sequence with the same weights."
        if s.kind == "bool":
            add(flag(name), action=argparse.BooleanOptionalAction, help=text)
        elif s.kind == "choice":
            add(flag(name), choices=s.choices, help=text)
        elif s.kind in ("int", "float"):
            add(flag(name), type=int if s.kind == "int" else float, metavar=s.metavar or "X", help=text)
        else:
            add(flag(name), metavar=s.metavar, help=text)
        if s.kind == "text":
            # a sentence in a file never passes through a shell: the mask editor's command reads them from its mask.json
            where = f'its text, or a .json file\'s string or "{name}" entry'
            add(flag(name) + "-file", dest=name, type=sentence_reader(name), metavar="FILE",
                help=f"{flag(name)} from a file: {where}")  # fmt: skip
    return p


# reading flags ----------------------------------------------------------------------------------


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


def _words(sentence: str | None) -> int:
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


def build_config(args: argparse.Namespace) -> Config:
    """The preset's config (or the defaults) with every flag that was given put over it (`build`)."""
    return build(args)[0]


Batch = tuple[torch.Tensor, torch.Tensor | None]  # (B, T_q, d_model) inputs and (B, T_k, d_kv) key inputs or None


def build(args: argparse.Namespace) -> tuple[Config, Batch | None]:
    """The preset's config (or the defaults) with every flag that was given put over it, and the batch when
    --embeddings (or --cross-embeddings) holds one: the config then has the batch's first sequence.

    A setting used only with another's value (attention.basics.params: `when`) implies that value when it is the only
    one given for it: --temperature implies --scale temperature, --padding --mask padding, --w-query --init given.
    A preset's own matrices give way to flags they no longer fit: a new sentence of another length drops
    the preset's embeddings (keeping their width), new embeddings drop words that no longer label them,
    and an init other than 'given' drops the preset's given weights.
    """
    base = presets.get(args.preset).config if args.preset else Config()
    changes: dict[str, Any] = {}
    for name, s in SETTINGS.items():
        value = getattr(args, name)
        if value is not None:
            reader = read_inputs if name in BATCHABLE else READERS.get(s.kind)
            changes[name] = reader(value, flag(name)) if reader else value
    batch = _batch(changes.get("embeddings"), changes.get("cross_embeddings"))
    if batch is not None:
        changes["embeddings"] = batch[0][0].tolist()
        if batch[1] is not None:
            changes["cross_embeddings"] = batch[1][0].tolist()
    if args.embeddings is not None and args.d_model is None:
        changes["d_model"] = None  # the given embeddings' width
    for matrix, text in (("embeddings", "sentence"), ("cross_embeddings", "cross_sentence")):
        if matrix in changes and text not in changes and _words(getattr(base, text)) != len(changes[matrix]):
            changes[text] = None  # labelled x1..xT (y1..yT) instead
        rows = getattr(base, matrix)
        if text in changes and matrix not in changes and rows is not None and _words(changes[text]) != len(rows):
            changes[matrix] = None  # drawn for the new words instead
            if matrix == "embeddings" and args.d_model is None:
                changes["d_model"] = base.width
    if args.custom_mask is not None and args.mask not in (None, "custom"):
        raise UsageError(f"--custom-mask gives a custom mask, but --mask says {args.mask}: leave one out")
    implied: dict[str, set[str]] = {}
    for name in changes:
        when = SETTINGS[name].when
        if when is not None and getattr(args, when[0]) is None:
            implied.setdefault(when[0], set()).add(when[1])
    for name, values in implied.items():
        if len(values) == 1:  # --padding and --window together pick no mask: they contradict each other
            changes[name] = values.pop()
    if changes.get("init", base.init) != "given":
        changes.update({name: None for name in WEIGHT_FIELDS if name not in changes})
    return base.replace(**changes), batch


def _batch(inputs: list | None, key_inputs: list | None) -> Batch | None:
    """The batch the input files hold as tensors, or None when neither is one; a batch of keys needs a batch of
    queries of the same size."""
    if not is_batch(inputs) and not is_batch(key_inputs):
        return None
    if not is_batch(inputs):
        raise UsageError("--cross-embeddings holds a batch (B, T_k, d): give --embeddings a batch of the same B too")
    x = torch.tensor(inputs, dtype=torch.float32)  # (B, T_q, d_model)
    if key_inputs is None:
        return x, None
    if not is_batch(key_inputs) or len(key_inputs) != len(x):
        got = f"{len(key_inputs)} sequences" if is_batch(key_inputs) else "one matrix"
        raise UsageError(f"--embeddings holds a batch of {len(x)}, so --cross-embeddings must too; it holds {got}")
    return x, torch.tensor(key_inputs, dtype=torch.float32)  # (B, T_k, d_kv)


def model_result(args: argparse.Namespace, script: bool = False) -> Result | Config:
    """--model: compute(head_config(...)) of the chosen layer and head on --sentence, labelled with the model's
    subword tokens (with script, the head's config alone). Another Config flag, --preset, or a layer or head out
    of range is a UsageError. The model reads at most its 512 tokens: only the start of a long text is tokenized,
    and of the run only the hidden states are kept (a `Reading`)."""
    if args.preset:
        raise UsageError("--model runs a pretrained model's head; --preset picks a toy tutorial: leave one out")
    given = [flag(name) for name in SETTINGS if name != "sentence" and getattr(args, name) is not None]
    if given:
        raise UsageError(f"{given[0]} is a toy setting; with --model only --sentence, --layer and --head apply")
    from ...models import minilm  # only here: the other commands never read the model

    layer, head = (
        (MODEL_VIEW[0] if args.layer is None else args.layer),
        (MODEL_VIEW[1] if args.head is None else args.head),
    )
    model = minilm.load()
    if not 0 <= layer < len(model.layers):
        raise UsageError(f"--layer must be a layer of the model, 0 to {len(model.layers) - 1}, got {layer}")
    if not 0 <= head < model.heads:
        raise UsageError(f"--head must be a head of the model, 0 to {model.heads - 1}, got {head}")
    args.layer, args.head = layer, head  # for the table's first line
    run = minilm.read(model, minilm.DEFAULT_SENTENCE if args.sentence is None else args.sentence, 0)
    if script:
        return minilm.head_config(model, run, layer, head)
    return minilm.head_result(model, run, layer, head)


# output -----------------------------------------------------------------------------------------


# Characters a terminal acts on rather than shows: controls (escape sequences, bells), lone surrogates,
# line separators and the bidirectional overrides of "Trojan Source"; emoji joiners and accents stay.
_UNSAFE_CATEGORIES = {"Cc", "Cs", "Co", "Cn", "Zl", "Zp"}
_BIDI_CONTROLS = set("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _printable(text: str) -> str:
    """User text safe for a terminal: control and bidi-override characters are shown escaped."""
    return "".join(
        repr(c)[1:-1] if c in _BIDI_CONTROLS or unicodedata.category(c) in _UNSAFE_CATEGORIES else c for c in text
    )


def _short(label: str, width: int) -> str:
    label = _printable(label)
    return label if len(label) <= width else label[: width - 1] + "~"


def table(matrix: torch.Tensor, rows: Sequence[str], cols: Sequence[str]) -> list[str]:
    """A matrix as aligned text lines, rows and columns labelled."""
    width = 10
    left = min(max(len(_printable(r)) for r in rows), 18)
    lines = [" " * left + "".join(f"{_short(c, width - 1):>{width}}" for c in cols)]
    for label, values in zip(rows, matrix.tolist(), strict=True):
        lines.append(f"{_short(label, left):<{left}}" + "".join(f"{x:>{width}.4f}" for x in values))
    return lines


def render_table(result: Result, preset: presets.Preset | None = None) -> str:
    """The readable report: the setting, then per head omega, the weights and the context, then the output."""
    c = result.config
    q, k = export.labels(result.tokens), export.labels(result.key_tokens)
    d_k, d_v = c.head_dims
    scale = {"sqrt": f"1/sqrt({d_k})", "none": "none", "temperature": f"1/{c.temperature:g}"}[c.scale]
    out = []
    if preset is not None:
        out += [f"{preset.name}: {preset.source.title}", ""]
    out += [
        "tokens:     " + " ".join(_printable(t) for t in result.tokens),
        *(["key tokens: " + " ".join(_printable(t) for t in result.key_tokens)] if c.is_cross else []),
        (
            f"d_model {c.width}, {c.heads} head(s), {c.head_layout} layout, d_k {d_k}, d_v {d_v}, init {c.init}, "
            f"scale {scale}, mask {c.mask}, dropout {c.dropout:g}, seed {c.seed}"
        ),
    ]
    if result.has_empty_rows:
        empty = [q[i] for i in result.empty_rows.nonzero().flatten().tolist()]
        out.append("queries with every key masked (zero weights and context): " + ", ".join(map(_printable, empty)))
    dims_v = [f"v{j + 1}" for j in range(d_v)]
    for i in range(result.heads):
        head = f"head {i + 1}: " if result.heads > 1 else ""
        out += ["", f"{head}omega = Q K^T (queries x keys)", *table(result.omega[i], q, k)]
        out += ["", f"{head}weights = softmax(omega * {scale}) (rows sum to 1)", *table(result.weights[i], q, k)]
        if c.dropout > 0:
            out += ["", f"{head}weights after dropout p={c.dropout:g}", *table(result.dropped_weights[i], q, k)]
        out += ["", f"{head}context = weights @ V", *table(result.context[i], q, dims_v)]
    what = "concat(heads) @ W_out" + (" + b_out" if result.b_out is not None else "")
    if result.w_out is not None or result.heads > 1:
        title = what if result.w_out is not None else "concat(heads)"
        dims = [f"o{j + 1}" for j in range(result.output.shape[1])]
        out += ["", f"output = {title}", *table(result.output, q, dims)]
    return "\n".join(out) + "\n"


def list_presets() -> str:
    width = max(len(name) for name in presets.PRESETS)
    return "".join(f"{p.name:<{width}}  {p.source.seed_file[:3]}  {p.source.title}\n" for p in presets.PRESETS.values())


# entry point ------------------------------------------------------------------------------------


def fail(message: str) -> int:
    """Report bad input as one line on stderr; the exit status is 2."""
    print(f"{PROG}: error: {_printable(' '.join(str(message).split()))}", file=sys.stderr)
    return 2


def _write(write: Callable[[], None]) -> int:
    """Run an output mode: 0, or 2 with one line for what it refuses (a mask that cannot decode, a bad block)."""
    try:
        write()
    except (UsageError, ValueError) as exc:
        return fail(str(exc))
    except MemoryError:
        return fail(OUT_OF_MEMORY)
    return 0


def _rows(t: torch.Tensor) -> list:
    return t.tolist()


def write_decode(result: Result, fmt: str) -> None:
    """--decode: every step of generating the tokens with a KV cache (attention.decoding), as text or JSON."""
    from ... import decoding

    steps = decoding.decode_result(result)
    tokens = [_printable(t) for t in result.tokens]
    if fmt == "json":
        json.dump({"tokens": list(result.tokens), "kv_heads": steps[0].kv_heads, "steps": [
            {"t": s.t, "token": result.tokens[s.t], "allowed": _rows(s.allowed), "weights": _rows(s.weights),
             "context": _rows(s.context), "products": s.products, "cache_bytes": s.cache_bytes} for s in steps
        ]}, sys.stdout)  # fmt: skip
        sys.stdout.write("\n")
        return
    for s in steps:
        sys.stdout.write(f"step {s.t}: token {tokens[s.t]!s} arrives; the cache holds {s.t + 1} token(s), "
                         f"{s.cache_bytes} bytes; {s.products} q.k products\n")  # fmt: skip
        for h in range(s.heads):
            head = f"  head {h + 1} " if s.heads > 1 else "  "
            sys.stdout.write(head + "weights " + " ".join(f"{w:.4f}" for w in s.weights[h].tolist()) + "\n")


def _tiles(t_q: int, t_k: int, block_size: int) -> int:
    return math.ceil(t_q / block_size) * math.ceil(t_k / block_size)


def tile_bytes(t_q: int, t_k: int, heads: int, d_v: int, block_size: int) -> int:
    """What --block-size keeps of every tile (attention.llm.flash.Tile): the allowed mask, the scores, m, l and the
    output so far, and the Python objects around them."""
    per_tile = 4 * heads * (block_size * block_size + 2 * block_size + block_size * d_v) + block_size**2
    return _tiles(t_q, t_k, block_size) * (per_tile + TILE_OVERHEAD)


def write_tiled(result: Result, block_size: int, fmt: str) -> None:
    """--block-size B: FlashAttention's tiles (attention.llm.flash) over the computed queries, keys and values."""
    from ...llm import flash

    if not 1 <= block_size <= len(result.key_tokens):
        raise UsageError(f"--block-size must be from 1 to the {len(result.key_tokens)} keys, got {block_size}")
    t_q, t_k, d_v = len(result.tokens), len(result.key_tokens), result.values.shape[-1]
    if tile_bytes(t_q, t_k, result.heads, d_v, block_size) > TILE_BYTES or _tiles(t_q, t_k, block_size) > MAX_TILES:
        least = next(b for b in range(block_size, t_k + 1) if tile_bytes(t_q, t_k, result.heads, d_v, b) <= TILE_BYTES
                     and _tiles(t_q, t_k, b) <= MAX_TILES)  # fmt: skip
        raise UsageError(
            f"--block-size {block_size} makes {_tiles(t_q, t_k, block_size):,} tiles of {result.heads} head(s), "
            f"{tile_bytes(t_q, t_k, result.heads, d_v, block_size) / 2**20:,.0f} MiB to keep every tile's state "
            f"(at most {MAX_TILES:,} tiles, {TILE_BYTES >> 20} MiB): give --block-size {least} or more"
        )
    tiled = flash.tiled_attention(result.queries, result.keys, result.values, scale=result.scale, mask=result.mask,
                                  block_size=block_size)  # fmt: skip
    ordinary = flash.ordinary_attention(result.queries, result.keys, result.values, scale=result.scale,
                                        mask=result.mask)  # fmt: skip
    difference = float((tiled.output - ordinary).abs().max())
    memory = flash.memory_numbers(len(result.tokens), len(result.key_tokens), block_size, result.heads)
    if fmt == "json":
        json.dump({"block_size": block_size, "largest_difference": difference, "output": _rows(tiled.output),
                   "memory": memory._asdict(), "tiles": [
            {"query_rows": [t.query_rows.start, t.query_rows.stop], "key_cols": [t.key_cols.start, t.key_cols.stop],
             "skipped": t.skipped, "m": _rows(t.m), "l": _rows(t.l)} for t in tiled.tiles
        ]}, sys.stdout)  # fmt: skip
        sys.stdout.write("\n")
        return
    for t in tiled.tiles:
        where = f"queries {t.query_rows.start + 1}-{t.query_rows.stop}, keys {t.key_cols.start + 1}-{t.key_cols.stop}"
        if t.skipped:
            sys.stdout.write(f"{where}: skipped (the mask blocks the whole tile)\n")
            continue
        m = " ".join(f"{x:.4f}" for x in t.m[0].tolist())
        sum_l = " ".join(f"{x:.4f}" for x in t.l[0].tolist())
        sys.stdout.write(f"{where}: m = {m}; l = {sum_l}\n")
    sys.stdout.write(f"largest difference from the ordinary softmax: {difference:.3g}\n")
    sys.stdout.write(f"scores held: {memory.full_scores} numbers ordinary, {memory.tile_scores} a tile\n")


def write_batch(config: Config, batch: Batch, fmt: str) -> int:
    """A batch: every sequence's result, computed and written one at a time (memory: one result). JSON is
    {"batch": [one object per sequence, as --format json writes it]}; a table gives each sequence in turn."""
    inputs, key_inputs = batch
    if fmt == "json":
        sys.stdout.write('{"batch": [')
    for b, result in enumerate(batch_results(config, inputs, key_inputs)):
        if not _finite(result):
            return fail(f"sequence {b + 1}: {OVERFLOW}")
        if fmt == "json":
            sys.stdout.write(", " if b else "")
            export.write_json(result, sys.stdout)
        else:
            sys.stdout.write(("\n" if b else "") + f"sequence {b + 1} of {len(inputs)}\n")
            sys.stdout.write(render_table(result))
    if fmt == "json":
        sys.stdout.write("]}\n")
    return 0


def _finite(result: Result) -> bool:
    return bool(torch.isfinite(result.output).all() and torch.isfinite(result.weights).all())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on argv (sys.argv[1:] when None); returns the exit status: 0, or 2 for bad input.

    Whatever a library raises for memory (MemoryError, torch's "can't allocate memory") or tokenizers raises
    from its Rust side (a PanicException, not an Exception) is one line with status 2 too, never a traceback."""
    try:
        return _main(argv)
    except MemoryError:
        return fail(OUT_OF_MEMORY)
    except RuntimeError as exc:
        return fail(OUT_OF_MEMORY if "alloc" in str(exc) else f"cannot compute this config: {exc}")
    except BrokenPipeError:  # the reader left: __main__ ends quietly
        raise
    except Exception as exc:  # noqa: BLE001  one line, whatever went wrong (tokenizers' errors are Exception)
        return fail(f"{type(exc).__name__}: {exc}")
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":  # KeyboardInterrupt, SystemExit: as they are
            raise
        return fail(f"the tokenizer failed: {exc}")


def _main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a == "--train" or a.startswith("--train=") for a in argv):  # the tiny model's training: flags of its own
        from . import tiny as tiny_cli

        return tiny_cli.main(argv)
    if "--model=smollm2" in argv or any(
        a == "--model" and b == "smollm2" for a, b in zip(argv, argv[1:], strict=False)
    ):
        from . import smollm2 as smollm2_cli  # the chat model: flags of its own (--generate, --temperature)

        return smollm2_cli.main(argv)
    try:
        args = parser().parse_args(argv)
    except UsageError as exc:
        return fail(str(exc))
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    if args.list_presets:
        sys.stdout.write(list_presets())
        return 0
    try:
        if args.model is None and (args.layer is not None or args.head is not None):
            raise UsageError(
                f"{'--layer' if args.layer is not None else '--head'} picks a head of --model: add --model minilm"
            )
        if args.decode and args.block_size is not None:
            raise UsageError("--decode and --block-size show two different things: give one")
        mode = "--decode" if args.decode else "--block-size" if args.block_size is not None else None
        if mode and args.format == "script":  # refused before anything is computed
            raise UsageError(f"{mode} writes a table or JSON, not a script")
        if args.decode and args.mask is None and args.window is None and not args.model:
            args.mask = "causal"  # decoding generates left to right
        config, batch = (None, None) if args.model else build(args)
        if batch is not None:
            if mode or args.format == "script":
                raise UsageError(f"{mode or '--format script'} works on one sequence, but --embeddings holds a batch "
                                 f"of {len(batch[0])}: give one (T, d) matrix")  # fmt: skip
            return write_batch(config, batch, args.format)
        if args.format == "script":  # the script computes it: only its config is needed
            config = model_result(args, script=True) if args.model else config
            sys.stdout.write(script.script(config))
            return 0
        result = model_result(args) if args.model else compute(config)
        config = result.config
        if args.decode:
            return _write(lambda: write_decode(result, args.format))
        if args.block_size is not None:
            return _write(lambda: write_tiled(result, args.block_size, args.format))
    except (UsageError, ValueError, OverflowError) as exc:
        return fail(str(exc))
    except MemoryError:
        return fail(OUT_OF_MEMORY)
    except RuntimeError as exc:  # e.g. sizes too large for this machine's memory
        return fail(OUT_OF_MEMORY if "alloc" in str(exc) else f"cannot compute this config: {exc}")
    if not _finite(result):
        return fail(OVERFLOW)
    try:
        if args.format == "json":
            export.write_json(result, sys.stdout)  # streamed: the text can be gigabytes
            sys.stdout.write("\n")
        elif args.format == "script":
            sys.stdout.write(script.script(config))
        else:
            if args.model:
                sys.stdout.write(f"all-MiniLM-L6-v2, layer {args.layer}, head {args.head}\n\n")
            sys.stdout.write(render_table(result, presets.get(args.preset) if args.preset else None))
    except MemoryError:
        return fail(OUT_OF_MEMORY)
    return 0
