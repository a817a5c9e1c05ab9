"""Decoding with a KV cache: every step is one row of the full masked computation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings

from attention import Config, compute, masks
from attention.llm.decoding import DecodeStep, allowed_keys, decode, decode_result, decode_step
from attention.llm.gqa import expand_kv
from harness.strategies import configs

TIGHT = {"atol": 1e-6, "rtol": 1e-6}
HEAD_PAIRS = [(1, 1), (3, 3), (4, 2), (4, 1), (6, 3)]
MASK_KINDS = [("causal", None), ("window", 1), ("window", 3), ("window", 20)]


def full(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole (h, T, T) computation the steps must reproduce: weights by hand, context by SDPA."""
    h = q.shape[0]
    scores = q @ expand_kv(k, h).transpose(-2, -1) / scale  # (h, T, T)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1 / scale, enable_gqa=True)
    return weights, context


def qkv(h: int, h_kv: int, t: int, d_k: int, d_v: int, seed: int, dtype=torch.float64) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(h, t, d_k, generator=g, dtype=dtype),
        torch.randn(h_kv, t, d_k, generator=g, dtype=dtype),
        torch.randn(h_kv, t, d_v, generator=g, dtype=dtype),
    )


@pytest.mark.parametrize(("h", "h_kv"), HEAD_PAIRS)
@pytest.mark.parametrize(("kind", "w"), MASK_KINDS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_every_step_is_a_row_of_the_full_computation(h: int, h_kv: int, kind: str, w: int | None, dtype) -> None:
    t_total, d_k, d_v = 9, 4, 5
    q, k, v = qkv(h, h_kv, t_total, d_k, d_v, seed=h * 10 + h_kv, dtype=dtype)
    mask = masks.build(kind, t_total, t_total, width=w or 1)
    weights, context = full(q, k, v, 2.0, mask)
    steps = decode(q, k, v, scale=2.0, mask=kind, window=w)
    assert [s.t for s in steps] == list(range(t_total))
    for s in steps:
        t = s.t
        torch.testing.assert_close(s.weights, weights[:, t, : t + 1], **TIGHT)
        torch.testing.assert_close(s.context, context[:, t], **TIGHT)
        assert torch.equal(s.allowed, mask[t, : t + 1])
        assert not mask[t, t + 1 :].any()  # nothing after t is needed: the cache holds all query t may see
        assert torch.equal(s.cache_keys, k[:, : t + 1])
        assert torch.equal(s.cache_values, v[:, : t + 1])
        assert torch.equal(s.query, q[:, t])


@pytest.mark.parametrize(("h", "h_kv"), HEAD_PAIRS)
@pytest.mark.parametrize(("kind", "w"), MASK_KINDS)
def test_decode_step_one_at_a_time_matches_decode(h: int, h_kv: int, kind: str, w: int | None) -> None:
    q, k, v = qkv(h, h_kv, 7, 3, 2, seed=5)
    steps = decode(q, k, v, scale=1.5, mask=kind, window=w)
    step = None
    for t in range(7):
        step = decode_step(q[:, t], k[:, t], v[:, t], step, scale=1.5, mask=kind, window=w)
        expected = steps[t]
        assert step.t == t
        assert step.cache_keys.shape == (h_kv, t + 1, 3)
        assert step.cache_values.shape == (h_kv, t + 1, 2)
        assert torch.equal(step.cache_keys, expected.cache_keys)
        assert torch.equal(step.cache_values, expected.cache_values)
        torch.testing.assert_close(step.scores, expected.scores, **TIGHT)
        torch.testing.assert_close(step.weights, expected.weights, **TIGHT)
        torch.testing.assert_close(step.context, expected.context, **TIGHT)
        assert step.products == expected.products
        assert step.cache_bytes == expected.cache_bytes


@settings(max_examples=80, deadline=None)
@given(configs(masks=("causal", "window"), cross=False, dropout=False))
def test_decode_result_reproduces_compute(config: Config) -> None:
    """Every random self-attention config, in the package's float32.

    The one row and the whole matrix are different float32 products, so a score may differ by rounding,
    about 1e-7 of sum_i |q_i k_i| / scale (unscaled scores reach 1e2 here). Softmax turns a score error
    of e into at most 2e in the weights, and into 2e * max|v| in the context, so the test allows 1e-6
    plus that; a wrong row or mask is off by far more.
    """
    r = compute(config)
    steps = decode_result(r)
    assert len(steps) == len(config.tokens)
    for s in steps:
        t = s.t
        row = r.scaled[:, t, : t + 1]
        size = (r.queries[:, t : t + 1].abs() @ r.keys[:, : t + 1].abs().transpose(-2, -1))[:, 0] / r.scale
        torch.testing.assert_close(s.scores, row, atol=1e-6 * max(1.0, float(size.max())), rtol=0)
        e = float((s.scores - row).abs().max())
        v_max = max(1.0, float(r.values.abs().max()))
        torch.testing.assert_close(s.weights, r.weights[:, t, : t + 1], atol=1e-6 + 2 * e, rtol=1e-6)
        torch.testing.assert_close(s.context, r.context[:, t], atol=1e-6 * v_max + 2 * e * v_max, rtol=1e-6)
        assert torch.equal(s.allowed, r.mask[t, : t + 1])
        assert not r.mask[t, t + 1 :].any()


@pytest.mark.parametrize(
    "config",
    [
        Config(mask="causal"),
        Config(mask="causal", heads=2),
        Config(mask="window", window=2, heads=3),
        Config(mask="causal", heads=4, head_layout="split", init="linear", d_model=16),
        Config(mask="window", window=3, sentence="one two three four five six seven eight nine ten"),
    ],
)
def test_decode_result_equals_compute_to_1e_6(config: Config) -> None:
    r = compute(config)
    steps = decode_result(r)
    assert [s.tokens for s in steps] == list(range(1, len(config.tokens) + 1))
    for s in steps:
        torch.testing.assert_close(s.weights, r.weights[:, s.t, : s.t + 1], **TIGHT)
        torch.testing.assert_close(s.context, r.context[:, s.t], **TIGHT)
    assert torch.equal(steps[0].weights, torch.ones(config.heads, 1))  # the first token attends only to itself


def test_decode_result_runs_without_dropout_as_inference_does() -> None:
    r = compute(Config(mask="window", window=2, dropout=0.5))
    for s in decode_result(r):
        torch.testing.assert_close(s.weights, r.weights[:, s.t, : s.t + 1], **TIGHT)  # before dropout
        torch.testing.assert_close(s.context, (r.weights @ r.values)[:, s.t], **TIGHT)
    assert not torch.allclose(r.context, r.weights @ r.values)  # the result itself did drop weights


@pytest.mark.parametrize(
    ("config", "words"),
    [
        (Config(mask="causal", cross_sentence="a glass of wine"), "cross-attention"),
        (Config(mask="none"), "mask 'none'"),
        (Config(mask="padding", padding=1), "mask 'padding'"),
        (Config(mask="custom", custom_mask=[[True] * 6] * 6), "mask 'custom'"),
    ],
)
def test_decode_result_refuses_what_decoding_cannot_do(config: Config, words: str) -> None:
    with pytest.raises(ValueError, match=words) as info:
        decode_result(compute(config))
    message = str(info.value)
    assert "causal" in message or "self-attention" in message
    if config.mask != "causal":
        assert "do not exist yet" in message  # says why: the later tokens are not generated yet


@pytest.mark.parametrize(("h", "h_kv", "d_k", "d_v"), [(4, 4, 8, 8), (4, 2, 8, 8), (4, 1, 3, 5), (6, 3, 5, 2)])
def test_work_and_cache_bytes(h: int, h_kv: int, d_k: int, d_v: int) -> None:
    q, k, v = qkv(h, h_kv, 6, d_k, d_v, seed=0)
    for s in decode(q, k, v, scale=1.0):
        n = s.t + 1
        assert s.products == h * n  # one product of a query head with each cached key
        assert s.cache_bytes == h_kv * n * (d_k + d_v) * 4  # float32: keys d_k numbers, values d_v
        if d_k == d_v:
            assert s.cache_bytes == 2 * h_kv * n * d_k * 4
        assert s.heads == h
        assert s.kv_heads == h_kv
    fp16 = decode(q, k, v, scale=1.0, bytes_per_number=2)[-1]
    assert fp16.cache_bytes == h_kv * 6 * (d_k + d_v) * 2


@pytest.mark.parametrize("w", [1, 2, 4])
def test_window_row_allows_the_last_w_keys(w: int) -> None:
    for t in range(8):
        row = allowed_keys(t, "window", w)
        assert row.tolist() == [j > t - w for j in range(t + 1)]
        assert int(row.sum()) == min(t + 1, w)
        assert bool(row[t])  # the newest key is always allowed: no decoding row is empty
    assert allowed_keys(5).tolist() == [True] * 6


def test_weights_rows_sum_to_one_and_blocked_weights_are_zero() -> None:
    q, k, v = qkv(4, 2, 10, 3, 3, seed=1)
    for s in decode(q, k, v, scale=1.0, mask="window", window=3):
        torch.testing.assert_close(s.weights.sum(-1), torch.ones(4, dtype=torch.float64))
        assert torch.equal(s.weights[:, ~s.allowed], torch.zeros(4, int((~s.allowed).sum()), dtype=torch.float64))
        assert s.attended == min(s.t + 1, 3)


def test_bad_arguments_raise_value_error() -> None:
    q, k, v = qkv(4, 2, 3, 3, 3, seed=0)
    with pytest.raises(ValueError, match="'causal' or 'window'"):
        decode(q, k, v, scale=1.0, mask="none")
    with pytest.raises(ValueError, match="width"):
        decode(q, k, v, scale=1.0, mask="window")
    with pytest.raises(ValueError, match="must divide heads"):
        decode(q[:3], k, v, scale=1.0)
    with pytest.raises(ValueError, match="T=3"):
        decode(q, k[:, :2], v[:, :2], scale=1.0)
    with pytest.raises(ValueError, match="one token"):
        decode_step(q, k, v, scale=1.0)
    with pytest.raises(ValueError, match="d_k"):
        decode_step(q[:, 0], k[:, 0, :2], v[:, 0], scale=1.0)
    first = decode_step(q[:, 0], k[:, 0], v[:, 0], scale=1.0)
    assert isinstance(first, DecodeStep)
    assert first.t == 0


def test_decoding_chosen_steps_gives_those_steps_alone() -> None:
    r = compute(Config(sentence="one two three four five six", heads=2, kv_heads=1, mask="window", window=2))
    every = decode_result(r)
    for chosen in ([3], [0, 1, 2, 3], [5, 2]):
        some = decode_result(r, steps=chosen)
        assert [s.t for s in some] == chosen
        for a in some:
            b = every[a.t]
            assert torch.equal(a.weights, b.weights) and torch.equal(a.context, b.context)
            assert torch.equal(a.cache_keys, b.cache_keys) and a.cache_bytes == b.cache_bytes
    assert decode_result(r, steps=[6, -1]) == []  # no such step
