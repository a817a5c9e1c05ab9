"""One memory budget for the whole server process: every large computation is admitted against it before it starts.

What belongs here: the server-wide byte budget (`SERVER`), admitting a large Result against it (`compute`, which
`ui.results.compute` calls for every result over the small cache's bound), and holding a value's bytes while it
lives (`admitted`). Pages stop on a refusal through `ui.results` (`or_stop`, `kept_or_stop`, `run_or_stop`): this
module draws only the line a waiting run shows. Sizes come from `attention.basics.sizes`, from the Config alone,
before anything is computed.

Every visitor shares one process (Community Cloud gives the whole app 690 MB), so what the visitors' runs hold
at once is bounded here, not per session. A large Result holds its bytes of the budget from the moment it is
admitted until the Result itself is gone (a `weakref.finalize`): while a page draws it, while the cache keeps
it, while another session still holds one that the cache let go of. One Result per config is alive at a time: a
session asking for a config another session's run still holds gets that one.

Admission (`Admission`) is fair and sized: runs of one size are served in the order they asked, and small runs (a
chat model's step, a Real-model reading, up to `SMALL_MB`) before large ones, within a bounded share (`PASS_SHARE_MB`
of small runs computing past a large one at once), so that neither starves. A run that waits sees a line, updated
every second, that names what holds it with the numbers (the process's memory, its ceiling under the limit, what
the run needs; or the budget) and how long it may still wait; after `WAIT_S` it is refused in the same words, and
the refusal is logged (`log`) with those numbers.

The budget (`BUDGET_MB`, or $ATTENTION_LAB_BUDGET_MB) is what the measurements left (README, "Memory"): the
server idles at 250-550 MB, and every page's heaviest link computes at most one Result of up to ~175 MB at a
time, so one such run is admitted at once and a second waits for it.

Under a memory limit (the process's cgroup: Community Cloud's 690 MB, a container's, deploy/replica.sh's) a run is
also admitted only while the process's real anonymous memory, plus what the runs still computing may allocate yet,
plus the run stays under the limit less a reserve (`ceiling`): what the budget does not count (the models, the chat
model's and the training's runs, Streamlit's own messages, freed memory not yet handed back) is counted that way,
as the kernel counts it. A run that would pass the ceiling waits as for the budget, after every cache that
registered an evictor (`evictor`) has let go of what only it holds and the heaps have been trimmed; the pages that
keep big things (results, the real models' runs, the training runs) register theirs.

The parts: admission.py (`Admission`, the fair and sized semaphore of bytes, and `Shortage`, why a run waits),
memory.py (the cgroup's limit, the process's anonymous memory, the ceiling, trimming the heaps); this module holds
the server's one `SERVER`, its evictors, the words a page shows and the log, and the ways a run is admitted.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import streamlit as st

from attention import Config, Result
from attention.basics import sizes

# The parts, re-exported: callers write budget.NAME
from . import sending
from .admission import PASS_SHARE_MB as PASS_SHARE_MB
from .admission import SMALL_MB as SMALL_MB
from .admission import Admission as Admission
from .admission import Shortage as Shortage
from .admission import Ticket as Ticket
from .admission import Waiter as Waiter
from .memory import MB as MB
from .memory import RESERVE_FRACTION as RESERVE_FRACTION
from .memory import anonymous_bytes as anonymous_bytes
from .memory import ceiling_for as ceiling_for
from .memory import in_mb
from .memory import memory_limit as memory_limit
from .memory import trim_heaps as trim_heaps

BUDGET_MB = 200  # the whole server's large results, computed and held, together (README, "Memory")
# What a page may allocate while it draws a finished run, beyond the run (payloads, tables, Streamlit's messages),
# counted under the ceiling until the browser has its messages: up to the bytes the run keeps, at most this many MB
# ($ATTENTION_LAB_DRAW_MB). The heaviest links drew 15-46 MB each (benchmarks/results/2026-11-28-chat-crowd.md).
DRAW_MB = 50
DRAW_HOLD_S = 60.0  # a drawing still counted after this long stops counting (a page run alone, as AppTest runs one)
WAIT_S = 120.0  # a run not admitted after this long is told to try again (the spinner says why it waits)

T = TypeVar("T")
log = logging.getLogger(__name__)  # a line per refusal (WARNING) and per admission that waited (INFO; DEBUG: every one)


_LIMIT = memory_limit()
SERVER = Admission(
    int(float(os.environ.get("ATTENTION_LAB_BUDGET_MB", BUDGET_MB)) * MB),
    ceiling_for(_LIMIT, os.environ.get("ATTENTION_LAB_RESERVE_MB")),
    limit=_LIMIT,
    pass_share=int(float(os.environ.get("ATTENTION_LAB_PASS_SHARE_MB", PASS_SHARE_MB)) * MB),
)
DRAW = int(float(os.environ.get("ATTENTION_LAB_DRAW_MB", DRAW_MB)) * MB)


def evictor(fn: Callable[[], None]) -> Callable[[], None]:
    """Register fn (let go of what a server-wide cache keeps and no session is drawing) with the server's budget, to
    be called when a run does not fit; once per function (a decorator, or called at a module's import)."""
    if fn not in SERVER.evictors:
        SERVER.evictors.append(fn)
    return fn


def chore(fn: Callable[[], None]) -> Callable[[], None]:
    """Register fn to run every few seconds in the server's housekeeping thread (server/__init__.py, with the heap
    trim): let go of what a cache has kept unused for long; once per function."""
    if fn not in CHORES:
        CHORES.append(fn)
    return fn


CHORES: list[Callable[[], None]] = []


# Every large Result alive in the process, by config: a second session asking for one gets the same object.
_LIVE: weakref.WeakValueDictionary[str, Result] = weakref.WeakValueDictionary()
_LIVE_LOCK = threading.Lock()


class Refused(ValueError):
    """A run the budget cannot admit: too large for it, or not admitted within WAIT_S. Its message says which (a
    ValueError, so that the pages' `*_or_stop` helpers explain it and stop the page)."""


def _script_run() -> object | None:
    """The script run this thread is (its session's id: a session runs one at a time), or None outside one."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return None if ctx is None else ctx.session_id


def _in_script() -> bool:
    return _script_run() is not None


def drawing(nbytes: int, budget: Admission | None = None) -> None:
    """This script run draws a run that keeps nbytes: up to DRAW of them count under the ceiling until it ends
    (`drawn`), as what its page allocates while drawing (nothing outside a script run: a download, a test)."""
    key = _script_run()
    if key is not None and nbytes > 0:
        (budget or SERVER).draw(key, min(nbytes, DRAW))
        log.debug("drawing: %.1f MB counted while a page draws", min(nbytes, DRAW) / MB)


def drawn(budget: Admission | None = None) -> None:
    """This script run has drawn its page (dashboard.py, when the page's run ends, however it ends): its drawing
    counts on until the session's messages are sent (server/sending.py: Streamlit holds them until the browser
    takes them), then stops."""
    key = _script_run()
    if key is None:
        return
    budget = budget or SERVER
    token = budget.hand_over(key)
    if token is not None:
        sending.when_sent(key, lambda: _let_go(budget, token))


def _let_go(budget: Admission, key: object) -> None:
    if n := budget.drawn(key):
        log.debug("drawn: %.1f MB no longer counted", n / MB)


@chore
def _forget_stale_drawings() -> None:
    """A drawing counted longer than DRAW_HOLD_S stops counting (a page run directly, as a test does, never says
    it is done)."""
    SERVER.drawn_before(SERVER.clock() - DRAW_HOLD_S)


SMALLER = "or a smaller size (fewer tokens, heads or a smaller d_k/d_v)"


def waiting_words(waited: float, wait_s: float, shortage: Shortage) -> str:
    """The line a waiting visitor reads, updated while the run waits: for what, why (with the numbers) and how long
    it may still take."""
    why = shortage.reason() or "the memory it needs is coming free"
    return (
        f"Waiting for the server's memory ({waited:.0f} s so far, at most {max(wait_s - waited, 0):.0f} s more): {why}."
    )


def refusal_words(shortage: Shortage, wait_s: float, advice: str = SMALLER) -> str:
    """Why a run was refused after waiting, in plain words with the numbers that decided it."""
    why = shortage.reason() or "the memory it needs did not come free in time"
    return f"{why}. It waited {wait_s:.0f} s: try again in a moment, {advice}"


def _log_refusal(shortage: Shortage, waited: float) -> None:
    s = shortage
    log.warning(
        "admission: refused %.1f MB after %.1f s: the process holds %s MB, ceiling %s MB, limit %s MB, budget %.1f "
        "of %.1f MB, %d ahead: %s",
        s.need / MB, waited, "-" if s.memory is None else f"{s.memory / MB:.1f}",
        "-" if s.ceiling is None else f"{s.ceiling / MB:.1f}", "-" if s.limit is None else f"{s.limit / MB:.1f}",
        s.used / MB, s.capacity / MB, s.ahead, s.reason(),
    )  # fmt: skip


def _log_admitted(budget: Admission, n: int, waited: float, ticket: Ticket) -> None:
    level = logging.INFO if waited > 0 else logging.DEBUG
    if log.isEnabledFor(level):
        size = "small" if n <= budget.small else "large"
        ahead = ", ahead of a larger run" if ticket.passed else ""
        log.log(level, "admission: admitted %.1f MB (%s) after %.2f s%s", n / MB, size, waited, ahead)


def admit(nbytes: int, *, give_up: Callable[[], bool] | None = None, budget: Admission | None = None,
          wait_s: float | None = None, advice: str = SMALLER) -> Ticket | None:  # fmt: skip
    """Take nbytes of the server's admission, waiting while the memory it needs is taken (in a page's run, with a
    line that says why, with the numbers, and how long at most, updated every second); every registered cache lets
    go first when it does not fit (`evictor`). The Ticket once taken (given back with `Admission.finish`); None when
    give_up() became true while waiting. Refused, its words ending with `advice`, when it cannot be."""
    budget = budget or SERVER
    wait_s = WAIT_S if wait_s is None else wait_s
    if (me := _script_run()) is not None:  # what this run drew so far is in the memory now: never wait for it
        _let_go(budget, me)
    if not budget.fits(nbytes):
        raise Refused(
            f"this setting needs {in_mb(nbytes)} at once, more than the {in_mb(budget.capacity)} this server gives all "
            "its visitors' large runs together: use fewer tokens, heads or a smaller d_k/d_v"
        )
    start = budget.clock()
    ticket = budget.try_acquire(nbytes)
    if ticket is not None:
        _log_admitted(budget, nbytes, 0.0, ticket)
        return ticket
    on_wait = None
    line = st.empty() if _in_script() else None  # a download being made, or a test: no page to write on
    if line is not None:
        shown = [-1.0]

        def on_wait(waited: float, shortage: Shortage) -> None:
            if waited - shown[0] >= 1.0:  # a new line every second: the visitor sees the wait move
                shown[0] = waited
                line.info(waiting_words(waited, wait_s, shortage), icon=":material/hourglass_top:")

    try:
        ticket = budget.acquire(nbytes, wait_s, evict=budget.evict_all, give_up=give_up, on_wait=on_wait)
    finally:
        if line is not None:
            line.empty()
    waited = budget.clock() - start
    if ticket is not None:
        _log_admitted(budget, nbytes, waited, ticket)
        return ticket
    if give_up is not None and give_up():
        return None
    shortage = budget.shortage(nbytes)
    _log_refusal(shortage, waited)
    raise Refused(refusal_words(shortage, wait_s, advice))


def compute(config: Config, cached: Callable[[Config, str], Result], size: sizes.Size | None = None) -> Result:
    """A large Result, admitted against the server's budget before it is computed.

    cached(config, key) computes it (through a cache whose evictor lets go of it when the budget is short). A Result
    another run still holds is shared, not computed again. size: the config's `attention.basics.sizes.size`, when
    the caller has it already (sized once: admitted for its peak, held for what the Result keeps). Raises Refused.
    """
    key = repr(config)
    size = size or sizes.size(config)
    live = _LIVE.get(key)
    if live is not None:
        drawing(size.held)
        return live
    ticket = admit(size.peak, give_up=lambda: key in _LIVE)
    if ticket is None:
        drawing(size.held)
        return _LIVE[key]  # made by another session while this one waited
    try:
        result = cached(config, key)
    except BaseException:
        SERVER.finish(ticket)
        raise
    with _LIVE_LOCK:
        if _LIVE.get(key) is result:  # the cache already held it: its bytes are counted already
            SERVER.finish(ticket)
        else:
            # the temporaries are gone once compute returned: hold the Result's own bytes from now on
            SERVER.finish(ticket, keep=size.held)
            SERVER.hold(result, size.held)
            _LIVE[key] = result
    drawing(size.held)
    return result


def admitted(
    nbytes: int,
    make: Callable[[], T],
    *,
    held: Callable[[T], int] = sizes.held_bytes,
    holder: Callable[[T], Any] = lambda v: v,
    ticket: Ticket | None = None,
    advice: str = "or once fewer visitors are running the models",
) -> T:
    """make(), admitted against the server's budget for nbytes (its peak) first, unless `ticket` says it already
    was; once it returns, the value keeps held(value) of those bytes (at most nbytes) until holder(value) is gone,
    and the rest goes back. Raises Refused (a ValueError) when it cannot be admitted."""
    if ticket is None:
        ticket = admit(nbytes, advice=advice)
        assert ticket is not None  # no give_up: admitted, or Refused
    try:
        value = make()
    except BaseException:
        SERVER.finish(ticket)
        raise
    keep = min(held(value), nbytes)
    SERVER.finish(ticket, keep=keep)
    if keep:  # nothing kept (a pass whose value is not worth holding): nothing to hold, whatever the value is
        SERVER.hold(holder(value), keep)
    drawing(keep)
    return value


def used_mb() -> float:
    """The server's budget in use now, in MB (for benchmarks and tests)."""
    return SERVER.used / MB
