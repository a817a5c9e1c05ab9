"""Rendering helpers shared by every page; pages import `ui` and call what is listed here.

    ui/state.py      the parameters' registry, their values in the session, and the URL that shares them
    ui/settings.py   the settings the toy attention pages share (the Config's, the token followed, step mode, ...)
    ui/widgets.py    one widget per parameter, the sidebar's controls, presenter mode, the mask editor
    ui/results.py    the Config the parameters describe, computed once and shared (bounded caches), and the one way
                     a page stops when the server's memory budget refuses a run
    ui/markup.py     user text made inert, axis labels, one-line explanations
    ui/heatmaps.py   every matrix, drawn by our canvas component (assets/heatmap.js)
    ui/charts.py     the Vega-Lite charts: bands over d_k, bars of one row
    ui/walkthroughs.py  the walkthrough of one query with its numbers, and step mode
    ui/keys.py       a presenter's clicker and the elements that take no room (no torch: the course map's)
    ui/exports.py    downloads (CSV, JSON) and the code that reproduces a view
    ui/qr.py         a QR code for a link, made here (the poll's projector shows one)
    ui/views/        what one page draws and no other does, a module a page (ui/views/__init__.py lists them), with
                     the page's own settings;
                     `lesson_link`, the course's link that every page shows, is re-exported here

Layers: `attention` (the math; no Streamlit) <- `server` (what the whole process shares: the memory budget, the
warm-up, the training pool) <- `ui` (drawing; no attention math) <- `pages` (a lesson each: which controls, which
figures, which words). A page asks `attention` for every number it shows. Importing `ui` starts nothing: the
server's threads are `server.start()`'s, which dashboard.py calls.
"""

from __future__ import annotations

from server import warmup

from . import _frame as _frame  # first: see ui/_frame.py
from . import charts, exports, heatmaps, markup, results, settings, state, walkthroughs, widgets
from .charts import band_chart, bars, chart, chart_row, lines, sweep_frame, sweep_table
from .exports import MATRICES, code, command_line, downloads, export_file, json_size, matrix_of
from .heatmaps import decode_heatmap, heatmap, heatmap_payload, largest_abs
from .markup import dim_labels, explain, labels, plain
from .results import (
    check_length,
    compute,
    config_from_state,
    config_or_stop,
    kept_or_stop,
    or_stop,
    result_bytes,
    result_or_stop,
    run_or_stop,
    scaling_sweep,
    stop,
    tokens_or_stop,
)
from .settings import B_SIDE, STAGES
from .state import (
    MAX_CHARS,
    PARAMS,
    URL_MAX,
    allowed,
    default,
    ensure_frame,
    get,
    init_state,
    page_defaults,
    put,
    sync_url,
)
from .views.course import lesson_link
from .walkthroughs import SAY, clicker, inputs_note, stepper, walkthrough
from .widgets import (
    controls,
    copy_a_to_b,
    custom_mask,
    custom_mask_editor,
    head_picker,
    in_use,
    pick,
    presenter_toggle,
    radio,
    segmented,
    select,
    set_custom_mask,
    show_url_warnings,
    slider,
    store_custom_mask,
    text,
    toggle,
)

__all__ = [
    "charts",
    "lesson_link",
    "exports",
    "heatmaps",
    "markup",
    "results",
    "settings",
    "state",
    "walkthroughs",
    "widgets",
    "band_chart",
    "bars",
    "chart",
    "chart_row",
    "lines",
    "sweep_frame",
    "sweep_table",
    "MATRICES",
    "code",
    "command_line",
    "downloads",
    "export_file",
    "json_size",
    "matrix_of",
    "decode_heatmap",
    "heatmap",
    "heatmap_payload",
    "largest_abs",
    "SAY",
    "clicker",
    "inputs_note",
    "stepper",
    "walkthrough",
    "dim_labels",
    "explain",
    "labels",
    "plain",
    "check_length",
    "compute",
    "config_from_state",
    "config_or_stop",
    "kept_or_stop",
    "or_stop",
    "result_bytes",
    "result_or_stop",
    "run_or_stop",
    "scaling_sweep",
    "stop",
    "tokens_or_stop",
    "B_SIDE",
    "MAX_CHARS",
    "PARAMS",
    "STAGES",
    "URL_MAX",
    "allowed",
    "default",
    "ensure_frame",
    "finish",
    "get",
    "init_state",
    "page_defaults",
    "put",
    "sync_url",
    "controls",
    "copy_a_to_b",
    "custom_mask",
    "custom_mask_editor",
    "head_picker",
    "in_use",
    "pick",
    "presenter_toggle",
    "radio",
    "segmented",
    "select",
    "set_custom_mask",
    "show_url_warnings",
    "slider",
    "store_custom_mask",
    "text",
    "toggle",
]


def finish(*, figures: bool = True) -> None:
    """Call last on every page: the state written back into the URL (`ui.state.finish`), then one button that
    downloads all the page's figures (figures=False: a page that draws none, the class poll's)."""
    state.finish()
    if figures:
        heatmaps.figures_archive()
    warmup.page_drawn.set()
