"""What the Position page draws besides heatmaps: plain line charts over positions, and its "Shuffle again" button.

What belongs here: drawing helpers only the Position page needs (the numbers come from `attention.permutation`
and `attention.rope_demo`). Charts go through `ui.charts.chart`, so the URL is written before them.
"""

from __future__ import annotations

import functools
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from .charts import chart

SHUFFLE_KEY = "pos:shuffles"  # how many times "Shuffle again" was pressed in this session (not in the link)
# apart for every colour vision, mid-dark so that they read on the light and the dark theme (as ui.charts' bands)
PALETTE = ["#0a8494", "#e66100", "#5d3a9b", "#1a7f37", "#b8860b", "#d6336c", "#6c757d", "#1f4e9c", "#8b4513"]


@functools.lru_cache(maxsize=16)
def _lines_spec(title: str, x_title: str, y_title: str, height: int) -> dict:
    """Vega-Lite spec of one line with points per `series`, over linear axes; y starts from 0 (a flat line looks
    flat, not like rounding noise blown up), whole-number x ticks."""
    empty = pd.DataFrame({"x": [0], "y": [0.0], "series": ["a"]})
    spec = (
        alt.Chart(empty)
        .mark_line(point=True)
        .encode(
            x=alt.X("x:Q", title=x_title, axis=alt.Axis(format="d", tickMinStep=1)),
            y=alt.Y("y:Q", title=y_title, scale=alt.Scale(zero=True)),
            color=alt.Color(
                "series:N",
                scale=alt.Scale(range=PALETTE),
                legend=alt.Legend(title=None, orient="bottom", direction="vertical", labelLimit=0),
                sort=None,  # the order the page gives
            ),
            tooltip=[
                alt.Tooltip("series:N"),
                alt.Tooltip("x:Q", title=x_title),
                alt.Tooltip("y:Q", title=y_title, format=".4g"),
            ],  # fmt: skip
        )
        .properties(title=title, height=height)
        .to_dict()
    )
    spec.pop("datasets", None)
    spec.pop("data", None)
    return spec


def lines(frame: pd.DataFrame, *, title: str, x_title: str, y_title: str, key: str, container: Any = None,
          height: int = 240) -> None:  # fmt: skip
    """Lines of y over x, one per `series` (columns x, y, series of `frame`), linear axes, y from 0."""
    chart(frame, dict(_lines_spec(title, x_title, y_title, height)), height=height + 110, key=key, container=container)


def _shuffle_again() -> None:
    st.session_state[SHUFFLE_KEY] = st.session_state.get(SHUFFLE_KEY, 0) + 1


def shuffle_button(container: Any = None, *, disabled: bool = False) -> int:
    """A "Shuffle again" button; returns how many times it was pressed this session (0 at first), for the seed."""
    (container or st).button(
        "Shuffle again", key="pos:shuffle", on_click=_shuffle_again, disabled=disabled, icon=":material/shuffle:"
    )
    return int(st.session_state.get(SHUFFLE_KEY, 0))
