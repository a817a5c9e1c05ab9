"""Exports of a computation: a JSON object, CSV tables with safe labels, and a standalone PyTorch script.

`to_dict` / `to_json` give every matrix as a list of rows, and `write_json` streams the same text with
bounded memory (the command line's `--format json`);
`matrix_csv` writes one matrix for a spreadsheet, its token labels defused against formula injection;
`script` writes the plain PyTorch that reproduces `compute(config)`, for the dashboard's Code panel.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, TextIO

import torch

from ..basics import masks, position
from ..basics.config import Config
from ..basics.core import Result
from ..basics.weights import stable

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


# Script -----------------------------------------------------------------------------------------


def script(config: Config) -> str:
    """A standalone PyTorch script (torch, math and json only) that reproduces `compute(config)`.

    It draws the inputs and weights from a seeded `torch.Generator` in the package's order, embeds given
    matrices as literals, writes out only the steps this config uses (grouped-query heads, keys of another
    width, position encodings, score biases and bottom-right causal masks included), and prints the softmax
    weights (h, T_q, T_k) and the output (T_q, d_out) as JSON. User text appears only inside string literals.
    """
    return "\n".join(_Script(config).lines) + "\n"


def _num(x: float) -> str:
    """A float as Python source: repr, and the infinities (a score bias blocks with -inf) as float("-inf")."""
    x = float(x)
    return repr(x) if math.isfinite(x) else f'float("{x}")'


def _literal(matrix: Sequence[Sequence[Any]], fmt=_num) -> str:
    """A nested list literal, one row per line."""
    rows = ",\n".join("    [" + ", ".join(fmt(x) for x in row) + "]" for row in matrix)
    return "[\n" + rows + ",\n]"


def _vector(values: Sequence[float]) -> str:
    return "[" + ", ".join(_num(x) for x in values) + "]"


class _Projection(NamedTuple):
    """One of the three projections as the script writes it."""

    name: str  # W_query
    bias: str  # b_query
    out: str  # queries
    given: Any  # the given matrix, or None
    given_bias: Any  # the given bias, or None
    heads: str  # "h", or "h_kv" for keys and values of grouped-query heads
    n_heads: int
    d_in: str  # "d_model", or "d_kv" for keys and values of another width
    d: str  # "d_k" or "d_v"
    x: str  # "x" or "x_kv"
    t: str  # "T_q" or "T_k"


class _Script:
    """Builds the script line by line; each step writes only the branch its config takes."""

    def __init__(self, config: Config) -> None:
        self.c = c = config
        self.split = c.head_layout == "split"
        self.derived = self.split and c.d_k is None and c.d_v is None  # d_k = d_v = d_out // h
        self.grouped = c.group > 1
        kv_heads, kv_n = ("h_kv", c.key_value_heads) if self.grouped else ("h", c.heads)
        d_kv = "d_kv" if c.key_width != c.width else "d_model"
        q = _Projection(
            "W_query", "b_query", "queries", c.w_query, c.b_query, "h", c.heads, "d_model", "d_k", "x", "T_q"
        )
        k = _Projection("W_key", "b_key", "keys", c.w_key, c.b_key, kv_heads, kv_n, d_kv, "d_k", "x_kv", "T_k")
        v = k._replace(name="W_value", bias="b_value", out="values", given=c.w_value, given_bias=c.b_value, d="d_v")
        self.projections = (q, k, v)
        self.d_o = "d_out" if self.split else "d_model"  # width of the output projection
        self.lines: list[str] = []
        self.steps = 0
        self.needs_math = c.scale == "sqrt" or c.init == "linear" or (c.init == "normal" and c.out_proj)
        # stable draws: every column of the weights from a generator of its own, and what comes after from another
        self.stable = stable(c)
        drawn_after = c.dropout > 0 or c.position == "learned" or self._key_inputs_drawn()
        draws = c.init in ("rand", "rand-transposed", "linear") or drawn_after
        self.reseeds = drawn_after if self.stable else draws
        t_q, t_k = len(c.tokens), len(c.key_tokens)
        # bottom-right: the queries are the last T_q tokens, at positions T_k - T_q onward (as compute places them)
        self.query_offset = position.query_offset(t_q, t_k, c.causal_align)
        self.positions = max(t_q + self.query_offset, t_k)  # the positions a table or RoPE's angles cover
        self.mask_tensor = self._mask()  # (T_q, T_k), built once: a custom one can be 512 x 512
        self.bias_blocks = c.score_bias is not None and any(x == -math.inf for row in c.score_bias for x in row)
        allowed = self.mask_tensor
        if self.bias_blocks:
            allowed = allowed & (torch.tensor(c.score_bias) > -math.inf)
        self.empty_rows = bool((~allowed.any(dim=-1)).any())  # a query that sees no key at all
        self.rule = self._mask_rule()
        self.header()
        self.inputs()
        self.weights()
        self.key_inputs()
        self.position_inputs()
        self.attention()
        self.output()

    def emit(self, *lines: str) -> None:
        self.lines.extend(lines)

    def section(self, title: str) -> None:
        self.steps += 1
        self.emit(f"# {self.steps}. {title}")

    # the steps ----------------------------------------------------------------------------------

    def header(self) -> None:
        c = self.c
        self.emit('"""Attention, step by step in plain PyTorch: reproduces attention.compute() for one config."""', "")
        imports = ["import hashlib"] * (self.stable and (c.init not in ("identity", "given") or self.reseeds))
        self.emit(*imports, "import json", *(["import math"] if self.needs_math else []), "", "import torch", "")
        if self.stable and c.init not in ("identity", "given"):
            self.emit("")
            self.column_def()
        elif c.init == "linear":
            self.emit("")
            self.linear_def()
        self.emit(f"seed = {c.seed}")
        d_k, d_v = c.head_dims
        if self.derived:
            self.emit(f"d_model, h, d_out = {c.width}, {c.heads}, {c.split_width}")
            self.emit("d_k = d_v = d_out // h  # split layout: one projection d_out wide, cut into h heads")
        elif self.split:
            self.emit(
                f"d_model, h, d_k, d_v = {c.width}, {c.heads}, {d_k}, {d_v}"
                "  # split layout: one projection h * d_k wide (values h * d_v), cut into h heads"
            )
            if c.out_proj:
                self.emit(f"d_out = {c.out_width}  # the output projection's width")
        else:
            self.emit(f"d_model, d_k, d_v, h = {c.width}, {d_k}, {d_v}, {c.heads}  # every head has its own weights")
        if self.grouped:
            self.emit(
                f"h_kv = {c.key_value_heads}  # key/value heads, each shared by h // h_kv query heads (grouped-query)"
            )
        if c.key_width != c.width:
            self.emit(f"d_kv = {c.key_width}  # the key/value inputs' width (kdim = vdim)")
        self.emit("")

    def column_def(self) -> None:
        """`column(...)` and `stable(...)`: stable draws, one generator a column, seeded from (seed, matrix, head,
        column), so that adding heads keeps the first heads' weights and a wider d_k keeps the first columns."""
        c = self.c
        with_bias = c.init != "normal" and (c.bias or (c.out_proj and c.out_bias))
        draw = {
            "normal": "torch.randn(d_in, generator=g)  # N(0, 1), scaled to the inputs below",
            "linear": "torch.empty(n).uniform_(-1 / math.sqrt(d_in), 1 / math.sqrt(d_in), generator=g)"
            "  # nn.Linear's U(-1/sqrt(d_in), 1/sqrt(d_in))",
        }.get(c.init, "torch.rand(n, generator=g)")
        self.emit(
            "def column(matrix, head, j, d_in" + (", bias=False" if with_bias else "") + "):",
            '    """Column j of one head\'s matrix, from a generator of its own'
            + (" (then its bias)" * with_bias)
            + '."""',
            '    digest = hashlib.sha256(f"{seed}/{matrix}/{head}/{j}".encode()).digest()',
            '    g = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))',
            *(["    n = d_in + bias"] if with_bias else ["    n = d_in"] * (c.init != "normal")),
            f"    return {draw}",
            "",
            "",
            "def stable(matrix, heads, d_in, d" + (", bias=False" if with_bias else "") + "):",
            '    """(heads, d_in, d): head i\'s columns whatever the number of heads'
            + (" (with a bias: d_in + 1 rows, the last the bias)" * with_bias)
            + '."""',
            "    return torch.stack([torch.stack([column(matrix, i, j, d_in"
            + (", bias" if with_bias else "")
            + ") for j in range(d)], dim=1) for i in range(heads)])",
            "",
            "",
        )

    def stable_weights(self) -> None:
        c = self.c
        bias = c.bias and c.init != "normal"
        for p in self.projections:
            drawn = f'stable("{p.name[2:].lower()}", {p.heads}, {p.d_in}, {p.d}' + (", bias=True)" if bias else ")")
            if self.split:
                w = self._width(p)
                rows = f"{p.d_in} + 1" if bias else p.d_in
                self.emit(f"{p.name} = {drawn}.permute(1, 0, 2).reshape({rows}, {w})  # heads side by side")
                if bias:
                    self.emit(f"{p.name}, {p.bias} = {p.name}[:-1], {p.name}[-1]  # ({p.d_in}, {w}), ({w},)")
            elif bias:
                self.emit(
                    f"{p.name} = {drawn}",
                    f"{p.name}, {p.bias} = {p.name}[:, :-1], {p.name}[:, -1:]"
                    f"  # ({p.heads}, {p.d_in}, {p.d}), ({p.heads}, 1, {p.d})",
                )
            else:
                self.emit(f"{p.name} = {drawn}  # ({p.heads}, {p.d_in}, {p.d})")

    def linear_def(self) -> None:
        """`linear(d_in, d_out)`: nn.Linear's default init drawn from g, with a bias argument only if needed."""
        c = self.c
        with_bias = c.bias or (c.out_proj and c.out_bias)
        self.emit(
            "def linear(d_in, d_out" + (", bias=False" if with_bias else "") + "):",
            '    """nn.Linear(d_in, d_out)\'s default init, drawn from g; returned as x @ W: (d_in, d_out)'
            + (", and its bias" if with_bias else "")
            + '."""',
            "    w = torch.empty(d_out, d_in)",
            "    torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5), generator=g)  # U(-1/sqrt(d_in), 1/sqrt(d_in))",
        )
        if with_bias:
            self.emit(
                "    if not bias:",
                "        return w.T",
                "    b = torch.empty(d_out).uniform_(-1 / math.sqrt(d_in), 1 / math.sqrt(d_in), generator=g)",
                "    return w.T, b",
            )
        else:
            self.emit("    return w.T")
        self.emit("", "")

    def inputs(self) -> None:
        c = self.c
        self.section("inputs: one row per token")
        if c.embeddings is not None:
            self.emit(f"x = torch.tensor({_literal(c.embeddings)})  # (T_q, d_model) given embeddings")
        else:
            self.emit(f"tokens = {list(c.tokens)!r}")
            if c.embedding_init == "embedding" and self._table_words_include_keys():
                self.emit(f"key_tokens = {list(c.key_tokens)!r}")
            self.emit(self._generator("a private generator: the numbers torch.manual_seed(seed) gives"))
            if c.embedding_init == "embedding":
                self.vocab_table()
                self.emit("x = table[torch.tensor([vocab.index(t) for t in tokens])]  # (T_q, d_model)")
            else:
                self.emit(f"x = torch.{c.embedding_init}({len(c.tokens)}, d_model, generator=g)  # (T_q, d_model)")
        if not c.is_cross:
            self.emit("x_kv = x  # self-attention: keys and values come from the same tokens")
        elif c.cross_embeddings is not None:
            width = self.projections[1].d_in
            self.emit(f"x_kv = torch.tensor({_literal(c.cross_embeddings)})  # (T_k, {width}) given key/value inputs")
        elif self._key_init() == "embedding" and c.embeddings is None and c.embedding_init == "embedding":
            self.emit("x_kv = table[torch.tensor([vocab.index(t) for t in key_tokens])]  # (T_k, d_model)")
        self.emit("")

    def vocab_table(self) -> None:
        words = "set(tokens) | set(key_tokens)" if self._table_words_include_keys() else "set(tokens)"
        self.emit(
            f"vocab = sorted({words})  # the Raschka tutorial sorts its words",
            "table = torch.randn(len(vocab), d_model, generator=g)  # nn.Embedding initialises with randn",
        )

    def weights(self) -> None:
        c = self.c
        self.section("projections W_query, W_key, W_value, used as x @ W")
        if self.reseeds and not self.stable:
            self.emit(self._generator("reseeded before the weights, as the tutorials do"))
        if self.stable and c.init not in ("identity", "given"):
            self.stable_weights()
        elif c.init == "given":
            for p in self.projections:
                self.emit(self._given(p))
                if c.bias and p.given_bias is not None:
                    self.emit(self._given_bias(p))
            if c.bias and any(p.given_bias is None for p in self.projections):
                self.emit("# a bias that was not given is zero")
        elif c.init == "identity":
            for p in self.projections:
                if self.split:
                    w = self._width(p)
                    self.emit(f"{p.name} = torch.eye({p.d_in}, {w})  # ({p.d_in}, {w}): no projection")
                else:
                    self.emit(
                        f"{p.name} = torch.eye({p.d_in}, {p.d}).expand({p.heads}, -1, -1)"
                        f"  # ({p.heads}, {p.d_in}, {p.d}): no projection"
                    )
            if c.bias:
                self.emit("# the identity init has zero biases")
        elif c.init == "linear":
            self.linear_weights()
        else:
            self.rand_weights()
        if c.out_proj:
            self.out_weights()
        if self.stable and self.reseeds:
            self.emit(
                'digest = hashlib.sha256(f"{seed}/rest/0/0".encode()).digest()',
                'g = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))'
                "  # what is drawn after the weights",
            )
        self.emit("")

    def rand_weights(self) -> None:
        c = self.c
        transposed = c.init == "rand-transposed"
        for p in self.projections:
            if self.split:
                w = self._width(p)
                shape = f"{w}, {p.d_in}" if transposed else f"{p.d_in}, {w}"
                used = f".T  # ({p.d_in}, {w}), drawn as W x" if transposed else f"  # ({p.d_in}, {w})"
                self.emit(f"{p.name} = torch.rand({shape}, generator=g){used}")
                if c.bias:
                    self.emit(f"{p.bias} = torch.rand({w}, generator=g)  # ({w},)")
            else:
                shape = f"{p.heads}, {p.d}, {p.d_in}" if transposed else f"{p.heads}, {p.d_in}, {p.d}"
                used = f"({p.heads}, {p.d_in}, {p.d})"
                self.emit(
                    f"{p.name} = torch.rand({shape}, generator=g)"
                    + (f".transpose(1, 2)  # {used}, drawn as W x" if transposed else f"  # {used}")
                )
                if c.bias:
                    self.emit(f"{p.bias} = torch.rand({p.heads}, 1, {p.d}, generator=g)  # ({p.heads}, 1, {p.d})")

    def linear_weights(self) -> None:
        c = self.c
        bias = ", bias=True" if c.bias else ""
        if self.split:
            for p in self.projections:
                target = f"{p.name}, {p.bias}" if c.bias else p.name
                w = self._width(p)
                self.emit(f"{target} = linear({p.d_in}, {w}{bias})  # ({p.d_in}, {w}), cut into heads below")
            return
        q, k, v = self.projections
        if self.grouped:  # per head a query Linear; the first h_kv heads also a key and a value Linear
            self.emit(
                f"layers = [[linear(d_model, d_k{bias}), *([linear({k.d_in}, d_k{bias}), linear({v.d_in}, d_v{bias})]"
                " if i < h_kv else [])] for i in range(h)]  # per head: q, then k, v",
            )
        elif k.d_in != "d_model":
            self.emit(
                f"layers = [[linear(d_model, d_k{bias}), linear(d_kv, d_k{bias}), linear(d_kv, d_v{bias})]"
                " for _ in range(h)]  # per head: q, k, v"
            )
        else:
            self.emit(
                f"layers = [[linear(d_model, d{bias}) for d in (d_k, d_k, d_v)] for _ in range(h)]  # per head: q, k, v"
            )
        heads = " if len(head) > i" if self.grouped else ""
        if c.bias:
            self.emit(
                f"W_query, W_key, W_value = (torch.stack([head[i][0] for head in layers{heads}]) for i in range(3))",
                f"b_query, b_key, b_value = (torch.stack([head[i][1] for head in layers{heads}])[:, None]"
                " for i in range(3))",
            )
        else:
            self.emit(f"W_query, W_key, W_value = (torch.stack([head[i] for head in layers{heads}]) for i in range(3))")

    def out_weights(self) -> None:
        c = self.c
        d_o = self.d_o
        if self.stable and c.init not in ("identity", "given"):
            bias = c.out_bias and c.init != "normal"
            scale = " / math.sqrt(h * d_v)" if c.init == "normal" else ""
            self.emit(
                f'W_out = stable("out", 1, h * d_v, {d_o}'
                + (", bias=True)[0]" if bias else ")[0]")
                + scale
                + f"  # (h * d_v{' + 1' * bias}, {d_o})"
            )
            if bias:
                self.emit("W_out, b_out = W_out[:-1], W_out[-1]  # the last row is the bias")
            return
        if c.init == "given":
            self.emit(f"W_out = torch.tensor({_literal(c.w_out)})  # (h * d_v, {d_o})")
        elif c.init == "identity":
            self.emit(f"W_out = torch.eye(h * d_v, {d_o})  # (h * d_v, {d_o})")
        elif c.init == "linear":
            if c.out_bias:
                self.emit(
                    f"W_out, b_out = linear(h * d_v, {d_o}, bias=True)  # the output projection, (h * d_v, {d_o})"
                )
            else:
                bias = ", bias=False" if c.bias else ""
                self.emit(f"W_out = linear(h * d_v, {d_o}{bias})  # the output projection, (h * d_v, {d_o})")
        elif c.init == "rand-transposed":
            self.emit(f"W_out = torch.rand({d_o}, h * d_v, generator=g).T  # (h * d_v, {d_o})")
        else:
            self.emit(f"W_out = torch.rand(h * d_v, {d_o}, generator=g)  # (h * d_v, {d_o})")
        if c.out_bias and c.init in ("rand", "rand-transposed"):
            self.emit(f"b_out = torch.rand({d_o}, generator=g)  # ({d_o},)")
        elif c.out_bias and c.init == "given" and c.b_out is not None:
            self.emit(f"b_out = torch.tensor({_vector(c.b_out)})  # ({d_o},) given")
        elif c.out_bias and c.init in ("given", "identity"):
            self.emit("# the output bias is zero for this init")

    def key_inputs(self) -> None:
        """Key/value inputs that are drawn after the weights (Raschka's cross-attention cell)."""
        c = self.c
        if not self._key_inputs_drawn():
            return
        self.section("key/value inputs, drawn after the weights")
        if self._key_init() == "embedding":  # the query inputs drew no table: draw one now
            self.emit(f"key_tokens = {list(c.key_tokens)!r}")
            if c.embeddings is not None:
                self.emit(f"tokens = {list(c.tokens)!r}")
            self.vocab_table()
            self.emit("x_kv = table[torch.tensor([vocab.index(t) for t in key_tokens])]  # (T_k, d_model)")
        else:
            self.emit(f"x_kv = torch.{self._key_init()}({len(c.key_tokens)}, d_model, generator=g)  # (T_k, d_model)")
        self.emit("")

    def position_inputs(self) -> None:
        """A sinusoidal or learned position table, added to the inputs (query i and key j at positions i and j)."""
        c = self.c
        if c.position not in ("sinusoidal", "learned"):
            return
        t_q, t_k, p = len(c.tokens), len(c.key_tokens), self.positions
        if c.position == "sinusoidal":
            self.section("positions: the sinusoidal table of Attention Is All You Need, added to the inputs")
            self.emit(
                f"position = torch.arange({p}, dtype=torch.float64)[:, None]  # (P, 1)",
                "angles = position / 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)",
                f"pe = torch.empty({p}, d_model, dtype=torch.float64)",
                "pe[:, 0::2] = torch.sin(angles)  # even columns: sines",
                "pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])  # odd columns: cosines",
                "pe = pe.float()  # (P, d_model), computed in double so long sentences keep every digit",
            )
        else:
            self.section("positions: a learned table (as before training: random), added to the inputs")
            self.emit(f"pe = torch.randn({p}, d_model, generator=g)  # (P, d_model), what nn.Embedding(P, d) draws")
        self.emit(f"x = x + pe[{self._query_rows(t_q)}]  # (T_q, d_model)")
        if c.is_cross:
            self.emit(f"x_kv = x_kv + pe[:{t_k}]  # (T_k, d_model)")
        else:
            self.emit("x_kv = x")
        self.emit("")

    def attention(self) -> None:
        c = self.c
        self.section("queries, keys, values: one set per head")
        if c.init == "normal":
            self.emit(
                "m = float(x.double().pow(2).sum(-1).mean() * x_kv.double().pow(2).sum(-1).mean())",
                "sigma = m**-0.25 if m > 0 else 1.0  # then q . k / sqrt(d_k) has variance about 1 on these inputs",
                "W_query, W_key, W_value = W_query * sigma, W_key * sigma, W_value * sigma",
            )
        for p in self.projections:
            bias = f" + {p.bias}" if self._has_bias(p) else ""
            if self.split:
                self.emit(
                    f"{p.out} = ({p.x} @ {p.name}{bias}).view(-1, {p.heads}, {p.d}).transpose(0, 1)"
                    f"  # ({p.heads}, {p.t}, {p.d})"
                )
            else:
                self.emit(f"{p.out} = {p.x} @ {p.name}{bias}  # ({p.heads}, {p.t}, {p.d})")
        if self.grouped:
            self.emit(
                "keys = keys.repeat_interleave(h // h_kv, dim=0)  # (h, T_k, d_k): each K/V head serves its group",
                "values = values.repeat_interleave(h // h_kv, dim=0)  # (h, T_k, d_v)",
            )
        if c.position == "rope":
            self.rope()
        self.emit("")
        steps = (
            "scores",
            "scaling" * (c.scale != "none"),
            "ALiBi" * (c.position == "alibi"),
            "score bias" * (c.score_bias is not None),
            "mask" * self._masks(),
            "softmax",
            "dropout" * (c.dropout > 0),
        )
        self.section(", ".join(s for s in steps if s))
        self.emit("omega = queries @ keys.transpose(-2, -1)  # (h, T_q, T_k) unnormalised scores")
        if c.scale == "sqrt":
            self.emit("scaled = omega / math.sqrt(d_k)  # (h, T_q, T_k)")
        elif c.scale == "temperature":
            self.emit(f"scaled = omega / {_num(c.temperature)}  # (h, T_q, T_k) divided by the temperature")
        else:
            self.emit("scaled = omega  # unscaled")
        if c.position == "alibi":
            self.alibi()
        if c.score_bias is not None:
            self.emit(
                f"score_bias = torch.tensor({_literal(c.score_bias)})  # (T_q, T_k) given, added to the scores",
                "scaled = scaled + score_bias",
            )
        scores = self.mask()
        self.emit(f"weights = torch.softmax({scores}, dim=-1)  # (h, T_q, T_k), each row sums to 1")
        if scores != "scaled" and self.empty_rows:
            self.emit(
                "weights = weights.masked_fill(~mask.any(dim=-1)[:, None], 0.0)  # a row with no key: zeros, not NaN"
            )
        if c.dropout > 0:
            self.emit(
                f"keep = torch.rand(weights.shape, generator=g) >= {_num(c.dropout)}  # dropout, as nn.Dropout trains",
                f"dropped = weights * keep / (1 - {_num(c.dropout)})  # (h, T_q, T_k)",
                "context = dropped @ values  # (h, T_q, d_v)",
            )
        else:
            self.emit("context = weights @ values  # (h, T_q, d_v)")
        self.emit("")

    def rope(self) -> None:
        """RoPE in Llama's rotate-half form: pair (i, i + d_k/2) of every query and key turned by position x theta_i."""
        c = self.c
        t_q, t_k = len(c.tokens), len(c.key_tokens)
        self.emit(
            "",
            "# RoPE: every query and key rotated by its position (pairs i and i + d_k/2, Llama's rotate-half form)",
            f"theta = 1.0 / ({_num(c.rope_base)} ** (torch.arange(0, d_k, 2, dtype=torch.int64).float() / d_k))"
            "  # (d_k/2,)",
            f"angles = torch.arange({self.positions}).float()[:, None] * theta  # (P, d_k/2): position x theta_i",
            "",
            "",
            "def rope(v, angles):",
            '    """v (..., T, d_k) turned pair by pair: v * cos + rotate_half(v) * sin."""',
            "    angles = torch.cat((angles, angles), dim=-1)  # (T, d_k)",
            "    v1, v2 = v.chunk(2, dim=-1)",
            "    return v * angles.cos() + torch.cat((-v2, v1), dim=-1) * angles.sin()",
            "",
            "",
            f"queries = rope(queries, angles[{self._query_rows(t_q)}])  # (h, T_q, d_k)",
            f"keys = rope(keys, angles[:{t_k}])  # (h, T_k, d_k)",
        )

    def _query_rows(self, t_q: int) -> str:
        """The queries' positions as a slice: ":T_q", or "offset:offset + T_q" for a bottom-right step."""
        o = self.query_offset
        return f"{o}:{o + t_q}" if o else f":{t_q}"

    def _query_range(self, t_q: int) -> str:
        """torch.arange's arguments for the queries' positions: "T_q", or "offset, offset + T_q"."""
        o = self.query_offset
        return f"{o}, {o + t_q}" if o else f"{t_q}"

    def alibi(self) -> None:
        """ALiBi: -slope_h x |i - j| added to the scaled scores, one slope a head (Press et al.)."""
        c = self.c
        slopes = position.alibi_slopes(c.heads).tolist()
        t_q, t_k = len(c.tokens), len(c.key_tokens)
        self.emit(
            f"slopes = torch.tensor({_vector(slopes)})  # (h,) ALiBi's geometric slopes (Press et al.)",
            f"distance = (torch.arange({self._query_range(t_q)})[:, None] - torch.arange({t_k})[None, :]).abs()"
            "  # (T_q, T_k) |i - j|",
            "scaled = scaled + slopes[:, None, None] * -distance  # (h, T_q, T_k): farther keys, lower scores",
        )

    def mask(self) -> str:
        """Emit the mask (True = may attend) and return the expression the softmax takes.

        A custom mask that some rule gives (causal, padding, window, every key, no key) is written as that
        rule, so a 512-token causal mask is one line, not a quarter of a million literals. A score bias's -inf
        entries block as the mask does.
        """
        t_q, t_k = len(self.c.tokens), len(self.c.key_tokens)
        kind, n = self.rule
        if kind == "none":
            if self.c.mask == "custom":
                self.emit("# the custom mask lets every query see every key: nothing to mask")
            if not self.bias_blocks:
                return "scaled"
            self.emit('mask = score_bias > float("-inf")  # (T_q, T_k): a -inf in the score bias blocks')
            return 'scaled.masked_fill(~mask, float("-inf"))'
        if self.c.mask == "custom" and kind not in ("custom", "blocked"):
            self.emit(f"# the custom mask is exactly the {kind} mask, so it is written as that rule")
        shift = masks.offset(t_q, t_k, self.c.causal_align) if self.c.mask != "custom" else 0
        if kind == "causal":
            tril, how = (f"tril(diagonal={shift})", "causal, bottom-right aligned") if shift else ("tril()", "causal")
            self.emit(
                f"mask = torch.ones({t_q}, {t_k}, dtype=torch.bool).{tril}  # (T_q, T_k) {how}, True = may attend"
            )
        elif kind == "padding":
            self.emit(
                f"mask = torch.ones({t_q}, {t_k}, dtype=torch.bool)  # (T_q, T_k), True = may attend",
                f"mask[:, {max(t_k - n, 0)}:] = False  # the last {n} keys are padding",
            )
        elif kind == "window":
            at = f"torch.arange({t_q})[:, None]" + (f" + {shift}" if shift else "")
            self.emit(
                f"i, j = {at}, torch.arange({t_k})[None, :]" + ("  # bottom-right aligned" if shift else ""),
                f"mask = (j <= i) & (j > i - {n})  # (T_q, T_k) query i sees keys i-{n - 1} .. i",
            )
        elif kind == "blocked":
            self.emit(f"mask = torch.zeros({t_q}, {t_k}, dtype=torch.bool)  # (T_q, T_k): every key blocked")
        else:
            # no rule gives it: one string of 0/1 per query, at most T_q * (T_k + 8) characters
            rows = "".join(f'    "{"".join("1" if x else "0" for x in row)}",\n' for row in self.mask_tensor.tolist())
            self.emit(
                f"mask_rows = [\n{rows}]  # row i: 1 where query i may attend to key j",
                'mask = torch.tensor([[c == "1" for c in row] for row in mask_rows])  # (T_q, T_k), True = may attend',
            )
        if self.bias_blocks:
            self.emit('mask = mask & (score_bias > float("-inf"))  # a -inf in the score bias blocks too')
        return 'scaled.masked_fill(~mask, float("-inf"))'

    def output(self) -> None:
        c = self.c
        self.section("heads side by side" + (", then the output projection" if c.out_proj else ""))
        self.emit("concat = context.transpose(0, 1).reshape(context.shape[1], -1)  # (T_q, h * d_v)")
        if c.out_proj:
            drawn = c.init in ("rand", "rand-transposed", "linear")
            b_out = " + b_out" if c.out_bias and (drawn or (c.init == "given" and c.b_out is not None)) else ""
            self.emit(f"output = concat @ W_out{b_out}  # (T_q, {self.d_o})")
        else:
            self.emit("output = concat")
        self.emit('print(json.dumps({"weights": weights.tolist(), "output": output.tolist()}))')

    # helpers ------------------------------------------------------------------------------------

    def _generator(self, why: str) -> str:
        return f"g = torch.Generator().manual_seed(seed)  # {why}"

    def _width(self, p: _Projection) -> str:
        """The split layout's width of one projection: d_out when d_model / heads gives every head's width."""
        return "d_out" if self.derived and p.heads == "h" else f"{p.heads} * {p.d}"

    def _has_bias(self, p: _Projection) -> bool:
        """Whether a projection adds a bias that is not zero: one drawn, or one given."""
        c = self.c
        drawn = c.init in ("rand", "rand-transposed", "linear")
        return c.bias and (drawn or (c.init == "given" and p.given_bias is not None))

    def _given(self, p: _Projection) -> str:
        if self.split:
            return f"{p.name} = torch.tensor({_literal(p.given)})  # ({p.d_in}, {self._width(p)})"
        if p.n_heads == 1:
            return f"{p.name} = torch.tensor({_literal(p.given)})[None]  # (1, {p.d_in}, {p.d})"
        return (
            f"{p.name} = torch.tensor({_literal(p.given)}).view({p.d_in}, {p.heads}, {p.d}).transpose(0, 1)"
            f"  # ({p.heads}, {p.d_in}, {p.d}): the heads sit side by side in the columns"
        )

    def _given_bias(self, p: _Projection) -> str:
        if self.split:
            return f"{p.bias} = torch.tensor({_vector(p.given_bias)})  # ({self._width(p)},) given"
        return f"{p.bias} = torch.tensor({_vector(p.given_bias)}).view({p.heads}, 1, {p.d})  # ({p.heads}, 1, {p.d})"

    def _key_init(self) -> str:
        return self.c.cross_embedding_init or self.c.embedding_init

    def _key_inputs_drawn(self) -> bool:
        """Cross-attention whose key/value inputs come from the second generator, after the weights."""
        c = self.c
        if not c.is_cross or c.cross_embeddings is not None:
            return False
        return self._key_init() != "embedding" or c.embeddings is not None or c.embedding_init != "embedding"

    def _table_words_include_keys(self) -> bool:
        """The embedding table covers the key words too (as attention.basics.weights.vocabulary does)."""
        c = self.c
        return c.is_cross and c.cross_embeddings is None and c.cross_embedding_init in (None, "embedding")

    def _masks(self) -> bool:
        """Whether the mask (or a score bias's -inf) blocks anything that the script must write out."""
        return self.rule[0] != "none" or self.bias_blocks

    def _mask_rule(self) -> tuple[str, int]:
        """The simplest rule that gives this config's mask, and its number: ("none" | "blocked" | "causal",
        0), ("padding", n), ("window", w), or ("custom", 0) when no rule does."""
        c = self.c
        if c.mask == "none" or (c.mask == "padding" and c.padding == 0):
            return "none", 0
        if c.mask != "custom":
            return c.mask, {"padding": c.padding, "window": c.window}.get(c.mask, 0)
        m = self.mask_tensor  # (T_q, T_k)
        if bool(m.all()):
            return "none", 0
        if not bool(m.any()):
            return "blocked", 0
        t_q, t_k = m.shape
        n, w = t_k - int(m[0].sum()), int(m.sum(dim=-1).max())  # the only padding and window that could fit
        for kind, number, rule in (
            ("causal", 0, masks.causal(t_q, t_k)),
            ("padding", n, masks.padding(t_q, t_k, n)),
            ("window", w, masks.window(t_q, t_k, w)),
        ):
            if torch.equal(m, rule):
                return kind, number
        return "custom", 0

    def _mask(self) -> torch.Tensor:
        c = self.c
        return masks.build(
            c.mask, len(c.tokens), len(c.key_tokens), n_padding=c.padding, width=c.window, custom=c.custom_mask,
            align=c.causal_align,
        )  # fmt: skip  # (T_q, T_k)
