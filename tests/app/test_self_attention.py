"""The self-attention page (the dashboard's first page) in AppTest: defaults, controls, step mode, links."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

import ui
from attention import Config, compute
from harness import charts

ROOT = Path(__file__).resolve().parents[2]
TOKEN = 1  # the walkthrough follows "2 is" by default, as the Raschka tutorial follows x_2
# the dashboard opens on scaled normal weights drawn a column at a time (issue 23); the tutorial's are one click away
WEIGHTS = {"init": "normal", "draws": "stable"}
DEFAULT_WEIGHT = round(float(compute(Config(**WEIGHTS)).weights[0, TOKEN, 0]), 4)  # "is" -> "Life" at the defaults


def app(**params: str | list[str]) -> AppTest:
    """The dashboard opened with these URL parameters, after its first run."""
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=60)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()  # the course's map, the default page
    at.switch_page("pages/self_attention.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def config_of(at: AppTest) -> Config:
    """The Config the page's stored parameters describe (the page computes exactly this)."""
    get = lambda name: at.session_state["p:" + name]  # noqa: E731
    return Config(
        sentence=get("sentence"), d_model=get("d_model"), d_k=get("d_k"), d_v=get("d_v"), heads=get("heads"),
        head_layout=get("head_layout"), seed=get("seed"), mask=get("mask"), padding=get("padding"),
        window=get("window"),
        dropout=get("dropout"), scale=get("scale"), temperature=get("temperature"), init=get("init"),
        draws=get("draws"), out_proj=get("out_proj"), bias=get("bias"),
    )  # fmt: skip


def table(at: AppTest):
    """The walkthrough's table: one row per key for the followed query."""
    frames = [d.value for d in at.dataframe if "weight" in d.value.columns]
    assert len(frames) == 1
    return frames[0]


def _walk(node):
    yield node
    for child in (getattr(node, "children", None) or {}).values():
        yield from _walk(child)


def heatmaps(at: AppTest) -> dict[str, tuple[torch.Tensor, list[str], list[str]]]:
    """Each heatmap by title: the matrix it draws (blocked cells 0) and its row and column labels."""
    return charts.heatmaps(at)


def shown(at: AppTest) -> tuple:
    """Everything numeric the page shows: the heatmaps, the walkthrough's equations and its table."""
    t = table(at)
    maps = tuple((title, m.tolist(), tuple(cols)) for title, (m, _, cols) in sorted(heatmaps(at).items()))
    return maps, tuple(e.value for e in at.latex), tuple(t["q·k (omega)"]), tuple(t["weight"])


def assert_shows_compute(at: AppTest, token: int = TOKEN, head: int = 0) -> None:
    """The table equals compute() of the page's config, for the followed token."""
    r = compute(config_of(at))
    t = table(at)
    assert list(t["key"]) == [f"{j + 1} {w}" for j, w in enumerate(r.key_tokens)]
    torch.testing.assert_close(torch.tensor(list(t["weight"])), r.dropped_weights[head, token], rtol=0, atol=1e-6)
    torch.testing.assert_close(torch.tensor(list(t["q·k (omega)"])), r.omega[head, token], rtol=1e-6, atol=1e-5)
    assert list(t["may attend"]) == r.mask[token].tolist()
    maps = heatmaps(at)
    labels = [f"{i + 1} {w}" for i, w in enumerate(r.tokens)]
    for title, want in (
        ("Embeddings x", r.embeddings),
        ("Omega = Q Kᵀ", r.omega[head]),
        ("Softmax weights", r.dropped_weights[head].masked_fill(~r.mask, 0)),
        ("Context vectors", r.context[head]),
    ):
        matrix, rows, _ = maps[title]
        assert rows == labels
        torch.testing.assert_close(matrix, want, rtol=1e-6, atol=1e-5)


def test_defaults_show_scaled_normal_weights_and_say_so() -> None:
    at = app()
    assert [t.value for t in at.title] == ["Self-attention"]
    assert not at.error and not at.warning
    assert (at.session_state["p:init"], at.session_state["p:draws"]) == ("normal", "stable")
    assert any("**Weights:** scaled normal" in c.value for c in at.main.caption)  # on the first screen
    t = table(at).set_index("key")
    assert round(float(t.loc["1 Life", "weight"]), 4) == DEFAULT_WEIGHT
    assert 0.05 < float(t["weight"].max()) < 0.9  # a row that spreads: neither one-hot nor flat
    assert_shows_compute(at)


def test_one_click_shows_the_raschka_numbers_and_one_more_goes_back() -> None:
    at = app()
    at.button(key="w:weights_note").click().run()
    assert (at.session_state["p:init"], at.session_state["p:draws"]) == ("rand-transposed", "tutorial")
    assert (at.query_params["init"], at.query_params["draws"]) == ("rand-transposed", "tutorial")
    assert any("in the tutorial's order: its printed numbers" in c.value for c in at.main.caption)
    t = table(at).set_index("key")
    assert round(float(t.loc["1 Life", "weight"]), 4) == 0.2912
    assert round(float(t.loc["5 dessert", "q·k (omega)"]), 4) == 11.1466
    assert any("Following token 2: is" in m.value for m in at.markdown)
    equations = " ".join(e.value for e in at.latex)
    assert "= 11.1466" in equations and r"\alpha_{2,1} = 0.2912" in equations
    assert_shows_compute(at)
    at.button(key="w:weights_note").click().run()
    assert (at.session_state["p:init"], at.session_state["p:draws"]) == ("normal", "stable")
    assert round(float(table(at).set_index("key").loc["1 Life", "weight"]), 4) == DEFAULT_WEIGHT


@pytest.mark.parametrize(
    ("kind", "key", "value"),
    [
        ("slider", "w:d_k", 8),
        ("slider", "w:d_v", 5),
        ("number_input", "w:seed", 7),
        ("selectbox", "w:mask", "causal"),
    ],
)
def test_each_control_changes_the_numbers(kind: str, key: str, value: object) -> None:
    at = app()
    before = shown(at)
    getattr(at, kind)(key=key).set_value(value).run()
    assert not at.exception and not at.error
    assert at.session_state["p:" + key[2:]] == value
    assert shown(at) != before
    assert_shows_compute(at)
    assert at.query_params[key[2:]] == str(value)  # the URL follows, so the link reopens this view


def test_a_second_head_adds_a_head_and_keeps_head_1() -> None:
    """Stable draws: head 1's numbers are the same at 1 and 2 heads; head 2 is new."""
    at = app()
    before = shown(at)
    at.slider(key="w:heads").set_value(2).run()
    assert not at.exception and not at.error and at.query_params["heads"] == "2"
    # the same weights; the numbers from them equal up to float32 rounding (a batch of two heads may take another
    # BLAS kernel than one head: the last bit can differ)
    after = shown(at)
    assert [(t, c) for t, _, c in after[0]] == [(t, c) for t, _, c in before[0]]
    for (_, m_after, _), (_, m_before, _) in zip(after[0], before[0], strict=True):
        torch.testing.assert_close(torch.tensor(m_after), torch.tensor(m_before), rtol=1e-5, atol=1e-6)
    assert after[1] == before[1]  # the walkthrough's equations, as printed
    torch.testing.assert_close(torch.tensor(after[2:]), torch.tensor(before[2:]), rtol=1e-5, atol=1e-6)
    at.selectbox(key="w:head").set_value(1).run()
    assert shown(at) != before
    assert_shows_compute(at, head=1)


def test_step_mode_shows_one_stage_at_a_time_with_what_to_say() -> None:
    stages = ["Embeddings", "Queries, keys, values", "Omega", "Scaling", "Mask", "Softmax", "Context"]
    at = app()
    at.toggle(key="w:stepmode").set_value(True).run()
    assert [s.value for s in at.subheader] == ["1. Embeddings"]
    assert at.button(key="step:back").disabled
    for n in range(2, len(stages) + 1):
        at.button(key="step:next").click().run()
        assert not at.exception
        assert [s.value for s in at.subheader] == [f"{n}. {stages[n - 1]}"]  # only the current stage
        assert any(m.value == f"**Say:** {ui.SAY[n - 1]}" for m in at.markdown)
        assert at.query_params["step"] == str(n - 1)  # a link reopens this stage
    assert at.button(key="step:next").disabled
    at.button(key="step:back").click().run()
    assert [s.value for s in at.subheader] == [f"{len(stages) - 1}. {stages[-2]}"]
    at.button(key="step:reset").click().run()
    assert [s.value for s in at.subheader] == ["1. Embeddings"]


def test_the_page_says_its_inputs_and_weights_are_random_untrained_and_follow_the_words_rank() -> None:
    at = app()
    captions = [c.value for c in at.main.caption]
    assert any(c.startswith("**Random, untrained:** the embeddings and W_q, W_k, W_v") for c in captions)
    note = ui.inputs_note(config_of(at))
    assert note in captions  # under the embeddings
    assert "alphabetical order" in note and "“Life” is row 1 of 6" in note  # capitals sort first
    # what it claims: the vector is the rank's, not the word's ("fine" here is "good" there: both rank 2 of 4)
    good = compute(Config(sentence="the cat is good", **WEIGHTS))
    fine = compute(Config(sentence="the cat is fine", **WEIGHTS))
    torch.testing.assert_close(good.embeddings[3], fine.embeddings[3], rtol=0, atol=0)
    torch.testing.assert_close(good.embeddings[:3], fine.embeddings[:3], rtol=0, atol=0)


def test_step_mode_calls_the_projections_random_not_learned() -> None:
    at = app(stepmode="true")
    assert ui.inputs_note(config_of(at)) in [c.value for c in at.main.caption]  # stage 1: embeddings
    at.button(key="step:next").click().run()
    said = " ".join(c.value for c in at.main.caption)
    assert "random and untrained" in said and "learned matrices" not in said


def test_every_stage_has_a_sentence_to_say() -> None:
    assert len(ui.SAY) == len(ui.STAGES) and all(s.endswith(".") for s in ui.SAY)


def test_a_link_with_good_parameters_opens_that_view() -> None:
    at = app(seed="7", d_k="8", d_v="5", heads="2", mask="causal", sentence="the cat sat on the mat", token="3")
    assert not at.warning and not at.error
    assert at.number_input(key="w:seed").value == 7
    assert at.slider(key="w:d_k").value == 8
    assert at.slider(key="w:d_v").value == 5
    assert at.slider(key="w:heads").value == 2
    assert at.selectbox(key="w:mask").value == "causal"
    assert at.text_area(key="w:sentence").value == "the cat sat on the mat"
    assert any("Following token 4: on" in m.value for m in at.markdown)
    assert_shows_compute(at, token=3)


DEFAULTS = {"w:seed": 123, "w:d_k": 24, "w:d_v": 28, "w:heads": 1}


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"seed": "abc"}, "seed"),
        ({"d_k": "99999"}, "d_k"),
        ({"mask": "bogus"}, "mask"),
        ({"heads": "-1"}, "heads"),
        ({"seed": ""}, "seed"),
        ({"d_v": ""}, "d_v"),
        ({"sentence": ""}, "sentence"),
        ({"sentence": "   "}, "sentence"),
        ({"nonsense": "1"}, "nonsense"),
        ({"seed": ["7", "abc"]}, "seed"),  # repeated: the last value counts
        ({"seed": "7.5"}, "seed"),
        ({"d_k": "1e3"}, "d_k"),
        ({"heads": "0x10"}, "heads"),
        ({"seed": "9" * 5000}, "seed"),
    ],
)
def test_a_malformed_link_opens_the_defaults_with_a_warning(params: dict, named: str) -> None:
    at = app(**params)
    assert len(at.warning) == 1 and ui.plain(named) in at.warning[0].value  # names are shown escaped
    assert not at.error
    for key, default in DEFAULTS.items():
        assert (at.number_input if key == "w:seed" else at.slider)(key=key).value == default  # a seed: a number box
    assert at.selectbox(key="w:mask").value == "none"
    assert round(float(table(at).set_index("key").loc["1 Life", "weight"]), 4) == DEFAULT_WEIGHT
    # the rejected values are dropped from the URL, and the next change clears the warning
    assert all(name not in at.query_params for name in params)
    at.number_input(key="w:seed").set_value(8).run()
    assert not at.exception and not at.warning
    assert_shows_compute(at)


def test_presenter_mode_is_one_switch_in_the_link() -> None:
    at = app(present="true")
    assert not at.exception
    assert at.toggle(key="w:present").value is True
    assert "w:present" not in [t.key for t in at.sidebar.toggle]  # on the page, as the sidebar is hidden
    styles = [h.proto.body for h in at.get("html") if "font-size: 20px" in h.proto.body]
    assert len(styles) == 1 and "stSidebar" in styles[0]
    at.toggle(key="w:present").set_value(False).run()
    assert "present" not in at.query_params
    assert "w:present" in [t.key for t in at.sidebar.toggle]
    assert not [h for h in at.get("html") if "font-size: 20px" in h.proto.body]


def test_a_run_sends_a_slider_the_value_to_show_only_where_the_page_changed_it():
    """A run that sends a widget its value to show (`set_value`) puts the browser's widget back to it. Sent on every
    run, the run a learner's arrow press asked for, drawn while the next press moved the slider, put it back (four
    quick presses moved d_k three steps in Chromium); and the run a press on heads asked for put back a press on d_k
    made meanwhile (CI's four-browser load test). Sent only where the page's value differs from the widget's."""
    at = app(d_k="10")
    slider = lambda: at.slider(key="w:d_k")  # noqa: E731
    assert slider().value == 10
    slider().set_value(11).run()  # the learner's move: the browser already shows it
    assert at.session_state["p:d_k"] == 11 and slider().value == 11
    assert not slider().proto.set_value
    assert_shows_compute(at)
    at.slider(key="w:heads").set_value(2).run()  # another slider's move: d_k's is not sent again
    assert not slider().proto.set_value and slider().value == 11
    at.run()
    assert not slider().proto.set_value and slider().value == 11
    at.session_state["p:d_k"] = 14  # the page's own value changed (a lesson, a link, "copy A to B" write it there)
    at.run()
    assert slider().value == 14 and slider().proto.set_value
    assert_shows_compute(at)


def test_a_slider_drawn_with_other_bounds_starts_from_the_pages_value():
    """A slider whose bounds change is another widget to Streamlit (no state of its own): it starts from the page's
    value, not from its lowest (the padding slider's top is the sentence's length)."""
    at = app(sentence="one two three four five six", padding="3", mask="padding")
    at.switch_page("pages/masks.py").run()
    assert at.slider(key="w:padding").value == 3
    at.session_state["p:sentence"] = "one two three four five six seven"  # a longer sentence: a higher top
    at.run()
    assert not at.exception
    assert at.slider(key="w:padding").value == 3 and at.session_state["p:padding"] == 3
