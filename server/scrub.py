"""What scrubbing a run's timeline draws, kept a while: bounded by bytes, inside the server's memory budget, and let go
of once the visitors who drew it have left.

What belongs here: `ScrubCache`, the training pool's cache of what each snapshot draws (server/training.py owns
one and tells it which sessions ended). What an entry is, is the page's business (ui/views/watch_it_learn.py).

It used to be a `st.cache_resource` of 256 whole layer Results (every intermediate of `attention.compute`, about
375 kB each at the largest setting): scrubbing filled it to +118 MiB, outside the budget, and it stayed after the
visitor left. Now an entry is what is drawn (the heads' weights, the mask, the tokens: about 40 kB), the entries
together hold at most `capacity` bytes, each entry's bytes are taken from the server's budget while it is kept
(`budget.SERVER`: a large run that does not fit has the cache cleared first, as every registered cache is), and an
entry goes when every session that drew it has ended.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from attention.basics import sizes

from . import budget

T = TypeVar("T")
SCRUB_BYTES = 8 * 2**20  # about 200 snapshots' layers at the largest setting: a whole run scrubbed end to end


@dataclass(eq=False)
class _Entry:
    value: Any
    nbytes: int
    sessions: set[str] = field(default_factory=set)  # who drew it (empty: asked outside a page, kept until LRU)


class ScrubCache:
    """A least-recently-used cache bounded by bytes whose entries hold their bytes of a `budget.Admission`."""

    def __init__(self, capacity: int = SCRUB_BYTES, server: budget.Admission | None = None) -> None:
        self.capacity = capacity
        self.server = server or budget.SERVER
        self.used = 0
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self,
        key: Hashable,
        make: Callable[[], T],
        session: str | None = None,
        *,
        nbytes: Callable[[T], int] | None = None,
    ) -> T:
        """The value kept for key, or make()'s, kept if it fits (its bytes: `nbytes(value)`, by default the tensors'
        storages). A value the budget has no room for is returned without being kept."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                if session is not None:
                    entry.sessions.add(session)
                return entry.value
        value = make()  # outside the lock: another session's scrub need not wait for this one
        n = (nbytes or sizes.held_bytes)(value)
        if n > self.capacity:
            return value
        with self._lock:
            if key in self._entries:  # made meanwhile by another session
                return self._entries[key].value
            while self._entries and self.used + n > self.capacity:
                self._drop(next(iter(self._entries)))
            ticket = self.server.try_acquire(n)
            if ticket is None:  # the budget is short: every entry goes, then one more try
                for k in list(self._entries):
                    self._drop(k)
                ticket = self.server.try_acquire(n)
                if ticket is None:
                    return value
            self.server.finish(ticket, keep=n)  # nothing left to compute: the bytes are held until _drop
            self._entries[key] = _Entry(value, n, {session} if session is not None else set())
            self.used += n
        return value

    def _drop(self, key: Hashable) -> None:
        entry = self._entries.pop(key)
        self.used -= entry.nbytes
        self.server.release(entry.nbytes)

    def forget(self, sessions: Iterable[str]) -> None:
        """These sessions have ended: what only they drew goes."""
        gone = set(sessions)
        with self._lock:
            for key, entry in list(self._entries.items()):
                if entry.sessions and entry.sessions <= gone:
                    self._drop(key)
                else:
                    entry.sessions -= gone

    def clear(self) -> None:
        with self._lock:
            for key in list(self._entries):
                self._drop(key)

    def __len__(self) -> int:
        return len(self._entries)
