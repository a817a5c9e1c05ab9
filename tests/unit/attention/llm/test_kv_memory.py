"""The KV-cache calculator against numbers worked out by hand, and the published model shapes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention.llm.kv_memory import (
    CONTEXTS,
    MODELS,
    ModelShape,
    cache_series,
    format_bytes,
    gqa_choice,
    kv_cache_bytes,
    layout,
)

GIB, MIB = 2**30, 2**20


# (model, tokens, float16 cache bytes): 2 * layers * kv_heads * d_head * tokens * 2, multiplied out by hand
HAND_COMPUTED = [
    ("Llama 2 7B", 4096, 2 * GIB),  # 2 * 32 * 32 * 128 * 4096 * 2 = 2 147 483 648
    ("Llama 2 70B", 4096, 1_342_177_280),  # 2 * 80 * 8 * 128 * 4096 * 2 = 1.25 GiB
    ("Llama 3 8B", 8192, 1 * GIB),  # 2 * 32 * 8 * 128 * 8192 * 2 = 1 073 741 824
    ("Mistral 7B", 4096, 512 * MIB),  # 2 * 32 * 8 * 128 * 4096 * 2 = 536 870 912
    ("Falcon 7B", 2048, 16 * MIB),  # 2 * 32 * 1 * 64 * 2048 * 2 = 16 777 216
]


@pytest.mark.parametrize(("name", "tokens", "expected"), HAND_COMPUTED)
def test_cache_bytes_against_hand_computed_numbers(name: str, tokens: int, expected: int) -> None:
    m = MODELS[name]
    assert m.cache_bytes(tokens) == expected
    assert kv_cache_bytes(m.layers, m.kv_heads, m.d_head, tokens) == expected


def test_llama_2_7b_spelled_out() -> None:
    assert kv_cache_bytes(32, 32, 128, 4096, 2) == 2 * 32 * 32 * 128 * 4096 * 2 == 2_147_483_648
    assert kv_cache_bytes(32, 32, 128, 1) == 524_288  # half a MiB for every token
    assert kv_cache_bytes(32, 32, 128, 4096, bytes_per_number=4) == 4 * GIB  # float32 doubles it
    assert kv_cache_bytes(32, 32, 128, 0) == 0


def test_values_of_another_width_are_counted_with_their_own_width() -> None:
    """The toy pages' keys are d_k = 24 wide and their values d_v = 28: 1,248 bytes for 2 K/V heads, 6 tokens."""
    assert kv_cache_bytes(1, 2, 24, 6, 2, d_v=28) == 2 * (24 + 28) * 6 * 2 == 1248
    assert kv_cache_bytes(1, 2, 24, 6, 2, d_v=24) == kv_cache_bytes(1, 2, 24, 6, 2)  # d_v = d_head: as before
    with pytest.raises(ValueError, match="d_v must be at least 1"):
        kv_cache_bytes(1, 2, 24, 6, d_v=0)


# (name, layers, heads, kv_heads, hidden_size, d_head, layout): the numbers of each config.json
PUBLISHED = [
    ("Llama 2 7B", 32, 32, 32, 4096, 128, "MHA"),
    ("Llama 2 70B", 80, 64, 8, 8192, 128, "GQA"),
    ("Llama 3 8B", 32, 32, 8, 4096, 128, "GQA"),
    ("Mistral 7B", 32, 32, 8, 4096, 128, "GQA"),
    ("Falcon 7B", 32, 71, 1, 4544, 64, "MQA"),
]


@pytest.mark.parametrize(("name", "layers", "heads", "kv_heads", "d_model", "d_head", "kind"), PUBLISHED)
def test_published_shapes(
    name: str, layers: int, heads: int, kv_heads: int, d_model: int, d_head: int, kind: str
) -> None:
    m = MODELS[name]
    assert (m.layers, m.heads, m.kv_heads, m.d_model) == (layers, heads, kv_heads, d_model)
    assert m.d_head == d_head
    assert m.attention == kind
    assert m.source.startswith("https://huggingface.co/")
    assert m.source.endswith("/config.json")
    assert m.paper.startswith("https://arxiv.org/abs/")


def test_every_model_is_listed_and_checked() -> None:
    assert set(MODELS) == {name for name, *_ in PUBLISHED}
    assert {m.attention for m in MODELS.values()} == {"MHA", "GQA", "MQA"}
    assert MODELS["Mistral 7B"].sliding_window == 4096


def test_series_compares_mha_gqa_mqa_of_one_shape() -> None:
    llama = MODELS["Llama 2 7B"]
    points = cache_series(llama, (1024, 4096))
    by = {(p.layout, p.tokens): p for p in points}
    assert {p.layout for p in points} == {"MHA", "GQA", "MQA"}
    assert by["GQA", 1024].kv_heads == 8  # Llama 2 70B's grouping applied to the 7B shape
    assert by["MHA", 4096].bytes == 2 * GIB
    assert by["MHA", 4096].bytes == 4 * by["GQA", 4096].bytes == 32 * by["MQA", 4096].bytes
    assert by["MHA", 4096].bytes == 4 * by["MHA", 1024].bytes  # linear in the context length


def test_series_uses_the_models_own_grouping_and_skips_impossible_ones() -> None:
    assert gqa_choice(MODELS["Llama 3 8B"]) == 8
    assert gqa_choice(MODELS["Llama 2 70B"]) == 8
    assert gqa_choice(MODELS["Falcon 7B"]) is None  # 71 heads: prime, nothing between 1 and 71
    falcon = cache_series(MODELS["Falcon 7B"], (2048,))
    assert [(p.layout, p.kv_heads) for p in falcon] == [("MHA", 71), ("MQA", 1)]
    custom = cache_series(MODELS["Llama 2 7B"], (2048,), gqa_kv_heads=4)
    assert [(p.layout, p.kv_heads) for p in custom] == [("MHA", 32), ("GQA", 4), ("MQA", 1)]
    default = cache_series(MODELS["Mistral 7B"])
    assert [p.tokens for p in default if p.layout == "MHA"] == list(CONTEXTS)
    assert CONTEXTS[0] == 512
    assert CONTEXTS[-1] == 131_072


@pytest.mark.parametrize("kv", [3, 32, 1])
def test_series_rejects_a_gqa_choice_that_is_not_gqa(kv: int) -> None:
    with pytest.raises(ValueError, match="kv_heads|gqa_kv_heads"):
        cache_series(MODELS["Llama 2 7B"], (1024,), gqa_kv_heads=kv)


def test_layout_names() -> None:
    assert layout(8, 8) == "MHA"
    assert layout(8, 2) == "GQA"
    assert layout(8, 1) == "MQA"
    with pytest.raises(ValueError, match="pick one of 1, 2, 4, 8"):
        layout(8, 3)


def test_bad_numbers_raise_value_error() -> None:
    with pytest.raises(ValueError, match="tokens"):
        kv_cache_bytes(32, 8, 128, -1)
    with pytest.raises(ValueError, match="layers"):
        kv_cache_bytes(0, 8, 128, 10)
    with pytest.raises(ValueError, match="pick one of"):
        ModelShape("odd", 2, 8, 3, 64, 128, "https://example.org", "https://example.org")
    with pytest.raises(ValueError, match="multiple"):
        ModelShape("odd", 2, 8, 8, 60, 128, "https://example.org", "https://example.org")
    with pytest.raises(ValueError, match="pick one of"):
        MODELS["Falcon 7B"].cache_bytes(10, kv_heads=2)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 100), st.integers(1, 64), st.integers(1, 256), st.integers(0, 10**6), st.sampled_from([1, 2, 4]))
def test_bytes_grow_linearly_in_every_factor(layers: int, kv: int, d_head: int, tokens: int, b: int) -> None:
    n = kv_cache_bytes(layers, kv, d_head, tokens, b)
    assert n == 2 * layers * kv * d_head * tokens * b
    assert kv_cache_bytes(2 * layers, kv, d_head, tokens, b) == 2 * n
    assert kv_cache_bytes(layers, kv, d_head, tokens + 1, b) - n == kv_cache_bytes(layers, kv, d_head, 1, b)


def test_format_bytes() -> None:
    assert format_bytes(2 * GIB) == "2.00 GiB"
    assert format_bytes(1_342_177_280) == "1.25 GiB"
    assert format_bytes(16 * MIB) == "16.00 MiB"
    assert format_bytes(1000) == "1000 B"
    assert format_bytes(1536) == "1.50 KiB"
