"""Tiled attention with the online softmax equals ordinary attention, tile by tile and at the end."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention import masks
from attention.llm.flash import blocks, memory_numbers, ordinary_attention, tiled_attention

TIGHT = {"atol": 1e-6, "rtol": 1e-6}


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Written out in the test: the output, the row max m and the row sum l of ordinary attention."""
    scores = (q @ k.transpose(-2, -1) / scale).masked_fill(~mask, float("-inf"))  # (h, T_q, T_k)
    m = scores.amax(dim=-1)  # (h, T_q)
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # an all-blocked row: 0/0 -> 0
    empty = ~mask.any(dim=-1)
    l = torch.exp(scores - m[..., None]).nan_to_num(0.0).sum(dim=-1)  # noqa: E741
    return weights @ v, m, torch.where(empty, 0.0, l)


@st.composite
def problems(draw: st.DrawFn) -> tuple:
    """Random shapes, a mask (none, causal, window or random with a fully masked row) and block sizes."""
    h, t_q, t_k = draw(st.integers(1, 3)), draw(st.integers(1, 13)), draw(st.integers(1, 13))
    d_k, d_v = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**31))
    kind = draw(st.sampled_from(["none", "causal", "window", "random"]))
    g = torch.Generator().manual_seed(seed)
    if kind == "random":
        mask = torch.rand(t_q, t_k, generator=g) > draw(st.floats(0.0, 0.9))
        mask[draw(st.integers(0, t_q - 1))] = False  # at least one query sees no key
    else:
        mask = masks.build(kind, t_q, t_k, width=draw(st.integers(1, t_k + 1)))
    q = torch.randn(h, t_q, d_k, generator=g, dtype=torch.float64) * 3
    k = torch.randn(h, t_k, d_k, generator=g, dtype=torch.float64) * 3
    v = torch.randn(h, t_k, d_v, generator=g, dtype=torch.float64)
    block = draw(st.integers(1, 14))
    q_block = draw(st.one_of(st.none(), st.integers(1, 14)))
    scale = draw(st.sampled_from([1.0, math.sqrt(d_k), 0.3]))
    return q, k, v, mask, scale, block, q_block


@settings(max_examples=200, deadline=None)
@given(problems())
def test_tiled_equals_ordinary_in_float64(problem: tuple) -> None:
    q, k, v, mask, scale, block, q_block = problem
    r = tiled_attention(q, k, v, scale=scale, mask=mask, block_size=block, query_block_size=q_block)
    output, m, l = reference(q, k, v, scale, mask)  # noqa: E741
    torch.testing.assert_close(r.output, output, **TIGHT)
    torch.testing.assert_close(r.output, ordinary_attention(q, k, v, scale=scale, mask=mask), **TIGHT)
    torch.testing.assert_close(r.m, m, **TIGHT)
    torch.testing.assert_close(r.l, l, **TIGHT)
    assert not r.output.isnan().any()
    empty = ~mask.any(dim=-1)
    assert torch.equal(r.output[:, empty], torch.zeros_like(r.output[:, empty]))  # zero, never NaN
    assert bool((r.m[:, empty] == float("-inf")).all())
    ok = ~empty
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1 / scale)
    torch.testing.assert_close(r.output[:, ok], sdpa[:, ok], **TIGHT)


@settings(max_examples=60, deadline=None)
@given(problems())
def test_every_tile_holds_attention_over_the_keys_seen_so_far(problem: tuple) -> None:
    q, k, v, mask, scale, block, q_block = problem
    r = tiled_attention(q, k, v, scale=scale, mask=mask, block_size=block, query_block_size=q_block)
    t_q, t_k = mask.shape
    q_block = block if q_block is None else q_block
    assert len(r.tiles) == math.ceil(t_q / q_block) * math.ceil(t_k / block)
    order = [(tile.query_rows, tile.key_cols) for tile in r.tiles]
    assert order == [(rows, cols) for rows in blocks(t_q, q_block) for cols in blocks(t_k, block)]
    for tile in r.tiles:
        rows, seen = slice(tile.query_rows.start, tile.query_rows.stop), slice(0, tile.key_cols.stop)
        output, m, l = reference(q[:, rows], k[:, seen], v[:, seen], scale, mask[rows, seen])  # noqa: E741
        torch.testing.assert_close(tile.output, output, **TIGHT)
        torch.testing.assert_close(tile.m, m, **TIGHT)
        torch.testing.assert_close(tile.l, l, **TIGHT)
        cols = slice(tile.key_cols.start, tile.key_cols.stop)
        assert torch.equal(tile.allowed, mask[rows, cols])
        expected_scores = (q[:, rows] @ k[:, cols].transpose(-2, -1) / scale).masked_fill(
            ~mask[rows, cols], float("-inf")
        )
        torch.testing.assert_close(tile.scores, expected_scores, **TIGHT)
        assert tile.skipped == (not mask[rows, cols].any())
        if tile.key_cols.stop == t_k:  # the last tile of a query block is that block's final answer
            assert torch.equal(r.output[:, rows], tile.output)


def test_large_scores_stay_finite_where_a_naive_exp_overflows() -> None:
    g = torch.Generator().manual_seed(0)
    h, t, d = 2, 12, 4
    q = torch.randn(h, t, d, generator=g) * 100
    k = torch.randn(h, t, d, generator=g) * 100
    v = torch.randn(h, t, d, generator=g)
    scale = 1.0
    scores = q @ k.transpose(-2, -1) / scale
    assert scores.abs().max() > 1e4  # scores of order 1e4: exp overflows float32 past ~88.7
    naive = torch.exp(scores) / torch.exp(scores).sum(-1, keepdim=True)
    assert torch.isinf(torch.exp(scores)).any()
    assert naive.isnan().any()  # inf / inf
    stable = torch.softmax(scores, dim=-1) @ v
    r = tiled_attention(q, k, v, scale=scale, block_size=5)
    assert torch.isfinite(r.output).all()
    torch.testing.assert_close(r.output, stable, atol=1e-5, rtol=1e-5)
    for tile in r.tiles:
        assert torch.isfinite(tile.output).all()
        assert torch.isfinite(tile.l).all()


def test_fully_masked_rows_end_at_zero_in_float32() -> None:
    g = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(2, 4, 3, generator=g), torch.randn(2, 6, 3, generator=g), torch.randn(2, 6, 5, generator=g)
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[1] = False
    mask[3, :4] = False  # blocked in the first key blocks only: the state starts late
    r = tiled_attention(q, k, v, scale=1.0, mask=mask, block_size=2)
    assert not r.output.isnan().any()
    assert torch.equal(r.output[:, 1], torch.zeros(2, 5))
    assert torch.equal(r.l[:, 1], torch.zeros(2))
    assert bool((r.logsumexp[:, 1] == float("-inf")).all())
    torch.testing.assert_close(r.output, ordinary_attention(q, k, v, scale=1.0, mask=mask), atol=1e-6, rtol=1e-5)
    row0 = (q[:, :1] @ k.transpose(-2, -1))[:, 0]  # (h, T_k): query 0 sees every key
    torch.testing.assert_close(r.logsumexp[:, 0], torch.logsumexp(row0, dim=-1))


def test_memory_numbers() -> None:
    m = memory_numbers(512, 512, 64, heads=8)
    assert m.full_scores == 8 * 512 * 512 == 2_097_152
    assert m.tile_scores == 8 * 64 * 64 == 32_768
    assert m.statistics == 8 * 512 * 2
    assert m.ratio == pytest.approx(2_097_152 / (32_768 + 8_192))
    small = memory_numbers(3, 5, 16, query_block_size=2)  # a block larger than T holds only T
    assert small == (15, 2 * 5, 6)


@pytest.mark.parametrize(("n", "size"), [(1, 1), (7, 3), (9, 3), (4, 10), (13, 5)])
def test_blocks_cover_every_index_once(n: int, size: int) -> None:
    parts = blocks(n, size)
    assert [i for part in parts for i in part] == list(range(n))
    assert all(len(part) == size for part in parts[:-1])
    assert 1 <= len(parts[-1]) <= size


def test_bad_arguments_raise_value_error() -> None:
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 2)
    with pytest.raises(ValueError, match="at least 1"):
        tiled_attention(q, k, v, scale=1.0, block_size=0)
    with pytest.raises(ValueError, match="mask"):
        tiled_attention(q, k, v, scale=1.0, block_size=2, mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\(h, T_q, d_k\)"):
        tiled_attention(q, k[:1], v[:1], scale=1.0, block_size=2)
