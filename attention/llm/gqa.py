"""Grouped-query attention: fewer key/value heads than query heads.

    h query heads, h_kv key/value heads, h % h_kv == 0, g = h / h_kv heads a group
    query head i reads K/V head i // g
    h_kv = h: multi-head attention (MHA); 1 < h_kv < h: grouped-query (GQA); h_kv = 1: multi-query (MQA)

Ainslie et al. 2023 (GQA), Shazeer 2019 (MQA). The K/V heads are repeated with repeat_interleave, as
`torch.nn.functional.scaled_dot_product_attention(..., enable_gqa=True)` does, and then attention runs
as usual; what is saved is the key/value cache, h / h_kv times smaller.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..basics import core


def divisors(n: int) -> list[int]:
    """The numbers of K/V heads that n query heads allow: the divisors of n, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


def check_kv_heads(heads: int, kv_heads: int) -> None:
    """Raise ValueError unless 1 <= kv_heads <= heads and kv_heads divides heads."""
    if heads < 1:
        raise ValueError(f"heads must be at least 1, got {heads}")
    if not 1 <= kv_heads <= heads or heads % kv_heads:
        choices = ", ".join(map(str, divisors(heads)))
        raise ValueError(
            f"kv_heads={kv_heads} does not fit heads={heads}: every K/V head serves the same number of query "
            f"heads, so kv_heads must divide heads; pick one of {choices}"
        )


def group_of(heads: int, kv_heads: int) -> list[int]:
    """The K/V head each query head reads: [i // (heads // kv_heads) for i in range(heads)]."""
    check_kv_heads(heads, kv_heads)
    g = heads // kv_heads
    return [i // g for i in range(heads)]


def expand_kv(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(h_kv, T, d) -> (h, T, d): each K/V head repeated for the g = h / h_kv query heads of its group.

    repeat_interleave, as SDPA's enable_gqa: rows 0..g-1 are K/V head 0, rows g..2g-1 head 1, ...
    """
    check_kv_heads(heads, x.shape[0])
    return x.repeat_interleave(heads // x.shape[0], dim=0)  # (h, T, d)


@dataclass(frozen=True, eq=False)
class Grouped:
    """Every intermediate of grouped-query attention; h query heads, h_kv K/V heads."""

    group: list[int]  # (h,) the K/V head each query head reads
    keys: torch.Tensor  # (h, T_k, d_k) the K/V heads repeated per query head
    values: torch.Tensor  # (h, T_k, d_v)
    scaled: torch.Tensor  # (h, T_q, T_k) = Q K^T / scale
    mask: torch.Tensor  # (T_q, T_k) bool, True = may attend
    weights: torch.Tensor  # (h, T_q, T_k) softmax over the allowed keys
    context: torch.Tensor  # (h, T_q, d_v) = weights @ values
    empty_rows: torch.Tensor  # (T_q,) bool: queries whose every key is masked (zero weights, zero context)

    @property
    def heads(self) -> int:
        return len(self.group)

    @property
    def kv_heads(self) -> int:
        return max(self.group) + 1


def grouped_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    *,
    scale: float,
    mask: torch.Tensor | None = None,
) -> Grouped:
    """softmax(Q K_g^T / scale, masked) V_g, where K_g, V_g repeat the h_kv K/V heads to h.

    queries (h, T_q, d_k), keys (h_kv, T_k, d_k), values (h_kv, T_k, d_v), mask (T_q, T_k) bool or None;
    `scale` divides the scores (SDPA's `scale` multiplies them: pass scale=1/ours there).
    """
    h, t_q, _ = queries.shape
    h_kv, t_k, _ = keys.shape
    if values.shape[:2] != keys.shape[:2]:
        raise ValueError(f"keys {tuple(keys.shape)} and values {tuple(values.shape)} need the same (h_kv, T_k)")
    if keys.shape[-1] != queries.shape[-1]:
        raise ValueError(f"queries have d_k={queries.shape[-1]} but keys d_k={keys.shape[-1]}")
    group = group_of(h, h_kv)
    if mask is None:
        mask = torch.ones(t_q, t_k, dtype=torch.bool)
    if mask.shape != (t_q, t_k):
        raise ValueError(f"mask is {tuple(mask.shape)} but must be (T_q, T_k) = ({t_q}, {t_k})")
    keys_g = expand_kv(keys, h)  # (h, T_k, d_k)
    values_g = expand_kv(values, h)  # (h, T_k, d_v)
    scaled = core.scores(queries, keys_g) / scale  # (h, T_q, T_k)
    empty_rows = ~mask.any(dim=-1)  # (T_q,)
    weights = core.softmax(core.apply_mask(scaled, mask), empty_rows)  # (h, T_q, T_k)
    context = weights @ values_g  # (h, T_q, d_v)
    return Grouped(group, keys_g, values_g, scaled, mask, weights, context, empty_rows)
