"""ui.charts.chart sizes the plot, not the element (issue 32), and the chat page's sink chart draws shares in [0, 1]."""

from __future__ import annotations

import pytest
import torch

from attention.models import interpret
from ui import charts
from ui.views import chat


class Recorder:
    """A stand-in for a Streamlit container: keeps what vega_lite_chart was given."""

    def vega_lite_chart(self, frame, spec, **kw):
        self.spec, self.kw = spec, kw

    def html(self, body):
        self.table = body


@pytest.fixture
def recorder(monkeypatch) -> Recorder:
    monkeypatch.setattr(charts, "url_before_figure", lambda: None)
    return Recorder()


@pytest.mark.parametrize(("asked", "plot"), [(150, 150), (420, 420), (20, charts.MIN_PLOT_HEIGHT)])
def test_chart_gives_the_plot_its_height_and_the_element_its_content(recorder, asked, plot):
    spec = {"mark": "line", "height": 999}
    charts.chart(None, spec, height=asked, key="k", container=recorder)
    assert recorder.spec["height"] == plot  # the data rectangle's height, at least the minimum
    assert recorder.spec["autosize"] == {"type": "fit-x", "contains": "padding"}  # only the width fits the column
    assert recorder.kw["height"] == "content" and recorder.kw["width"] == "stretch"
    assert spec["height"] == 999  # the caller's (cached) spec is left as it was


def test_sink_frame_is_one_share_a_head_and_its_layer_means_are_the_layers():
    weights = torch.softmax(torch.randn(4, 3, 6, 6, generator=torch.Generator().manual_seed(0)), dim=-1)
    frame = chat.sink_frame(weights)
    assert len(frame) == 4 * 3
    assert frame["share"].between(0, 1).all()
    by_layer = frame.groupby("layer")["share"].mean().to_numpy()
    expected = interpret.first_token(weights).mean(dim=-1).numpy()
    assert by_layer == pytest.approx(expected, abs=1e-6)


def test_sink_bars_are_a_mean_of_the_heads_never_a_stack_and_the_axis_runs_from_0_to_1():
    bar, ticks = chat._sink_spec()["layer"]
    assert bar["encoding"]["y"]["aggregate"] == "mean"
    assert bar["encoding"]["y"]["scale"]["domain"] == [0, 1]
    assert ticks["mark"]["type"] == "tick" and ticks["encoding"]["y"]["scale"]["domain"] == [0, 1]


def test_every_mark_is_described_and_the_chart_has_a_table_of_its_numbers(recorder):
    """Issue 44: Vega draws a mark's group as an SVG image named by its description (a rule at a datum had none);
    under the chart, an HTML table of the same numbers, row and column headers marked, the user's text escaped."""
    import pandas as pd

    cached = {"title": "Scores", "layer": [{"mark": "line"}, {"mark": {"type": "rule", "color": "#666"}}]}
    frame = pd.DataFrame({"token": ["<b>cat</b>", "sat"], "score": [0.5, -1.25]})
    charts.chart(frame, cached, height=150, key="k", container=recorder)
    marks = [layer["mark"] for layer in recorder.spec["layer"]]
    assert all(m["description"].startswith("Scores: ") for m in marks), marks
    assert marks[1]["color"] == "#666" and recorder.spec["description"].startswith("Scores: chart")
    assert cached["layer"][0]["mark"] == "line"  # the cached spec is left as it was
    table = recorder.table
    assert '<th scope="col">token</th><th scope="col">score</th>' in table
    assert '<th scope="row">&lt;b&gt;cat&lt;/b&gt;</th><td>0.5</td>' in table and "<b>cat" not in table
    assert "<td>−1.25</td>" in table and "<summary>Table: Scores</summary>" in table


def test_a_long_frames_table_says_it_shows_its_first_rows(recorder):
    import pandas as pd

    frame = pd.DataFrame({"x": range(charts.TABLE_ROWS + 5), "y": 1.0})
    charts.chart(frame, {"mark": "line"}, height=150, key="k", container=recorder)
    assert recorder.table.count("<tr>") == charts.TABLE_ROWS + 1  # the header and the first rows
    assert f"The first {charts.TABLE_ROWS} of {charts.TABLE_ROWS + 5} rows." in recorder.table
