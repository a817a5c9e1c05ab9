"""Rendering helpers shared by every page; pages import `ui` and call what is listed here.

    ui/state.py      the parameters, their values in the session, and the URL that shares them
    ui/widgets.py    one widget per parameter, the sidebar's controls, presenter mode, the mask editor
    ui/results.py    the Config the parameters describe, computed once and shared (bounded caches)
    ui/markup.py     user text made inert, axis labels, one-line explanations
    ui/heatmaps.py   every matrix, drawn by our canvas component (assets/heatmap.js)
    ui/charts.py     the Vega-Lite charts: bands over d_k, bars of one row
    ui/lessons.py    the walkthrough of one query with its numbers, and step mode
    ui/exports.py    downloads (CSV, JSON) and the code that reproduces a view

Layers: `attention` (the math; no Streamlit) <- `ui` (drawing; no attention math) <- `pages` (a lesson each:
which controls, which figures, which words). A page asks `attention` for every number it shows.
"""

from __future__ import annotations

import ctypes
import gc
import threading
import time

from . import _frame as _frame  # first: see ui/_frame.py
from . import budget, charts, exports, heatmaps, lazy, lessons, markup, results, state, widgets
from .charts import band_chart, bars, chart, chart_row, lines, sweep_frame, sweep_table
from .exports import MATRICES, code, command_line, downloads, export_file, json_size, matrix_of
from .heatmaps import decode_heatmap, heatmap, heatmap_payload, largest_abs
from .lazy import warm_after
from .lessons import SAY, clicker, inputs_note, stepper, walkthrough
from .markup import dim_labels, explain, labels, plain
from .results import (
    check_length,
    compute,
    config_from_state,
    config_or_stop,
    result_bytes,
    result_or_stop,
    scaling_sweep,
    tokens_or_stop,
)
from .state import (
    B_SIDE,
    MAX_CHARS,
    PARAMS,
    STAGES,
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
    "budget",
    "charts",
    "exports",
    "heatmaps",
    "lessons",
    "markup",
    "results",
    "state",
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
    "result_bytes",
    "result_or_stop",
    "scaling_sweep",
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


def _return_freed_memory() -> None:
    """Have glibc serve every allocation of 1 MiB or more from its own mapping, handed back when freed.

    By default glibc raises that threshold to the size of the last large block freed (up to 32 MiB), after
    which blocks of 1 to 32 MiB (a 512-token result is tensors of 1 to 17 MiB) come from heaps that keep them
    once freed: the server grew by about a freed result per large computation, and its peak in
    benchmarks/soak.py went from 544 MB to 729 MB. Elsewhere (macOS, musl) this does nothing.
    """
    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD; setting it ends glibc's adjusting
    except (OSError, AttributeError):
        pass


def finish() -> None:
    """Call last on every page: the state written back into the URL (`ui.state.finish`), then one button that
    downloads all the page's figures."""
    state.finish()
    heatmaps.figures_archive()
    lazy.page_drawn.set()


_return_freed_memory()


def _trim_heaps(every_s: float = 5.0) -> None:
    """Hand the heaps' freed pages back to the system every few seconds, in a daemon thread.

    Blocks under 1 MiB (a 180-token model run is hundreds of 0.3 MB tensors) come from glibc's heaps, which keep
    the pages once freed: after ten visitors with sentences of their own, about 40 MB freed by expired sessions
    and evicted cache entries stayed resident. malloc_trim(0) gives back every whole free page of every heap (a
    few ms at most, usually 0.02 ms): benchmarks/mem_real_model.py peaked at 658 MB instead of 683-694 MB.
    """

    def loop() -> None:
        while True:
            time.sleep(every_s)
            budget.trim_heaps()

    threading.Thread(target=loop, name="malloc-trim", daemon=True).start()


_trim_heaps()
# Streamlit runs gc.collect(2) after every script run (runner.postScriptGC). With torch, pandas and Altair
# loaded that walks some 250,000 long-lived objects, ~150 ms holding the GIL, once per rerun of every session:
# most of the server's CPU under load. Freezing what the imports built takes it out of every collection;
# what the runs allocate is still collected.
gc.freeze()
# pandas, pyarrow and altair are imported at first use (ui/lazy.py), not above: once the script run that imported
# ui is over, a background thread imports them (and freezes what they built).
warm_after(threading.current_thread())
