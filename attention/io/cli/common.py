"""What every part of the command line shares: its errors (one line, exit status 2), the argument parser that
raises them, the result table, and the text it prints made safe for a terminal.
"""

from __future__ import annotations

import argparse
import sys
import unicodedata
from collections.abc import Sequence
from typing import NoReturn

import torch

from ...basics import presets
from ...basics.core import Result
from .. import export

PROG = "attention"
OVERFLOW = "the numbers overflow float32 (inputs or weights too large): scale them down"
OUT_OF_MEMORY = "not enough memory for these sizes: try fewer tokens or heads, or smaller d_model, d_k or d_v"


class UsageError(Exception):
    """A bad flag or value: reported as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse whose own errors are one line, like ours, instead of usage text and a message."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace | int:
    """argv parsed, or the exit status to return at once: 2 and one line for a bad flag, 0 after --help."""
    try:
        return parser.parse_args(list(argv))
    except UsageError as exc:
        return fail(str(exc))
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0


def fail(message: str) -> int:
    """Report bad input as one line on stderr; the exit status is 2."""
    print(f"{PROG}: error: {printable(' '.join(str(message).split()))}", file=sys.stderr)
    return 2


# output -----------------------------------------------------------------------------------------


# Characters a terminal acts on rather than shows: controls (escape sequences, bells), lone surrogates,
# line separators and the bidirectional overrides of "Trojan Source"; emoji joiners and accents stay.
_UNSAFE_CATEGORIES = {"Cc", "Cs", "Co", "Cn", "Zl", "Zp"}
_BIDI_CONTROLS = set("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def printable(text: str) -> str:
    """User text safe for a terminal: control and bidi-override characters are shown escaped."""
    return "".join(
        repr(c)[1:-1] if c in _BIDI_CONTROLS or unicodedata.category(c) in _UNSAFE_CATEGORIES else c for c in text
    )


def _short(label: str, width: int) -> str:
    label = printable(label)
    return label if len(label) <= width else label[: width - 1] + "~"


def table(matrix: torch.Tensor, rows: Sequence[str], cols: Sequence[str]) -> list[str]:
    """A matrix as aligned text lines, rows and columns labelled."""
    width = 10
    left = min(max(len(printable(r)) for r in rows), 18)
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
        "tokens:     " + " ".join(printable(t) for t in result.tokens),
        *(["key tokens: " + " ".join(printable(t) for t in result.key_tokens)] if c.is_cross else []),
        (
            f"d_model {c.width}, {c.heads} head(s), {c.head_layout} layout, d_k {d_k}, d_v {d_v}, init {c.init}, "
            f"scale {scale}, mask {c.mask}, dropout {c.dropout:g}, seed {c.seed}"
        ),
    ]
    if result.has_empty_rows:
        empty = [q[i] for i in result.empty_rows.nonzero().flatten().tolist()]
        out.append("queries with every key masked (zero weights and context): " + ", ".join(map(printable, empty)))
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
