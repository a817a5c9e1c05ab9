"""Vega-Lite charts: lines with bands over d_k, bars of one row's weights, and the sweep's table.

What belongs here: every chart that is not a heatmap, each spec built once (lru_cache) and fed a small frame
each run. All of them go through `chart`, which writes the URL first (see its docstring).
"""

from __future__ import annotations

import copy
import functools
import html
from collections.abc import Sequence
from typing import Any

import numpy as np
import streamlit as st
import torch

from attention.lessons import scaling
from server.warmup import lazy

from .state import url_before_figure

alt = lazy("altair")  # imported at first use: the first page draws no Vega chart (server/warmup.py)
pd = lazy("pandas")


MIN_PLOT_HEIGHT = 100  # px: a plot lower than this reads as a flat strip (issue 32)
VEGA_LOADED = "al:vega-loaded"  # session: a Vega chart has been drawn in this tab (its scripts are loaded)
PRELOAD_KEY = "al-vega-preload"


def preload() -> Any:
    """At a page's top, for a chart that comes after seconds of computing: an empty Vega-Lite chart, hidden, on the
    session's first run that draws one, so the browser fetches and compiles Vega's scripts (Streamlit loads them
    lazily, on a page's first Vega element: 0.5 s and more in a fresh tab) while the server computes. Returns the slot
    it is in: the page empties it before its first chart (benchmarks/bench_atlas_first_visit.py measures it)."""
    slot = st.empty()
    if not st.session_state.get(VEGA_LOADED):
        with slot.container(key=PRELOAD_KEY):
            st.html(f"<style>.st-key-{PRELOAD_KEY} {{ display: none; }}</style>")
            st.vega_lite_chart({"mark": "point", "data": {"values": []}}, width="stretch")
    return slot


def chart(
    frame: pd.DataFrame, spec: dict, *, height: int, key: str, container: Any = None, table: Any = None, **kw: Any
) -> Any:
    """Every chart of the app goes through here: st.vega_lite_chart, with the URL brought up to date first.

    height: the plot's height in px, the data rectangle inside the axes (at least MIN_PLOT_HEIGHT). The plot is as
    wide as its column and the element as tall as what Vega draws: the plot, its title, axes and legend. Streamlit's
    default sizing (autosize "fit") gave the element's height to all of them, so a chart whose legend or axis labels
    grew (a narrow column, more heads) drew its plot a few px tall, or none; a spec's own height was the whole
    chart's, not the plot's, in the same way.

    Vega's SVG renderer points each colour legend's gradient at `url(<page address>#gradient_n)`. If the
    address changes after a chart is drawn (the URL is rewritten at the end of a run), Chromium treats the
    reference as another document's and the legend's colour bar vanishes. So the URL is written before the
    run's first chart (and again after a parameter changes mid-run), and the address each chart is drawn
    under is the one it keeps.

    Under the chart, a closed "Table" with the same numbers (`data_table`): `frame`, or `table` where the frame's
    columns are not what a reader should see (indices, flags).
    """
    url_before_figure()
    st.session_state[VEGA_LOADED] = True  # this tab has Vega's scripts from now on: no `preload` needed
    name = chart_title(spec)
    spec = {**spec, "height": max(int(height), MIN_PLOT_HEIGHT), "autosize": {"type": "fit-x", "contains": "padding"},
            # a screen reader meets the chart by its name and finds its numbers in the table under it
            "description": f"{name}: chart. Its numbers are in the table below it."}  # fmt: skip
    spec = described(spec, name)
    parent = container or st
    event = parent.vega_lite_chart(frame, spec, width="stretch", height="content", key=key, **kw)
    if frame is not None:
        parent.html(data_table(frame if table is None else table, name))
    return event


def described(spec: dict, name: str) -> dict:
    """The spec with a description on every mark that has none (a copy; the cached spec is left as it was): Vega
    draws each mark's group as an SVG image named by its description, and a mark Vega-Lite cannot describe itself
    (a rule at a datum) was an image without a text alternative (WCAG 1.1.1; axe's svg-img-alt)."""
    out = dict(spec)
    mark = out.get("mark")
    if isinstance(mark, str):
        mark = {"type": mark}
    if isinstance(mark, dict) and "description" not in mark:
        out["mark"] = {**mark, "description": f"{name}: {mark.get('type', 'mark')} marks"}
    for part in ("layer", "concat", "hconcat", "vconcat"):
        if isinstance(out.get(part), list):
            out[part] = [described(s, name) for s in out[part]]
    return out


def chart_title(spec: dict) -> str:
    """A spec's title as text ('chart' when it has none)."""
    title = spec.get("title")
    if isinstance(title, dict):
        title = title.get("text")
    if isinstance(title, list):
        title = " ".join(map(str, title))
    return str(title) if title else "chart"


TABLE_ROWS = 200  # a chart's table shows its first rows (its numbers are also in the page's CSV downloads)


def _cell(value: Any) -> str:
    if isinstance(value, (float, np.floating)):
        return "" if np.isnan(value) else f"{float(value):.4g}".replace("-", "−")
    return html.escape(str(value))


def data_table(frame: pd.DataFrame, title: str) -> str:
    """The numbers of a chart as an HTML table in a closed <details> (WCAG 1.1.1: a text alternative of the same
    numbers): its first column's values head the rows, the column names head the columns, so a screen reader reads
    a row with its names. Everything is escaped: labels are the user's text."""
    head = "".join(f'<th scope="col">{html.escape(str(c))}</th>' for c in frame.columns)
    rows = []
    for record in frame.head(TABLE_ROWS).itertuples(index=False):
        first, *rest = record
        rows.append(
            f'<tr><th scope="row">{_cell(first)}</th>' + "".join(f"<td>{_cell(v)}</td>" for v in rest) + "</tr>"
        )
    more = (f"<p>The first {TABLE_ROWS} of {len(frame)} rows.</p>" if len(frame) > TABLE_ROWS else "")  # fmt: skip
    name = html.escape(title)
    return (f'<details class="al-data-table"><summary>Table: {name}</summary>{more}<table><caption>{name}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></details>")  # fmt: skip


def chart_row(n: int, *, key: str, min_width: int = 320, container: Any = None) -> list[Any]:
    """n containers side by side for charts, each at least min_width px wide: where the page is too narrow for all
    of them in one row (a projector's 1024 px with the sidebar open), the last ones wrap onto the next row, so every
    plot keeps a readable width instead of being squeezed (st.columns never wrap above 640 px)."""
    parent = container or st
    parent.html(f"<style>.st-key-al-row-{key} > * {{ flex: 1 1 {min_width}px; min-width: {min_width}px; }}</style>")
    row = parent.container(horizontal=True, gap="medium", key=f"al-row-{key}")
    return [row.container(key=f"al-row-{key}-{i}") for i in range(n)]


SWEEP_SERIES = ("unscaled", "scaled ÷ √d_k")  # the legend's names of scaling.VARIANTS, in its order


def sweep_frame(sweep: scaling.ScalingSweep, metric: str) -> pd.DataFrame:
    """One metric of a sweep in long form for `band_chart`: d_k, series, mean, lo, hi (10th/90th percentile)."""
    parts = []
    for variant in scaling.VARIANTS:
        mean, lo, hi = sweep.band(metric, variant)
        name = SWEEP_SERIES[scaling.VARIANTS.index(variant)]
        parts.append(pd.DataFrame({"d_k": sweep.d_ks.numpy(), "series": name, "mean": mean.numpy(),
                                   "lo": lo.numpy(), "hi": hi.numpy()}))  # fmt: skip
    return pd.concat(parts, ignore_index=True)


@functools.lru_cache(maxsize=32)
def _band_spec(title: str, y_title: str, height: int) -> dict:
    """Vega-Lite spec of mean lines with a band each over a log x axis, and a rule at x = param `current`."""
    empty = pd.DataFrame({"d_k": [1], "series": ["a"], "mean": [0.0], "lo": [0.0], "hi": [0.0]})
    x = alt.X("d_k:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(title="d_k (log scale)", values=[
        1, 2, 4, 8, 16, 32, 64, 128, 256, 512]))  # fmt: skip
    colour = alt.Color(
        "series:N",
        # apart for every colour vision; the teal is mid-dark so that it reads on the light and the dark theme
        scale=alt.Scale(domain=list(SWEEP_SERIES), range=["#e66100", "#0a8494"]),
        # one entry a line: side by side, a third of a projector's 1024 px cut "scaled ÷ √d_k" to "s"
        # opaque symbols: the band's 25% opacity made them dark blots on the dark theme
        legend=alt.Legend(title=None, orient="bottom", direction="vertical", labelLimit=0, symbolOpacity=1,
                          symbolType="circle", symbolSize=120),
    )  # fmt: skip
    base = alt.Chart(empty).encode(x=x, color=colour)
    band = base.mark_area(opacity=0.25).encode(y=alt.Y("lo:Q", title=y_title), y2="hi:Q")
    tooltip = [
        alt.Tooltip("series:N"),
        alt.Tooltip("d_k:Q"),
        alt.Tooltip("mean:Q", format=".3f"),
        alt.Tooltip("lo:Q", format=".3f", title="10th percentile"),
        alt.Tooltip("hi:Q", format=".3f", title="90th percentile"),
    ]
    line = base.mark_line(point=True).encode(
        y="mean:Q", strokeDash=alt.StrokeDash("series:N", legend=None), tooltip=tooltip
    )
    spec = alt.layer(band, line).properties(title=title, height=height).to_dict()
    spec.pop("datasets", None)
    spec.pop("data", None)
    for layer in spec["layer"]:
        layer.pop("data", None)
    spec["layer"].append(
        {
            "data": {"values": [{}]},
            "mark": {"type": "rule", "color": "#666", "strokeDash": [2, 2]},
            "encoding": {"x": {"datum": {"expr": "current"}, "type": "quantitative"}},
        }
    )
    return spec


def band_chart(
    frame: pd.DataFrame, *, title: str, y_title: str, current: float, key: str, container: Any = None, height: int = 180
) -> None:
    """Lines of `mean` over a log d_k axis, one per `series`, each in a band from `lo` to `hi`; a dashed
    rule marks d_k = current (the slider's value). The spec is built once; each run sends the frame."""
    spec = dict(_band_spec(title, y_title, height))
    spec["params"] = [{"name": "current", "value": float(current)}]
    chart(frame, spec, height=height, key=key, container=container)


def ink() -> str:
    """The theme's text colour for marks Vega does not theme (the bars' values): Streamlit themes the axes and
    legends only, and Vega's default black text is unreadable on the dark theme."""
    dark = getattr(st.context.theme, "type", None) == "dark"
    return "#fafafa" if dark else "#31333f"


@functools.lru_cache(maxsize=32)
def _bars_spec(title: str, height: int, colour: str = "#31333f") -> dict:
    """Vega-Lite spec of horizontal bars, one per row label (param rowLabels), blocked rows grey, values in the
    theme's ink (colour)."""
    empty = pd.DataFrame({"i": [0], "value": [0.0], "blocked": [False]})
    base = alt.Chart(empty).transform_calculate(
        row="rowLabels[datum.i]", shown="datum.blocked ? '0 (masked)' : format(datum.value, '.3f')"
    ).encode(
        y=alt.Y("i:O", title=None, axis=alt.Axis(labelExpr="rowLabels[datum.value]", labelLimit=90)),
        x=alt.X("value:Q", title="weight", scale=alt.Scale(domainMin=0)),
        tooltip=[alt.Tooltip("row:N", title="key"), alt.Tooltip("shown:N", title="weight")],
    )  # fmt: skip
    bar = base.mark_bar().encode(
        color=alt.condition("datum.blocked", alt.value("#c8c8c8"), alt.value("#0a8494"))
    )  # fmt: skip
    text = base.mark_text(align="left", dx=3, fontSize=10, color=colour).encode(text="shown:N")
    spec = alt.layer(bar, text).properties(title=title, height=height).to_dict()
    spec.pop("datasets", None)
    spec.pop("data", None)
    for layer in spec["layer"]:
        layer.pop("data", None)
    return spec


BAR_ROW_MIN = 14  # px: a row thinner than this has no room for its number, and only some rows keep their label


def bars(values: torch.Tensor, rows: Sequence[str], *, title: str, key: str, blocked: torch.Tensor | None = None,
         container: Any = None, height: int | None = None, top: float | None = None) -> None:  # fmt: skip
    """Horizontal bars of one number per row label, in order (e.g. one query's weights over the keys).

    blocked: a (rows,) bool tensor, True where the row may be attended; the others show grey and '0 (masked)'.
    height: the plot's; by default 24 px a row, as `heatmap` draws the same number of rows.
    top: the axis's end (bars drawn side by side share one scale: the same length is the same number); by default
    the largest value's.
    Rows thinner than BAR_ROW_MIN (a long sentence) drop their printed numbers (the tooltip and the table keep them),
    and the axis labels as many rows as it has room for, without overlap.
    """
    n = values.shape[0]
    height = height or int(min(max(24 * n, 100), 520))
    frame = pd.DataFrame(
        {
            "i": np.arange(n, dtype=np.int32),
            "value": values.detach().to(torch.float32).numpy(),
            "blocked": np.zeros(n, dtype=bool) if blocked is None else ~blocked.numpy(),
        }
    )
    spec = copy.deepcopy(_bars_spec(title, height, ink()))  # the cached spec is shared: changed on a copy
    spec["params"] = [{"name": "rowLabels", "value": list(rows)}]
    crowded = height / max(n, 1) < BAR_ROW_MIN
    if crowded:
        spec["layer"] = spec["layer"][:1]
    for layer in spec["layer"]:
        if crowded:
            layer["encoding"]["y"]["axis"]["labelOverlap"] = "greedy"
        if top is not None:
            layer["encoding"]["x"]["scale"] = {"domain": [0, float(top)]}
    shown = [("0 (masked)" if b else f"{float(v):.4f}") for v, b in zip(frame["value"], frame["blocked"], strict=True)]
    chart(
        frame,
        spec,
        height=height,
        key=key,
        container=container,
        table=pd.DataFrame({"key": list(rows), "weight": shown}),
    )


def sweep_table(sweep: scaling.ScalingSweep) -> pd.DataFrame:
    """A sweep's means over the seeds, one row per d_k, one column per metric and variant."""
    table = {"d_k": sweep.d_ks.numpy()}
    for metric, name in (("spread", "score std"), ("entropy", "entropy"), ("top", "largest weight")):
        for variant in scaling.VARIANTS:
            table[f"{name}, {variant}"] = sweep.band(metric, variant)[0].numpy()
    return pd.DataFrame(table)


# mid-dark so that they read on the light and the dark theme (as the bands above), in an order that keeps neighbours
# and the first four apart for each common colour vision deficiency (ΔE ≥ 24 simulated: tests/unit/ui/test_palettes.py)
PALETTE = ["#0a8494", "#e66100", "#5d3a9b", "#8b4513", "#d6336c", "#1f4e9c", "#b8860b", "#1a7f37", "#6c757d"]


@functools.lru_cache(maxsize=16)
def _lines_spec(title: str, x_title: str, y_title: str, height: int, log: bool) -> dict:
    """Vega-Lite spec of one line with points per `series`. log: both axes log2, the tooltip shows `shown`;
    else linear axes, y from 0 (a flat line looks flat, not like rounding noise blown up), whole-number x ticks."""
    empty = pd.DataFrame({"x": [1], "y": [1.0], "series": ["a"], "shown": [""]})
    if log:
        x = alt.X("x:Q", scale=alt.Scale(type="log", base=2), title=x_title)
        y = alt.Y("y:Q", scale=alt.Scale(type="log", base=2), title=y_title)
        shown = alt.Tooltip("shown:N", title=y_title)
    else:
        x = alt.X("x:Q", title=x_title, axis=alt.Axis(format="d", tickMinStep=1))
        y = alt.Y("y:Q", title=y_title, scale=alt.Scale(zero=True))
        shown = alt.Tooltip("y:Q", title=y_title, format=".4g")
    colour = alt.Color("series:N", scale=alt.Scale(range=PALETTE), sort=None,  # the order the page gives
                       legend=alt.Legend(title=None, orient="bottom", direction="vertical", labelLimit=0))  # fmt: skip
    tooltip = [alt.Tooltip("series:N"), alt.Tooltip("x:Q", title=x_title), shown]
    dash = alt.StrokeDash("series:N", sort=None, legend=None)  # lines apart by their dashes too, not by colour alone
    spec = alt.Chart(empty).mark_line(point=True).encode(x=x, y=y, color=colour, strokeDash=dash, tooltip=tooltip)
    spec = spec.properties(title=title, height=height).to_dict()
    spec.pop("datasets", None)
    spec.pop("data", None)
    return spec


def lines(frame: pd.DataFrame, *, title: str, x_title: str, y_title: str, key: str, container: Any = None,
          height: int = 200, log: bool = False) -> None:  # fmt: skip
    """Lines of y over x, one per `series` (columns x, y, series of `frame`): linear axes with y from 0, or both
    log-scaled (memory against context length) with `shown`, y as the tooltip writes it (e.g. '2.0 GiB')."""
    spec = dict(_lines_spec(title, x_title, y_title, height, log))
    chart(frame, spec, height=height, key=key, container=container)
