"""Grouped-query and multi-query heads through Config and compute: kv_heads K/V heads shared by groups of query
heads, against PyTorch's own scaled_dot_product_attention(..., enable_gqa=True)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention import Config, compute
from attention.basics.config import MASKS


@st.composite
def grouped(draw: st.DrawFn) -> Config:
    kv = draw(st.sampled_from([1, 2, 3, 4]))
    heads = kv * draw(st.sampled_from([1, 2, 3]))
    layout = draw(st.sampled_from(["independent", "split"]))
    d_model = heads * draw(st.integers(1, 3)) if layout == "split" else draw(st.integers(2, 9))
    mask = draw(st.sampled_from([m for m in MASKS if m != "custom"]))
    return Config(
        sentence=" ".join(f"w{i}" for i in range(draw(st.integers(1, 7)))), d_model=d_model, heads=heads,
        kv_heads=kv, head_layout=layout, d_k=draw(st.integers(1, 6)), d_v=draw(st.integers(1, 6)),
        init=draw(st.sampled_from(["rand", "rand-transposed", "linear", "identity"])), bias=draw(st.booleans()),
        mask=mask, padding=draw(st.integers(0, 2)), window=draw(st.integers(1, 3)), seed=draw(st.integers(0, 999)),
        scale=draw(st.sampled_from(["sqrt", "none"])),
    )  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(grouped())
def test_grouped_heads_equal_sdpa_with_enable_gqa(config: Config) -> None:
    r = compute(config)
    assert r.kv_keys.shape[0] == r.kv_values.shape[0] == config.key_value_heads
    allowed = ~r.empty_rows  # SDPA gives NaN where every key is blocked; we give zeros
    want = torch.nn.functional.scaled_dot_product_attention(
        r.queries, r.kv_keys, r.kv_values, attn_mask=r.mask, scale=1 / r.scale, enable_gqa=True
    )  # (h, T_q, d_v)
    torch.testing.assert_close(r.context[:, allowed], want[:, allowed], atol=1e-5, rtol=1e-5)
    assert bool((r.context[:, ~allowed] == 0).all())


def test_query_heads_of_one_group_read_the_same_keys_and_values() -> None:
    r = compute(Config(heads=6, kv_heads=2, seed=3))
    for h in range(6):
        assert torch.equal(r.keys[h], r.kv_keys[h // 3]) and torch.equal(r.values[h], r.kv_values[h // 3])
        assert torch.equal(r.w_key[h], r.w_key[3 * (h // 3)])
    assert not torch.equal(r.kv_keys[0], r.kv_keys[1])  # two K/V heads, not one
    assert not torch.equal(r.queries[0], r.queries[1])  # every query head its own


@pytest.mark.parametrize("layout", ["independent", "split"])
@pytest.mark.parametrize("init", ["rand", "rand-transposed", "linear", "identity"])
def test_as_many_kv_heads_as_heads_is_multi_head_attention_number_for_number(layout: str, init: str) -> None:
    mha = Config(heads=4, head_layout=layout, init=init, bias=True, out_proj=True, dropout=0.3)
    assert torch.equal(compute(mha).output, compute(mha.replace(kv_heads=4)).output)


def test_multi_query_projects_one_key_and_one_value_head() -> None:
    config = Config(heads=4, kv_heads=1, d_k=3, d_v=5)
    r = compute(config)
    assert r.kv_keys.shape == (1, 6, 3) and r.kv_values.shape == (1, 6, 5)
    assert config.group == 4 and r.kv_heads == 1


@pytest.mark.parametrize(("heads", "kv_heads", "message"), [(4, 3, "pick kv_heads from 1, 2, 4"), (2, 4, "divide")])
def test_kv_heads_that_do_not_divide_the_heads_are_refused(heads: int, kv_heads: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Config(heads=heads, kv_heads=kv_heads)


def test_given_weights_have_kv_heads_columns_for_keys_and_values() -> None:
    x = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    wq = [[1.0, 0.0, 0.5, 0.5], [0.0, 1.0, 0.5, -0.5]]  # 2 query heads of d_k 2
    wk = [[1.0, 0.0], [0.0, 1.0]]  # 1 K/V head
    config = Config.from_embeddings(x, heads=2, kv_heads=1, d_k=2, d_v=2, init="given", w_query=wq, w_key=wk,
                                    w_value=wk)  # fmt: skip
    r = compute(config)
    assert torch.equal(r.keys[0], r.keys[1]) and r.keys[0].tolist() == x
    with pytest.raises(ValueError, match="w_key is 2x4 but must be 2x2"):
        config.replace(w_key=wq)


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_the_command_line_takes_kv_heads() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "attention", "--heads", "4", "--kv-heads", "2", "--format", "json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    heads = json.loads(run.stdout)["heads"]
    assert heads[0]["keys"] == heads[1]["keys"] != heads[2]["keys"] == heads[3]["keys"]
    bad = subprocess.run([sys.executable, "-m", "attention", "--heads", "4", "--kv-heads", "3"], capture_output=True,
                         text=True)  # fmt: skip
    assert bad.returncode == 2 and "kv_heads=3 must divide heads=4" in bad.stderr
