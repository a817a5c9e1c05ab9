"""Attention one step at a time, and `compute`, which returns every intermediate.

    queries = x_q @ W_query      keys = x_kv @ W_key      values = x_kv @ W_value
    omega   = queries @ keys^T                    (unnormalised scores)
    scaled  = omega / sqrt(d_k)                   (or / temperature, or unscaled)
    masked  = scaled, -inf where the mask blocks
    weights = softmax(masked, dim=-1)             (then dropout)
    context = weights @ values                    (per head)
    output  = concat(context) @ W_out + b_out     (when there is an output projection)

Cross-attention is the general case: every function takes the query input and the
key/value input separately; self-attention passes the same tensor twice.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from . import masks, position
from .config import Config
from .weights import embed_keys, embed_queries, fit_to_inputs, seeded_projections


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(T, h*d) -> (h, T, d): the view/transpose of nn.MultiheadAttention."""
    t, hd = x.shape
    return x.view(t, heads, hd // heads).transpose(0, 1)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(h, T, d) -> (T, h*d): heads concatenated along the features."""
    h, t, d = x.shape
    return x.transpose(0, 1).reshape(t, h * d)


def project(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, heads: int) -> torch.Tensor:
    """x @ W (+ b), split into heads: (T, d_model) -> (h, T, d_head)."""
    y = x @ w if b is None else torch.addmm(b, x, w)  # (T, h*d_head)
    return split_heads(y, heads)


def expand(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(h_kv, ...) -> (h, ...): each K/V head repeated for the group of query heads it serves (no copy at h_kv = h)."""
    if x.shape[0] == heads:
        return x
    return x.repeat_interleave(heads // x.shape[0], dim=0)


def _expand_bias(b: torch.Tensor | None, heads: int) -> torch.Tensor | None:
    return None if b is None else expand(b, heads)


def scores(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """omega = Q K^T, one matrix per head."""
    return queries @ keys.transpose(-2, -1)  # (h, T_q, T_k)


def scale_factor(config: Config) -> float:
    """The number omega is divided by: sqrt(d_k), the temperature, or 1."""
    if config.scale == "sqrt":
        return math.sqrt(config.head_dims[0])
    if config.scale == "temperature":
        return float(config.temperature)
    return 1.0


def add_bias(scaled: torch.Tensor, bias: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """scaled + bias (broadcast over heads): in place when scaled is a tensor of its own, a new one when it is
    omega itself (scale 1), which the Result returns unchanged."""
    return scaled + bias if scaled is omega else scaled.add_(bias)


def apply_mask(scaled: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Blocked scores become -inf (PyTorch's convention: mask True = may attend).

    A mask that blocks nothing returns `scaled` itself: no h*T_q*T_k copy to allocate and fill.
    """
    if bool(mask.all()):
        return scaled
    return scaled.masked_fill(~mask, float("-inf"))  # (h, T_q, T_k)


def softmax(masked: torch.Tensor, empty_rows: torch.Tensor) -> torch.Tensor:
    """Row-wise softmax over the keys; a row with every key blocked gives zeros, not NaN."""
    weights = torch.softmax(masked, dim=-1)  # (h, T_q, T_k)
    if bool(empty_rows.any()):
        weights = weights.masked_fill(empty_rows[:, None], 0.0)
    return weights


def dropout(weights: torch.Tensor, p: float, g: torch.Generator) -> torch.Tensor:
    """Zero each weight with probability p and rescale by 1/(1-p), as nn.Dropout does in training."""
    if p == 0:
        return weights
    keep = torch.rand(weights.shape, generator=g) >= p
    return weights * keep / (1 - p)


@dataclass(frozen=True, eq=False)
class Result:
    """Every intermediate of one attention computation; h heads, T_q queries, T_k keys."""

    config: Config
    tokens: tuple[str, ...]  # T_q query tokens
    key_tokens: tuple[str, ...]  # T_k key/value tokens (= tokens for self-attention)
    embeddings: torch.Tensor  # (T_q, d_model) query inputs (+ the position table when sinusoidal or learned)
    key_embeddings: torch.Tensor  # (T_k, d_model) key/value inputs
    w_query: torch.Tensor  # (h, d_model, d_k), used as x @ W
    w_key: torch.Tensor  # (h, d_model, d_k): each query head's; grouped-query heads share their group's
    w_value: torch.Tensor  # (h, d_model, d_v)
    b_query: torch.Tensor | None  # (h, d_k)
    b_key: torch.Tensor | None  # (h, d_k)
    b_value: torch.Tensor | None  # (h, d_v)
    queries: torch.Tensor  # (h, T_q, d_k), after RoPE's rotation when position is rope
    keys: torch.Tensor  # (h, T_k, d_k): the keys each query head reads (a K/V head repeated for its group)
    values: torch.Tensor  # (h, T_k, d_v)
    unrotated_queries: torch.Tensor  # (h, T_q, d_k) before RoPE (the same tensor as queries without it)
    unrotated_keys: torch.Tensor  # (h, T_k, d_k) before RoPE
    position: position.PositionTerms  # the positional terms: the table, RoPE's angles or ALiBi's bias (or none)
    omega: torch.Tensor  # (h, T_q, T_k) = Q K^T
    scale: float  # omega is divided by this
    scaled: torch.Tensor  # (h, T_q, T_k) = omega / scale (+ ALiBi's bias)
    mask: torch.Tensor  # (T_q, T_k) bool, True = may attend
    masked: torch.Tensor  # (h, T_q, T_k), -inf where blocked
    weights: torch.Tensor  # (h, T_q, T_k) softmax, before dropout
    dropped_weights: torch.Tensor  # (h, T_q, T_k) after dropout (= weights when p = 0)
    context: torch.Tensor  # (h, T_q, d_v) = weights @ values
    concat: torch.Tensor  # (T_q, h*d_v) heads side by side
    w_out: torch.Tensor | None  # (h*d_v, d_model)
    b_out: torch.Tensor | None  # (d_model,)
    output: torch.Tensor  # (T_q, d_model) with an output projection, else = concat
    empty_rows: torch.Tensor  # (T_q,) bool: queries whose every key is masked

    @property
    def heads(self) -> int:
        return self.omega.shape[0]

    @property
    def kv_heads(self) -> int:
        """K/V heads: as many as heads, or fewer shared by groups of query heads (grouped-query attention)."""
        return self.config.key_value_heads

    @property
    def kv_keys(self) -> torch.Tensor:
        """(h_kv, T_k, d_k): the keys as a KV cache stores them, one per K/V head."""
        return self.keys[:: self.config.group]

    @property
    def kv_values(self) -> torch.Tensor:
        """(h_kv, T_k, d_v): the values as a KV cache stores them."""
        return self.values[:: self.config.group]

    @property
    def d_k(self) -> int:
        return self.queries.shape[-1]

    @property
    def d_v(self) -> int:
        return self.values.shape[-1]

    @property
    def has_empty_rows(self) -> bool:
        """True when some query may attend to no key (its weights and context are zero)."""
        return bool(self.empty_rows.any())


def _per_head(w: torch.Tensor, heads: int) -> torch.Tensor:
    d_in, hd = w.shape
    return w.view(d_in, heads, hd // heads).permute(1, 0, 2)  # (h, d_in, d_head)


def _bias_per_head(b: torch.Tensor | None, heads: int) -> torch.Tensor | None:
    return None if b is None else b.view(heads, -1)  # (h, d_head)


@torch.no_grad()
def compute(config: Config) -> Result:
    """Run attention for a config and return every intermediate (pure and deterministic)."""
    x_q, table = embed_queries(config)  # (T_q, d_model)
    p, g = seeded_projections(config)  # the tutorials reseed before building their weights
    x_kv = embed_keys(config, x_q, table, g)  # (T_k, d_model)
    h = config.heads
    t_q, t_k = x_q.shape[0], x_kv.shape[0]
    # bottom-right: the queries are the last T_q tokens (a decoding step), at positions T_k - T_q onward
    where = position.encode(
        config.position, t_q=t_q, t_k=t_k, d_model=config.width, d_head=config.head_dims[0], heads=h, generator=g,
        rope_base=config.rope_base, query_offset=position.query_offset(t_q, t_k, config.causal_align),
    )  # fmt: skip
    if where.table is not None:  # sinusoidal or learned: added to the inputs
        shifted = x_q + where.table[where.query_positions]  # (T_q, d_model)
        x_kv = x_kv + where.table[where.key_positions] if config.is_cross else shifted  # (T_k, d_model)
        x_q = shifted
    p = fit_to_inputs(config, p, x_q, x_kv)  # the "normal" init: scaled scores of unit variance on these inputs

    hk = config.key_value_heads
    queries = project(x_q, p.w_query, p.b_query, h)  # (h, T_q, d_k)
    # grouped-query heads: each K/V head serves config.group query heads, repeated as SDPA's enable_gqa does
    keys = expand(project(x_kv, p.w_key, p.b_key, hk), h)  # (h, T_k, d_k)
    values = expand(project(x_kv, p.w_value, p.b_value, hk), h)  # (h, T_k, d_v)
    unrotated = queries, keys
    if where.angles is not None:  # RoPE: every head's queries and keys turned by their positions
        queries = position.apply_rope(queries, where.angles[where.query_positions])  # (h, T_q, d_k)
        keys = position.apply_rope(keys, where.angles[where.key_positions])  # (h, T_k, d_k)
    omega = scores(queries, keys)  # (h, T_q, T_k)
    factor = scale_factor(config)
    scaled = omega / factor if factor != 1.0 else omega
    if where.bias is not None:  # ALiBi: a penalty linear in the distance, one slope per head
        scaled = add_bias(scaled, where.bias, omega)  # (h, T_q, T_k)
    mask = masks.build(
        config.mask,
        t_q,
        t_k,
        n_padding=config.padding,
        width=config.window,
        custom=config.custom_mask,
        align=config.causal_align,
    )  # (T_q, T_k)
    if config.score_bias is not None:  # an additive float mask: added to the scores, -inf blocking as False does
        bias = torch.tensor(config.score_bias, dtype=torch.float32)  # (T_q, T_k)
        scaled = add_bias(scaled, bias, omega)
        mask = mask & (bias > float("-inf"))
    empty_rows = ~mask.any(dim=-1)  # (T_q,)
    masked = apply_mask(scaled, mask)
    weights = softmax(masked, empty_rows)
    dropped = dropout(weights, config.dropout, g)
    context = dropped @ values  # (h, T_q, d_v)
    concat = merge_heads(context)  # (T_q, h*d_v)
    output = concat
    if p.w_out is not None:
        output = concat @ p.w_out if p.b_out is None else torch.addmm(p.b_out, concat, p.w_out)  # (T_q, d_model)
    return Result(
        config=config,
        tokens=config.tokens,
        key_tokens=config.key_tokens,
        embeddings=x_q,
        key_embeddings=x_kv,
        w_query=_per_head(p.w_query, h),
        w_key=expand(_per_head(p.w_key, hk), h),
        w_value=expand(_per_head(p.w_value, hk), h),
        b_query=_bias_per_head(p.b_query, h),
        b_key=_expand_bias(_bias_per_head(p.b_key, hk), h),
        b_value=_expand_bias(_bias_per_head(p.b_value, hk), h),
        queries=queries,
        keys=keys,
        unrotated_queries=unrotated[0],
        unrotated_keys=unrotated[1],
        position=where,
        values=values,
        omega=omega,
        scale=factor,
        scaled=scaled,
        mask=mask,
        masked=masked,
        weights=weights,
        dropped_weights=dropped,
        context=context,
        concat=concat,
        w_out=p.w_out,
        b_out=p.b_out,
        output=output,
        empty_rows=empty_rows,
    )


@dataclass(frozen=True, eq=False)
class Batch:
    """A batch of sequences through `compute`: one Result a sequence, and any of its fields stacked, (B, ...)."""

    results: tuple[Result, ...]

    def __len__(self) -> int:
        return len(self.results)

    def __getattr__(self, name: str) -> torch.Tensor:
        """`batch.weights` is (B, h, T_q, T_k): the field of every sequence's Result, stacked."""
        if name.startswith("__") or name == "results":
            raise AttributeError(name)
        return torch.stack([getattr(r, name) for r in self.results])


def batch_results(config: Config, inputs: torch.Tensor, key_inputs: torch.Tensor | None = None) -> Iterator[Result]:
    """Each sequence of a (B, T_q, d_model) batch (and (B, T_k, d_kv) key/value inputs) through `compute`, one at
    a time: a caller that writes each Result out holds one at a time (the command line's batch).

    Every other field is the config's, so sequence b gets exactly the Result of its own single-sequence config
    (same seed: the same weights for all). Rows are labelled by position, as `Config.from_embeddings` does.
    """
    if inputs.dim() != 3 or (key_inputs is not None and (key_inputs.dim() != 3 or len(key_inputs) != len(inputs))):
        raise ValueError("inputs must be (B, T, d), and key_inputs (B, T_k, d_kv) for the same B")
    for b in range(len(inputs)):
        yield compute(config.replace(
            sentence=None, embeddings=inputs[b], d_model=None,
            cross_sentence=None, cross_embeddings=None if key_inputs is None else key_inputs[b],
        ))  # fmt: skip


def compute_batch(config: Config, inputs: torch.Tensor, key_inputs: torch.Tensor | None = None) -> Batch:
    """Run a (B, T_q, d_model) batch of inputs (and (B, T_k, d_kv) key/value inputs) through `compute`: a Batch
    of every sequence's Result (`batch_results`), each equal to its own single-sequence computation."""
    return Batch(tuple(batch_results(config, inputs, key_inputs)))
