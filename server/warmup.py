"""Heavy modules imported when first used instead of at `import ui`, and warmed once the first page is drawn.

The first visitor of a fresh server waits for `import ui`: the course map draws with Streamlit alone, so pandas
(tables) and altair (other pages' charts) are imported on first use (`pd = lazy("pandas")`: the module is imported
at its first attribute read). Then `warm_after` imports them in a background thread once the first page is drawn,
or at once when nobody's page is waiting (a server started before anyone opens it), so the next page does not wait
for them either (it does not freeze what they built: see the comment in `warm_after`); then it runs what was
registered with `after_warm` (the installed models' SHA-256, checked once: server/atlas.py).
benchmarks/bench_startup.py measures the effect (time from `streamlit run` to the course map drawn),
benchmarks/bench_atlas_first_visit.py the Head atlas's first visit.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

# Imported by the pages after the first chart, or by other pages: tables (pandas, and pyarrow under st.dataframe)
# and the Vega-Lite charts (altair); and what a session's first run imports: st.set_page_config's emoji check
# (streamlit.emojis compiles a regex of every emoji when imported: 0.1-0.25 s of a fresh server's first visit).
WARM = ("pandas", "pyarrow", "altair", "streamlit.emojis")


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
# Set by ui.load() once `ui`'s names (torch, the package, every page's declarations) are imported: until then a
# session's first run on the bare address draws the course map without them (dashboard.first_screen).
ui_loaded = threading.Event()
SCRIPT_THREAD = "ScriptRunner.scriptThread"  # Streamlit's name for the thread of a session's script run


def _vega_lite_schema() -> None:
    """altair checks a chart against Vega-Lite's JSON schema, read and compiled at its first `to_dict` (25 ms
    quiet, 140 ms loaded): the first page with a Vega chart no longer waits for it."""
    import altair as alt

    alt.Chart(alt.Data(values=[{"x": 0.0}])).mark_point().encode(x="x:Q").to_dict()


AFTER: list[Callable[[], None]] = [_vega_lite_schema]  # run after WARM, in the same thread (`after_warm`)


def after_warm(chore: Callable[[], None]) -> Callable[[], None]:
    """Register `chore` to run once WARM is imported (in the warm-up thread, so no visitor's run waits for it); an
    error is logged, not raised. Returns `chore` (usable as a decorator)."""
    AFTER.append(chore)
    return chore


def page_waiting() -> bool:
    """Whether a session's script run is in progress (a visitor waits for a page)."""
    return any(t.name == SCRIPT_THREAD for t in threading.enumerate())


def wait_for_first_page(page_wait_s: float = 30.0, idle_s: float = 0.5, poll_s: float = 0.05) -> str:
    """Until the first page is drawn ("drawn"), or no script run has been in progress for `idle_s` in a row (nobody
    is waiting: "idle"), or `page_wait_s` has passed ("timeout")."""
    deadline = time.monotonic() + page_wait_s
    idle_since: float | None = None
    while not page_drawn.wait(poll_s):
        now = time.monotonic()
        if now >= deadline:
            return "timeout"
        if page_waiting():
            idle_since = None
        elif idle_since is None:
            idle_since = now
        elif now - idle_since >= idle_s:
            return "idle"
    return "drawn"


def app_navigation() -> None:
    """From now on every session's run goes through dashboard.py's `st.navigation`, a deep link's first included.

    With a pages/ folder beside dashboard.py, Streamlit starts in its older folder-based navigation until some
    session's run calls `st.navigation` (which sets this flag): on a fresh server a deep link's first visit (the Head
    atlas from a share link) ran its page file alone, whose `ui.state.ensure_frame` then asked for a rerun through
    dashboard.py: a run and a round trip more, and the page's title drawn without the app's navigation while the
    run waited for torch. Set when the server starts (dashboard.py's start-up hook, before any session: `PagesManager`
    sets the flag only where it is unset), and again by `warm_after` for a server started without that hook."""
    from streamlit.runtime.pages_manager import PagesManager

    PagesManager.uses_pages_directory = False  # what st.navigation itself sets


def warm_after(thread: threading.Thread, page_wait_s: float = 30.0, idle_s: float = 0.5) -> None:
    """Import WARM, then run AFTER, in a daemon thread once `thread` (the script run that imported ui, or the
    server's start-up warm-up: dashboard.warm_up) has finished and a first page has been drawn, or nobody's page has
    been waiting for `idle_s` (a server nobody has opened yet: its first visitor, whatever the page, finds them
    ready), or `page_wait_s` has passed; so that the first visitor's run never shares the GIL with these imports;
    once a process."""
    if _started.is_set() or thread is threading.main_thread():  # not a Streamlit script run (a test, a shell)
        return
    _started.set()
    app_navigation()

    def run() -> None:
        thread.join()
        wait_for_first_page(page_wait_s, idle_s)
        warm()
        for chore in list(AFTER):
            try:
                chore()
            except Exception:  # noqa: BLE001 -- a check that fails here is made again, and said, where it is needed
                logging.getLogger("server").debug("a warm-up chore failed", exc_info=True)
        # No gc.freeze() here, unlike ui/__init__.py's at import time: by now other sessions' scripts are running,
        # and a freeze would make their namespaces (cycles through the pages' functions) uncollectable, with the
        # Results in them: memory that never comes back, and bytes of the server's budget (server/budget.py) held for
        # ever (benchmarks/soak.py showed it: every later large run refused).

    threading.Thread(target=run, name="ui-warm-imports", daemon=True).start()
