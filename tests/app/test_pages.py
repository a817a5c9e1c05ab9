"""The masks, multi-head, cross-attention and tutorials pages in AppTest: defaults, controls, links, bad input."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from attention import Config, compute, presets
from harness.charts import drawn, frames, headers, heatmaps, open_page

ROOT = Path(__file__).resolve().parents[2]
OK, BAD = "✅", "❌"
WEIGHTS = {"init": "normal", "draws": "stable"}  # the dashboard's weights (issue 23); the tutorial's one click away


page = open_page


def charts(at: AppTest) -> dict[str, pd.DataFrame]:
    """Every heatmap on the page by title: its numeric frame (i, j, value, blocked)."""
    return frames(at)


def labels(at: AppTest, title: str) -> tuple[list[str], list[str]]:
    """A heatmap's row and column labels."""
    if title not in headers(at):
        raise AssertionError(f"no chart titled {title!r}")
    h = headers(at)[title]
    return h["rows"], h["cols"]


def blocked(frame: pd.DataFrame) -> int:
    return int(frame["blocked"].sum())


def same(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame], title: str) -> bool:
    return a[title].equals(b[title])


def texts(at: AppTest) -> str:
    """All the visible text of alerts, captions and markdown, for assertions on what a user reads."""
    parts = [e.value for e in (*at.info, *at.warning, *at.error, *at.success, *at.caption, *at.markdown)]
    return "\n".join(str(p) for p in parts)


def run_widget(at: AppTest, kind: str, key: str, value) -> AppTest:
    kind = "number_input" if kind == "slider" and key.endswith("seed") else kind  # a seed is a number box
    getattr(at, kind)(key=key).set_value(value).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


# --------------------------------------------------------------------------- masks


def test_masks_defaults_show_omega_mask_masked_scores_and_weights():
    at = page("masks")  # the page opens on its lesson: a causal mask
    assert [t.value for t in at.title] == ["Masks and dropout"]
    shown = charts(at)
    assert set(shown) == {
        "Omega = Q Kᵀ",
        "Mask (1 = may attend)",
        f"Masked scores: omega / {24**0.5:.4g}",
        "Softmax weights",
        "Weights before dropout",
        "Weights after dropout p = 0.00",
    }
    assert blocked(shown["Softmax weights"]) == 15  # the future of each of 6 tokens: 5 + 4 + 3 + 2 + 1
    assert at.selectbox(key="w:mask").value == "causal"
    assert "mask" not in at.query_params  # the page's default: a link need not say it
    assert not at.warning and not at.error
    # the dashboard's scaled normal weights: query "is" against key "dessert"
    omega = shown["Omega = Q Kᵀ"].set_index(["i", "j"])["value"]
    assert float(omega[(1, 4)]) == pytest.approx(float(compute(Config(mask="causal", **WEIGHTS)).omega[0, 1, 4]))
    # one click away, the Raschka numbers
    at.button(key="w:weights_note").click().run()
    omega = charts(at)["Omega = Q Kᵀ"].set_index(["i", "j"])["value"]
    assert round(float(omega[(1, 4)]), 4) == 11.1466


@pytest.mark.parametrize(("mask", "n_blocked"), [("causal", 15), ("padding", 6), ("window", 21), ("custom", 15)])
def test_masks_select_changes_the_mask_and_the_weights(mask, n_blocked):
    at = page("masks", mask="none")
    before = charts(at)
    after = charts(run_widget(at, "selectbox", "w:mask", mask))
    title = f"Masked scores: omega / {24**0.5:.4g}"
    assert blocked(after[title]) == n_blocked
    assert blocked(after["Softmax weights"]) == n_blocked
    assert not same(before, after, "Softmax weights")
    assert same(before, after, "Omega = Q Kᵀ")  # the mask acts after the scores
    weights = after["Softmax weights"]
    assert (weights.loc[weights["blocked"], "value"] == 0).all()


@pytest.mark.parametrize(
    ("mask", "key", "value", "n_blocked"), [("padding", "w:padding", 3, 18), ("window", "w:window", 2, 25)]
)
def test_masks_padding_and_window_sliders_change_the_mask(mask, key, value, n_blocked):
    at = page("masks", mask=mask)
    before = charts(at)
    after = charts(run_widget(at, "slider", key, value))
    assert not same(before, after, "Mask (1 = may attend)")
    assert blocked(after["Softmax weights"]) == n_blocked
    assert at.slider(key=key).max == 6  # the range stops at the sentence's length


def test_masks_padding_every_key_warns_that_weights_are_zero():
    at = page("masks", mask="padding", padding="6")
    assert len(at.warning) == 1
    assert "6 queries" in at.warning[0].value and "zero" in at.warning[0].value
    assert charts(at)["Softmax weights"]["value"].eq(0).all()


def test_masks_dropout_changes_weights_after_but_not_before():
    at = page("masks")
    before = charts(at)
    after = charts(run_widget(at, "slider", "w:dropout", 0.5))
    assert same(before, after, "Weights before dropout")
    dropped = after["Weights after dropout p = 0.50"]["value"]
    assert (dropped == 0).sum() > 0 and dropped.max() > 1  # zeroed, and the kept ones scaled by 2
    assert "scaled by 2" in texts(at)


@pytest.mark.parametrize(("key", "value"), [("w:d_k", 4), ("w:seed", 7)])
def test_masks_sidebar_sliders_change_the_scores(key, value):
    at = page("masks", mask="causal")
    before = charts(at)
    after = charts(run_widget(at, "slider", key, value))
    assert not same(before, after, "Omega = Q Kᵀ")


def test_masks_a_second_head_keeps_head_1_and_adds_head_2():
    at = page("masks", mask="causal")
    before = charts(at)
    assert same(before, charts(run_widget(at, "slider", "w:heads", 2)), "Omega = Q Kᵀ")  # stable draws
    assert not same(before, charts(run_widget(at, "selectbox", "w:head", 1)), "Omega = Q Kᵀ")


def test_masks_custom_editor_changes_the_weights_and_warns_on_an_empty_row():
    at = page("masks", mask="custom")
    editor = at.data_editor[0]
    assert list(editor.value.columns) == ["1 Life", "2 is", "3 short", "4 eat", "5 dessert", "6 first"]
    assert list(editor.value.index) == list(editor.value.columns)
    before = charts(at)
    assert blocked(before["Softmax weights"]) == 15  # the editor starts from causal
    row = {c: False for c in editor.value.columns}
    at.session_state[editor.key] = {"edited_rows": {0: {"2 is": True}, 5: row}, "added_rows": [], "deleted_rows": []}
    at.run()
    after = charts(at)
    assert not same(before, after, "Softmax weights")
    weights = after["Softmax weights"].set_index(["i", "j"])
    assert not weights.loc[(0, 1), "blocked"] and weights.loc[(0, 1), "value"] > 0  # "Life" now sees "is"
    assert weights.loc[5, "value"].eq(0).all()  # "first" sees nothing: zero weights
    assert len(at.warning) == 1 and "6 first" in at.warning[0].value and "zero" in at.warning[0].value
    assert at.session_state["p:custom_mask"] == "110000.110000.111000.111100.111110.000000"


@pytest.mark.parametrize("linked", [True, False])
def test_masks_past_the_grid_says_which_mask_it_uses(linked: bool):
    """Past 40 tokens there is no grid: the page names the mask it computes with (issue 23: it said causal while it
    used the link's custom mask)."""
    t = 41
    rows = ".".join("1" * (i + 1) + "0" * (t - i - 1) if i % 2 else "1" * t for i in range(t))  # not causal
    params = {"custom_mask": rows} if linked else {}
    at = page("masks", mask="custom", sentence=" ".join(f"w{i}" for i in range(t)), **params)
    [note] = [i.value for i in at.info if "grid editor" in i.value]
    assert "this one has 41" in note
    assert ("custom mask from the link" in note) == linked and ("causal mask" in note) == (not linked)
    blocked_cells = int(charts(at)["Softmax weights"]["blocked"].sum())
    assert blocked_cells == (sum(t - i - 1 for i in range(1, t, 2)) if linked else t * (t - 1) // 2)


def test_the_sentence_box_says_how_long_a_paste_may_be():
    at = page("self_attention")
    assert any("At most 20,000 characters: a longer text is refused" in c.value for c in at.sidebar.caption)


def test_masks_custom_buttons_reset_the_grid():
    at = page("masks", mask="custom", custom_mask="100000.010000.001000.000100.000010.000001")
    assert blocked(charts(at)["Softmax weights"]) == 30
    at.button(key="masks:cmask:all").click().run()
    assert blocked(charts(at)["Softmax weights"]) == 0
    assert at.data_editor[0].value.to_numpy().all()
    at.button(key="masks:cmask:causal").click().run()
    assert blocked(charts(at)["Softmax weights"]) == 15


def test_masks_empty_sentence_is_refused_with_a_message():
    at = page("masks", mask="custom")
    run_widget(at, "text_area", "w:sentence", "   ")
    assert len(at.error) == 1 and "empty" in at.error[0].value
    assert not drawn(at)


# --------------------------------------------------------------------------- multi-head


def shapes(at: AppTest) -> dict[str, str]:
    frame = next(d.value for d in at.dataframe if "here" in d.value.columns)
    return dict(zip(frame["step"], frame["here"], strict=True))


def test_multi_head_defaults_four_heads_that_differ_concat_and_shapes():
    at = page("multi_head")  # the page opens on its lesson: four heads, each attending its own way
    shown = charts(at)
    assert {f"head {i}: weights" for i in range(1, 5)} <= set(shown) and "Concatenated heads (6 × 4 · 28)" in shown
    assert at.selectbox(key="w:init").value == "normal"
    favourite = [tuple(f.loc[f.groupby("i")["value"].idxmax(), "j"]) for t, f in shown.items() if t.startswith("head")]
    assert len(set(favourite)) == 4  # each head's most-attended key per query: four different patterns
    steps = shapes(at)
    assert steps["inputs"] == "6 × 16"
    assert steps["scores: Q Kᵀ"] == "4 × 6 × 6"
    assert steps["concatenate the heads"] == "6 × 112"
    assert not any(t.startswith("Output") for t in shown)
    assert "No output projection" in texts(at)


@pytest.mark.parametrize(
    ("params", "more"),
    [({}, 4), ({"head_layout": "split", "d_model": "9"}, 3), ({"head_layout": "split", "d_model": "10"}, 2)],
)
def test_multi_head_at_one_head_offers_a_head_count_that_works(params: dict, more: int):
    at = page("multi_head", heads="1", **params)
    assert "One head is plain self-attention" in texts(at)
    at.button(key="mh:more").click().run()
    assert not at.exception and not at.error
    assert at.slider(key="w:heads").value == more
    assert {f"head {i}: weights" for i in range(1, more + 1)} <= set(charts(at))
    # the link says the head count unless it is the page's own default (4), which a link need not say
    assert at.query_params.get("heads") == (None if more == 4 else str(more))
    assert "One head is plain self-attention" not in texts(at)


@pytest.mark.parametrize("view", ["weights", "omega"])
def test_multi_head_small_multiples_share_one_colour_scale(view: str):
    at = page("multi_head", heads="3", headview=view)
    heads = [h for t, h in headers(at).items() if t.startswith("head ")]
    assert len(heads) == 3
    ends = {h["maxAbs"] for h in heads}
    assert len(ends) == 1  # one scale for every head
    shown = [f for t, f in charts(at).items() if t.startswith("head ")]
    assert ends.pop() == pytest.approx(max(float(f["value"].abs().max()) for f in shown), rel=1e-6)
    assert not any(h["legend"] for h in heads)  # the caption is the key
    assert "in every head" in texts(at)


def test_multi_head_at_one_head_with_a_prime_split_width_offers_no_button():
    at = page("multi_head", head_layout="split", d_model="7", heads="1")
    assert "One head is plain self-attention" in texts(at)
    assert not [b for b in at.button if b.key == "mh:more"]


def test_multi_head_heads_slider_draws_one_heatmap_per_head():
    at = run_widget(page("multi_head"), "slider", "w:heads", 4)
    titles = set(charts(at))
    assert {f"head {i}: weights" for i in range(1, 5)} <= titles
    assert "head 5: weights" not in titles
    assert shapes(at)["concatenate the heads"] == "6 × 112"
    assert shapes(at)["weights @ V"] == "4 × 6 × 28"


def test_multi_head_split_layout_and_d_model():
    at = page("multi_head", heads="4")
    at = run_widget(at, "selectbox", "w:head_layout", "split")
    steps = shapes(at)
    assert steps["project once: x @ W_q"] == "6 × 16"
    assert steps["split: view into heads"] == "6 × 4 × 4"
    assert steps["transpose heads to the front"] == "4 × 6 × 4"
    before = charts(at)
    at = run_widget(at, "slider", "w:d_model", 32)
    assert shapes(at)["split: view into heads"] == "6 × 4 × 8"
    assert not same(before, charts(at), "head 1: weights")


def test_multi_head_split_layout_explains_heads_that_do_not_divide_d_model():
    at = page("multi_head", head_layout="split", heads="3")
    sidebar_errors = [e.value for e in at.sidebar.error]
    assert len(sidebar_errors) == 1 and "3 does not divide it" in sidebar_errors[0]
    assert len(at.main.error) == 1 and "cannot be computed" in at.main.error[0].value
    assert not drawn(at)


def test_multi_head_view_radio_shows_omega():
    at = page("multi_head", heads="2")
    at = run_widget(at, "radio", "w:headview", "omega")
    shown = charts(at)
    assert {"head 1: omega", "head 2: omega"} <= set(shown)
    assert shown["head 1: omega"]["value"].max() > 1  # raw scores, not weights


def test_multi_head_out_proj_adds_the_output():
    at = page("multi_head", heads="2")
    at = run_widget(at, "toggle", "w:out_proj", True)
    shown = charts(at)
    assert "Output = concat W_out + b (6 × 16)" in shown
    assert shapes(at)["output projection: concat @ W_out"] == "6 × 16"


@pytest.mark.parametrize(
    ("key", "value", "title"), [("w:d_k", 5, "head 1: weights"), ("w:d_v", 3, None), ("w:seed", 9, "head 1: weights")]
)
def test_multi_head_sliders_change_what_is_shown(key, value, title):
    at = page("multi_head")
    before = charts(at)
    after = charts(run_widget(at, "slider", key, value))
    if title is None:  # d_v changes only the value side: the concatenation's width
        assert f"Concatenated heads (6 × 4 · {value})" in after
    else:
        assert not same(before, after, title)


# --------------------------------------------------------------------------- cross-attention

CROSS_OMEGA = "Omega = Q Kᵀ (6 × 9)"  # the key/value sentence is longer: omega is not square


def test_cross_defaults_queries_from_one_sentence_keys_from_the_other():
    at = page("cross_attention")
    rows, cols = labels(at, CROSS_OMEGA)
    assert rows == ["1 Life", "2 is", "3 short", "4 eat", "5 dessert", "6 first"]
    assert cols == ["1 and", "2 it", "3 was", "4 served", "5 with", "6 a", "7 glass", "8 of", "9 wine"]
    r = compute(Config(cross_sentence="and it was served with a glass of wine", **WEIGHTS))
    omega = charts(at)[CROSS_OMEGA].set_index(["i", "j"])["value"]
    assert abs(float(omega[(1, 2)]) - float(r.omega[0, 1, 2])) < 1e-4
    assert "may differ" in texts(at)
    # random, untrained inputs whose rows follow the rank among both sentences' 15 distinct words
    assert "random and untrained" in texts(at) and "“Life” is row 1 of 15" in texts(at)


def test_cross_second_sentence_changes_the_rectangle():
    at = page("cross_attention")
    at = run_widget(at, "text_area", "w:cross_sentence", "and it was served")
    shown = charts(at)
    assert "Omega = Q Kᵀ (6 × 4)" in shown and "Softmax weights (6 × 4)" in shown
    assert len(shown["Softmax weights (6 × 4)"]) == 24
    assert "6 queries × 4 keys" in texts(at)
    assert "Context vectors (6 × 28)" in shown  # one context row per query, whatever T_k


def test_cross_first_sentence_changes_the_rows():
    at = run_widget(page("cross_attention"), "text_area", "w:sentence", "The chef cooked")
    rows, cols = labels(at, "Omega = Q Kᵀ (3 × 9)")
    assert rows == ["1 The", "2 chef", "3 cooked"] and cols[0] == "1 and"


@pytest.mark.parametrize(("key", "value"), [("w:d_k", 3), ("w:seed", 5)])
def test_cross_sliders_change_the_scores(key, value):
    at = page("cross_attention")
    before = charts(at)
    assert not same(before, charts(run_widget(at, "slider", key, value)), CROSS_OMEGA)


def test_cross_presenter_sentence_box_changes_the_key_sentence_too():
    """Presenter mode hides the sidebar: its "Sentence" box offers the page's key/value sentence as well, with the
    same limit as the page's box, and the keys (omega's columns) follow what the presenter types."""
    at = page("cross_attention", present="true")
    boxes = {t.key: t for t in at.text_area if t.key.startswith("w:present:")}
    assert list(boxes) == ["w:present:sentence", "w:present:cross_sentence"]
    # the same limit as the page's box: a longer text refused and said (tests/app/test_long_text.py)
    at = run_widget(at, "text_area", "w:present:cross_sentence", "w" * 20_001)
    assert [e.value for e in at.error] == ["That text is 20,001 characters long and was not taken: a box takes at "
                                           "most 20,000. The box keeps its last text."]  # fmt: skip
    assert boxes["w:present:cross_sentence"].label == "Key/value sentence (columns)"
    at = run_widget(at, "text_area", "w:present:cross_sentence", "and it was served")
    rows, cols = labels(at, "Omega = Q Kᵀ (6 × 4)")
    assert cols == ["1 and", "2 it", "3 was", "4 served"] and rows[0] == "1 Life"
    assert at.text_area(key="w:cross_sentence").value == "and it was served"  # the page's own box follows
    assert at.query_params["cross_sentence"] == "and it was served"
    at = run_widget(at, "text_area", "w:present:sentence", "The chef cooked")
    assert labels(at, "Omega = Q Kᵀ (3 × 4)") == (["1 The", "2 chef", "3 cooked"], cols)
    at = run_widget(at, "text_area", "w:present:cross_sentence", "")
    assert len(at.error) == 1 and "cross sentence is empty" in at.error[0].value  # refused as the page's box is


def test_presenter_sentence_box_offers_only_the_pages_own_texts():
    at = page("self_attention", present="true")
    assert [t.key for t in at.text_area if t.key.startswith("w:present:")] == ["w:present:sentence"]


def test_cross_empty_second_sentence_is_refused():
    at = run_widget(page("cross_attention"), "text_area", "w:cross_sentence", "")
    assert len(at.error) == 1 and "cross sentence is empty" in at.error[0].value
    assert not drawn(at)


# --------------------------------------------------------------------------- tutorials


def marks(at: AppTest) -> list[str]:
    """Every match mark on the page: summary column, per-value columns, expander labels, the verdict's icon."""
    cells = [str(x) for d in (*at.dataframe, *at.table) for x in d.value.to_numpy().ravel()]
    labels = [e.label for e in at.expander] + [a.icon for a in (*at.success, *at.error)]
    return [t[0] for t in cells + labels if t[:1] in (OK, BAD)]


@pytest.mark.parametrize("name", list(presets.PRESETS))
def test_tutorials_every_preset_matches(name):
    at = page("tutorials")
    at = run_widget(at, "selectbox", "w:preset", name)
    preset = presets.PRESETS[name]
    assert at.subheader[0].value == preset.source.title
    summary = next(d.value for d in at.table if "printed as" in d.value.columns)
    assert list(summary["printed as"]) == [c.label for c in preset.checks]
    assert list(summary["match"]) == [f"{OK} yes"] * len(preset.checks)
    assert BAD not in marks(at) and OK in marks(at)
    assert len(at.success) == 1 and not at.error
    assert ("Open the tutorial" in [b.label for b in at.get("link_button")]) == bool(preset.source.link)
    if preset.corrections:
        assert any(preset.corrections[:40] in i.value.replace("\\", "") for i in at.info)
    assert len(drawn(at)) == 4


def test_tutorials_shape_checks_show_shapes():
    at = page("tutorials", preset="spelled-out-multi-head")
    summary = next(d.value for d in at.table if "printed as" in d.value.columns)
    assert list(summary["printed"]) == ["shape (24, 512)", "shape (24, 4096)"]
    assert list(summary["computed"]) == ["shape (24, 512)", "shape (24, 4096)"]
    _, cols = labels(at, "Output vectors")
    assert len(cols) == 64  # the 512-wide output is cut for speed


def test_tutorials_a_wrong_printed_number_shows_a_cross(monkeypatch):
    preset = presets.PRESETS["raschka-self-attention"]
    wrong = dataclasses.replace(preset.checks[2], expected=(8.5808, -7.6597, 3.2558, 1.0395, 11.1476, -0.4800))
    monkeypatch.setitem(presets.PRESETS, preset.name, dataclasses.replace(preset, checks=(wrong,)))
    at = page("tutorials")
    assert marks(at).count(BAD) == 4  # the verdict, the summary row, the one wrong value, its expander
    assert len(at.error) == 1 and "1 of 1 checks do not match" in at.error[0].value


def test_tutorials_link_opens_that_preset():
    at = page("tutorials", preset="chef-causal")
    assert at.selectbox(key="w:preset").value == "chef-causal"
    assert at.subheader[0].value == "Attention on Attention (Vipul Koti)"
    assert not at.warning
    assert at.query_params["preset"] == "chef-causal"


def test_tutorials_bad_link_opens_the_default_with_a_warning():
    at = page("tutorials", preset="nope")
    assert at.selectbox(key="w:preset").value == "raschka-self-attention"
    assert len(at.warning) == 1 and "preset" in at.warning[0].value
    assert list(next(d.value for d in at.table if "match" in d.value.columns)["match"]) == [f"{OK} yes"] * 7


def test_page_defaults_stay_on_their_page_and_links_reopen_what_they_show():
    at = page("masks")
    assert at.selectbox(key="w:mask").value == "causal"
    at.switch_page("pages/self_attention.py").run()
    assert at.selectbox(key="w:mask").value == "none"  # the self-attention page's own default
    at.switch_page("pages/masks.py").run()
    at = run_widget(at, "selectbox", "w:mask", "none")  # the learner's choice outlives the page's default
    assert at.query_params["mask"] == "none"  # and the link says so, since it differs from the page's default
    at.switch_page("pages/multi_head.py").run()
    assert at.selectbox(key="w:mask").value == "none" and at.slider(key="w:heads").value == 4
    again = page("masks", mask="none")  # that link opens the view it was copied from
    assert again.selectbox(key="w:mask").value == "none"
    assert blocked(charts(again)["Softmax weights"]) == 0


def test_a_split_layout_from_the_multi_head_page_sets_d_k_on_pages_without_the_layout_control():
    at = open_page("self_attention", head_layout="split", heads="2", d_k="5", d_v="3")
    assert {"w:d_k", "w:d_v"}.isdisjoint(s.key for s in at.sidebar.slider) and "w:heads" in [
        s.key for s in at.sidebar.slider
    ]
    captions = [c.value for c in at.sidebar.caption]
    assert "d_k and d_v: set by the split layout (chosen on the Multi-head page) to d_model / heads." in captions
    assert heatmaps(at)["Context vectors"][0].shape == (6, 8)  # d_v = d_model 16 / 2 heads, not 3
