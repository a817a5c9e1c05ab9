"""Exports of a computation: a JSON object and CSV tables with safe labels.

`to_dict` / `to_json` give every matrix as a list of rows, and `write_json` streams the same text with
bounded memory (the command line's `--format json`);
`matrix_csv` writes one matrix for a spreadsheet, its token labels defused against formula injection.
`mask_json` and `cli_args` give a custom mask as the command line's `--custom-mask` file and the arguments
that read it. The standalone PyTorch script of a config is `attention.io.script`.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

import torch

from ..basics.config import SETTINGS, Config
from ..basics.core import Result
from ..basics.params import flag

# A spreadsheet evaluates a cell that starts with one of these as a formula (OWASP, "CSV Injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


# JSON -------------------------------------------------------------------------------------------


def _rows(t: torch.Tensor | None) -> list | None:
    """A tensor as nested lists; non-finite numbers (overflow) become None, since JSON has no inf or NaN."""
    if t is None:
        return None
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        return [_rows(row) for row in t] if t.dim() > 1 else [x if math.isfinite(x) else None for x in t.tolist()]
    return t.tolist()


def to_dict(result: Result) -> dict[str, Any]:
    """The Result as JSON-ready data: every matrix a list of rows, the mask a list of rows of true/false.

    Per head: w_query/w_key (d_model, d_k), w_value (d_model, d_v), queries (T_q, d_k), keys (T_k, d_k),
    values (T_k, d_v), omega/scaled/mask/weights (T_q, T_k), context (T_q, d_v). The -inf masked scores
    are left out (the mask says which weights are blocked); w_out and the biases are None when absent.
    """
    mask = result.mask.tolist()
    biases = {"b_query": result.b_query, "b_key": result.b_key, "b_value": result.b_value}  # (h, d) or None
    heads = []
    for i in range(result.heads):
        bias = {name: None if b is None else _rows(b[i]) for name, b in biases.items()}
        heads.append(
            {
                "w_query": _rows(result.w_query[i]),
                "w_key": _rows(result.w_key[i]),
                "w_value": _rows(result.w_value[i]),
                **bias,
                "queries": _rows(result.queries[i]),
                "keys": _rows(result.keys[i]),
                "values": _rows(result.values[i]),
                "omega": _rows(result.omega[i]),
                "scaled": _rows(result.scaled[i]),
                "mask": mask,
                "weights": _rows(result.weights[i]),
                "dropped_weights": _rows(result.dropped_weights[i]),
                "context": _rows(result.context[i]),
            }
        )
    return {
        "config": result.config.to_dict(),
        "tokens": list(result.tokens),
        "key_tokens": list(result.key_tokens),
        "embeddings": _rows(result.embeddings),
        "key_embeddings": _rows(result.key_embeddings),
        "scale": result.scale,
        "heads": heads,
        "concat": _rows(result.concat),
        "w_out": _rows(result.w_out),
        "b_out": _rows(result.b_out),
        "output": _rows(result.output),
        "empty_rows": result.empty_rows.tolist(),
    }


def to_json(result: Result, indent: int | None = None) -> str:
    """`to_dict` as strict JSON text (no NaN or Infinity tokens; non-ASCII escaped)."""
    return json.dumps(to_dict(result), indent=indent, allow_nan=False)


# Rows converted to Python numbers at a time while streaming: ~64k numbers, a few MB, whatever the sizes.
_STREAM_NUMBERS = 1 << 16


def write_json(result: Result, out: TextIO) -> None:
    """Write `to_json(result)` to out piece by piece, with memory bounded whatever the sizes.

    The text is the same, byte for byte: the same keys in the same order as `to_dict` (kept in step
    by tests), but matrices are converted and written a block of rows at a time instead of all at once.
    """
    mask = result.mask
    biases = {"b_query": result.b_query, "b_key": result.b_key, "b_value": result.b_value}  # (h, d) or None
    heads = [
        {
            "w_query": result.w_query[i],
            "w_key": result.w_key[i],
            "w_value": result.w_value[i],
            **{name: None if b is None else b[i] for name, b in biases.items()},
            "queries": result.queries[i],
            "keys": result.keys[i],
            "values": result.values[i],
            "omega": result.omega[i],
            "scaled": result.scaled[i],
            "mask": mask,
            "weights": result.weights[i],
            "dropped_weights": result.dropped_weights[i],
            "context": result.context[i],
        }
        for i in range(result.heads)
    ]
    document = {
        "config": result.config.to_dict(),
        "tokens": list(result.tokens),
        "key_tokens": list(result.key_tokens),
        "embeddings": result.embeddings,
        "key_embeddings": result.key_embeddings,
        "scale": result.scale,
        "heads": heads,
        "concat": result.concat,
        "w_out": result.w_out,
        "b_out": result.b_out,
        "output": result.output,
        "empty_rows": result.empty_rows,
    }
    for chunk in _json_chunks(document):
        out.write(chunk)


def _json_chunks(value: Any) -> Iterator[str]:
    """JSON text of value in pieces, as json.dumps(..., allow_nan=False) writes it; tensors as `_rows` gives them."""
    if isinstance(value, dict):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield (", " if i else "") + json.dumps(key) + ": "
            yield from _json_chunks(item)
        yield "}"
    elif isinstance(value, torch.Tensor) and value.dim() > 1 and len(value):
        # a block of rows is one json.dumps of a list of rows, less its brackets
        step = max(1, _STREAM_NUMBERS // max(1, value[0].numel()))
        finite = not value.is_floating_point() or bool(torch.isfinite(value).all())  # one check, not one a block
        yield "["
        for start in range(0, len(value), step):
            block = value[start : start + step]
            rows = block.tolist() if finite else _rows(block)
            yield (", " if start else "") + json.dumps(rows, allow_nan=False)[1:-1]
        yield "]"
    elif isinstance(value, torch.Tensor):
        yield json.dumps(_rows(value), allow_nan=False)
    elif isinstance(value, list) and any(isinstance(x, (dict, list, torch.Tensor)) for x in value):
        yield "["
        for i, item in enumerate(value):
            if i:
                yield ", "
            yield from _json_chunks(item)
        yield "]"
    else:
        yield json.dumps(value, allow_nan=False)


# CSV --------------------------------------------------------------------------------------------


def labels(tokens: Sequence[str]) -> list[str]:
    """Distinct axis labels for tokens: position, a space, then the word ("1 Life", "2 is").

    Repeated words ("the ... the") would otherwise collapse into one heatmap row or CSV label;
    the dashboard's heatmap axes and the CSV export both use these labels.
    """
    return [f"{i} {token}" for i, token in enumerate(tokens, start=1)]


def safe_cell(text: str) -> str:
    """Text a spreadsheet shows as text: a leading =, +, -, @, tab or CR gets a ' before it (OWASP)."""
    return "'" + text if text.lstrip(" ")[:1] in _FORMULA_START and text[:1] != "'" else text


def matrix_csv(
    matrix: torch.Tensor | Sequence[Sequence[float]],
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    corner: str = "",
) -> str:
    """CSV text of a (rows, cols) matrix: a header of column labels, then one row per row label.

    Labels are user text, so each is defused with `safe_cell` and quoted by the csv module; numbers are
    written in the shortest form that reads back to the same float32 (booleans as 1/0).
    """
    t = matrix if isinstance(matrix, torch.Tensor) else torch.tensor(matrix)
    if t.dim() != 2 or tuple(t.shape) != (len(row_labels), len(col_labels)):
        raise ValueError(
            f"matrix_csv needs a {len(row_labels)}x{len(col_labels)} matrix (rows x columns), got {tuple(t.shape)}"
        )
    cells = _bool_cells(t) if t.dtype == torch.bool else _float_cells(t)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([safe_cell(corner), *(safe_cell(c) for c in col_labels)])
    for label, row in zip(row_labels, cells, strict=True):
        writer.writerow([safe_cell(label), *row])
    return out.getvalue()


def _bool_cells(t: torch.Tensor) -> list[list[str]]:
    return [["1" if x else "0" for x in row] for row in t.tolist()]


def _float_cells(t: torch.Tensor) -> list[list[str]]:
    """Seven significant digits, widened to eight or nine where float32 needs them to read back exactly."""
    t = t.to(torch.float32)
    values = t.tolist()
    cells = [[f"{x:.7g}" for x in row] for row in values]
    back = torch.tensor([[float(s) for s in row] for row in cells], dtype=torch.float32)  # (rows, cols)
    inexact = ~((back == t) | (torch.isnan(back) & torch.isnan(t)))
    for i, j in inexact.nonzero().tolist():
        x = values[i][j]
        cells[i][j] = next(s for s in (f"{x:.8g}", f"{x:.9g}") if torch.tensor(float(s), dtype=torch.float32) == x)
    return cells


# The mask editor's export ------------------------------------------------------------------------


def mask_json(mask: Sequence[Sequence[bool]] | torch.Tensor, tokens: Sequence[str] = (),
              key_tokens: Sequence[str] | None = None, *, config: Config | None = None) -> str:  # fmt: skip
    """A (T_q, T_k) mask (True = may attend) as the command line's --custom-mask file.

    {"mask": rows of true/false, "tokens": [...], "key_tokens": [...]}; the command line reads "mask".
    With a config, its sentences come too ("sentence", "cross_sentence"): `cli_args` reads them from here
    (--sentence-file), so no user text has to pass through a shell.
    """
    rows = mask.tolist() if isinstance(mask, torch.Tensor) else [list(r) for r in mask]
    data: dict[str, Any] = {"mask": [[bool(x) for x in row] for row in rows]}
    if tokens:
        data["tokens"] = list(tokens)
        data["key_tokens"] = list(tokens if key_tokens is None else key_tokens)
    if config is not None:
        data.update({name: getattr(config, name) for name in _TEXT_FIELDS if getattr(config, name) is not None})
    return json.dumps(data)


# the mask file decides the mask: the mask setting and those used only with one of its values
_NOT_FLAGS = ("mask", *(name for name, s in SETTINGS.items() if s.when and s.when[0] == "mask"))
# user text: read from the mask file, never typed into a shell
_TEXT_FIELDS = tuple(name for name, s in SETTINGS.items() if s.kind == "text")
# Characters that every shell passes on as they are (bash, zsh, PowerShell, cmd.exe): no quotes, spaces, &, |,
# <, >, ^, %, !, $, `, ;, (, ), {, }, *, ?, # or newline, which one shell or another acts on.
_SHELL_SAFE = re.compile(r"[A-Za-z0-9._=/-]+")


def cli_args(config: Config, mask_path: str = "mask.json") -> list[str]:
    """Command-line arguments that recompute a config from the file `mask_json(..., config=config)` saved at
    mask_path (its mask and its sentences).

    Every other field that differs from Config()'s default becomes a flag; each one is a name, a number or
    a choice, inert in any shell (ValueError otherwise, and for matrix fields, which need JSON files).
    """
    changes = config.changes()
    args: list[str] = []
    for name, s in SETTINGS.items():
        value = getattr(config, name)
        if name in _NOT_FLAGS or name not in changes:
            continue
        if s.kind in ("matrix", "vector", "mask") and value is not None:
            raise ValueError(f"{name} is a {s.kind}: give it to the command line as a JSON file")
        if name in _TEXT_FIELDS and value is not None:
            args += [flag(name) + "-file", mask_path]
        elif s.kind == "bool":
            args.append(flag(name) if value else "--no-" + flag(name)[2:])
        elif value is None:
            raise ValueError(f"{name} cannot be left out on the command line")
        else:
            args.append(f"{flag(name)}={value}")  # one argument, so a value starting with - is no flag
            if not _SHELL_SAFE.fullmatch(args[-1]):
                raise ValueError(f"{name}={value!r} is no value a shell would pass on unchanged")
    return [*args, "--custom-mask", mask_path]
