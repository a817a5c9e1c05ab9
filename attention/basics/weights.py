"""Inputs and projection matrices, drawn from private generators, in the tutorials' order or a column at a time.

Randomness never touches torch's global RNG: each draw takes a `torch.Generator`
seeded from the config, which gives exactly the numbers `torch.manual_seed(seed)`
gave in the tutorials. With `draws="tutorial"` the order of draws follows them:

1. the query inputs (and the shared nn.Embedding table), from a generator seeded with `seed`;
2. the projections, from a fresh generator seeded with `seed` again (the tutorials
   reseed before building their modules), query, key, value, then output;
3. random key/value inputs of a cross-attention (Raschka's cross-attention cell draws
   them after its weights), then dropout, from that same second generator.

In that order every head of W_query comes before the first number of W_key, so a change of heads or d_k
redraws every later matrix: head 1 of a 4-head run is not head 1 of a 1-head run. With `draws="stable"` (the
dashboard's default; always for the "normal" init) every column of every head's matrix has a generator of its
own, seeded from (seed, matrix, head, column) by `column_seed`, and step 3 draws from a generator of its own
too: adding heads adds heads, and widening d_k or d_v adds columns, whatever the init.

The "normal" init draws W ~ N(0, 1) and `fit_to_inputs` scales W_query, W_key, W_value by `input_scale` of the
inputs they multiply: for inputs x, y and W ~ N(0, sigma^2), q_i = x . W_i has variance sigma^2 |x|^2, so
q . k / sqrt(d_k) (d_k products of independent q_i, k_i) has variance sigma^4 |x|^2 |y|^2 (d_model s2 sigma^2
squared, for a per-coordinate second moment s2); sigma = (mean |x|^2 . mean |y|^2)^(-1/4) makes it 1, the
regime the sqrt(d_k) page explains (tests/unit/ui/test_default_entropy.py measures it).

Every matrix is returned as used, `x @ W`: W is (d_in, d_out) whatever the init.
"""

from __future__ import annotations

import functools
import hashlib
import math
from typing import NamedTuple

import torch

from .config import Config, tokenize


class Projections(NamedTuple):
    """Full projection matrices, heads side by side in the columns (x @ W)."""

    w_query: torch.Tensor  # (d_model, h*d_k)
    w_key: torch.Tensor  # (d_model, h_kv*d_k); h_kv = h unless grouped-query
    w_value: torch.Tensor  # (d_model, h_kv*d_v)
    b_query: torch.Tensor | None  # (h*d_k,)
    b_key: torch.Tensor | None  # (h_kv*d_k,)
    b_value: torch.Tensor | None  # (h_kv*d_v,)
    w_out: torch.Tensor | None  # (h*d_v, d_model)
    b_out: torch.Tensor | None  # (d_model,)


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def column_seed(seed: int, matrix: str, head: int, column: int) -> int:
    """The seed of one column's own generator (stable draws): the first 8 bytes, little-endian, of
    sha256("seed/matrix/head/column"); matrix is query, key, value, out, or rest (the draws after the weights)."""
    digest = hashlib.sha256(f"{seed}/{matrix}/{head}/{column}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def stable(config: Config) -> bool:
    """Whether the weights are drawn a column at a time (see the module docstring): draws="stable", or init
    "normal", which has no tutorial order to keep."""
    return config.draws == "stable" or config.init == "normal"


def _column(init: str, g: torch.Generator, d_in: int, bias: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One column of W (d_in,) and its bias number, from the column's own generator: torch.rand for the rand
    inits, nn.Linear's U(+-1/sqrt(d_in)) for linear, N(0, 1) for normal (whose bias is zero)."""
    n = d_in + (bias and init != "normal")
    if init == "normal":
        v = torch.randn(n, generator=g)
    elif init == "linear":
        bound = 1 / math.sqrt(d_in)
        v = torch.empty(n).uniform_(-bound, bound, generator=g)
    else:
        v = torch.rand(n, generator=g)
    b = (torch.zeros(()) if init == "normal" else v[d_in]) if bias else None
    return v[:d_in], b


def _stable(
    init: str, seed: int, matrix: str, heads: int, d_in: int, d_out: int, bias: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(d_in, heads*d_out) weights, heads side by side, each column from generator(column_seed(...)), and the
    (heads*d_out,) bias: column j of head i is the same whatever heads and d_out are."""
    cols = [
        _column(init, generator(column_seed(seed, matrix, i, j)), d_in, bias)
        for i in range(heads)
        for j in range(d_out)
    ]
    w = torch.stack([c[0] for c in cols], dim=1)  # (d_in, heads*d_out)
    b = torch.stack([c[1] for c in cols]) if bias else None  # (heads*d_out,)
    return w, b


def input_scale(x_q: torch.Tensor, x_kv: torch.Tensor) -> float:
    """sigma = (mean_t |x_t|^2 . mean_t |y_t|^2)^(-1/4): with W ~ N(0, sigma^2), q . k / sqrt(d_k) has variance 1.

    In float64, so that a permutation of the tokens gives the same sigma; 1 when an input is all zeros.
    """
    m = float(x_q.double().pow(2).sum(-1).mean() * x_kv.double().pow(2).sum(-1).mean())
    return m**-0.25 if 0 < m < math.inf else 1.0


def fit_to_inputs(config: Config, p: Projections, x_q: torch.Tensor, x_kv: torch.Tensor) -> Projections:
    """The "normal" init's W_query, W_key, W_value times `input_scale` of the inputs they multiply (after any
    position table is added); every other init's projections unchanged."""
    if config.init != "normal":
        return p
    sigma = input_scale(x_q, x_kv)
    return p._replace(w_query=p.w_query * sigma, w_key=p.w_key * sigma, w_value=p.w_value * sigma)


def vocabulary(config: Config) -> tuple[str, ...]:
    """Sorted distinct words of both sentences (the Raschka tutorial sorts its words)."""
    words = set(config.tokens)
    if config.is_cross and config.cross_embeddings is None and config.cross_embedding_init in (None, "embedding"):
        words |= set(tokenize(config.cross_sentence or ""))
    return tuple(sorted(words))


def draw(init: str, rows: int, d: int, g: torch.Generator, table: torch.Tensor | None, tokens, vocab) -> torch.Tensor:
    """(rows, d) inputs: an nn.Embedding lookup, torch.rand or torch.randn."""
    if init == "embedding":
        index = {w: i for i, w in enumerate(vocab)}
        ids = torch.tensor([index[t] for t in tokens], dtype=torch.long)
        return table[ids]  # (T, d)
    if init == "rand":
        return torch.rand(rows, d, generator=g)
    return torch.randn(rows, d, generator=g)


def embed_queries(config: Config) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Query inputs (T_q, d_model) and, for the 'embedding' init, the shared table (V, d_model)."""
    d = config.width
    if config.embeddings is not None:
        return torch.tensor(config.embeddings, dtype=torch.float32), None
    g = generator(config.seed)
    vocab = vocabulary(config)
    # nn.Embedding initialises its table with normal_(): the same draws as randn
    table = torch.randn(len(vocab), d, generator=g) if config.embedding_init == "embedding" else None
    x = draw(config.embedding_init, len(config.tokens), d, g, table, config.tokens, vocab)
    return x, table


def embed_keys(config: Config, x: torch.Tensor, table: torch.Tensor | None, g: torch.Generator) -> torch.Tensor:
    """Key/value inputs (T_k, d_model): the query inputs for self-attention."""
    if not config.is_cross:
        return x
    if config.cross_embeddings is not None:
        return torch.tensor(config.cross_embeddings, dtype=torch.float32)
    init = config.cross_embedding_init or config.embedding_init
    if init == "embedding":
        if table is None:  # query inputs were given: draw a table for the key words alone
            table = torch.randn(len(vocabulary(config)), config.width, generator=g)
        return draw(init, 0, 0, g, table, config.key_tokens, vocabulary(config))
    return draw(init, len(config.key_tokens), config.width, g, None, (), ())


def _linear(d_in: int, d_out: int, bias: bool, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor | None]:
    """nn.Linear's default init (kaiming_uniform_ a=sqrt(5), bias U(+-1/sqrt(d_in))), returned as x @ W."""
    w = torch.empty(d_out, d_in)
    torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5), generator=g)
    b = None
    if bias:
        bound = 1 / math.sqrt(d_in) if d_in > 0 else 0
        b = torch.empty(d_out).uniform_(-bound, bound, generator=g)
    return w.T, b


def _rand(h: int, d_in: int, d_out: int, bias: bool, transposed: bool, g: torch.Generator):
    """torch.rand weights for all heads at once, as Raschka's multi-head cell draws them."""
    if transposed:  # torch.rand(h, d_out, d_in), used as W x
        w = torch.rand(h, d_out, d_in, generator=g).transpose(1, 2)  # (h, d_in, d_out)
    else:  # torch.rand(h, d_in, d_out), used as x @ W
        w = torch.rand(h, d_in, d_out, generator=g)
    w = w.permute(1, 0, 2).reshape(d_in, h * d_out)  # heads side by side
    b = torch.rand(h * d_out, generator=g) if bias else None
    return w, b


def _identity(h: int, d_in: int, d_out: int, bias: bool):
    w = torch.eye(d_in, d_out).repeat(1, h)  # (d_in, h*d_out)
    return w, (torch.zeros(h * d_out) if bias else None)


def projections(config: Config, g: torch.Generator) -> Projections:
    """W_query, W_key, W_value (and W_out) for every head, drawn from g in order q, k, v, out.

    With grouped-query heads (kv_heads < heads) W_key and W_value have kv_heads heads' columns; the draws for
    kv_heads = heads are those of multi-head attention.
    """
    d, h, hk = config.width, config.heads, config.key_value_heads
    d_k, d_v = config.head_dims
    split = config.head_layout == "split"
    init, bias = config.init, config.bias
    if init == "given":
        t = lambda m: None if m is None else torch.tensor(m, dtype=torch.float32)  # noqa: E731

        def given_bias(b, n: int, on: bool) -> torch.Tensor | None:  # the given bias, else zeros when it is on
            return (torch.zeros(n) if b is None else t(b)) if on else None

        out = t(config.w_out) if config.out_proj else None
        b_out = given_bias(config.b_out, config.out_width, config.out_proj and config.out_bias)
        return Projections(
            t(config.w_query), t(config.w_key), t(config.w_value),
            given_bias(config.b_query, h * d_k, bias), given_bias(config.b_key, hk * d_k, bias),
            given_bias(config.b_value, hk * d_v, bias), out, b_out,
        )  # fmt: skip
    sizes = (d_k, d_k, d_v)
    heads_of = (h, hk, hk)  # query heads, key heads, value heads
    d_in = (d, config.key_width, config.key_width)  # keys and values may come from a wider or narrower input
    if stable(config) and init != "identity":  # both layouts: head i's columns, one generator a column
        names = ("query", "key", "value")
        qkv = [
            _stable(init, config.seed, m, n, r, w, bias)
            for m, n, r, w in zip(names, heads_of, d_in, sizes, strict=True)
        ]
        w_out = b_out = None
        if config.out_proj:
            d_cat = h * d_v
            w_out, b_out = _stable(init, config.seed, "out", 1, d_cat, config.out_width, config.out_bias)
            if init == "normal":
                w_out = w_out / math.sqrt(d_cat)  # LeCun's normal: unit-variance heads give unit-variance outputs
        (wq, bq), (wk, bk), (wv, bv) = qkv
        return Projections(wq, wk, wv, bq, bk, bv, w_out, b_out)
    # the split layout draws one d_model x (heads * d_k) matrix per projection (narrower for fewer K/V heads) and
    # cuts its product into heads
    heads, widths = (
        ((1, 1, 1), tuple(n * s for n, s in zip(heads_of, sizes, strict=True))) if split else (heads_of, sizes)
    )
    qkv: list[tuple[torch.Tensor, torch.Tensor | None]] = []
    if init == "linear":
        if split:  # one Linear(d_model, d_out) each, cut into heads by view (Attention on Attention)
            qkv = [_linear(i, w, bias, g) for i, w in zip(d_in, widths, strict=True)]
        else:  # per head a module with its own query, key, value Linear (Self Attention Spelled Out)
            per_head = [
                [_linear(r, n, bias, g) for r, n, m in zip(d_in, sizes, heads_of, strict=True) if i < m]
                for i in range(h)
            ]
            qkv = [_cat([ph[i] for ph in per_head if len(ph) > i]) for i in range(3)]
    elif init in ("rand", "rand-transposed"):
        qkv = [_rand(n, r, w, bias, init == "rand-transposed", g) for n, r, w in zip(heads, d_in, widths, strict=True)]
    else:  # identity: eye(d_model, d_k) per head, or one eye(d_model, d_out) cut into heads
        qkv = [_identity(n, r, w, bias) for n, r, w in zip(heads, d_in, widths, strict=True)]
    w_out = b_out = None
    if config.out_proj:
        d_cat, d_o = h * d_v, config.out_width
        if init == "linear":
            w_out, b_out = _linear(d_cat, d_o, config.out_bias, g)
        elif init in ("rand", "rand-transposed"):
            w_out, b_out = _rand(1, d_cat, d_o, config.out_bias, init == "rand-transposed", g)
        else:
            w_out, b_out = torch.eye(d_cat, d_o), (torch.zeros(d_o) if config.out_bias else None)
    (wq, bq), (wk, bk), (wv, bv) = qkv
    return Projections(wq, wk, wv, bq, bk, bv, w_out, b_out)


def _cat(pairs: list[tuple[torch.Tensor, torch.Tensor | None]]) -> tuple[torch.Tensor, torch.Tensor | None]:
    w = torch.cat([p[0] for p in pairs], dim=1)
    b = None if pairs[0][1] is None else torch.cat([p[1] for p in pairs])
    return w, b


def _drawing_config(config: Config) -> Config:
    """The fields the projections depend on, and nothing else (so sentences share draws): the key/value input's
    width, when it differs, as one row of zeros of that width."""
    keys = None if config.key_width == config.width else ((0.0,) * config.key_width,)
    return Config(
        sentence="x", cross_embeddings=keys, d_model=config.width, d_k=config.d_k, d_v=config.d_v, d_out=config.d_out,
        heads=config.heads, kv_heads=config.kv_heads, head_layout=config.head_layout, init=config.init,
        draws=config.draws, bias=config.bias, out_proj=config.out_proj, out_bias=config.out_bias, seed=config.seed,
    )  # fmt: skip


# Up to 8 cached draws of at most 2M numbers (8 MiB) each: 64 MiB at worst, shared by every session.
CACHED_PROJECTION_NUMBERS = 2 << 20


def projection_numbers(config: Config) -> int:
    """How many numbers W_query, W_key, W_value and W_out hold."""
    d_k, d_v = config.head_dims
    qkv = config.width * config.heads * d_k + config.key_width * config.key_value_heads * (d_k + d_v)
    return qkv + (config.heads * d_v * config.out_width if config.out_proj else 0)


def after_stable(config: Config) -> torch.Generator:
    """Stable draws: the generator of what is drawn after the weights (key/value inputs, a learned position
    table, dropout), seeded from (seed, "rest"), so that it never repeats the inputs' numbers."""
    return generator(column_seed(config.seed, "rest", 0, 0))


@functools.lru_cache(maxsize=8)
def _drawn(key: Config) -> tuple[Projections, torch.Tensor]:
    g = generator(key.seed)
    p = projections(key, g)
    return p, (after_stable(key) if stable(key) else g).get_state()


def seeded_projections(config: Config) -> tuple[Projections, torch.Generator]:
    """The projections and the generator positioned after them, as if freshly drawn.

    Drawing is the costliest step at small T (four 512 x 512 matrices are ~1M serial random
    numbers), so draws are cached on the fields they depend on (bounded: 8 entries of 8 MiB) and
    cloned, so a caller that edits a tensor in place never changes another's numbers.
    """
    if config.init in ("given", "identity") or projection_numbers(config) > CACHED_PROJECTION_NUMBERS:
        g = generator(config.seed)  # large draws are not cached: there the attention itself dominates
        return projections(config, g), (after_stable(config) if stable(config) else g)
    p, state = _drawn(_drawing_config(config))
    g = torch.Generator()
    g.set_state(state)
    clone = Projections(*(None if t is None else t.clone() for t in p))
    return clone, g
