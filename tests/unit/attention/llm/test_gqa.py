"""Grouped-query attention against SDPA's enable_gqa, and the head-grouping rules."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attention import masks
from attention.llm.gqa import check_kv_heads, divisors, expand_kv, group_of, grouped_attention

CLOSE = {"atol": 1e-5, "rtol": 1e-5}
HEAD_PAIRS = [(1, 1), (4, 4), (4, 2), (4, 1), (6, 3), (6, 2), (8, 2), (8, 1)]


def random_mask(t_q: int, t_k: int, g: torch.Generator) -> torch.Tensor:
    """A random (T_q, T_k) mask whose first row blocks every key."""
    mask = torch.rand(t_q, t_k, generator=g) > 0.4
    mask[0] = False
    return mask


def qkv(h: int, h_kv: int, t_q: int, t_k: int, d_k: int, d_v: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(h, t_q, d_k, generator=g),
        torch.randn(h_kv, t_k, d_k, generator=g),
        torch.randn(h_kv, t_k, d_v, generator=g),
    )


@pytest.mark.parametrize(("h", "h_kv"), HEAD_PAIRS)
@pytest.mark.parametrize("mask_kind", ["none", "causal", "window", "random"])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_sdpa_with_enable_gqa(h: int, h_kv: int, mask_kind: str, seed: int) -> None:
    t_q, t_k, d_k, d_v = 5, 7, 4, 3
    q, k, v = qkv(h, h_kv, t_q, t_k, d_k, d_v, seed)
    g = torch.Generator().manual_seed(seed + 100)
    mask = random_mask(t_q, t_k, g) if mask_kind == "random" else masks.build(mask_kind, t_q, t_k, width=2)
    scale = 1.7
    r = grouped_attention(q, k, v, scale=scale, mask=mask)
    # SDPA multiplies the scores by its `scale`; ours divides by it
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1 / scale, enable_gqa=True)
    ok = mask.any(dim=-1)  # SDPA gives NaN where a row blocks every key; the package gives zeros
    torch.testing.assert_close(r.context[:, ok], expected[:, ok], **CLOSE)
    assert torch.equal(r.context[:, ~ok], torch.zeros_like(r.context[:, ~ok]))
    assert torch.equal(r.weights[:, ~ok], torch.zeros_like(r.weights[:, ~ok]))
    assert not r.context.isnan().any()
    # weights: SDPA with V = I returns the weights themselves
    eye = torch.eye(t_k).expand(h_kv, t_k, t_k)
    weights = F.scaled_dot_product_attention(q, k, eye, attn_mask=mask, scale=1 / scale, enable_gqa=True)
    torch.testing.assert_close(r.weights[:, ok], weights[:, ok], **CLOSE)
    assert r.weights.shape == (h, t_q, t_k)
    assert r.context.shape == (h, t_q, d_v)


@pytest.mark.parametrize(("h", "h_kv"), HEAD_PAIRS)
def test_group_of_is_what_expand_kv_repeats(h: int, h_kv: int) -> None:
    x = torch.randn(h_kv, 3, 2)
    expanded = expand_kv(x, h)
    group = group_of(h, h_kv)
    assert expanded.shape == (h, 3, 2)
    assert group == sorted(group)  # consecutive query heads share a K/V head
    assert [group.count(j) for j in range(h_kv)] == [h // h_kv] * h_kv
    for i, j in enumerate(group):
        assert torch.equal(expanded[i], x[j])


def test_group_of_spelled_out() -> None:
    assert group_of(8, 2) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert group_of(4, 4) == [0, 1, 2, 3]
    assert group_of(3, 1) == [0, 0, 0]


def test_one_kv_head_per_query_head_is_ordinary_attention() -> None:
    q, k, v = qkv(3, 3, 4, 4, 5, 6, seed=7)
    mask = masks.causal(4, 4)
    r = grouped_attention(q, k, v, scale=2.0, mask=mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.5)
    torch.testing.assert_close(r.context, expected, **CLOSE)
    assert torch.equal(r.keys, k)
    assert r.kv_heads == 3
    assert r.heads == 3


def test_multi_query_heads_share_one_key_and_value() -> None:
    q, k, v = qkv(4, 1, 3, 5, 2, 2, seed=3)
    q = q[:1].expand(4, 3, 2)  # four identical query heads reading one K/V head agree exactly
    r = grouped_attention(q, k, v, scale=1.0)
    for i in range(1, 4):
        assert torch.equal(r.weights[i], r.weights[0])
        assert torch.equal(r.context[i], r.context[0])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(-3, 14))
def test_check_kv_heads_accepts_exactly_the_divisors(heads: int, kv_heads: int) -> None:
    if kv_heads in divisors(heads):
        check_kv_heads(heads, kv_heads)
    else:
        with pytest.raises(ValueError, match="pick one of " + ", ".join(map(str, divisors(heads)))):
            check_kv_heads(heads, kv_heads)


@pytest.mark.parametrize(("h", "h_kv"), [(6, 4), (4, 8), (4, 0), (5, 2)])
def test_invalid_head_counts_raise_value_error(h: int, h_kv: int) -> None:
    with pytest.raises(ValueError, match=f"kv_heads={h_kv}"):
        group_of(h, h_kv)
    if h_kv > 0:
        q, k, v = qkv(h, h_kv, 2, 2, 3, 3, seed=0)
        with pytest.raises(ValueError, match="must divide heads"):
            grouped_attention(q, k, v, scale=1.0)
        with pytest.raises(ValueError, match="must divide heads"):
            expand_kv(k, h)


def test_mismatched_shapes_raise_value_error() -> None:
    q, k, v = qkv(4, 2, 3, 5, 4, 2, seed=0)
    with pytest.raises(ValueError, match="d_k"):
        grouped_attention(q, k[..., :3], v, scale=1.0)
    with pytest.raises(ValueError, match="same"):
        grouped_attention(q, k, v[:, :4], scale=1.0)
    with pytest.raises(ValueError, match="mask"):
        grouped_attention(q, k, v, scale=1.0, mask=torch.ones(5, 3, dtype=torch.bool))
