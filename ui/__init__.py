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

Importing `ui` imports nothing heavy either: the names below are imported at their first use (PEP 562), all at once
by `load()`, with every page's declarations. Until then a module that needs no torch (`ui.keys`, `ui.state`, the
course's outline) imports without it, so that a fresh server draws its first screen while the warm-up imports torch.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from server import warmup

from . import _frame as _frame  # first: see ui/_frame.py

# what `ui.<name>` is, by the module that defines it: imported at the name's first use (PEP 562), after `load()`
_MODULES = ("charts", "exports", "heatmaps", "markup", "results", "settings", "state", "walkthroughs", "widgets")
_BY_MODULE = {  # fmt: skip
    ".views.course": "lesson_link",
    ".charts": "band_chart bars chart chart_row lines sweep_frame sweep_table",
    ".exports": "MATRICES code command_line downloads export_file json_size matrix_of",
    ".heatmaps": "decode_heatmap heatmap heatmap_payload largest_abs",
    ".walkthroughs": "SAY clicker inputs_note stepper walkthrough",
    ".markup": "dim_labels explain labels plain",
    ".results": "check_length compute config_from_state config_or_stop kept_or_stop or_stop result_bytes "
    "result_or_stop run_or_stop scaling_sweep stop tokens_or_stop",
    ".settings": "B_SIDE STAGES",
    ".state": "MAX_CHARS PARAMS URL_MAX allowed default ensure_frame get init_state page_defaults put sync_url",
    ".widgets": "controls copy_a_to_b custom_mask custom_mask_editor head_picker in_use pick presenter_toggle radio "
    "segmented select set_custom_mask show_url_warnings slider store_custom_mask text toggle",
}
_EXPORTS = {name: module for module, names in _BY_MODULE.items() for name in names.split()}


def load() -> None:
    """Import what the names need (torch, the package, the server's shared state) and every page's declarations, so
    that the parameters' registry is whole before a session reads its link. The first use of any name calls it; the
    server's warm-up calls it at start (dashboard.py). Until it has returned, `import ui` has imported no torch: the
    course map's first screen draws meanwhile (ui/views/course/outline.py)."""
    if warmup.ui_loaded.is_set():
        return
    for module in _MODULES:
        importlib.import_module("." + module, __name__)
    # after ui/settings.py's: the registry in the order `import ui` always gave it
    importlib.import_module(".views", __name__).declare()
    warmup.ui_loaded.set()


def loaded() -> bool:
    """Whether `load()` has finished: the names can be used without waiting for torch's import."""
    return warmup.ui_loaded.is_set()


def __getattr__(name: str) -> Any:
    if name in _EXPORTS or name in _MODULES:
        load()
        module = importlib.import_module(_EXPORTS.get(name, "." + name), __name__)
        return module if name in _MODULES else getattr(module, name)
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module("." + name, __name__)  # another submodule (`ui.views`), as `import ui` gave it
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


def finish(*, figures: bool = True) -> None:
    """Call last on every page: the state written back into the URL (`ui.state.finish`), then one button that
    downloads all the page's figures (figures=False: a page that draws none, the class poll's)."""
    from . import heatmaps, state

    state.finish()
    if figures:
        heatmaps.figures_archive()
    warmup.page_drawn.set()


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
    "load",
    "loaded",
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


if TYPE_CHECKING:  # what the names are, for readers and tools that follow imports (a test keeps _BY_MODULE to it)
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
