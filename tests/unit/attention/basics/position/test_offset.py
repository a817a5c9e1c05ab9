"""A decoding step written as the README describes it (causal_align="bottom-right", T_q < T_k) places its queries at
positions T_k - T_q onward: every row of the step is the same row of the full computation, for every position
encoding; RoPE's equals Hugging Face's rotary embedding at cache positions, ALiBi's is -m |i - j| from the real
positions; and the plain-PyTorch script writes the same numbers."""

from __future__ import annotations

import pytest
import torch

from attention import Config, compute
from attention.basics import position
from harness.scripts import assert_reproduces, exec_script

KINDS = ("none", "sinusoidal", "learned", "rope", "alibi")
T = 7
EXACT = {"atol": 1e-5, "rtol": 1e-5}


def _x(t: int = T, d: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.randn(t, d, generator=torch.Generator().manual_seed(seed))


def _configs(kind: str, new: int, mask: str = "causal", **kw) -> tuple[Config, Config]:
    """The full computation over T tokens and the step over its last `new` queries reading all T keys."""
    x = _x()
    shared = dict(d_k=4, d_v=6, heads=2, mask=mask, position=kind, init="linear", seed=3, **kw)
    full = Config.from_embeddings(x, x, **shared)
    step = Config.from_embeddings(x[-new:], x, causal_align="bottom-right", **shared)
    return full, step


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("new", [1, 3, T])
def test_every_row_of_a_bottom_right_step_is_that_row_of_the_full_computation(kind: str, new: int) -> None:
    full, step = _configs(kind, new)
    a, b = compute(full), compute(step)
    assert b.position.query_positions.tolist() == list(range(T - new, T))
    for name in ("queries", "scaled", "weights", "context", "output"):
        whole = getattr(a, name)
        rows = whole[-new:] if name == "output" else whole[:, -new:]
        torch.testing.assert_close(getattr(b, name), rows, **EXACT, msg=f"{kind}: {name}")
    torch.testing.assert_close(b.keys, a.keys, **EXACT)


@pytest.mark.parametrize("kind", ["rope", "alibi", "sinusoidal"])
def test_a_window_mask_step_too(kind: str) -> None:
    full, step = _configs(kind, 2, mask="window", window=3)
    torch.testing.assert_close(compute(step).weights, compute(full).weights[:, -2:], **EXACT)


def test_top_left_keeps_queries_from_position_zero_and_more_queries_than_keys_never_go_negative() -> None:
    x = _x()
    top = compute(Config.from_embeddings(x[:2], x, d_k=4, position="rope", mask="causal"))
    assert top.position.query_positions.tolist() == [0, 1]
    wide = compute(
        Config.from_embeddings(x, x[:3], d_k=4, position="alibi", mask="causal", causal_align="bottom-right")
    )
    assert wide.position.query_positions.tolist() == list(range(T))
    assert position.query_offset(2, 7, "bottom-right") == 5 and position.query_offset(7, 2, "bottom-right") == 0


def test_rope_step_equals_hugging_faces_rotary_embedding_at_the_cache_positions() -> None:
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    x = _x()
    config = Config.from_embeddings(x[-2:], x, d_k=8, heads=1, position="rope", rope_base=500.0, init="linear",
                                    mask="causal", causal_align="bottom-right")  # fmt: skip
    r = compute(config)
    hf = LlamaConfig(hidden_size=8, num_attention_heads=1, head_dim=8, rope_theta=500.0)
    hf.rope_parameters = {"rope_type": "default", "rope_theta": 500.0}
    rotary = LlamaRotaryEmbedding(hf)
    cos, sin = rotary(x[None], torch.tensor([[T - 2, T - 1]]))  # cache_position: the new tokens' places
    cos_k, sin_k = rotary(x[None], torch.arange(T)[None])
    q, _ = apply_rotary_pos_emb(r.unrotated_queries[None], r.unrotated_queries[None], cos, sin)
    _, k = apply_rotary_pos_emb(r.unrotated_keys[None], r.unrotated_keys[None], cos_k, sin_k)
    torch.testing.assert_close(r.queries, q[0], **EXACT)
    torch.testing.assert_close(r.keys, k[0], **EXACT)


def test_alibi_step_bias_is_minus_slope_times_the_real_distance() -> None:
    x = _x()
    r = compute(Config.from_embeddings(x[-3:], x, d_k=4, heads=2, position="alibi", init="linear",
                                       causal_align="bottom-right"))  # fmt: skip
    slopes = position.alibi_slopes(2)
    i = torch.arange(T - 3, T)[:, None]
    j = torch.arange(T)[None, :]
    torch.testing.assert_close(r.position.bias, -slopes[:, None, None] * (i - j).abs(), **EXACT)
    assert r.position.bias[:, -1, -1].tolist() == [0.0, 0.0]  # the newest query on the newest key: no penalty


@pytest.mark.parametrize("kind", KINDS)
def test_the_script_of_a_step_prints_the_steps_weights(kind: str) -> None:
    _, step = _configs(kind, 2)
    assert_reproduces(exec_script(step), step)
