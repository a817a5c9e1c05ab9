"""FlashAttention's tiled online softmax, as a teaching implementation (no speed-up on a CPU).

Ordinary attention stores the whole (T_q, T_k) score matrix. FlashAttention (Dao et al. 2022) never
does: for a block of query rows it visits the key blocks in order, holding only one tile of scores,
and keeps three running numbers per query row (the online softmax of Milakov & Gimelshein 2018):

    m  running max of the scores seen so far              (h, B_q)
    l  running sum of exp(score - m)                      (h, B_q)
    O  running output: the softmax-weighted average of    (h, B_q, d_v)
       the values seen so far (normalised, as in
       FlashAttention's Algorithm 1)

When a key block j arrives with scores S (h, B_q, B_k):

    m_new = max(m, rowmax(S))
    P     = exp(S - m_new)                    blocked scores are -inf, so their P is 0
    l_new = exp(m - m_new) * l + rowsum(P)
    O_new = (exp(m - m_new) * l * O + P @ V_j) / l_new

exp(m - m_new) <= 1 rescales what was accumulated under the old max; no exp ever sees a positive
number, so nothing overflows. After the last block O = softmax(S_full) @ V exactly (up to rounding).
FlashAttention-2 keeps O unnormalised and divides by l once at the end: the same numbers.
A tile the mask blocks entirely (above a causal diagonal) would change nothing, so it is skipped,
as FlashAttention's kernels skip it. A row whose every key is blocked keeps m = -inf and l = 0 and
ends with O = 0, never NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from ..basics import core


@dataclass(frozen=True, eq=False)
class Tile:
    """The state of one query block after one key block: enough to replay the algorithm."""

    query_rows: range  # the query rows of this block, e.g. range(0, 4)
    key_cols: range  # the keys of this block
    allowed: torch.Tensor  # (B_q, B_k) bool, True = may attend
    scores: torch.Tensor  # (h, B_q, B_k) = Q_i K_j^T / scale, -inf where blocked
    m: torch.Tensor  # (h, B_q) running max after this key block (-inf: no allowed key yet)
    l: torch.Tensor  # noqa: E741 (h, B_q) running sum of exp(score - m) after this key block
    output: torch.Tensor  # (h, B_q, d_v) normalised output over the keys seen so far (0 while l = 0)
    skipped: bool = False  # the mask blocks the whole tile: nothing is computed, the state carries over


@dataclass(frozen=True, eq=False)
class Tiled:
    """Tiled attention: the final output and statistics, and every tile's state in visiting order."""

    output: torch.Tensor  # (h, T_q, d_v) = softmax(Q K^T / scale, masked) @ V
    m: torch.Tensor  # (h, T_q) final row max of the allowed scores
    l: torch.Tensor  # noqa: E741 (h, T_q) final sum of exp(score - m) over the allowed keys
    tiles: list[Tile]  # query block by query block; within one, the key blocks in order
    block_size: int  # B_k, keys per tile
    query_block_size: int  # B_q, query rows per tile

    @property
    def logsumexp(self) -> torch.Tensor:
        """m + log(l), (h, T_q): what FlashAttention keeps for the backward pass (-inf for an empty row)."""
        return self.m + torch.log(self.l)


class Memory(NamedTuple):
    """Numbers held at once for the scores: the whole matrix, or one tile plus the running statistics."""

    full_scores: int  # heads * T_q * T_k: ordinary attention's score (and weight) matrix
    tile_scores: int  # heads * B_q * B_k: one tile of scores, all tiled attention holds at a time
    statistics: int  # heads * T_q * 2: the running m and l of every query row

    @property
    def ratio(self) -> float:
        """How many times fewer numbers the tiled form holds for the scores."""
        return self.full_scores / (self.tile_scores + self.statistics)


def blocks(n: int, size: int) -> list[range]:
    """0..n-1 cut into consecutive ranges of `size`; the last one is shorter when size does not divide n."""
    return [range(start, min(start + size, n)) for start in range(0, n, size)]


def tile_scores(q: torch.Tensor, k: torch.Tensor, allowed: torch.Tensor, scale: float) -> torch.Tensor:
    """S = Q_i K_j^T / scale with -inf where blocked: (h, B_q, d_k) x (h, B_k, d_k) -> (h, B_q, B_k)."""
    return core.apply_mask(core.scores(q, k) / scale, allowed)  # (h, B_q, B_k)


def online_update(
    m: torch.Tensor,
    l: torch.Tensor,  # noqa: E741 (the paper's name for the running sum)
    output: torch.Tensor,
    scores: torch.Tensor,
    v: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fold one tile of scores (h, B_q, B_k) and its values (h, B_k, d_v) into the running (m, l, O).

    m_new = max(m, rowmax S); P = exp(S - m_new); l_new = e^(m - m_new) l + rowsum P;
    O_new = (e^(m - m_new) l O + P V) / l_new, and O_new = 0 while l_new = 0 (no allowed key yet).
    """
    m_new = torch.maximum(m, scores.amax(dim=-1))  # (h, B_q)
    # a row with no allowed key so far has m_new = -inf: subtract 0 instead, so exp(-inf - 0) = 0, not NaN
    shift = torch.where(m_new == float("-inf"), 0.0, m_new)  # (h, B_q)
    p = torch.exp(scores - shift[..., None])  # (h, B_q, B_k), every exponent <= 0
    alpha = torch.exp(m - shift)  # (h, B_q): rescales the old state to the new max; 0 at the start
    l_new = alpha * l + p.sum(dim=-1)  # (h, B_q)
    numerator = (alpha * l)[..., None] * output + p @ v  # (h, B_q, d_v)
    output_new = numerator / torch.where(l_new > 0, l_new, 1.0)[..., None]  # (h, B_q, d_v)
    return m_new, l_new, output_new


def tiled_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    *,
    scale: float,
    mask: torch.Tensor | None = None,
    block_size: int,
    query_block_size: int | None = None,
) -> Tiled:
    """softmax(Q K^T / scale, masked) @ V computed tile by tile with the online softmax.

    queries (h, T_q, d_k), keys (h, T_k, d_k), values (h, T_k, d_v), mask (T_q, T_k) bool or None.
    Key blocks of `block_size`, query blocks of `query_block_size` (default: block_size); neither
    needs to divide T. Returns the output (h, T_q, d_v), the final m and l, and every tile's state.
    """
    h, t_q, _ = queries.shape
    _, t_k, d_v = values.shape
    if keys.shape[:2] != values.shape[:2] or keys.shape[0] != h or keys.shape[-1] != queries.shape[-1]:
        raise ValueError(
            f"queries {tuple(queries.shape)}, keys {tuple(keys.shape)}, values {tuple(values.shape)} must be "
            "(h, T_q, d_k), (h, T_k, d_k), (h, T_k, d_v)"
        )
    query_block_size = block_size if query_block_size is None else query_block_size
    if block_size < 1 or query_block_size < 1:
        raise ValueError(f"block sizes must be at least 1, got {block_size} and {query_block_size}")
    if mask is None:
        mask = torch.ones(t_q, t_k, dtype=torch.bool)
    if mask.shape != (t_q, t_k):
        raise ValueError(f"mask is {tuple(mask.shape)} but must be (T_q, T_k) = ({t_q}, {t_k})")

    tiles: list[Tile] = []
    outputs, ms, ls = [], [], []
    for rows in blocks(t_q, query_block_size):
        q = queries[:, rows.start : rows.stop]  # (h, B_q, d_k)
        m = queries.new_full((h, len(rows)), float("-inf"))  # (h, B_q)
        l = queries.new_zeros((h, len(rows)))  # noqa: E741 (h, B_q)
        output = queries.new_zeros((h, len(rows), d_v))  # (h, B_q, d_v)
        for cols in blocks(t_k, block_size):
            allowed = mask[rows.start : rows.stop, cols.start : cols.stop]  # (B_q, B_k)
            if not bool(allowed.any()):  # e.g. above a causal diagonal: FlashAttention skips the tile
                blocked = q.new_full((h, len(rows), len(cols)), float("-inf"))  # (h, B_q, B_k)
                tiles.append(Tile(rows, cols, allowed, blocked, m, l, output, skipped=True))
                continue
            scores = tile_scores(q, keys[:, cols.start : cols.stop], allowed, scale)  # (h, B_q, B_k)
            m, l, output = online_update(  # noqa: E741
                m, l, output, scores, values[:, cols.start : cols.stop]
            )
            tiles.append(Tile(rows, cols, allowed, scores, m, l, output))
        outputs.append(output)
        ms.append(m)
        ls.append(l)
    return Tiled(
        output=torch.cat(outputs, dim=1),  # (h, T_q, d_v)
        m=torch.cat(ms, dim=1),  # (h, T_q)
        l=torch.cat(ls, dim=1),  # (h, T_q)
        tiles=tiles,
        block_size=block_size,
        query_block_size=query_block_size,
    )


def ordinary_attention(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, *, scale: float, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """The reference: softmax(Q K^T / scale, masked) @ V with the whole (h, T_q, T_k) matrix at once.

    Shapes as in `tiled_attention`; a row whose every key is blocked gives a zero output.
    """
    t_q, t_k = queries.shape[1], keys.shape[1]
    if mask is None:
        mask = torch.ones(t_q, t_k, dtype=torch.bool)
    scaled = core.scores(queries, keys) / scale  # (h, T_q, T_k)
    weights = core.softmax(core.apply_mask(scaled, mask), ~mask.any(dim=-1))  # (h, T_q, T_k)
    return weights @ values  # (h, T_q, d_v)


def memory_numbers(t_q: int, t_k: int, block_size: int, heads: int = 1, query_block_size: int | None = None) -> Memory:
    """Score numbers held at once: heads*T_q*T_k for ordinary attention, heads*B_q*B_k (one tile) tiled.

    The tiled form also keeps m and l for every query row (heads*T_q*2); the output (T_q x d_v) is
    the same size either way and is left out.
    """
    query_block_size = block_size if query_block_size is None else query_block_size
    b_q, b_k = min(query_block_size, t_q), min(block_size, t_k)
    return Memory(full_scores=heads * t_q * t_k, tile_scores=heads * b_q * b_k, statistics=heads * t_q * 2)
