"""Generation with a KV cache: how an LLM runs attention, one new token a step.

At step t (0-based) the model has the query, key and value of token t. Key t and value t are
appended to the cache, and the ONE query row t is scored against every cached key:

    cache_keys   = [k_0 .. k_t]                              (h_kv, t+1, d_k)
    cache_values = [v_0 .. v_t]                              (h_kv, t+1, d_v)
    scores       = q_t . k_j / scale,  j = 0..t              (h, t+1)
    weights      = softmax(scores over the allowed keys)     (h, t+1)
    context      = weights @ cache_values                    (h, d_v)

The allowed keys are row t of the causal mask, bottom-right aligned (the newest query sees the newest
key): causal, keys 0..t; window (width w), keys t-w+1..t. Step t reproduces row t of the full
masked computation, so T steps of h*(t+1) products replace recomputing the T x T scores every token.
Query head i reads K/V head i // (h / h_kv) (grouped-query attention, `attention.llm.gqa`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from ..basics.core import Result
from .gqa import check_kv_heads

DECODE_MASKS = ("causal", "window")
FLOAT32_BYTES = 4


@dataclass(frozen=True, eq=False)
class DecodeStep:
    """Step t of generation: the cache after appending token t, and query t's row of attention.

    `products` counts every cached key, blocked ones included (they are scored, then masked); a
    sliding-window kernel that skips them does h * min(t+1, w), see `attended`.
    """

    t: int  # the step, 0-based: token t was just appended
    cache_keys: torch.Tensor  # (h_kv, t+1, d_k) keys 0..t
    cache_values: torch.Tensor  # (h_kv, t+1, d_v) values 0..t
    query: torch.Tensor  # (h, d_k) query t
    scores: torch.Tensor  # (h, t+1) = q_t . k_j / scale for every cached key, before the mask
    allowed: torch.Tensor  # (t+1,) bool: the keys query t may attend to (row t of the mask)
    weights: torch.Tensor  # (h, t+1) softmax over the allowed keys; exactly 0 elsewhere
    context: torch.Tensor  # (h, d_v) = weights @ cache_values (through each head's K/V head)
    products: int  # query-key dot products this step: h * (t+1), every cached key scored once per head
    cache_bytes: int  # h_kv * (t+1) * (d_k + d_v) * bytes_per_number: keys take d_k numbers, values d_v

    @property
    def heads(self) -> int:
        return self.query.shape[0]

    @property
    def kv_heads(self) -> int:
        return self.cache_keys.shape[0]

    @property
    def tokens(self) -> int:
        """Tokens in the cache: t + 1."""
        return self.t + 1

    @property
    def attended(self) -> int:
        """Keys query t actually attends to: t+1 for causal, min(t+1, w) for a window of width w."""
        return int(self.allowed.sum())


def allowed_keys(t: int, mask: str = "causal", window: int | None = None) -> torch.Tensor:
    """Row t of the mask, bottom-right aligned: (t+1,) bool over keys 0..t.

    causal: all True; window of width w: True for keys t-w+1 .. t. Key t itself is always allowed,
    so a decoding step never has an empty row.
    """
    _check_mask(mask, window)
    if mask == "causal":
        return torch.ones(t + 1, dtype=torch.bool)
    return torch.arange(t + 1) > t - window  # (t+1,)


def append(cache: torch.Tensor | None, new: torch.Tensor) -> torch.Tensor:
    """(h_kv, t, d) cache and (h_kv, d) new row -> (h_kv, t+1, d): the new token's key or value at the end."""
    row = new.unsqueeze(1)  # (h_kv, 1, d)
    return row if cache is None else torch.cat([cache, row], dim=1)


def step_scores(query: torch.Tensor, cache_keys: torch.Tensor, scale: float) -> torch.Tensor:
    """q_t . k_j / scale for every cached key: (h, d_k) x (h_kv, t+1, d_k) -> (h, t+1).

    The g = h / h_kv query heads of a group share one K/V head, so they are scored in one product.
    """
    h, d_k = query.shape
    h_kv, n, _ = cache_keys.shape
    grouped = query.reshape(h_kv, h // h_kv, d_k)  # (h_kv, g, d_k)
    return (grouped @ cache_keys.transpose(-2, -1)).reshape(h, n) / scale  # (h, t+1)


def step_weights(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Softmax of the scores over the allowed keys: (h, t+1); blocked keys get exactly 0."""
    masked = scores if bool(allowed.all()) else scores.masked_fill(~allowed, float("-inf"))  # (h, t+1)
    return torch.softmax(masked, dim=-1)  # (h, t+1)


def step_context(weights: torch.Tensor, cache_values: torch.Tensor) -> torch.Tensor:
    """weights @ values, each query head through its K/V head: (h, t+1) x (h_kv, t+1, d_v) -> (h, d_v)."""
    h, n = weights.shape
    h_kv, _, d_v = cache_values.shape
    grouped = weights.reshape(h_kv, h // h_kv, n)  # (h_kv, g, t+1)
    return (grouped @ cache_values).reshape(h, d_v)  # (h, d_v)


def cache_bytes(kv_heads: int, tokens: int, d_k: int, d_v: int, bytes_per_number: int = FLOAT32_BYTES) -> int:
    """Bytes of one layer's KV cache: kv_heads * tokens * (d_k + d_v) * bytes_per_number.

    With d_k = d_v = d_head this is the usual 2 * kv_heads * tokens * d_head * bytes_per_number.
    """
    return kv_heads * tokens * (d_k + d_v) * bytes_per_number


def decode_step(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    previous: DecodeStep | None = None,
    *,
    scale: float,
    mask: str = "causal",
    window: int | None = None,
    bytes_per_number: int = FLOAT32_BYTES,
) -> DecodeStep:
    """One generation step: append key t (h_kv, d_k) and value t (h_kv, d_v), attend with query t (h, d_k).

    `previous` is step t-1 (None for the first token); its keys and values are reused, not recomputed
    (torch.cat copies them into the longer cache; a server preallocates the cache and writes in place).
    `scale` divides the scores (sqrt(d_k) in the paper); mask is "causal" or "window" (width `window`).
    """
    _check_mask(mask, window)
    if query.dim() != 2 or key.dim() != 2 or value.dim() != 2:
        raise ValueError("decode_step takes one token: query (h, d_k), key (h_kv, d_k), value (h_kv, d_v)")
    if key.shape[-1] != query.shape[-1] or value.shape[0] != key.shape[0]:
        raise ValueError(
            f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}: the key needs the "
            "query's d_k, and key and value the same h_kv"
        )
    check_kv_heads(query.shape[0], key.shape[0])
    t = 0 if previous is None else previous.t + 1
    cache_keys = append(None if previous is None else previous.cache_keys, key)  # (h_kv, t+1, d_k)
    cache_values = append(None if previous is None else previous.cache_values, value)  # (h_kv, t+1, d_v)
    return _attend(t, query, cache_keys, cache_values, scale, mask, window, bytes_per_number)


def decode(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    *,
    scale: float,
    mask: str = "causal",
    window: int | None = None,
    bytes_per_number: int = FLOAT32_BYTES,
    steps: Iterable[int] | None = None,
) -> list[DecodeStep]:
    """Every step of generating T tokens: queries (h, T, d_k), keys (h_kv, T, d_k), values (h_kv, T, d_v); with
    `steps`, only those (a page showing step t needs no other: each step reads the cache as it is at that step).

    Step t's cache is a view of keys[:, :t+1] and values[:, :t+1] (no copies), and its weights and
    context equal row t of the full masked computation.
    """
    _check_mask(mask, window)
    h, n, d_k = queries.shape
    if keys.shape[1] != n or values.shape[1] != n:
        raise ValueError(
            f"decoding runs self-attention over one sequence: queries have T={n} tokens but keys "
            f"{keys.shape[1]} and values {values.shape[1]}"
        )
    if keys.shape[0] != values.shape[0]:
        raise ValueError(f"keys have {keys.shape[0]} heads but values {values.shape[0]}: both need h_kv")
    if keys.shape[-1] != d_k:
        raise ValueError(f"queries have d_k={d_k} but keys d_k={keys.shape[-1]}")
    check_kv_heads(h, keys.shape[0])
    return [
        _attend(t, queries[:, t], keys[:, : t + 1], values[:, : t + 1], scale, mask, window, bytes_per_number)
        for t in (range(n) if steps is None else steps)
        if 0 <= t < n
    ]


def decode_result(
    result: Result, bytes_per_number: int = FLOAT32_BYTES, steps: Iterable[int] | None = None
) -> list[DecodeStep]:
    """The steps of generating a computed self-attention's tokens one at a time, with its mask (only `steps`, when
    given).

    Uses result.queries, kv_keys, kv_values (h_kv heads), scale and the config's mask ("causal" or "window").
    Decoding runs at inference, without dropout: the steps match result.weights, and result.context when dropout is 0.
    """
    config = result.config
    if config.is_cross:
        raise ValueError(
            "decoding needs self-attention: a generated token's keys and values come from the tokens "
            "generated so far, but this result's come from a second sentence (cross-attention), which "
            "is read whole rather than one token at a time"
        )
    if config.mask not in DECODE_MASKS:
        why = {
            "none": "lets every token see the tokens after it, which do not exist yet when the model writes "
            "one token at a time",
            "padding": "hides the last keys but lets every token see the tokens after it, which do not exist "
            "yet when the model writes one token at a time",
            "custom": "may let a token see tokens after it, which do not exist yet when the model writes one "
            "token at a time",
        }.get(config.mask, "is not one decoding knows")
        raise ValueError(f"mask {config.mask!r} {why}; decoding with a KV cache needs mask 'causal' or 'window'")
    window = config.window if config.mask == "window" else None
    return decode(
        result.queries,
        result.kv_keys,  # (h_kv, T, d_k): a cache keeps one key per K/V head (grouped-query heads share theirs)
        result.kv_values,
        scale=result.scale,
        mask=config.mask,
        window=window,
        bytes_per_number=bytes_per_number,
        steps=steps,
    )


def _attend(
    t: int,
    query: torch.Tensor,
    cache_keys: torch.Tensor,
    cache_values: torch.Tensor,
    scale: float,
    mask: str,
    window: int | None,
    bytes_per_number: int,
) -> DecodeStep:
    """Query t against the cache of tokens 0..t: the shared body of decode_step and decode."""
    h, h_kv = query.shape[0], cache_keys.shape[0]
    allowed = allowed_keys(t, mask, window)  # (t+1,)
    scores = step_scores(query, cache_keys, scale)  # (h, t+1)
    weights = step_weights(scores, allowed)  # (h, t+1)
    context = step_context(weights, cache_values)  # (h, d_v)
    return DecodeStep(
        t=t,
        cache_keys=cache_keys,
        cache_values=cache_values,
        query=query,
        scores=scores,
        allowed=allowed,
        weights=weights,
        context=context,
        products=h * (t + 1),
        cache_bytes=cache_bytes(h_kv, t + 1, cache_keys.shape[-1], cache_values.shape[-1], bytes_per_number),
    )


def _check_mask(mask: str, window: int | None) -> None:
    if mask not in DECODE_MASKS:
        raise ValueError(f"decoding supports mask 'causal' or 'window', got {mask!r}")
    if mask == "window" and (window is None or window < 1):
        raise ValueError(f"mask 'window' needs a width window >= 1, got {window!r}")
