"""RoPE's promise, as numbers a page can draw: a query/key score that depends on their distance only.

Rotate query q by angles m * theta and key k by n * theta (`position.apply_rope`); each pair's rotations cancel
but for the difference, so

    rope(q, m) . rope(k, n) = f(q, k, m - n)

Slide both along the sentence at a fixed distance and the score stays put. An absolute table added to the inputs
(sinusoidal) gives no such promise: ((x_q + PE[m]) W_q) . ((x_k + PE[n]) W_k) changes as the pair moves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..basics import position
from ..basics.core import Result, scores


def _as_positions(key_positions: Sequence[int] | torch.Tensor) -> torch.Tensor:
    positions = torch.as_tensor(key_positions, dtype=torch.long)
    if positions.dim() != 1:
        raise ValueError(f"key_positions must be one position a step (S,); got shape {tuple(positions.shape)}")
    return positions


def _check_positions(key_positions: torch.Tensor, distance: int) -> torch.Tensor:
    query_positions = key_positions + distance  # (S,)
    if bool((key_positions < 0).any()) or bool((query_positions < 0).any()):
        raise ValueError("positions count from 0: every key position and key position + distance must be >= 0")
    return query_positions


def pair_scores(
    query: torch.Tensor,
    key: torch.Tensor,
    distance: int,
    key_positions: Sequence[int] | torch.Tensor,
    base: float = 10000.0,
) -> torch.Tensor:
    """q . k after RoPE, the key at each of key_positions (S,) and the query `distance` places after it: (S,).

    query, key: (d_head,) unrotated vectors (d_head even). Constant over the positions, up to rounding.
    """
    key_positions = _as_positions(key_positions)
    query_positions = _check_positions(key_positions, distance)
    d_head = query.shape[-1]
    q_angles = position.rope_angles(query_positions, d_head, base)  # (S, d_head/2)
    q = position.apply_rope(query.expand(len(key_positions), d_head), q_angles)
    k = position.apply_rope(key.expand(len(key_positions), d_head), position.rope_angles(key_positions, d_head, base))
    return (q * k).sum(-1)  # (S,)


def sinusoidal_pair_scores(
    x_query: torch.Tensor,
    x_key: torch.Tensor,
    w_query: torch.Tensor,
    w_key: torch.Tensor,
    distance: int,
    key_positions: Sequence[int] | torch.Tensor,
    b_query: torch.Tensor | None = None,
    b_key: torch.Tensor | None = None,
) -> torch.Tensor:
    """The same pair with the sinusoidal table added to its inputs instead: ((x_q + PE[m]) W_q) . ((x_k + PE[n]) W_k).

    x_query, x_key: (d_model,) inputs; w_query, w_key: (d_model, d_k) one head's projections (x @ W), with its
    biases (d_k,) if any; n = key_positions (S,), m = n + distance. Returns (S,): not constant, the table is absolute.
    """
    key_positions = _as_positions(key_positions)
    query_positions = _check_positions(key_positions, distance)
    p = int(max(query_positions.max(), key_positions.max())) + 1 if len(key_positions) else 0
    table = position.sinusoidal(p, x_query.shape[-1])  # (P, d_model)
    q = (x_query + table[query_positions]) @ w_query  # (S, d_k)
    k = (x_key + table[key_positions]) @ w_key  # (S, d_k)
    if b_query is not None:
        q = q + b_query
    if b_key is not None:
        k = k + b_key
    return (q * k).sum(-1)  # (S,)


def omega_before_rotation(result: Result) -> torch.Tensor:
    """omega of the queries and keys before RoPE turns them: (h, T_q, T_k), the scores without positions.

    Equal to the omega of the same config with position 'none' (RoPE draws nothing, so the weights are the same).
    """
    return scores(result.unrotated_queries, result.unrotated_keys)  # (h, T_q, T_k)


def spread(values: torch.Tensor) -> float:
    """max - min: how far a line of scores moves (0 for a flat one)."""
    return float(values.max() - values.min()) if values.numel() else 0.0


def wrapped_angles(angles: torch.Tensor) -> torch.Tensor:
    """Angles modulo one turn, as the rotation sees them: in [-pi, pi), same shape (a turn and a bit is a bit)."""
    return torch.remainder(angles + math.pi, 2 * math.pi) - math.pi
