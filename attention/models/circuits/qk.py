"""A head's QK circuit for one score: how much of q . k comes from what the key carries (its token, its position,
what earlier layers wrote there) and how much from RoPE's rotation.

The key vector is linear in the key's residual stream, so a residual split into parts gives an exact split of the
key, k = sum_p k_p (for a model with RMSNorm before the attention, with the norm's scale frozen at the whole
residual's: n_j = g * x_j / s_j = sum_p g * x_p / s_j). The score is bilinear in q and k, so

    score = q_rot . k_rot / sqrt(d_head) = sum_p q_rot . R_j k_p / sqrt(d_head)             exact
    RoPE:  q_rot . k_rot = (R_i q) . (R_j k) = q . R_(j-i) k                               (R orthogonal)
           = q . k  (content: the score without the rotation)  +  q . (R_(j-i) - I) k  (the rotation's effect)

Both splits are exact identities. Where the decomposition is not exact: the frozen norm scale (a part alone would
be normalised by its own, different, scale); the query, which carries its own token and context, is kept whole
(split it the same way with the query's residual); and the softmax after the score is not linear, so shares of a
score are not shares of the attention weight.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from ...basics import position


class QKSplit(NamedTuple):
    """One score q_i . k_j / sqrt(d_head) split over P parts of the key's residual stream and the rotation."""

    names: tuple[str, ...]  # P names of the key's parts ("token", "position", "earlier layers", ...)
    query: torch.Tensor  # (d_head,) q before rotation
    key_parts: torch.Tensor  # (P, d_head) k_p before rotation, summing to the key
    rotated_query: torch.Tensor  # (d_head,) R_i q (q itself without RoPE)
    rotated_parts: torch.Tensor  # (P, d_head) R_j k_p
    content: torch.Tensor  # (P,) q . k_p / sqrt(d_head): each part without the rotation
    rotation: torch.Tensor  # (P,) (R_i q . R_j k_p - q . k_p) / sqrt(d_head): what the rotation adds to each
    parts: torch.Tensor  # (P,) content + rotation: each part's share of the score
    score: torch.Tensor  # () the sum of parts: the scaled score the model computes


def qk_split(
    names: Sequence[str],
    query: torch.Tensor,
    key_parts: torch.Tensor,
    query_position: int | None = None,
    key_position: int | None = None,
    rope_base: float = 10000.0,
) -> QKSplit:
    """Split the score of `query` (d_head,) and the key whose parts are `key_parts` (P, d_head), both before RoPE;
    positions None: a model without RoPE (the rotation is the identity and adds 0)."""
    d = query.shape[-1]
    if query_position is None or key_position is None:
        rotated_query, rotated_parts = query, key_parts
    else:
        rotated_query = position.apply_rope(query[None], position.rope_angles(torch.tensor([query_position]), d,
                                                                                rope_base))[0]  # fmt: skip
        k_angles = position.rope_angles(torch.tensor([key_position]), d, rope_base)  # (1, d/2)
        rotated_parts = position.apply_rope(key_parts[:, None], k_angles)[:, 0]  # (P, d_head)
    scale = d**0.5
    content = key_parts @ query / scale  # (P,)
    parts = rotated_parts @ rotated_query / scale  # (P,)
    return QKSplit(tuple(names), query, key_parts, rotated_query, rotated_parts, content, parts - content, parts,
                   parts.sum())  # fmt: skip
