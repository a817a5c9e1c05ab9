"""The KV cache and FlashAttention pages in AppTest: defaults, the step and block controls, what they draw, links."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention import Config, compute
from harness import charts

ROOT = Path(__file__).resolve().parents[2]
W = {"init": "normal", "draws": "stable"}  # the dashboard's weights (issue 23)
SENTENCE = "Life is short, eat dessert first"  # the dashboard's default: 6 tokens


page = charts.open_page


run_widget = charts.set_widget
drawn = charts.heatmaps


def one(at: AppTest, prefix: str) -> tuple[torch.Tensor, list[str], list[str]]:
    """The one heatmap whose title starts with prefix."""
    found = [v for title, v in drawn(at).items() if title.startswith(prefix)]
    assert len(found) == 1, (prefix, list(drawn(at)))
    return found[0]


def blocked_cells(at: AppTest, title: str) -> torch.Tensor:
    """The blocked flags a heatmap drew, by title."""
    return {h["title"]: flags for h, _, flags in charts.drawn(at)}[title]


def texts(at: AppTest) -> str:
    parts = [e.value for e in (*at.info, *at.warning, *at.error, *at.success, *at.caption, *at.markdown)]
    return "\n".join(str(p) for p in parts)


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


# --------------------------------------------------------------------------- KV cache


def test_kv_cache_defaults_show_the_first_step_under_a_causal_mask():
    at = page("kv_cache")
    assert [t.value for t in at.title] == ["KV cache"]
    assert at.selectbox(key="w:mask").value == "causal"
    assert "mask" not in at.query_params  # the page's own default: a link need not say it
    keys, rows, cols = drawn(at)["Cached keys (1 × 24)"]
    assert keys.shape == (1, 24) and rows == ["1 Life"] and cols[0] == "d1"
    assert metric(at, "q·k this step") == "1"
    assert metric(at, "Cache size") == f"{1 * 1 * (24 + 28) * 4} B"
    assert at.button(key="kv:restart").disabled
    assert not at.warning and not at.error


@pytest.mark.parametrize("t", [2, 5])
def test_kv_cache_step_grows_the_cache_and_its_row_is_row_t_of_the_full_weights(t):
    at = run_widget(page("kv_cache"), "slider", "w:decode_step", t)
    full = compute(Config(sentence=SENTENCE, mask="causal", **W))
    keys, rows, _ = drawn(at)[f"Cached keys ({t + 1} × 24)"]
    values, _, _ = drawn(at)[f"Cached values ({t + 1} × 28)"]
    assert keys.shape == (t + 1, 24) and values.shape == (t + 1, 28)
    assert len(rows) == t + 1
    torch.testing.assert_close(keys, full.keys[0, : t + 1])
    torch.testing.assert_close(values, full.values[0, : t + 1])
    row, row_labels, _ = one(at, f"Step {t}:")
    assert row.shape == (1, 6) and row_labels == [rows[-1]]
    torch.testing.assert_close(row[0], full.weights[0, t])  # keys after t drawn as blocked zeros
    assert float(row[0, : t + 1].sum()) == pytest.approx(1.0, abs=1e-6)
    # the full matrix greys the rows of tokens not generated yet, and the future keys of the rest
    assert int(blocked_cells(at, "The full masked weight matrix, rows so far").sum()) == 36 - (t + 1) * (t + 2) // 2
    assert metric(at, "q·k this step") == str(t + 1)
    assert metric(at, "…with no cache") == str((t + 1) * (t + 2) // 2)
    assert "check_circle" in texts(at) and "cancel" not in texts(at)
    assert at.query_params["decode_step"] == str(t)


def test_kv_cache_next_button_advances_one_token_and_stops_at_the_last():
    at = page("kv_cache", decode_step="3")
    at.button(key="kv:next").click().run()
    assert not at.exception
    assert at.slider(key="w:decode_step").value == 4
    assert "Cached keys (5 × 24)" in drawn(at)
    at.button(key="kv:next").click().run()
    assert at.slider(key="w:decode_step").value == 5
    assert at.button(key="kv:next").disabled  # the sentence has 6 tokens: step 5 is the last
    assert at.query_params["decode_step"] == "5"
    at.button(key="kv:restart").click().run()
    assert at.slider(key="w:decode_step").value == 0
    assert "decode_step" not in at.query_params


def test_kv_cache_window_mask_decodes_with_the_window():
    at = page("kv_cache", mask="window", window="2", decode_step="4")
    row, _, _ = one(at, "Step 4:")
    full = compute(Config(sentence=SENTENCE, mask="window", window=2, **W))
    torch.testing.assert_close(row[0], full.weights[0, 4])
    assert int((row[0] > 0).sum()) == 2  # step 4 sees keys 3 and 4 (counted from 0)
    assert "see 2 of the 5 cached keys" in texts(at)


@pytest.mark.parametrize("mask", ["none", "padding"])
def test_kv_cache_non_causal_mask_explains_and_offers_the_causal_view(mask):
    at = page("kv_cache", mask=mask)
    assert len(at.warning) == 1
    assert "needs mask 'causal' or 'window'" in at.warning[0].value
    assert "do not exist yet" in at.warning[0].value
    assert not drawn(at)
    at.button(key="kv:causal").click().run()
    assert not at.exception
    assert at.selectbox(key="w:mask").value == "causal"
    assert not at.warning and "Cached keys (1 × 24)" in drawn(at)


def test_kv_cache_one_token_sentence_has_no_step_slider():
    at = page("kv_cache", sentence="hello", decode_step="3")
    assert not at.exception
    assert not [s for s in at.slider if s.key == "w:decode_step"]
    assert "One token" in texts(at)
    assert "Cached keys (1 × 24)" in drawn(at)
    assert not [b for b in at.button if b.key in ("kv:next", "kv:restart")]  # nothing to step through


# --------------------------------------------------------------------------- FlashAttention

SCORES = f"Scores S = Q Kᵀ / {24**0.5:.4g}, visited so far"


def test_flash_defaults_show_the_first_key_block_and_say_it_is_a_teaching_implementation():
    at = page("flash_attention")
    assert [t.value for t in at.title] == ["FlashAttention"]
    assert "teaching implementation" in at.info[0].value and "SRAM" in at.info[0].value
    flags = blocked_cells(at, SCORES)
    assert flags[:, :2].sum() == 0 and bool(flags[:, 2:].all())  # block size 2, key block 0: keys 0 and 1
    assert at.slider(key="w:block_size").max == 6
    assert at.slider(key="w:tile").max == 2  # 6 keys in blocks of 2
    assert not at.warning and not at.error


@pytest.mark.parametrize(("block_size", "tile", "visited"), [(2, 1, 4), (2, 2, 6), (4, 0, 4), (4, 1, 6), (1, 2, 3)])
def test_flash_block_size_and_tile_sliders_change_the_visited_columns(block_size, tile, visited):
    at = page("flash_attention")
    run_widget(at, "slider", "w:block_size", block_size)
    run_widget(at, "slider", "w:tile", tile)
    flags = blocked_cells(at, SCORES)
    assert flags[:, :visited].sum() == 0 and bool(flags[:, visited:].all())
    block, _, cols = one(at, f"Key block {tile}'s scores")
    full = compute(Config(sentence=SENTENCE, **W))
    assert len(cols) == min(block_size, 6 - tile * block_size)  # the last block may be shorter
    torch.testing.assert_close(block, full.masked[0, :, tile * block_size : visited])
    assert at.query_params["tile"] == str(tile) if tile else "tile" not in at.query_params
    assert at.query_params["block_size"] == str(block_size) if block_size != 2 else "block_size" not in at.query_params


def test_flash_running_statistics_after_a_block_are_those_of_the_keys_seen():
    at = page("flash_attention", block_size="4")
    full = compute(Config(sentence=SENTENCE, **W))
    scores = full.masked[0]  # (6, 6) scaled scores
    m, _, cols = drawn(at)["Running max m"]
    assert cols == ["m"]
    torch.testing.assert_close(m[:, 0], scores[:, :4].amax(dim=-1))
    l_sum, _, _ = drawn(at)["Running sum l"]
    torch.testing.assert_close(l_sum[:, 0], torch.exp(scores[:, :4] - m).sum(dim=-1))
    partial, _, _ = drawn(at)["Running output O after key block 0"]
    torch.testing.assert_close(partial, torch.softmax(scores[:, :4], dim=-1) @ full.values[0, :4])


FINAL_CASES = [
    ({}, {}),
    ({"mask": "causal", "block_size": "4"}, {"mask": "causal"}),
    ({"heads": "2", "head": "1", "block_size": "3"}, {"heads": 2}),
]


@pytest.mark.parametrize(("params", "config"), FINAL_CASES)
def test_flash_final_output_equals_the_ordinary_context(params, config):
    at = page("flash_attention", **params)
    head = int(params.get("head", 0))
    context = compute(Config(sentence=SENTENCE, **config, **W)).context[head]
    tiled, _, cols = drawn(at)["Tiled output (online softmax)"]
    ordinary, _, _ = drawn(at)["Ordinary output: softmax(S) V"]
    assert tiled.shape == (6, 28) and cols[-1] == "d28"
    torch.testing.assert_close(tiled, context)
    torch.testing.assert_close(ordinary, context)
    assert ":green[:material/check_circle:] Largest difference" in texts(at)


def test_flash_last_block_running_output_is_the_final_output_and_memory_is_reported():
    at = page("flash_attention", tile="2")
    partial, _, _ = drawn(at)["Running output O after key block 2"]
    torch.testing.assert_close(partial, drawn(at)["Tiled output (online softmax)"][0])
    assert metric(at, "Ordinary: the whole S") == "36 numbers"
    assert metric(at, "Tiled: one tile + m and l") == f"{2 * 2 + 6 * 2} numbers"
    assert metric(at, "Fewer numbers held") == f"{36 / 16:.3g}×"


def test_flash_causal_mask_skips_the_tiles_above_the_diagonal():
    at = page("flash_attention", mask="causal", block_size="2")
    assert "9 tiles, 3 of them skipped" in texts(at)


def test_flash_one_token_sentence_draws_one_block():
    at = page("flash_attention", sentence="hello")
    assert not [s for s in at.slider if s.key in ("w:block_size", "w:tile")]
    assert "One block of 1 holds all 1 keys" in texts(at)
    tiled, _, _ = drawn(at)["Tiled output (online softmax)"]
    torch.testing.assert_close(tiled, compute(Config(sentence="hello", **W)).context[0])


def test_flash_too_many_tiles_is_explained_not_computed():
    at = page("flash_attention", sentence=" ".join(f"w{i}" for i in range(512)), block_size="1", d_v="256")
    assert len(at.warning) == 1 and "Pick a block size of at least" in at.warning[0].value
    assert SCORES not in drawn(at)
