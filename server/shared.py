"""Values made once per key across the whole server and kept within a byte capacity: a session asking for a
key another session is making waits for that one instead of making it again. The Real model page keeps its
Readings and heads here (ui/views/model.py), the Head atlas its atlases (ui/views/atlas.py), the chat page its
prompt runs and generations (ui/views/chat.py).

A visitor may hold one value of a `Shared` (`get(..., holder=session)`): what a visitor is stepping through (the
chat page's generation, the prompt run it draws) is not let go of when a run elsewhere needs the memory (`let_go`,
the server budget's evictor), only once the visitor has left or not used it for `hold_s`, and within `hold_bytes`
(the visitors who held first keep theirs; a later one beyond it pays the forward again, once). Issue 50: every run
that waited for memory cleared the chat page's caches, so each visitor's next click ran the prompt again as a large
run and regenerated every token so far.

`Turns` is a fair queue of turns: the chat page's generating visitors take one model step a turn, in the order they
asked, so that a visitor asking for many tokens goes to the back of the line after each one.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

import streamlit as st

from . import budget, sessions


class Abandoned(Exception):
    """The session making a Reading stopped (its visitor reran or left): a session waiting for it makes it."""


class Shared:
    """Values made once per key at a time and kept, most recently used last, up to `capacity` bytes (the newest
    is kept whatever its size): a session asking for a key another session is making waits for that one."""

    def __init__(
        self,
        capacity: int,
        size: Callable[[Any], int],
        *,
        hold_bytes: int = 0,
        hold_s: float = 90.0,
        alive: Callable[[str], bool] = sessions.alive,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity, self.size = capacity, size
        self.hold_bytes, self.hold_s, self.alive, self.clock = hold_bytes, hold_s, alive, clock
        self.lock = threading.Lock()
        self.kept: OrderedDict[Any, Any] = OrderedDict()
        self.making: dict[Any, Future] = {}
        self.holds: dict[str, list] = {}  # visitor -> [key, first held, last used]
        self.made = 0  # how many values were made (tests: one per key)

    def _hold(self, holder: str | None, key: Any) -> None:
        """(Under the lock.) The visitor holds this key now (their one hold), used now."""
        if holder is None or not self.hold_bytes:
            return
        now = self.clock()
        held = self.holds.get(holder)
        if held is not None and held[0] == key:
            held[2] = now
        else:
            self.holds[holder] = [key, now, now]

    def held(self) -> set[Any]:
        """The keys visitors hold now (under the lock or not): of visitors still there who used theirs within hold_s,
        those who held first, up to hold_bytes together. Holds of visitors gone or idle are forgotten."""
        now = self.clock()
        for sid, (_, _, used) in list(self.holds.items()):
            if now - used > self.hold_s or not self.alive(sid):
                self.holds.pop(sid, None)
        keys: set[Any] = set()
        total = 0
        for key, _, _ in sorted(self.holds.values(), key=lambda h: h[1]):
            if key in keys or key not in self.kept:
                continue
            size = self.size(self.kept[key])
            if total + size <= self.hold_bytes:
                keys.add(key)
                total += size
        return keys

    def get(self, key: Any, make: Callable[[], Any], waiting: str = "", holder: str | None = None) -> Any:
        """The value of key: kept, being made by another session (waited for), or made here by make(). holder: the
        visitor it is for, who holds it from now on (see the module's docstring)."""
        while True:
            with self.lock:
                if key in self.kept:
                    self.kept.move_to_end(key)
                    self._hold(holder, key)
                    return self.kept[key]
                future = self.making.get(key)
                mine = future is None
                if mine:
                    future = self.making[key] = Future()
            if mine:
                return self._make(key, make, future, holder)
            try:
                if waiting and _in_script():
                    with st.spinner(waiting, show_time=True):
                        return future.result(timeout=budget.WAIT_S)
                return future.result(timeout=budget.WAIT_S)
            except Abandoned:
                continue  # its maker stopped: make it here
            except TimeoutError:
                raise budget.Refused(f"{waiting} did not finish in {budget.WAIT_S:.0f} s: try again") from None

    def _make(self, key: Any, make: Callable[[], Any], future: Future, holder: str | None = None) -> Any:
        try:
            value = make()
        except BaseException as exc:
            with self.lock:
                del self.making[key]
            # an error of the input is every session's; a stopped script's control exception is only its own
            future.set_exception(exc if isinstance(exc, Exception) else Abandoned())
            raise
        with self.lock:
            del self.making[key]
            self.made += 1
            self.kept[key] = value
            self._hold(holder, key)
            held = self.held()
            total = sum(self.size(v) for k, v in self.kept.items() if k not in held)
            for old in [k for k in self.kept if k not in held and k != key]:  # the least recently used first
                if total <= self.capacity:
                    break
                total -= self.size(self.kept.pop(old))
        future.set_result(value)
        return value

    def clear(self) -> None:
        """Let go of what is kept, held or not (what sessions still draw stays theirs)."""
        with self.lock:
            self.kept.clear()
            self.holds.clear()

    def let_go(self) -> None:
        """The server's memory is short (a budget evictor): let go of what no visitor holds (`held`)."""
        with self.lock:
            held = self.held()
            for key in [k for k in self.kept if k not in held]:
                del self.kept[key]


def _in_script() -> bool:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    return get_script_run_ctx(suppress_warning=True) is not None


class Turns:
    """A fair queue of turns: at most `slots` turns at once, given in the order they were asked for. A visitor who
    wants several steps takes one turn a step and asks again after it, so visitors who step at once take turns."""

    def __init__(self, slots: int = 1) -> None:
        self.slots = slots
        self.busy = 0
        self.served = 0  # turns given (tests)
        self._line: deque[object] = deque()
        self._cond = threading.Condition()

    def waiting(self) -> int:
        """How many ask for a turn now and have none yet."""
        with self._cond:
            return len(self._line)

    @contextmanager
    def turn(self, timeout: float, on_wait: Callable[[int], None] | None = None) -> Iterator[None]:
        """One turn: waits while `slots` turns are taken or earlier askers wait (on_wait(ahead) told every second);
        TimeoutError after timeout seconds without one."""
        me = object()
        deadline = time.monotonic() + timeout
        with self._cond:
            self._line.append(me)
            try:
                while not (self._line[0] is me and self.busy < self.slots):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError("no turn")
                    if on_wait is not None:
                        on_wait(self._line.index(me) + self.busy)
                    self._cond.wait(min(left, 1.0))
            except BaseException:
                self._line.remove(me)
                self._cond.notify_all()
                raise
            self._line.popleft()
            self.busy += 1
            self.served += 1
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self.busy -= 1
                self._cond.notify_all()
