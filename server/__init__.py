"""What the whole server process shares, apart from what any page draws: every visitor's session runs in one
process (Community Cloud gives the whole app 690 MB), so these are process-wide, bounded, and started once.

    server/budget.py    one memory budget: every large run is admitted against it (and the process's cgroup
                        limit) before it starts; the caches that keep big things register an evictor
    server/warmup.py    heavy modules imported at first use, and warmed in a background thread
    server/training.py  Watch it learn's training pool: runs trained in worker processes or threads, queued, kept
                        for their visitors (server/sessions.py: who is still there; server/scrub.py: the timeline's
                        cache inside the budget; server/jobs.py: a run as the pages see it)
    server/poll/        the class poll's rooms, in this process or in Redis (ATTENTION_LAB_REDIS_URL) for replicas
    server/shared.py    values made once per key across the server and kept within a byte capacity (the real
                        models' runs, the head atlases)
    server/chat.py      the chat model's runs, generations and heads' writes, shared and held for their visitors
    server/model.py     the Real model's Readings and heads' Results, shared within a byte capacity
    server/media.py     the files the server serves: Streamlit's media store keeping a download a while longer,
                        heavy exports one at a time
    server/sending.py   what the server has drawn and not yet sent: each websocket's queue counted, so that a
                        page's drawing counts under the memory ceiling until the browser has taken it

`start()` starts the process's background work (heap trimming, the warm-up); dashboard.py calls it once the
packages are imported. Importing `server` (or `ui`) starts nothing, and imports only server/warmup.py: the other
modules (the budget imports torch) are imported where used, or at their first use as `server.<module>` (PEP 562),
so that `ui` can tell whether its names are loaded (`warmup.ui_loaded`) before torch is.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import importlib
import importlib.util
import logging
import os
import threading
from types import ModuleType

from . import warmup


def _return_freed_memory() -> None:
    """Have glibc serve every allocation of 1 MiB or more from its own mapping, handed back when freed.

    By default glibc raises that threshold to the size of the last large block freed (up to 32 MiB), after
    which blocks of that size (a large result's tensors) come from heaps that keep them once freed: the server
    grew by about a freed result per large computation (benchmarks/results/2026-11-27-design-figures.md).
    Elsewhere (macOS, musl) this does nothing.
    """
    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD; setting it ends glibc's adjusting
    except (OSError, AttributeError):
        pass


def _trim_heaps(every_s: float = 5.0, stop: threading.Event | None = None) -> None:
    """Hand the heaps' freed pages back to the system every few seconds, in a daemon thread.

    Blocks under 1 MiB (a model run is hundreds of small tensors) come from glibc's heaps, which keep the pages
    once freed, so what expired sessions and evicted cache entries freed stayed resident. malloc_trim(0) gives
    back every whole free page of every heap, in milliseconds at most (benchmarks/results/2026-11-27-design-figures.md).
    """

    stop = stop or threading.Event()  # set: the loop ends (the tests' own loops)

    def loop() -> None:
        while not stop.wait(every_s):
            from . import budget

            for chore in list(budget.CHORES):  # what caches let go of when unused for long (`budget.chore`)
                try:
                    chore()
                except Exception:  # noqa: BLE001 -- one cache's chore must not stop the trimming
                    logging.getLogger("server").exception("a housekeeping chore failed")
            budget.trim_heaps()

    threading.Thread(target=loop, name="malloc-trim", daemon=True).start()


def _log_to_stderr() -> None:
    """The server's own log lines (an admission refused, with its numbers: server/budget.py) on stderr beside
    Streamlit's, at $ATTENTION_LAB_LOG_LEVEL (INFO: every wait; DEBUG: every admission), unless the process has
    set up logging itself."""
    logger = logging.getLogger("server")
    if logger.handlers or logging.root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(os.environ.get("ATTENTION_LAB_LOG_LEVEL", "INFO").upper())


@functools.lru_cache(maxsize=1)  # once a process: the warm-up thread and the first script run may both call it
def start() -> None:
    """The process's background work, once: its log lines on stderr, large blocks handed back when freed, the heaps
    trimmed every few seconds, what the imports built frozen out of the garbage collector, and pandas/altair warmed
    after the first page (server/warmup.py)."""
    from . import sending

    _log_to_stderr()
    sending.install()  # a page's drawing counts under the memory ceiling until its messages are sent
    _return_freed_memory()
    _trim_heaps()
    # Streamlit runs gc.collect(2) after every script run (runner.postScriptGC). With torch, pandas and Altair
    # loaded that walks some hundreds of thousands of long-lived objects holding the GIL, once per rerun of every
    # session: most of the server's CPU under load (benchmarks/results/2026-11-27-design-figures.md). Freezing
    # what the imports built takes it out of every collection; what the runs allocate is still collected.
    gc.freeze()
    warmup.warm_after(threading.current_thread())


def __getattr__(name: str) -> ModuleType:
    """`server.budget` after a bare `import server`: the module, imported now."""
    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module("." + name, __name__)
