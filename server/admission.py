"""Admission: a counting semaphore of bytes, fair and sized (`Admission`), and why a run is not admitted now
(`Shortage`, in plain words with its numbers). The server's one instance and its words on a page are budget.py's.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .memory import MB, anonymous_bytes, in_mb, trim_heaps

log = logging.getLogger("server.budget")  # the budget's logger: one place for what admission says
POLL_S = 0.25  # how often a waiting run looks again (a Result made by another session, memory freed)

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
    drawing: int = 0  # what the pages drawing finished runs may allocate yet (`Admission.draw`)

    def reason(self) -> str:
        """The limit that holds the run, in plain words with its numbers ("" when nothing does: it is admitted)."""
        need = f"this run needs {in_mb(self.need)}"
        if self.used + self.need > self.capacity:
            return (
                f"other visitors' large runs hold {in_mb(self.used)} of the {in_mb(self.capacity)} this server gives "
                f"its visitors' runs together, and {need}"
            )
        taken = None if self.memory is None else self.memory + self.computing + self.drawing
        if self.ceiling is not None and taken is not None and taken + self.need > self.ceiling:
            under = f"its {self.limit / 2**20:.0f} MiB limit less a reserve" if self.limit else "its ceiling"
            who = (
                "runs computing or being drawn"
                if self.computing and self.drawing
                else ("runs computing" if self.computing else "pages drawing finished runs")
            )
            more = self.computing + self.drawing
            computing = f", {who} now may take {in_mb(more)} more," if more else ""
            return (
                f"the server process holds {in_mb(self.memory)}{computing} and takes on runs only up to "
                f"{in_mb(self.ceiling)} ({under}); {need}, which would pass that by "
                f"{in_mb(taken + self.need - self.ceiling)}"
            )
        if self.ahead:
            runs = "run that asked earlier is" if self.ahead == 1 else "runs that asked earlier are"
            return f"{self.ahead} {runs} served first, and {need}"
        return ""


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
    that asked earlier and are still computing hold at most `pass_share` bytes together, or the large one would
    not fit even if they were done (it waits for memory that other runs hold, not for them). So a small run that
    fits is never held behind a large one that could not start anyway, memory that comes free goes to a small run
    that waits before a large one takes it for its whole run, and a large run waits at most for that share more
    than it would alone. A run is never kept waiting while what it needs is free, unless a run of its class asked
    earlier, or (a small one) the share is taken by the runs the first large one waits for, or (a large one) a
    small run waits.

    ceiling: where set, a run is also admitted only while memory() + n, plus what the runs still computing may
    allocate yet (their n, until `finish`) and what the pages drawing finished runs may allocate yet (`draw`, until
    `drawn`), stays under it (memory: the process's anonymous memory under a cgroup limit); memory is read again at
    every poll, so freed memory lets a waiting run in. clock and memory are injectable (tests)."""

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
        self.drawing = 0  # bytes the pages drawing finished runs may still allocate: the sum of `_draws`
        self._draws: dict[object, tuple[int, float]] = {}  # a drawing (a script run) -> (its bytes, since when)
        self.peak = 0  # the most ever taken at once (benchmarks and tests reset it)
        self._cond = threading.Condition(threading.RLock())  # reentrant: a finalizer may release inside acquire
        self._waiting: list[Waiter] = []  # in the order they asked

    def fits(self, n: int) -> bool:
        return n <= self.capacity

    def _room(self, n: int, besides: int = 0) -> bool:
        """Whether n more bytes fit the budget, and under the ceiling, were `besides` bytes of the runs computing
        done (called under the lock)."""
        if self.used - besides + n > self.capacity:
            return False
        return self.ceiling is None or self.memory() + self.computing + self.drawing - besides + n <= self.ceiling

    def _share_taken(self, n: int, first_large: Waiter | None) -> bool:
        """Whether a small run of n bytes may not go ahead of the first large run that waits: the small runs gone
        ahead would pass their share, and they are what that run waits for (it would fit were they done)."""
        if first_large is None or self.passing + n <= self.pass_share:
            return False
        return self._room(first_large.n, besides=self.passing)

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
            first_large = next((w for w in self._waiting if w.ticket is None and w.n > self.small), None)
            for w in sorted(self._waiting, key=lambda w: w.n > self.small):  # stable: each class in its order
                if w.ticket is not None:
                    continue
                small = w.n <= self.small
                passing = small and first_large is not None and first_large.since <= w.since  # a larger run asked first
                if (small_held if small else large_held) or (passing and self._share_taken(w.n, first_large)):
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
        first_large = next((w for w in self._waiting if w.ticket is None and w.n > self.small), None)
        share_taken = self._share_taken(me.n, first_large)

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
                drawing=self.drawing,
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
            raise ValueError(f"{in_mb(n)} is more than the server's whole budget of {in_mb(self.capacity)}")
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
            if self.used < self.computing:  # bytes released that a run still computing holds: a ticket not finished
                log.error("admission: %s released of runs still computing (%s in use, %s computing): a run's bytes "
                          "were given back without finishing its ticket", in_mb(n), in_mb(self.used),
                          in_mb(self.computing))  # fmt: skip
            self.serve()
            self._cond.notify_all()

    def draw(self, key: object, n: int) -> None:
        """A page is drawing a finished run and may allocate up to n bytes more until `drawn(key)` (the script run's
        charts, tables and messages: the run's own ticket counted only its computing). One drawing a key: a second
        run drawn by the same script run keeps the larger of the two, as it draws them one after the other."""
        with self._cond:
            old = self._draws.get(key, (0, 0.0))[0]
            if n > old:
                self._draws[key] = (n, self.clock())
                self.drawing += n - old

    def drawn(self, key: object) -> int:
        """The drawing of `key` is done (its script run ended): its bytes stop counting (returned); runs that now
        fit go in."""
        with self._cond:
            n, _ = self._draws.pop(key, (0, 0.0))
            if n:
                self.drawing -= n
                self.serve()
                self._cond.notify_all()
            return n

    def hand_over(self, key: object) -> object | None:
        """The script run `key` has drawn its page, and its messages are on their way to the browser: its drawing
        counts on under a key of its own (returned; None when it counted none) until `drawn` of that, so that the
        session's next run starts a drawing of its own."""
        with self._cond:
            entry = self._draws.pop(key, None)
            if entry is None:
                return None
            token = object()
            self._draws[token] = entry
            return token

    def drawn_before(self, since: float) -> None:
        """Every drawing counted since before `since` is done: a script run that never said so (it ended another
        way than its page's run) holds no bytes for good."""
        with self._cond:
            stale = [key for key, (_, at) in self._draws.items() if at < since]
        for key in stale:
            self.drawn(key)

    def hold(self, obj: Any, n: int) -> None:
        """Keep n acquired bytes until obj is garbage: released by a finalizer when it goes."""
        weakref.finalize(obj, self.release, n)
