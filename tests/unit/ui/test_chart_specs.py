"""ui.charts.chart sizes the plot, not the element (issue 32), and the chat page's sink chart draws shares in [0, 1]."""

from __future__ import annotations

import pytest
import torch

from attention.models import interpret
from ui import charts
from ui.pages import chat


class Recorder:
    """A stand-in for a Streamlit container: keeps what vega_lite_chart was given."""

    def vega_lite_chart(self, frame, spec, **kw):
        self.spec, self.kw = spec, kw


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
