"""One memory budget for the whole server process: every large computation is admitted against it before it starts.

What belongs here: the server-wide byte budget (`SERVER`), admitting a large Result against it (`compute`, which
`ui.results.compute` calls for every result over the small cache's bound), and holding a value's bytes while it
lives (`admitted`). Pages stop on a refusal through `ui.results` (`or_stop`, `kept_or_stop`, `run_or_stop`): this
module draws only the line a waiting run shows. Sizes come from `attention.basics.budget`, from the Config alone,
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
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import streamlit as st

from attention import Config, Result
from attention.basics import budget as sizes

MB = 1_000_000
BUDGET_MB = 200  # the whole server's large results, computed and held, together (README, "Memory")
WAIT_S = 120.0  # a run not admitted after this long is told to try again (the spinner says why it waits)
POLL_S = 0.25  # how often a waiting run looks whether the Result it waits for was made by another session

T = TypeVar("T")
log = logging.getLogger(__name__)  # a line per refusal (WARNING) and per admission that waited (INFO; DEBUG: every one)


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def trim_heaps() -> None:
    """glibc hands every whole free page of its heaps back to the system (malloc_trim(0): a few ms at most); nothing
    where the C library is not glibc."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _cgroup_limit_files(proc: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> list[str]:
    """The memory-limit files of this process's own cgroup: v1's memory.limit_in_bytes under the memory controller,
    v2's memory.max (from /proc/self/cgroup), then the mount's top (a container's own cgroup)."""
    files = []
    try:
        lines = open(proc).read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            files.append(f"{root}/memory{path.rstrip('/')}/memory.limit_in_bytes")
        elif controllers == "":
            files.append(f"{root}{path.rstrip('/')}/memory.max")
    return [*files, f"{root}/memory/memory.limit_in_bytes", f"{root}/memory.max"]


def memory_limit(paths: list[str] | None = None) -> int | None:
    """The memory limit of this process's cgroup in bytes (the first of `paths` that sets one); None where there is
    none ("max", v1's huge default, or no such file)."""
    for path in _cgroup_limit_files() if paths is None else paths:
        try:
            text = open(path).read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            return int(text)
    return None


def anonymous_bytes(status: str = "/proc/self/status") -> int:
    """The process's anonymous resident memory (RssAnon): what the kernel cannot drop and read again, and what it
    kills a process in a memory cgroup for. 0 where /proc cannot tell (then only the byte budget counts)."""
    try:
        with open(status) as lines:
            for line in lines:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# Under a limit L, a run of n bytes is admitted while anonymous memory + the bytes of the runs still computing + n
# stays under L - RESERVE. The runs computing are counted for all they may still allocate (their estimates; what
# they have allocated already is counted twice, on the safe side); a finished run's Result is in the anonymous
# memory itself. The reserve is for the pages of torch's and the other libraries' code (file-backed: counted by the
# cgroup, dropped and read again under pressure, but a working set must stay), what a run allocates beyond its
# estimate, and what a page draws (at the soak's peak with this reserve for a run alone the kernel had squeezed the
# page cache to 37 MB without killing anything). Before, a second reserve of 145 MB applied whenever any bytes of
# the budget were held, finished Results included: under a crowd the process sat above that ceiling and a 1 MB
# reading waited 20 s, a chat step 120 s and was refused (issue 37).
RESERVE_FRACTION = 0.06  # 43 MB of Community Cloud's 690 MiB; $ATTENTION_LAB_RESERVE_MB sets it in MB


def ceiling_for(limit: int | None, reserve_mb: str | None = None, fraction: float = RESERVE_FRACTION) -> int | None:
    """The anonymous memory under which runs are admitted, for a cgroup limit (None: no limit, no ceiling)."""
    if limit is None:
        return None
    reserve = float(reserve_mb) * MB if reserve_mb else fraction * limit
    return int(limit - reserve)


SMALL_MB = 64  # a run of at most this many MB is small: a chat step (about 55 MB), a Real-model reading, a toy page
PASS_SHARE_MB = 64  # small runs computing past a large one that waits, together at most ($ATTENTION_LAB_PASS_SHARE_MB)


class Ticket:
    """One admitted run's bytes, from `acquire` to `finish`: passed says it went ahead of a larger run that waits."""

    __slots__ = ("n", "passed")

    def __init__(self, n: int, passed: bool = False) -> None:
        self.n, self.passed = n, passed

    def __repr__(self) -> str:
        return f"Ticket({self.n}, passed={self.passed})"


@dataclass(frozen=True)
class Shortage:
    """Why a run is not admitted now, with the numbers that decide it (bytes), for the page's words and the log."""

    need: int  # what the run asks for
    used: int  # what the admitted runs hold of the budget
    capacity: int  # the budget
    memory: int | None  # the process's anonymous memory (None: no memory limit, the budget alone counts)
    computing: int  # what the runs still computing may allocate yet
    ceiling: int | None  # the memory under which runs are admitted
    limit: int | None  # the cgroup's memory limit
    ahead: int  # runs that asked earlier and are served first

    def reason(self) -> str:
        """The limit that holds the run, in plain words with its numbers ("" when nothing does: it is admitted)."""
        need = f"this run needs {_mb(self.need)}"
        if self.used + self.need > self.capacity:
            return (
                f"other visitors' large runs hold {_mb(self.used)} of the {_mb(self.capacity)} this server gives "
                f"its visitors' runs together, and {need}"
            )
        taken = None if self.memory is None else self.memory + self.computing
        if self.ceiling is not None and taken is not None and taken + self.need > self.ceiling:
            under = f"its {self.limit / 2**20:.0f} MiB limit less a reserve" if self.limit else "its ceiling"
            computing = f", runs computing now may take {_mb(self.computing)} more," if self.computing else ""
            return (
                f"the server process holds {_mb(self.memory)}{computing} and takes on runs only up to "
                f"{_mb(self.ceiling)} ({under}); {need}, which would pass that by "
                f"{_mb(taken + self.need - self.ceiling)}"
            )
        if self.ahead:
            runs = "run that asked earlier is" if self.ahead == 1 else "runs that asked earlier are"
            return f"{self.ahead} {runs} served first, and {need}"
        return ""


def _mb(n: int) -> str:
    return f"{n / MB:.0f} MB"


class Waiter:
    """A run in the line: n bytes asked at `since`; `ticket` once admitted, `handed` once its caller has it."""

    __slots__ = ("n", "since", "ticket", "handed")

    def __init__(self, n: int, since: float) -> None:
        self.n, self.since = n, since
        self.ticket: Ticket | None = None
        self.handed = False


class Admission:
    """The server's memory admission: a counting semaphore of bytes, fair and sized.

    Runs of one size class are served in the order they asked; small runs (at most `small` bytes: a chat step, a
    Real-model reading) are served before large ones, as long as the small runs that went ahead of a large one
    that asked earlier and are still computing hold at most `pass_share` bytes together. So a small run that fits
    is never held behind a large one, and memory that comes free goes to a small run that waits before a large
    one takes it for its whole run; a large run waits at most for that share more than it would alone. A run is
    never kept waiting while what it needs is free, unless a run of its class asked earlier, or (a small one) the
    share is taken, or (a large one) a small run waits.

    ceiling: where set, a run is also admitted only while memory() + n, plus what the runs still computing may
    allocate yet (their n, until `finish`), stays under it (memory: the process's anonymous memory under a cgroup
    limit); memory is read again at every poll, so freed memory lets a waiting run in. clock and memory are
    injectable (tests)."""

    def __init__(
        self,
        capacity: int,
        ceiling: int | None = None,
        memory: Callable[[], int] = anonymous_bytes,
        *,
        limit: int | None = None,
        small: int = SMALL_MB * MB,
        pass_share: int = PASS_SHARE_MB * MB,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity = capacity
        self.ceiling = ceiling
        self.limit = limit
        self.memory = memory
        self.small, self.pass_share = small, pass_share
        self.clock = clock
        self.evictors: list[Callable[[], None]] = []  # the server-wide caches' (`evictor`)
        self.used = 0
        self.computing = 0  # bytes of the runs admitted and not finished: what they may still allocate
        self.passing = 0  # bytes of small runs that went ahead of a waiting larger one, until they finish
        self.peak = 0  # the most ever taken at once (benchmarks and tests reset it)
        self._cond = threading.Condition(threading.RLock())  # reentrant: a finalizer may release inside acquire
        self._waiting: list[Waiter] = []  # in the order they asked

    def fits(self, n: int) -> bool:
        return n <= self.capacity

    def _room(self, n: int) -> bool:
        """Whether n more bytes fit the budget, and under the ceiling (called under the lock)."""
        if self.used + n > self.capacity:
            return False
        return self.ceiling is None or self.memory() + self.computing + n <= self.ceiling

    def _take(self, n: int, passed: bool = False) -> Ticket:
        self.used += n
        self.computing += n
        self.peak = max(self.peak, self.used)
        if passed:
            self.passing += n
        return Ticket(n, passed)

    def serve(self) -> None:
        """Admit every waiting run the rules let in now: the small ones first, in the order they asked, then the
        large ones in theirs."""
        with self._cond:
            small_held = large_held = False  # one of the class waits: the later ones of that class wait too
            granted = False
            first_large = next((w.since for w in self._waiting if w.ticket is None and w.n > self.small), None)
            for w in sorted(self._waiting, key=lambda w: w.n > self.small):  # stable: each class in its order
                if w.ticket is not None:
                    continue
                small = w.n <= self.small
                passing = small and first_large is not None and first_large <= w.since  # a larger run asked first
                if (small_held if small else large_held) or (passing and self.passing + w.n > self.pass_share):
                    may = False
                else:
                    may = self._room(w.n)
                if may:
                    w.ticket = self._take(w.n, passed=passing)
                    granted = True
                elif small:
                    small_held = True
                else:
                    large_held = True
            if granted:
                self._cond.notify_all()

    def ask(self, n: int) -> Waiter:
        """Join the line for n bytes: its `ticket` is set once admitted (at once where the rules let it in). Leave
        the line with `withdraw`."""
        with self._cond:
            me = Waiter(n, self.clock())
            self._waiting.append(me)
            self.serve()
            return me

    def withdraw(self, me: Waiter) -> None:
        """Leave the line (admitted or not): the runs behind may go in; bytes admitted and not handed over go back."""
        with self._cond:
            self._waiting.remove(me)
            if me.ticket is not None and not me.handed:
                self.finish(me.ticket)
                me.ticket = None
            self.serve()

    def _ahead(self, me: Waiter) -> int:
        """The runs that wait and are served before `me` (called under the lock): of its class, those that asked
        earlier; for a large one, every small one; for a small one whose share is taken, the earlier large ones."""
        small = me.n <= self.small
        share_taken = self.passing + me.n > self.pass_share

        def before(w: Waiter) -> bool:
            if w.n <= self.small:
                return not small or w.since < me.since
            return not small and w.since < me.since or small and share_taken and w.since < me.since

        return sum(1 for w in self._waiting if w is not me and w.ticket is None and before(w))

    def shortage(self, n: int, me: Waiter | None = None) -> Shortage:
        """What holds a run of n bytes now, with its numbers (`Shortage.reason`)."""
        with self._cond:
            return Shortage(
                need=n,
                used=self.used,
                capacity=self.capacity,
                memory=None if self.ceiling is None else self.memory(),
                computing=self.computing,
                ceiling=self.ceiling,
                limit=self.limit,
                ahead=0 if me is None or me not in self._waiting else self._ahead(me),
            )

    def try_acquire(self, n: int) -> Ticket | None:
        """n bytes at once, or None: when they do not fit now, or an earlier run this one may not pass waits."""
        with self._cond:
            me = self.ask(n)
            me.handed = me.ticket is not None
            self.withdraw(me)
            return me.ticket

    def acquire(
        self,
        n: int,
        timeout: float,
        *,
        evict: Callable[[], None] | None = None,
        give_up: Callable[[], bool] | None = None,
        on_wait: Callable[[float, Shortage], None] | None = None,
    ) -> Ticket | None:
        """Take n bytes; None after `timeout` seconds, or as soon as give_up() says so (checked every POLL_S).

        evict: called (outside the lock) while this run is the first that waits, to let go of what is only cached:
        before the first wait and again after each (what a run still held when the cache was cleared may be in the
        cache again by then). on_wait(waited_s, shortage): told at every poll while it waits. ValueError for a
        request larger than the whole budget: it could never be served.
        """
        if n > self.capacity:
            raise ValueError(f"{_mb(n)} is more than the server's whole budget of {_mb(self.capacity)}")
        me = self.ask(n)
        deadline = me.since + timeout
        try:
            while True:
                with self._cond:
                    first = me.ticket is None and next(w for w in self._waiting if w.ticket is None) is me
                if first and evict is not None:
                    evict()  # outside the lock: it may drop a Result, whose finalizer releases into this budget
                with self._cond:
                    self.serve()  # memory is read again
                    if me.ticket is not None:
                        me.handed = True
                        return me.ticket
                    left = deadline - self.clock()
                    if left <= 0 or (give_up is not None and give_up()):
                        return None
                    shortage = self.shortage(n, me) if on_wait is not None else None
                if on_wait is not None:
                    on_wait(self.clock() - me.since, shortage)
                with self._cond:
                    if me.ticket is None:
                        self._cond.wait(min(left, POLL_S))
        finally:
            self.withdraw(me)

    def finish(self, ticket: Ticket, keep: int = 0) -> None:
        """The admitted run is done computing: all but `keep` of its bytes go back (keep them with `hold`)."""
        with self._cond:
            if ticket.passed:
                self.passing -= ticket.n
                ticket.passed = False
            n, ticket.n = ticket.n, 0  # finished once
            self.computing -= n
            self.release(n - keep)

    def evict_all(self) -> None:
        """Every registered cache lets go of what it keeps, then glibc hands the freed pages back to the system."""
        for fn in list(self.evictors):
            try:
                fn()
            except Exception:  # an evictor that fails (a cache mid-change) must not stop the run that asked
                pass
        trim_heaps()

    def release(self, n: int) -> None:
        """n bytes go back; the runs that wait and now fit go in at once (no poll: no wait while memory is free)."""
        with self._cond:
            self.used -= n
            self.serve()
            self._cond.notify_all()

    def hold(self, obj: Any, n: int) -> None:
        """Keep n acquired bytes until obj is garbage: released by a finalizer when it goes."""
        weakref.finalize(obj, self.release, n)


_LIMIT = memory_limit()
SERVER = Admission(
    int(float(os.environ.get("ATTENTION_LAB_BUDGET_MB", BUDGET_MB)) * MB),
    ceiling_for(_LIMIT, os.environ.get("ATTENTION_LAB_RESERVE_MB")),
    limit=_LIMIT,
    pass_share=int(float(os.environ.get("ATTENTION_LAB_PASS_SHARE_MB", PASS_SHARE_MB)) * MB),
)


def evictor(fn: Callable[[], None]) -> Callable[[], None]:
    """Register fn (let go of what a server-wide cache keeps and no session is drawing) with the server's budget, to
    be called when a run does not fit; once per function (a decorator, or called at a module's import)."""
    if fn not in SERVER.evictors:
        SERVER.evictors.append(fn)
    return fn


# Every large Result alive in the process, by config: a second session asking for one gets the same object.
_LIVE: weakref.WeakValueDictionary[str, Result] = weakref.WeakValueDictionary()
_LIVE_LOCK = threading.Lock()


class Refused(ValueError):
    """A run the budget cannot admit: too large for it, or not admitted within WAIT_S. Its message says which (a
    ValueError, so that the pages' `*_or_stop` helpers explain it and stop the page)."""


def _in_script() -> bool:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    return get_script_run_ctx(suppress_warning=True) is not None


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
    if not budget.fits(nbytes):
        raise Refused(
            f"this setting needs {_mb(nbytes)} at once, more than the {_mb(budget.capacity)} this server gives all "
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


def compute(config: Config, cached: Callable[[Config, str], Result]) -> Result:
    """A large Result, admitted against the server's budget before it is computed.

    cached(config, key) computes it (through a cache whose evictor lets go of it when the budget is short). A Result
    another run still holds is shared, not computed again. Raises Refused.
    """
    key = repr(config)
    live = _LIVE.get(key)
    if live is not None:
        return live
    need = sizes.compute_bytes(config)
    ticket = admit(need, give_up=lambda: key in _LIVE)
    if ticket is None:
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
            SERVER.finish(ticket, keep=sizes.result_bytes(config))
            SERVER.hold(result, sizes.result_bytes(config))
            _LIVE[key] = result
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
    SERVER.hold(holder(value), keep)
    return value


def used_mb() -> float:
    """The server's budget in use now, in MB (for benchmarks and tests)."""
    return SERVER.used / MB
