"""Heavy modules imported when first used instead of at `import ui`, and warmed once the first page is drawn.

The first visitor of a fresh server waits for `import ui`: the first page draws its heatmaps with torch alone,
so pandas (tables) and altair (other pages' charts) are imported on first use (`pd = lazy("pandas")`: the
module is imported at its first attribute read). Then `warm_after` imports them in a background thread once the
script run that imported `ui` has finished, so the next page does not wait for them either (it does not freeze what
they built: see the comment in `warm_after`).
benchmarks/bench_startup.py measures the effect (time from `streamlit run` to the first chart drawn).
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

# Imported by the pages after the first chart, or by other pages: tables (pandas, and pyarrow under st.dataframe)
# and the Vega-Lite charts (altair).
WARM = ("pandas", "pyarrow", "altair")


class LazyModule:
    """Stands for a module that is imported at the first attribute read (thread-safe: Python's import lock)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy(name: str) -> Any:
    return LazyModule(name)


def warm(names: tuple[str, ...] = WARM) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional module: the page that needs it says so
            pass


_started = threading.Event()
# Set by ui.finish() at the end of every page's run: the first page of the first visitor has been drawn.
page_drawn = threading.Event()


def warm_after(thread: threading.Thread, page_wait_s: float = 30.0) -> None:
    """Import WARM in a daemon thread once `thread` (the script run that imported ui, or the server's start-up
    warm-up: dashboard.warm_up) has finished and a first page has been drawn (or `page_wait_s` has passed), so
    that the first visitor's run never shares the GIL with these imports; once a process."""
    if _started.is_set() or thread is threading.main_thread():  # not a Streamlit script run (a test, a shell)
        return
    _started.set()

    def run() -> None:
        thread.join()
        page_drawn.wait(page_wait_s)
        warm()
        # No gc.freeze() here, unlike ui/__init__.py's at import time: by now other sessions' scripts are running,
        # and a freeze would make their namespaces (cycles through the pages' functions) uncollectable, with the
        # Results in them: memory that never comes back, and bytes of the server's budget (server/budget.py) held for
        # ever (benchmarks/soak.py showed it: every later large run refused).

    threading.Thread(target=run, name="ui-warm-imports", daemon=True).start()
