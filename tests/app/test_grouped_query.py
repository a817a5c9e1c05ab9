"""The grouped-query page: which query heads read which K/V head, their weights, and the KV-cache memory."""

from __future__ import annotations

from pathlib import Path

import torch

from attention import Config, compute
from harness.charts import heatmaps, open_page

ROOT = Path(__file__).resolve().parents[2]


page = open_page


def test_defaults_group_eight_query_heads_on_two_kv_heads_and_draw_their_weights() -> None:
    at = page("grouped_query")
    drawn = heatmaps(at)
    groups, rows, cols = drawn["K/V head read"]
    assert rows == [f"q{h}" for h in range(1, 9)] and cols == ["kv1", "kv2"]
    assert groups.tolist() == [[1.0, 0.0]] * 4 + [[0.0, 1.0]] * 4
    want = compute(Config(heads=8, kv_heads=2, init="normal", draws="stable")).weights  # the dashboard's weights
    for h in range(8):
        torch.testing.assert_close(drawn[f"query head {h + 1}"][0], want[h], atol=1e-6, rtol=0)
    assert any("GQA" in s.value for s in at.subheader)


def test_one_kv_head_is_multi_query_and_the_link_keeps_it() -> None:
    at = page("grouped_query")
    at.selectbox(key="w:kv_heads").set_value(1).run()
    groups = heatmaps(at)["K/V head read"][0]
    assert groups.shape == (8, 1) and bool((groups == 1).all())
    assert any("MQA" in s.value for s in at.subheader)
    assert at.query_params["kv_heads"] == "1"
    reopened = page("grouped_query", kv_heads="1")
    assert heatmaps(reopened)["K/V head read"][0].shape == (8, 1)


def test_memory_metrics_follow_the_number_format() -> None:
    at = page("grouped_query")
    saved = [m for m in at.metric if m.label == "Saved"]
    assert saved and saved[0].value == "75%"  # 2 K/V heads instead of 8
    half = [m.value for m in at.metric if m.label == "This setting, one layer"]
    # 2 K/V heads x (d_k 24 + d_v 28) x 6 tokens x 2 bytes (float16) = 1,248 bytes (not 2 x d_k: 1.12 KiB)
    assert half == ["1.22 KiB"]


def test_a_kv_heads_that_does_not_divide_the_heads_is_named_and_the_nearest_used() -> None:
    at = page("grouped_query", kv_heads="3")  # 8 heads: 3 K/V heads cannot serve equal groups
    assert any("kv_heads=3 does not divide heads=8" in w.value and "using 2" in w.value for w in at.warning)
    assert at.selectbox(key="w:kv_heads").value == 2
    assert heatmaps(at)["K/V head read"][0].shape == (8, 2)
    assert not page("grouped_query", kv_heads="4").warning  # a divisor: no warning


def test_other_pages_ignore_kv_heads_from_a_link() -> None:
    at = page("self_attention", kv_heads="4")  # the self-attention page has one head: 4 K/V heads cannot apply
    assert not at.error and "Softmax weights" in heatmaps(at)
