"""Positional encodings against their papers: formulas recomputed by hand, defining properties, SDPA as oracle."""

from __future__ import annotations

import cmath
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention.basics.position import (
    KINDS,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    encode,
    learned,
    position_similarity,
    relative_positions,
    rope_angles,
    rope_frequencies,
    rotate_half,
    sinusoidal,
)

SETTINGS = settings(max_examples=80, deadline=None)
seeds = st.integers(0, 2**32 - 1)
even_d = st.integers(1, 16).map(lambda n: 2 * n)


def randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# sinusoidal -------------------------------------------------------------------------------------


@SETTINGS
@given(st.integers(1, 40), st.integers(1, 33))
def test_sinusoidal_is_the_papers_formula(t: int, d: int) -> None:
    expected = [[0.0] * d for _ in range(t)]
    for pos in range(t):
        for col in range(d):
            two_i = col - col % 2  # columns 2i and 2i+1 share a frequency
            angle = pos / 10000 ** (two_i / d)
            expected[pos][col] = math.sin(angle) if col % 2 == 0 else math.cos(angle)
    pe = sinusoidal(t, d)
    assert pe.shape == (t, d) and pe.dtype == torch.float32
    torch.testing.assert_close(pe, torch.tensor(expected, dtype=torch.float32), rtol=0, atol=1e-6)


@SETTINGS
@given(st.integers(0, 200), st.integers(0, 200), even_d)
def test_sinusoidal_shift_is_a_rotation_of_each_pair(pos: int, k: int, d: int) -> None:
    """The paper's reason for sinusoids: PE[pos + k] is a fixed linear map (a rotation per pair) of PE[pos]."""
    pe = sinusoidal(pos + k + 1, d).double()
    for i in range(d // 2):
        c, s = math.cos(k / 10000 ** (2 * i / d)), math.sin(k / 10000 ** (2 * i / d))
        rot = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)  # sin(a+b) = sin a cos b + cos a sin b, ...
        sin_cos = pe[pos, 2 * i : 2 * i + 2]  # (sin, cos) at pos
        torch.testing.assert_close(sin_cos @ rot, pe[pos + k, 2 * i : 2 * i + 2], rtol=0, atol=1e-5)


def test_sinusoidal_rows_have_norm_sqrt_half_d() -> None:
    pe = sinusoidal(50, 12)
    torch.testing.assert_close(pe.norm(dim=-1), torch.full((50,), math.sqrt(6)))


# learned and similarity -------------------------------------------------------------------------


@SETTINGS
@given(st.integers(1, 20), st.integers(1, 16), seeds)
def test_learned_is_nn_embeddings_draw_from_the_private_generator(t: int, d: int, seed: int) -> None:
    before = torch.get_rng_state()
    table = learned(t, d, torch.Generator().manual_seed(seed))
    assert torch.equal(torch.get_rng_state(), before)  # the global RNG is never touched
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        expected = torch.nn.Embedding(t, d).weight.detach()
    assert torch.equal(table, expected)
    assert torch.equal(learned(t, d, torch.Generator().manual_seed(seed)), table)  # seeded: same draw again


@SETTINGS
@given(st.integers(1, 12), st.integers(1, 10), seeds)
def test_position_similarity_is_pairwise_cosine(t: int, d: int, seed: int) -> None:
    table = randn(t, d, seed=seed)
    sim = position_similarity(table)
    expected = F.cosine_similarity(table[:, None, :], table[None, :, :], dim=-1)  # (T, T)
    torch.testing.assert_close(sim, expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(sim.diagonal(), torch.ones(t), rtol=0, atol=1e-5)
    torch.testing.assert_close(sim, sim.T, rtol=0, atol=1e-6)


def test_sinusoidal_neighbours_are_more_alike_than_distant_positions() -> None:
    sim = position_similarity(sinusoidal(64, 32))
    near, far = sim[10, 11], sim[10, 60]
    assert near > far


def test_position_similarity_of_a_zero_row_is_zero_not_nan() -> None:
    sim = position_similarity(torch.tensor([[0.0, 0.0], [1.0, 2.0]]))
    assert torch.isfinite(sim).all() and sim[0, 0] == 0 and sim[0, 1] == 0


# RoPE -------------------------------------------------------------------------------------------


def rope_by_hand(x: list[float], pos: float, base: float = 10000.0) -> list[float]:
    """Each pair (x_i, x_{i+d/2}) as the complex number x_i + 1j x_{i+d/2}, times e^{1j pos theta_i}."""
    half = len(x) // 2
    out = [0.0] * len(x)
    for i in range(half):
        theta = base ** (-2 * i / len(x))
        z = complex(x[i], x[i + half]) * cmath.exp(1j * pos * theta)
        out[i], out[i + half] = z.real, z.imag
    return out


@SETTINGS
@given(even_d, st.lists(st.integers(0, 511), min_size=1, max_size=6), st.sampled_from((1e4, 5e5, 100.0)), seeds)
def test_rope_equals_the_complex_rotation_of_each_pair(d: int, positions: list[int], base: float, seed: int) -> None:
    x = randn(3, len(positions), d, seed=seed)  # (h, T, d_head)
    out = apply_rope(x, rope_angles(torch.tensor(positions), d, base))
    expected = [[rope_by_hand(x[h, t].tolist(), positions[t], base) for t in range(len(positions))] for h in range(3)]
    assert out.shape == x.shape
    torch.testing.assert_close(out, torch.tensor(expected, dtype=torch.float32), rtol=1e-4, atol=2e-4)


def test_rope_frequencies_and_angles_are_the_formula() -> None:
    theta = rope_frequencies(8, 10000.0)
    torch.testing.assert_close(theta, torch.tensor([1.0, 0.1, 0.01, 0.001]))
    angles = rope_angles(3, 8)
    assert angles.shape == (3, 4)
    torch.testing.assert_close(angles, torch.arange(3.0)[:, None] * theta)
    torch.testing.assert_close(rope_angles(torch.tensor([5, 7]), 8), torch.tensor([5.0, 7.0])[:, None] * theta)


def test_rotate_half_turns_each_pair_by_90_degrees() -> None:
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert torch.equal(rotate_half(x), torch.tensor([-3.0, -4.0, 1.0, 2.0]))
    assert torch.equal(rotate_half(rotate_half(x)), -x)


@SETTINGS
@given(even_d, st.lists(st.integers(0, 4096), min_size=1, max_size=8), seeds)
def test_rope_preserves_norms(d: int, positions: list[int], seed: int) -> None:
    x = randn(2, len(positions), d, seed=seed)  # (h, T, d_head)
    out = apply_rope(x, rope_angles(torch.tensor(positions), d))
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), rtol=1e-5, atol=1e-5)


@SETTINGS
@given(even_d, st.integers(0, 4096), st.integers(0, 4096), st.integers(-4096, 4096), seeds)
def test_rope_score_depends_only_on_the_offset_m_minus_n(d: int, m: int, n: int, shift: int, seed: int) -> None:
    m, n = m + max(0, -shift), n + max(0, -shift)  # keep the shifted positions at 0 or beyond
    q, k = randn(2, d, seed=seed, dtype=torch.float64)

    def score(at_q: int, at_k: int) -> torch.Tensor:
        angles = rope_angles(torch.tensor([at_q, at_k], dtype=torch.float64), d)  # (2, d/2)
        rq, rk = apply_rope(torch.stack([q, k]), angles)
        return rq @ rk

    torch.testing.assert_close(score(m + shift, n + shift), score(m, n), rtol=0, atol=1e-5)
    # at offset 0 the rotations cancel: the score is the plain dot product, wherever the pair stands
    torch.testing.assert_close(score(m, m), q @ k, rtol=0, atol=1e-5)


@pytest.mark.parametrize("d_head", [1, 3, 5, 7])
def test_odd_d_head_is_a_clear_error(d_head: int) -> None:
    with pytest.raises(ValueError, match="d_head must be even"):
        rope_frequencies(d_head)
    with pytest.raises(ValueError, match="d_head must be even"):
        apply_rope(torch.zeros(2, d_head), torch.zeros(2, d_head // 2))
    with pytest.raises(ValueError, match="d_head must be even"):
        encode("rope", t_q=3, t_k=3, d_model=8, d_head=d_head, heads=1)


def test_angles_of_another_size_are_an_error() -> None:
    with pytest.raises(ValueError, match="cannot rotate"):
        apply_rope(torch.zeros(3, 8), rope_angles(3, 6))


# ALiBi ------------------------------------------------------------------------------------------


def test_alibi_slopes_for_8_heads_are_press_et_al() -> None:
    expected = [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]
    assert alibi_slopes(8).tolist() == expected


def test_alibi_slopes_for_12_heads_are_the_official_get_slopes() -> None:
    # ofirpress/attention_with_linear_biases, fairseq/models/transformer.py get_slopes(12), worked by hand:
    # get_slopes_power_of_2(8) = 2^-1 .. 2^-8, then get_slopes_power_of_2(16)[0::2][:4] = 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5
    expected = [2.0**-k for k in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(expected), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("heads", "expected"),
    [
        (1, [2.0**-8]),
        (2, [2.0**-4, 2.0**-8]),
        (3, [2.0**-4, 2.0**-8, 2.0**-2]),  # 2 heads' slopes, then the first of 4 heads' (2^-2)
        (4, [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]),
    ],
)
def test_alibi_slopes_for_few_heads(heads: int, expected: list[float]) -> None:
    assert alibi_slopes(heads).tolist() == expected


@given(st.integers(1, 64))
def test_alibi_slopes_are_distinct_and_in_0_1(heads: int) -> None:
    slopes = alibi_slopes(heads)
    assert slopes.shape == (heads,) and ((slopes > 0) & (slopes < 1)).all()
    assert len(set(slopes.tolist())) == heads


def test_alibi_slopes_need_a_head() -> None:
    with pytest.raises(ValueError, match="at least one head"):
        alibi_slopes(0)


@SETTINGS
@given(st.integers(1, 8), st.integers(1, 10), st.integers(1, 10), st.integers(0, 5))
def test_alibi_bias_is_minus_slope_times_distance(heads: int, t_q: int, t_k: int, offset: int) -> None:
    bias = alibi_bias(heads, t_q, t_k, query_offset=offset)
    slopes = alibi_slopes(heads).tolist()
    assert bias.shape == (heads, t_q, t_k)
    for h in range(heads):
        for i in range(t_q):
            for j in range(t_k):
                assert bias[h, i, j].item() == pytest.approx(-slopes[h] * abs(i + offset - j), rel=1e-6)
    assert not torch.signbit(bias[bias == 0]).any()  # +0.0 where a query meets its own position, never -0.0
    if t_q == t_k and offset == 0:
        assert torch.equal(bias, bias.transpose(1, 2))  # symmetric: keys after the query pay as much as before


def test_relative_positions_count_keys_back_from_the_query() -> None:
    assert relative_positions(2, 3).tolist() == [[0, -1, -2], [1, 0, -1]]
    assert relative_positions(2, 3, query_offset=1).tolist() == [[1, 0, -1], [2, 1, 0]]  # bottom-right: T_k - T_q


@SETTINGS
@given(st.integers(1, 8), st.integers(1, 9), st.integers(1, 9), st.integers(1, 8), seeds)
def test_alibi_through_sdpa_equals_softmax_by_hand(heads: int, t_q: int, t_k: int, d: int, seed: int) -> None:
    q, k, v = randn(heads, t_q, d, seed=seed), randn(heads, t_k, d, seed=seed + 1), randn(heads, t_k, d, seed=seed + 2)
    bias = alibi_bias(heads, t_q, t_k)  # (h, T_q, T_k)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d) + bias, dim=-1)  # (h, T_q, T_k)
    expected = weights @ v  # (h, T_q, d)
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=bias), expected)
    # with a causal mask folded into the float mask, as the ALiBi repository adds its bias to the future mask
    causal = torch.ones(t_q, t_k, dtype=torch.bool).tril()
    masked = bias.masked_fill(~causal, float("-inf"))
    by_hand = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d) + masked, dim=-1) @ v
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=masked), by_hand)


@SETTINGS
@given(st.integers(1, 8), st.integers(1, 12), seeds)
def test_causal_alibi_equals_the_official_row_shifted_bias(heads: int, t: int, seed: int) -> None:
    """The official code adds +m*j (all rows alike), equal to -m*(i-j) up to a per-row constant: same softmax."""
    scores = randn(heads, t, t, seed=seed)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    official = alibi_slopes(heads)[:, None, None] * torch.arange(t).float()[None, None, :]  # (h, 1, T) -> rows
    ours = torch.softmax((scores + alibi_bias(heads, t, t)).masked_fill(~causal, float("-inf")), dim=-1)
    theirs = torch.softmax((scores + official).masked_fill(~causal, float("-inf")), dim=-1)
    torch.testing.assert_close(ours, theirs)


# encode -----------------------------------------------------------------------------------------


@SETTINGS
@given(
    st.sampled_from(KINDS), st.integers(1, 10), st.integers(1, 10), st.integers(1, 16), even_d,
    st.integers(1, 8), st.integers(0, 4), seeds,
)  # fmt: skip
def test_encode_shapes(
    kind: str, t_q: int, t_k: int, d_model: int, d_head: int, heads: int, offset: int, seed: int
) -> None:
    terms = encode(
        kind, t_q=t_q, t_k=t_k, d_model=d_model, d_head=d_head, heads=heads,
        generator=torch.Generator().manual_seed(seed), query_offset=offset,
    )  # fmt: skip
    p = max(t_q + offset, t_k)
    assert terms.kind == kind
    assert terms.query_positions.tolist() == list(range(offset, offset + t_q))
    assert terms.key_positions.tolist() == list(range(t_k))
    present = {name for name in ("table", "angles", "slopes", "bias") if getattr(terms, name) is not None}
    wanted = {"none": set(), "sinusoidal": {"table"}, "learned": {"table"}, "rope": {"angles"}}
    assert present == wanted.get(kind, {"slopes", "bias"})
    if terms.table is not None:
        assert terms.table.shape == (p, d_model)
        assert terms.table[terms.query_positions].shape == (t_q, d_model)
    if kind == "sinusoidal":
        assert torch.equal(terms.table, sinusoidal(p, d_model))
    if terms.angles is not None:
        assert terms.angles.shape == (p, d_head // 2)
        assert apply_rope(randn(heads, t_q, d_head, seed=seed), terms.angles[terms.query_positions]).shape == (
            heads, t_q, d_head,
        )  # fmt: skip
    if terms.bias is not None:
        assert terms.slopes.shape == (heads,) and terms.bias.shape == (heads, t_q, t_k)
        assert torch.equal(terms.bias, alibi_bias(heads, t_q, t_k, query_offset=offset))


def test_encode_rejects_bad_arguments() -> None:
    shape = {"t_q": 2, "t_k": 2, "d_model": 4, "d_head": 4, "heads": 1}
    with pytest.raises(ValueError, match="unknown position encoding"):
        encode("absolute", **shape)
    with pytest.raises(ValueError, match="pass a generator"):
        encode("learned", **shape)
    with pytest.raises(ValueError, match="query_offset"):
        encode("rope", **shape, query_offset=-1)
