"""One memory budget for the whole server process: every large computation is admitted against it before it starts.

What belongs here: the server-wide byte budget (`SERVER`), admitting a large Result against it (`compute`, which
`ui.results.compute` calls for every result over the small cache's bound), and holding a value's bytes while it
lives (`admitted`). Pages stop on a refusal through `ui.results` (`or_stop`, `kept_or_stop`, `run_or_stop`): this
module draws nothing. Sizes come from `attention.basics.budget`, from the Config alone, before anything is computed.

Every visitor shares one process (Community Cloud gives the whole app 690 MB), so what the visitors' runs hold
at once is bounded here, not per session. A large Result holds its bytes of the budget from the moment it is
admitted until the Result itself is gone (a `weakref.finalize`): while a page draws it, while the cache keeps
it, while another session still holds one that the cache let go of. A run that does not fit waits, with a
spinner saying for what ("waiting for 141 MB of the server's memory: another visitor's large run is using
it"), in the order the runs asked, and is told to try again or a smaller size after `WAIT_S`. One Result per
config is alive at a time: a session asking for a config another session's run still holds gets that one.

The budget (`BUDGET_MB`, or $ATTENTION_LAB_BUDGET_MB) is what the measurements left (README, "Memory"): the
server idles at 250-550 MB, and every page's heaviest link computes at most one Result of up to ~175 MB at a
time, so one such run is admitted at once and a second waits for it.

Under a memory limit (the process's cgroup: Community Cloud's 690 MB, a container's, deploy/replica.sh's) a run is
also admitted only while the process's real anonymous memory plus the run stays under the limit less a reserve
(`ceiling`): what the budget does not count (the models, the chat model's and the training's runs, Streamlit's
own messages, freed memory not yet handed back) is counted that way, as the kernel counts it. A run that would
pass the ceiling waits as for the budget, after every cache that registered an evictor (`evictor`) has let go
of what only it holds and the heaps have been trimmed; the pages that keep big things (results, the real
models' runs, the training runs) register theirs.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

import streamlit as st

from attention import Config, Result
from attention.basics import budget as sizes

MB = 1_000_000
BUDGET_MB = 200  # the whole server's large results, computed and held, together (README, "Memory")
WAIT_S = 120.0  # a run not admitted after this long is told to try again (the spinner says why it waits)
POLL_S = 0.25  # how often a waiting run looks whether the Result it waits for was made by another session

T = TypeVar("T")


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


# Under a limit L, a run is admitted while anonymous memory + the run stays under L - RESERVE: the reserve is for
# the pages of torch's and the other libraries' code (file-backed: counted by the cgroup, dropped and read again
# under pressure, but a working set must stay) and for what a run allocates beyond its counted bytes. A run that
# would be the only large one in flight gets the smaller ALONE reserve: nothing else of the budget can grow beside
# it, and at the soak's peak the kernel had squeezed the page cache to 37 MB without killing anything. (With 145 MB
# for every run, a 187 MB run never fitted beside the ~485 MB a server holds at rest once every page, model and
# cache has been used: 20 of 60 soak visits were refused after waiting 120 s.)
RESERVE_FRACTION = 0.2  # 145 MB of Community Cloud's 690 MiB; $ATTENTION_LAB_RESERVE_MB sets it in MB
ALONE_RESERVE_FRACTION = 0.06  # 43 MB of 690 MiB; $ATTENTION_LAB_ALONE_RESERVE_MB


def ceiling_for(limit: int | None, reserve_mb: str | None = None, fraction: float = RESERVE_FRACTION) -> int | None:
    """The anonymous memory under which runs are admitted, for a cgroup limit (None: no limit, no ceiling)."""
    if limit is None:
        return None
    reserve = float(reserve_mb) * MB if reserve_mb else fraction * limit
    return int(limit - reserve)


class ByteBudget:
    """A counting semaphore of bytes, first come first served: `acquire(n)` waits until n bytes are free and every
    earlier request has been served (so a large request is not passed over for ever by small ones).

    ceiling: where set, a request is also served only while memory() + n stays under it (the process's anonymous
    memory under a cgroup limit), or under alone_ceiling when no other bytes of the budget are taken; memory is read
    again at every poll, so freed memory lets the waiting run in."""

    def __init__(
        self,
        capacity: int,
        ceiling: int | None = None,
        memory: Callable[[], int] = anonymous_bytes,
        alone_ceiling: int | None = None,
    ) -> None:
        self.capacity = capacity
        self.ceiling = ceiling
        self.alone_ceiling = ceiling if alone_ceiling is None else alone_ceiling
        self.memory = memory
        self.evictors: list[Callable[[], None]] = []  # the server-wide caches' (`evictor`)
        self.used = 0
        self.peak = 0  # the most ever taken at once (benchmarks and tests reset it)
        self._cond = threading.Condition(threading.RLock())  # reentrant: a finalizer may release inside acquire
        self._queue: deque[object] = deque()

    def fits(self, n: int) -> bool:
        return n <= self.capacity

    def _room(self, n: int) -> bool:
        """Whether n more bytes fit the budget, and under the ceiling (called under the lock)."""
        if self.used + n > self.capacity:
            return False
        if self.ceiling is None:
            return True
        return self.memory() + n <= (self.alone_ceiling if self.used == 0 else self.ceiling)

    def try_acquire(self, n: int) -> bool:
        with self._cond:
            if self._queue or not self._room(n):
                return False
            self._take(n)
            return True

    def _take(self, n: int) -> None:
        self.used += n
        self.peak = max(self.peak, self.used)

    def acquire(
        self,
        n: int,
        timeout: float,
        *,
        evict: Callable[[], None] | None = None,
        give_up: Callable[[], bool] | None = None,
    ) -> bool:
        """Take n bytes; False after `timeout` seconds, or as soon as give_up() says so (checked every POLL_S).

        evict: called (outside the lock) while this request is first in line and does not fit, to let go of what
        is only cached: once, and again after each wait (what a run still held when the cache was cleared may be in
        the cache again by then). ValueError for a request larger than the whole budget: it could never be served.
        """
        if n > self.capacity:
            raise ValueError(f"{n / MB:.0f} MB is more than the server's whole budget of {self.capacity / MB:.0f} MB")
        me = object()
        deadline = time.monotonic() + timeout
        waited = True  # evict before the first wait
        with self._cond:
            self._queue.append(me)
        try:
            while True:
                with self._cond:
                    first = self._queue[0] is me
                    if first and self._room(n):
                        self._take(n)
                        return True
                    if not (first and waited and evict is not None):
                        left = deadline - time.monotonic()
                        if left <= 0 or (give_up is not None and give_up()):
                            return False
                        self._cond.wait(min(left, POLL_S))
                        waited = True
                        continue
                waited = False
                evict()  # outside the lock: it may drop a Result, whose finalizer releases into this budget
        finally:
            with self._cond:
                self._queue.remove(me)
                self._cond.notify_all()

    def evict_all(self) -> None:
        """Every registered cache lets go of what it keeps, then glibc hands the freed pages back to the system."""
        for fn in list(self.evictors):
            try:
                fn()
            except Exception:  # an evictor that fails (a cache mid-change) must not stop the run that asked
                pass
        trim_heaps()

    def release(self, n: int) -> None:
        with self._cond:
            self.used -= n
            self._cond.notify_all()

    def hold(self, obj: Any, n: int) -> None:
        """Keep n acquired bytes until obj is garbage: released by a finalizer when it goes."""
        weakref.finalize(obj, self.release, n)


SERVER = ByteBudget(
    int(float(os.environ.get("ATTENTION_LAB_BUDGET_MB", BUDGET_MB)) * MB),
    ceiling_for(memory_limit(), os.environ.get("ATTENTION_LAB_RESERVE_MB")),
    alone_ceiling=ceiling_for(memory_limit(), os.environ.get("ATTENTION_LAB_ALONE_RESERVE_MB"), ALONE_RESERVE_FRACTION),
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


def admit(nbytes: int, *, give_up: Callable[[], bool] | None = None, budget: ByteBudget | None = None,
          wait_s: float | None = None) -> bool:  # fmt: skip
    """Take nbytes of the server's budget, waiting (with a spinner saying why, in a page's run) while other runs
    hold it; every registered cache lets go first when it does not fit (`evictor`). True once taken; False when
    give_up() became true while waiting. Refused when it cannot be."""
    budget = budget or SERVER
    wait_s = WAIT_S if wait_s is None else wait_s
    if not budget.fits(nbytes):
        raise Refused(
            f"this setting needs {nbytes / MB:.0f} MB at once, more than the {budget.capacity / MB:.0f} MB this "
            "server gives all its visitors' large runs together: use fewer tokens, heads or a smaller d_k/d_v"
        )
    if budget.try_acquire(nbytes):
        return True
    evict = budget.evict_all
    waiting = (
        f"Waiting for {nbytes / MB:.0f} MB of the server's memory: another visitor's large run is using it "
        f"({budget.used / MB:.0f} of {budget.capacity / MB:.0f} MB taken)…"
    )
    if _in_script():
        with st.spinner(waiting, show_time=True):
            got = budget.acquire(nbytes, wait_s, evict=evict, give_up=give_up)
    else:  # a download being made, or a test: no page to write on
        got = budget.acquire(nbytes, wait_s, evict=evict, give_up=give_up)
    if got or (give_up is not None and give_up()):
        return got
    raise Refused(
        f"the server's memory is taken by other visitors' large runs ({budget.used / MB:.0f} of "
        f"{budget.capacity / MB:.0f} MB) and this run waited {wait_s:.0f} s: try again in a moment, or a smaller "
        "size (fewer tokens, heads or a smaller d_k/d_v)"
    )


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
    if not admit(need, give_up=lambda: key in _LIVE):
        return _LIVE[key]  # made by another session while this one waited
    try:
        result = cached(config, key)
    except BaseException:
        SERVER.release(need)
        raise
    with _LIVE_LOCK:
        if _LIVE.get(key) is result:  # the cache already held it: its bytes are counted already
            SERVER.release(need)
        else:
            # the temporaries are gone once compute returned: hold the Result's own bytes from now on
            SERVER.release(need - sizes.result_bytes(config))
            SERVER.hold(result, sizes.result_bytes(config))
            _LIVE[key] = result
    return result


def admitted(
    nbytes: int,
    make: Callable[[], T],
    *,
    held: Callable[[T], int] = sizes.held_bytes,
    holder: Callable[[T], Any] = lambda v: v,
    admitted_already: bool = False,
) -> T:
    """make(), admitted against the server's budget for nbytes (its peak) first; once it returns, the value keeps
    held(value) of those bytes (at most nbytes) until holder(value) is gone, and the rest goes back. Raises Refused
    (a ValueError) when it cannot be admitted."""
    if not admitted_already:
        admit(nbytes)
    try:
        value = make()
    except BaseException:
        SERVER.release(nbytes)
        raise
    keep = min(held(value), nbytes)
    SERVER.release(nbytes - keep)
    SERVER.hold(holder(value), keep)
    return value


def used_mb() -> float:
    """The server's budget in use now, in MB (for benchmarks and tests)."""
    return SERVER.used / MB
