"""The script's first steps: its header, the inputs, the weights, keys of another input and the position tables.

`Steps` holds what every step reads of the config (the projections as the script names them, the draws, the
query positions) and writes these steps line by line; `attention.io.script` adds the attention itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..basics import position
from ..basics.config import Config
from ..basics.weights import stable


def num(x: float) -> str:
    """A float as Python source: repr, and the infinities (a score bias blocks with -inf) as float("-inf")."""
    x = float(x)
    return repr(x) if math.isfinite(x) else f'float("{x}")'


def literal(matrix: Sequence[Sequence[Any]], fmt=num) -> str:
    """A nested list literal, one row per line."""
    rows = ",\n".join("    [" + ", ".join(fmt(x) for x in row) + "]" for row in matrix)
    return "[\n" + rows + ",\n]"


def vector(values: Sequence[float]) -> str:
    return "[" + ", ".join(num(x) for x in values) + "]"


class Projection(NamedTuple):
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


class Steps:
    """The script so far, line by line, and the steps before the attention; each writes only the branch its
    config takes."""

    def __init__(self, config: Config) -> None:
        self.c = c = config
        self.split = c.head_layout == "split"
        self.derived = self.split and c.d_k is None and c.d_v is None  # d_k = d_v = d_out // h
        self.grouped = c.group > 1
        kv_heads, kv_n = ("h_kv", c.key_value_heads) if self.grouped else ("h", c.heads)
        d_kv = "d_kv" if c.key_width != c.width else "d_model"
        q = Projection(
            "W_query", "b_query", "queries", c.w_query, c.b_query, "h", c.heads, "d_model", "d_k", "x", "T_q"
        )
        k = Projection("W_key", "b_key", "keys", c.w_key, c.b_key, kv_heads, kv_n, d_kv, "d_k", "x_kv", "T_k")
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
            self.emit(f"x = torch.tensor({literal(c.embeddings)})  # (T_q, d_model) given embeddings")
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
            self.emit(f"x_kv = torch.tensor({literal(c.cross_embeddings)})  # (T_k, {width}) given key/value inputs")
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
            self.emit(f"W_out = torch.tensor({literal(c.w_out)})  # (h * d_v, {d_o})")
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
            self.emit(f"b_out = torch.tensor({vector(c.b_out)})  # ({d_o},) given")
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

    def _query_rows(self, t_q: int) -> str:
        """The queries' positions as a slice: ":T_q", or "offset:offset + T_q" for a bottom-right step."""
        o = self.query_offset
        return f"{o}:{o + t_q}" if o else f":{t_q}"

    def _query_range(self, t_q: int) -> str:
        """torch.arange's arguments for the queries' positions: "T_q", or "offset, offset + T_q"."""
        o = self.query_offset
        return f"{o}, {o + t_q}" if o else f"{t_q}"

    # helpers ------------------------------------------------------------------------------------

    def _generator(self, why: str) -> str:
        return f"g = torch.Generator().manual_seed(seed)  # {why}"

    def _width(self, p: Projection) -> str:
        """The split layout's width of one projection: d_out when d_model / heads gives every head's width."""
        return "d_out" if self.derived and p.heads == "h" else f"{p.heads} * {p.d}"

    def _has_bias(self, p: Projection) -> bool:
        """Whether a projection adds a bias that is not zero: one drawn, or one given."""
        c = self.c
        drawn = c.init in ("rand", "rand-transposed", "linear")
        return c.bias and (drawn or (c.init == "given" and p.given_bias is not None))

    def _given(self, p: Projection) -> str:
        if self.split:
            return f"{p.name} = torch.tensor({literal(p.given)})  # ({p.d_in}, {self._width(p)})"
        if p.n_heads == 1:
            return f"{p.name} = torch.tensor({literal(p.given)})[None]  # (1, {p.d_in}, {p.d})"
        return (
            f"{p.name} = torch.tensor({literal(p.given)}).view({p.d_in}, {p.heads}, {p.d}).transpose(0, 1)"
            f"  # ({p.heads}, {p.d_in}, {p.d}): the heads sit side by side in the columns"
        )

    def _given_bias(self, p: Projection) -> str:
        if self.split:
            return f"{p.bias} = torch.tensor({vector(p.given_bias)})  # ({self._width(p)},) given"
        return f"{p.bias} = torch.tensor({vector(p.given_bias)}).view({p.heads}, 1, {p.d})  # ({p.heads}, 1, {p.d})"

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
