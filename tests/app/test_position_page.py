"""The Position page in AppTest: its defaults, the permutation verdict, RoPE's flat line, controls, links, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention import Config, compute
from attention.basics import position
from attention.lessons.permutation import apply_order, shuffled_order
from harness import charts

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "Life is short eat dessert first"
PAGE = {"heads": 4, "init": "normal", "draws": "stable", "mask": "none", "dropout": 0.0}  # what the page computes


def page(**params: str) -> AppTest:
    """The Position page opened from a link with these parameters."""
    return charts.open_page("position", **params)


def verdicts(at: AppTest) -> list[tuple[str, str]]:
    """The alerts of the permutation experiment: (icon, text). Streamlit moves a leading emoji into the icon."""
    return [(a.icon, a.value) for a in (*at.success, *at.info) if "rows" in a.value]


def vega_charts(at: AppTest) -> dict[str, pd.DataFrame]:
    """Each Vega-Lite chart on the page by title: the frame it was sent."""
    out = {}
    for node in charts._walk(at._tree):
        if getattr(node, "type", None) == "vega_lite_chart":
            spec = json.loads(node.proto.spec)
            out[spec["title"]] = pa.ipc.open_stream(node.proto.data.data).read_all().to_pandas()
    return out


def test_defaults_render_rope_with_every_section() -> None:
    at = page()
    assert [t.value for t in at.title] == ["Position"]
    assert [h.value for h in at.header] == [
        "1. Shuffle the words",
        "2. RoPE: the score depends on the distance only",
        "3. ALiBi: a penalty growing with distance",
        "4. The encodings themselves",
    ]
    assert at.selectbox(key="w:position").value == "rope"  # the page's default
    assert at.slider(key="w:heads").value == 4
    assert "position" not in at.query_params and "heads" not in at.query_params  # defaults stay out of the link
    shown = charts.heatmaps(at)
    for title in (
        "Context: the sentence",
        "Context: the shuffled sentence",
        "Omega before rotation",
        "Omega after rotation (RoPE)",
        "RoPE's rotation angle by position and pair (radians)",
        "head 1: m = 1/4",
        "head 4: m = 1/256",
        "Sinusoidal table: position × dimension",
        "Sinusoidal: similarity of positions (cosine)",
        "Learned table (before training)",
        "Learned: similarity of positions (cosine)",
    ):
        assert title in shown, (title, sorted(shown))
    result = compute(Config(sentence=SENTENCE, position="rope", **PAGE))
    torch.testing.assert_close(shown["Context: the sentence"][0], result.context[0])
    torch.testing.assert_close(shown["Omega after rotation (RoPE)"][0], result.omega[0])
    torch.testing.assert_close(shown["head 1: m = 1/4"][0], position.alibi_bias(4, 6, 6)[0])


def test_the_shuffled_sentence_is_the_seeded_shuffle() -> None:
    at = page()
    words = SENTENCE.split()
    shuffled = apply_order(words, shuffled_order(words, 0))
    _, rows, _ = charts.heatmaps(at)["Context: the shuffled sentence"]
    assert [r.split(" ", 1)[1] for r in rows] == shuffled
    at.button(key="pos:shuffle").click().run()
    _, again, _ = charts.heatmaps(at)["Context: the shuffled sentence"]
    assert [r.split(" ", 1)[1] for r in again] == apply_order(words, shuffled_order(words, 1))


def test_without_position_the_verdict_is_a_check_mark() -> None:
    at = page(position="none")
    [(icon, text)] = verdicts(at)
    assert icon == "✅" and text.startswith("Same rows, reordered")
    difference = float(text.split("largest difference is ")[1].split(" ")[0])
    assert 0 <= difference < 1e-4  # the number is computed: rounding only
    assert "RoPE is not on" not in text
    assert any("Switch to RoPE" == b.label for b in at.button)


@pytest.mark.parametrize("kind", ["rope", "sinusoidal", "learned", "alibi"])
def test_with_an_encoding_the_verdict_is_a_cross(kind: str) -> None:
    at = page(position=kind)
    [(icon, text)] = verdicts(at)
    assert icon == "❌" and text.startswith("Not the same rows")
    difference = float(text.split("by up to ")[1].split(" ")[0])
    assert difference > 1e-3


def test_ropes_pair_score_is_flat_and_the_sinusoidal_one_is_not() -> None:
    at = page()
    frame = vega_charts(at)["q · k of “is” and “Life”, 1 apart"]
    rope = frame[frame["series"] == "RoPE"]
    table = frame[frame["series"] == "sinusoidal table instead"]
    assert list(rope["x"]) == list(range(24)) and list(table["x"]) == list(range(24))
    result = compute(Config(sentence=SENTENCE, position="rope", **PAGE))
    assert rope["y"].max() - rope["y"].min() <= 1e-4 * max(1.0, rope["y"].abs().max())
    assert rope["y"].iloc[0] == pytest.approx(float(result.omega[0, 1, 0]), rel=1e-4)  # "is" after "Life"
    assert table["y"].max() - table["y"].min() > 0.1


def test_alibi_weights_chart_compares_the_last_row() -> None:
    at = page()
    frame = vega_charts(at)["Weights of the last word “first”, head 1"]
    alibi = compute(Config(sentence=SENTENCE, position="alibi", **PAGE))
    plain = compute(Config(sentence=SENTENCE, position="none", **PAGE))
    with_bias = frame[frame["series"] == "ALiBi, slope 1/4"].sort_values("x", ascending=False)
    without = frame[frame["series"] == "no position"].sort_values("x", ascending=False)
    torch.testing.assert_close(torch.tensor(with_bias["y"].to_numpy()), alibi.weights[0, -1])
    torch.testing.assert_close(torch.tensor(without["y"].to_numpy()), plain.weights[0, -1])


def test_switching_position_in_the_sidebar_changes_the_context_and_the_link() -> None:
    at = page()
    before = charts.heatmaps(at)["Context: the sentence"][0]
    at.selectbox(key="w:position").set_value("sinusoidal").run()
    assert not at.exception
    after = charts.heatmaps(at)["Context: the sentence"][0]
    assert not torch.allclose(before, after)
    expected = compute(Config(sentence=SENTENCE, position="sinusoidal", **PAGE)).context[0]
    torch.testing.assert_close(after, expected)
    assert at.query_params["position"] == "sinusoidal"
    assert "Omega before rotation" not in charts.heatmaps(at)  # the RoPE figures wait for RoPE
    at.button(key="pos:rope").click().run()
    assert at.selectbox(key="w:position").value == "rope"
    assert "Omega before rotation" in charts.heatmaps(at)


def test_a_link_keeps_position() -> None:
    at = page(position="alibi", rope_base="500")
    assert at.selectbox(key="w:position").value == "alibi"
    assert at.query_params["position"] == "alibi"
    at = page(position="rope", rope_base="500")
    assert at.slider(key="w:rope_base").value == 500.0
    assert float(at.query_params["rope_base"]) == 500.0


def test_one_word_says_the_shuffle_is_the_identity() -> None:
    at = page(sentence="hello")
    assert not verdicts(at)
    assert any("One word: shuffling gives back the same sentence" in i.value for i in at.info)
    assert at.button(key="pos:shuffle").disabled


def test_odd_d_k_with_rope_shows_the_configs_error() -> None:
    at = page(d_k="7")
    assert any("d_k must be even" in e.value for e in at.error)
    assert not charts.heatmaps(at)
