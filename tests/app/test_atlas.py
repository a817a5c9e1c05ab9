"""The Head atlas page in AppTest: every head in the scatter and the table with the package's scores, the
sentences computed from them, the switch and inputs recomputing, a text with no repeated token said in words, bad
text refused with the page's sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention.lessons import atlas
from harness import charts
from harness.charts import open_page, set_widget
from harness.fixtures import one_thread  # noqa: F401  (fixtures, one_thread autouse)
from ui import charts as ui_charts
from ui.state import MAX_CHARS
from ui.views.atlas import TABLE_OPEN

ROOT = Path(__file__).resolve().parents[2]


def page(**params: str) -> AppTest:
    at = open_page("head_atlas", timeout_s=300, **params)  # the corpus: every text through the model
    assert not at.dataframe, "the table is sent before its expander is opened"
    at.session_state[TABLE_OPEN] = True  # the table's expander opened: its grid sent (a rerun)
    return at.run()


def texts(at: AppTest) -> str:
    parts = [e.value for e in (*at.info, *at.warning, *at.error, *at.caption, *at.markdown)]
    return "\n".join(str(p) for p in parts)


def scatter_spec(at: AppTest) -> dict:
    """The scatter's Vega-Lite spec as the page sent it."""
    for node in charts._walk(at._tree):
        if getattr(node, "type", None) == "vega_lite_chart":
            spec = json.loads(node.proto.spec)
            if str(spec.get("title", "")).startswith("Every head"):
                return spec
    raise AssertionError("no scatter")


def test_minilm_on_repeated_tokens_shows_every_head_with_the_packages_scores() -> None:
    at = page(atlas_model="minilm", atlas_input="repeated")
    expected = atlas.model_atlas("minilm", "repeated")
    table = at.dataframe[0].value
    assert len(table) == 6 * 12 and set(atlas.ENCODER_SCORES) <= set(table.columns)
    for score in ("previous_token", "induction", "special"):
        got = torch.tensor(table[score].to_numpy(), dtype=torch.float32).view(6, 12)
        torch.testing.assert_close(got, expected.scores[score], atol=1e-5, rtol=0)
    spec = scatter_spec(at)
    assert spec["encoding"]["x"]["field"] == "previous_token" and spec["encoding"]["y"]["field"] == "induction"
    assert {"name", "layer", "head", "induction"} <= {t["field"] for t in spec["encoding"]["tooltip"]}
    words = texts(at)
    best = atlas.ranked(expected.scores["previous_token"], 1)[0]
    assert f"{atlas.head_name(best[0], best[1])} is the strongest previous-token head" in words
    assert any(s in words for s in atlas.findings(expected))


def test_the_switch_recomputes_without_the_first_token_and_the_text_input_scores_the_text() -> None:
    at = page(atlas_model="minilm", atlas_input="repeated")
    before = at.dataframe[0].value["special"].to_numpy()
    set_widget(at, "toggle", "w:atlas_drop_first", True)
    after = at.dataframe[0].value
    dropped = atlas.model_atlas("minilm", "repeated", drop_first=True)
    got = torch.tensor(after["special"].to_numpy(), dtype=torch.float32).view(6, 12)
    torch.testing.assert_close(got, dropped.scores["special"], atol=1e-5, rtol=0)
    assert not (after["special"].to_numpy() == before).all()
    set_widget(at, "segmented_control", "w:atlas_input", "text")
    set_widget(at, "text_area", "w:atlas_text", "the bird saw the bird and the bird sang")
    mine = atlas.model_atlas("minilm", "text", "the bird saw the bird and the bird sang", drop_first=True)
    got = torch.tensor(at.dataframe[0].value["induction"].to_numpy(), dtype=torch.float32).view(6, 12)
    torch.testing.assert_close(got, mine.scores["induction"], atol=1e-5, rtol=0)


def test_a_text_with_no_repeated_token_says_so_instead_of_showing_zeros() -> None:
    at = page(atlas_model="minilm", atlas_input="text", atlas_text="A quick brown fox jumps over lazy dogs")
    assert "need a token that appears twice" in texts(at)
    table = at.dataframe[0].value
    assert table["induction"].isna().all() and table["duplicate_token"].isna().all()
    assert not any("strongest induction head" in s for s in texts(at).splitlines())


@pytest.mark.parametrize(
    ("text", "said"),
    [("   ", "The model cannot read this text: the sentence is empty"), ("x" * (MAX_CHARS + 1), "characters long")],
)
def test_empty_and_too_long_texts_are_refused_with_the_pages_sentence(text: str, said: str) -> None:
    at = page(atlas_model="minilm", atlas_input="text")
    at.session_state["p:atlas_text"] = text
    at.run()
    assert not at.exception
    assert said in texts(at)
    assert not at.dataframe  # nothing drawn from a text it refused


def test_smollm2_on_repeated_tokens_names_the_chat_pages_induction_head_first() -> None:
    at = page(atlas_model="smollm2", atlas_input="repeated")
    table = at.dataframe[0].value
    assert len(table) == 30 * 9 and "kv_group" in table.columns and "special" not in table.columns
    assert (table["kv_group"] == table["head"] // 3).all()
    from attention.models import interpret, smollm2

    model = smollm2.load()
    ids = smollm2.induction_ids(model)  # the chat page's induction preset, and the head it names
    chat = divmod(int(interpret.induction(smollm2.run_ids(model, ids).weights, ids).argmax()), model.heads)
    assert f"{atlas.head_name(*chat)} is the strongest induction head on repeated random tokens" in texts(at)


def test_the_atlas_gives_back_every_byte_it_was_admitted_for() -> None:
    """A model pass of the atlas is admitted for its peak and, once it returns, gives it all back, finished: before,
    it released the bytes without finishing its ticket, so the server counted every pass as still computing for
    ever (the soak's 171 MB 'computing' beside 15 MB of the budget in use), and every later run under the memory
    ceiling waited for runs that had ended (issue 37)."""
    from server import budget

    before = (budget.SERVER.computing, budget.SERVER.passing)
    at = page(atlas_model="minilm", atlas_input="text", atlas_text="A text of its own, once: the atlas reads it.")
    assert at.dataframe, "the atlas drew no table"
    assert (budget.SERVER.computing, budget.SERVER.passing) == before


def test_a_one_token_text_with_the_first_token_left_out_says_why_and_does_not_crash() -> None:
    """Issue 50: one token, the first left out, leaves no query to score (StopIteration picking the y axis). MiniLM
    always reads [CLS] and [SEP] besides: SmolLM2 is the model where one word is one token."""
    at = page(atlas_model="smollm2", atlas_input="text", atlas_text="Hello", atlas_drop_first="true")
    assert not at.exception, at.exception
    assert "too short" in texts(at)
    set_widget(at, "toggle", "w:atlas_drop_first", False)  # the switch back off: still no crash
    assert not at.exception


def test_smollm2s_copying_score_and_direct_logit_attribution_are_axes_and_columns() -> None:
    """Issue 49: what a head writes as axes: its copying score (from the weights) and its direct logit attribution
    to the token that comes next, averaged over the input's positions; MiniLM (no unembedding) offers neither."""
    from attention.models import smollm2
    from attention.models.circuits import chat

    at = page(atlas_model="smollm2", atlas_input="repeated", atlas_x="copying", atlas_y="logit_attribution")
    assert not at.exception
    spec = scatter_spec(at)
    assert spec["encoding"]["x"]["field"] == "copying" and spec["encoding"]["y"]["field"] == "logit_attribution"
    assert spec["encoding"]["x"]["scale"]["domain"] == [-1, 1]
    table = at.dataframe[0].value
    model = smollm2.load()
    got = torch.tensor(table["copying"].to_numpy(), dtype=torch.float32).view(30, 9)
    torch.testing.assert_close(got, chat.copying_scores(model), atol=1e-6, rtol=0)
    per_text = [chat.next_token_attribution(model, t.ids) for t in atlas.inputs("smollm2", "repeated")]
    want = torch.cat(per_text, dim=-1).mean(-1)  # (L, h): every position of every text
    got = torch.tensor(table["logit_attribution"].to_numpy(), dtype=torch.float32).view(30, 9)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert "copying" in [o for o in at.selectbox(key="w:atlas_x").options]
    encoder = page(atlas_model="minilm", atlas_input="repeated")
    assert "copying" not in encoder.dataframe[0].value.columns


def _preloading_page(draw: bool) -> None:
    import streamlit as st

    import ui

    slot = ui.charts.preload()
    st.markdown("computing")
    if draw:
        slot.empty()
        ui.chart(None, {"mark": "point", "data": {"values": [{"a": 1}]}, "title": "A chart"}, height=120, key="c")


def _vega_charts(at: AppTest) -> list:
    return [n for n in charts._walk(at._tree) if getattr(n, "type", None) == "vega_lite_chart"]


def test_a_fresh_tabs_first_run_preloads_vega_hidden_until_its_first_chart_and_never_again() -> None:
    at = AppTest.from_function(_preloading_page, kwargs={"draw": False}).run()  # a run that stops before its chart
    assert len(_vega_charts(at)) == 1, "no Vega chart drawn while the page computes"
    assert any(ui_charts.PRELOAD_KEY in str(h.proto.body) for h in at.get("html")), "the preload is not hidden"
    at = AppTest.from_function(_preloading_page, kwargs={"draw": True}).run()
    assert [json.loads(n.proto.spec).get("title") for n in _vega_charts(at)] == ["A chart"], "the preload stayed"
    at.run()  # the tab has Vega's scripts now: no preload on a later run
    assert len(_vega_charts(at)) == 1
