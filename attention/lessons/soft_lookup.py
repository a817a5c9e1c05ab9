"""Attention as a soft dictionary lookup: one query's weights over the keys and the value rows they mix (the
Experiments page "Soft lookup").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..basics.core import Result


@dataclass(frozen=True, eq=False)
class SoftLookup:
    """Query i of one head as a soft dictionary lookup: z_i = sum_j a_ij v_j."""

    head: int
    query: int
    weights: torch.Tensor  # (T_k,) a_ij, after dropout
    allowed: torch.Tensor  # (T_k,) bool: the mask's row
    values: torch.Tensor  # (T_k, d_v) v_j
    weighted: torch.Tensor  # (T_k, d_v) a_ij v_j: each value row scaled by its weight
    context: torch.Tensor  # (d_v,) z_i = weighted.sum(0), as compute returned it


def soft_lookup(result: Result, head: int, i: int) -> SoftLookup:
    """For query i of a head: its weights over the keys, the value rows, and their weighted sum."""
    weights = result.dropped_weights[head, i]  # (T_k,)
    values = result.values[head]  # (T_k, d_v)
    return SoftLookup(
        head=head,
        query=i,
        weights=weights,
        allowed=result.mask[i],
        values=values,
        weighted=weights[:, None] * values,  # (T_k, d_v)
        context=result.context[head, i],  # (d_v,)
    )
