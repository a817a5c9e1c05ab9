"""Where words are: positional encodings, each as plain tensors a page can show.

Attention by itself ignores word order (permute the words and the weights permute with them).
Four ways to put position back, one function a step:

    sinusoidal  table (T, d_model) added to the inputs      Vaswani et al. 2017, "Attention Is All You Need"
    learned     table (T, d_model) added to the inputs      as BERT and GPT-2 (a seeded random one here)
    rope        queries and keys rotated by position angles  Su et al. 2021, in Llama's rotate-half form
    alibi       bias (h, T_q, T_k) added to the scores      Press et al. 2022, "Train Short, Test Long"

Positions count from 0 in each sequence: query i sits at position i + query_offset, key j at j. With the
default offset 0 this is the top-left alignment of `masks.causal` (and SDPA's is_causal); a KV-cache step,
whose new queries are the last tokens, passes query_offset = T_k - T_q (`compute` does for a config with
causal_align="bottom-right", so each row of a step equals the same row of the full computation).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

KINDS = ("none", "sinusoidal", "learned", "rope", "alibi")


# absolute tables, added to the inputs ------------------------------------------------------------


def sinusoidal(t: int, d: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d)): (T, d).

    An odd d ends with a sine column. Computed in double, then rounded, so long sentences keep every digit.
    """
    pos = torch.arange(t, dtype=torch.float64)[:, None]  # (T, 1)
    even = torch.arange(0, d, 2, dtype=torch.float64)  # (ceil(d/2),) the column indices 2i
    angles = pos / 10000.0 ** (even / d)  # (T, ceil(d/2))
    pe = torch.empty(t, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d // 2])
    return pe.float()  # (T, d)


def learned(t: int, d: int, generator: torch.Generator) -> torch.Tensor:
    """A learned position table as it is before training: (T, d) draws of N(0, 1) from `generator`.

    BERT (and Hugging Face's GPT-2) draw the position table at the token table's scale, both N(0, 0.02^2).
    Our token table is nn.Embedding's default N(0, 1) (see weights.py), so the positions are N(0, 1) too,
    exactly what nn.Embedding(T, d) would draw: neither drowns the other when the two are added.
    """
    return torch.randn(t, d, generator=generator)  # (T, d)


def position_similarity(table: torch.Tensor) -> torch.Tensor:
    """cos(PE[p], PE[q]) for every pair of positions: (T, d) -> (T, T), 1 on the diagonal.

    An all-zero row (possible only in a given table) has similarity 0 to everything.
    """
    unit = torch.nn.functional.normalize(table, dim=-1)  # (T, d)
    return unit @ unit.T  # (T, T)


# RoPE: queries and keys rotated, pairs (i, i + d_head/2) as Llama's rotate_half ----------------------


def _check_even(d_head: int) -> None:
    if d_head % 2:
        raise ValueError(f"RoPE rotates pairs of features, so d_head must be even; got {d_head}")


def rope_frequencies(d_head: int, base: float = 10000.0) -> torch.Tensor:
    """theta_i = base^(-2i/d_head) for i = 0 .. d_head/2 - 1: (d_head/2,), one frequency per pair.

    Computed as Hugging Face's Llama computes `inv_freq` (float32), so the numbers are the ones a model uses.
    """
    _check_even(d_head)
    return 1.0 / (base ** (torch.arange(0, d_head, 2, dtype=torch.int64).float() / d_head))  # (d_head/2,)


def rope_angles(positions: int | torch.Tensor, d_head: int, base: float = 10000.0) -> torch.Tensor:
    """angle[p, i] = position_p * theta_i: (T, d_head/2) for positions (T,) or 0..t-1 when given an int.

    Any positions tensor (..., T) works (offsets, a pair moved along the sentence, a KV-cache step);
    float64 positions give float64 angles.
    """
    theta = rope_frequencies(d_head, base)  # (d_head/2,)
    if isinstance(positions, int):
        positions = torch.arange(positions)
    if not positions.is_floating_point():
        positions = positions.float()
    return positions[..., None] * theta  # (..., T, d_head/2)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[x1, x2] -> [-x2, x1], halves of the last dimension: the 90-degree turn of every pair (i, i + d/2)."""
    _check_even(x.shape[-1])
    x1, x2 = x.chunk(2, dim=-1)  # (..., d/2) each
    return torch.cat((-x2, x1), dim=-1)  # (..., d)


def apply_rope(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """x * cos + rotate_half(x) * sin, with cos and sin of the angles repeated over both halves.

    x (..., T, d_head) and angles (T, d_head/2) -> (..., T, d_head): pair (x_i, x_{i+d/2}) turned by angle_i.
    Then q_m . k_n depends on m - n only, and every vector keeps its length.
    """
    _check_even(x.shape[-1])
    if angles.shape[-1] * 2 != x.shape[-1]:
        raise ValueError(f"angles for d_head {2 * angles.shape[-1]} cannot rotate vectors of size {x.shape[-1]}")
    doubled = torch.cat((angles, angles), dim=-1)  # (T, d_head)
    return x * doubled.cos() + rotate_half(x) * doubled.sin()  # (..., T, d_head)


# ALiBi: a bias on the scores, linear in the distance -----------------------------------------------


def alibi_slopes(heads: int) -> torch.Tensor:
    """One slope per head: (h,). For h a power of two, m_k = 2^(-8k/h), k = 1..h (h = 8: 1/2, 1/4, ..., 1/256).

    Otherwise, as the official `get_slopes`: the slopes of the closest power of two below h, then every
    other slope of twice that many heads (h = 12: 2^-1 .. 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5).
    """
    if heads < 1:
        raise ValueError(f"ALiBi needs at least one head; got {heads}")

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * k / n) for k in range(1, n + 1)]  # start 2^(-8/n), ratio the same

    closest = 2 ** math.floor(math.log2(heads))
    slopes = power_of_two(closest) + power_of_two(2 * closest)[0::2][: heads - closest]
    return torch.tensor(slopes)  # (h,)


def relative_positions(t_q: int, t_k: int, query_offset: int = 0) -> torch.Tensor:
    """distance[i, j] = (i + query_offset) - j: how far key j lies before query i (negative: after). (T_q, T_k)."""
    i = torch.arange(t_q)[:, None] + query_offset  # (T_q, 1) query positions
    j = torch.arange(t_k)[None, :]  # (1, T_k) key positions
    return i - j  # (T_q, T_k)


def alibi_bias(heads: int, t_q: int, t_k: int, *, query_offset: int = 0) -> torch.Tensor:
    """bias[h, i, j] = -m_h * |(i + query_offset) - j|, added to the scaled scores: (h, T_q, T_k).

    Keys after the query get the symmetric penalty (the encoder recipe of the ALiBi repository's issue #5), so
    the bias makes sense without a mask; under a causal mask those cells are blocked and this is the paper's.
    """
    slopes = alibi_slopes(heads)  # (h,)
    distance = relative_positions(t_q, t_k, query_offset).abs()  # (T_q, T_k)
    return slopes[:, None, None] * -distance  # (h, T_q, T_k); the integer -0 keeps the diagonal at +0.0


# everything one kind needs, for compute -------------------------------------------------------------


def query_offset(t_q: int, t_k: int, align: str = "top-left") -> int:
    """Where query 0 sits among the key positions: 0 top-left; T_k - T_q bottom-right, a decoding step whose
    T_q new tokens come after the T_k - T_q the cache holds (0 when there are more queries than keys)."""
    if align not in ("top-left", "bottom-right"):
        raise ValueError(f"unknown causal alignment {align!r}")
    return max(t_k - t_q, 0) if align == "bottom-right" else 0


class PositionTerms(NamedTuple):
    """What one kind of positional encoding adds to an attention computation (None where it adds nothing).

    Tables and angles have one row per position 0..P-1; index them by position:
    x_q + table[query_positions], x_kv + table[key_positions];
    apply_rope(queries, angles[query_positions]), apply_rope(keys, angles[key_positions]); scaled + bias.
    """

    kind: str  # one of KINDS
    query_positions: torch.Tensor  # (T_q,) long: i + query_offset
    key_positions: torch.Tensor  # (T_k,) long: j
    table: torch.Tensor | None  # (P, d_model) sinusoidal or learned, added to the inputs
    angles: torch.Tensor | None  # (P, d_head/2) rope, rotates queries and keys
    slopes: torch.Tensor | None  # (h,) alibi
    bias: torch.Tensor | None  # (h, T_q, T_k) alibi, added to the scaled scores


def encode(
    kind: str,
    *,
    t_q: int,
    t_k: int,
    d_model: int,
    d_head: int,
    heads: int,
    generator: torch.Generator | None = None,
    rope_base: float = 10000.0,
    query_offset: int = 0,
) -> PositionTerms:
    """The position terms of one kind, for T_q queries at i + query_offset and T_k keys at j.

    P = max(T_q + query_offset, T_k) positions are tabled; `generator` is drawn from only by 'learned'.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown position encoding {kind!r}; choose one of {', '.join(KINDS)}")
    if query_offset < 0:
        raise ValueError(f"query_offset must be at least 0; got {query_offset}")
    query_positions = torch.arange(t_q) + query_offset  # (T_q,)
    key_positions = torch.arange(t_k)  # (T_k,)
    p = max(t_q + query_offset, t_k)
    table = angles = slopes = bias = None
    if kind == "sinusoidal":
        table = sinusoidal(p, d_model)  # (P, d_model)
    elif kind == "learned":
        if generator is None:
            raise ValueError("a learned position table is drawn at random: pass a generator")
        table = learned(p, d_model, generator)  # (P, d_model)
    elif kind == "rope":
        angles = rope_angles(p, d_head, rope_base)  # (P, d_head/2)
    elif kind == "alibi":
        slopes = alibi_slopes(heads)  # (h,)
        bias = alibi_bias(heads, t_q, t_k, query_offset=query_offset)  # (h, T_q, T_k)
    return PositionTerms(kind, query_positions, key_positions, table, angles, slopes, bias)
