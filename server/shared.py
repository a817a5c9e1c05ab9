"""Values made once per key across the whole server and kept within a byte capacity: a session asking for a
key another session is making waits for that one instead of making it again. The Real model page keeps its
Readings and heads here (ui/pages/model.py), the Head atlas its atlases (ui/pages/atlas.py).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import streamlit as st

from . import budget


class Abandoned(Exception):
    """The session making a Reading stopped (its visitor reran or left): a session waiting for it makes it."""


class Shared:
    """Values made once per key at a time and kept, most recently used last, up to `capacity` bytes (the newest
    is kept whatever its size): a session asking for a key another session is making waits for that one."""

    def __init__(self, capacity: int, size: Callable[[Any], int]) -> None:
        self.capacity, self.size = capacity, size
        self.lock = threading.Lock()
        self.kept: OrderedDict[Any, Any] = OrderedDict()
        self.making: dict[Any, Future] = {}
        self.made = 0  # how many values were made (tests: one per key)

    def get(self, key: Any, make: Callable[[], Any], waiting: str = "") -> Any:
        while True:
            with self.lock:
                if key in self.kept:
                    self.kept.move_to_end(key)
                    return self.kept[key]
                future = self.making.get(key)
                mine = future is None
                if mine:
                    future = self.making[key] = Future()
            if mine:
                return self._make(key, make, future)
            try:
                if waiting and _in_script():
                    with st.spinner(waiting, show_time=True):
                        return future.result(timeout=budget.WAIT_S)
                return future.result(timeout=budget.WAIT_S)
            except Abandoned:
                continue  # its maker stopped: make it here
            except TimeoutError:
                raise budget.Refused(f"{waiting} did not finish in {budget.WAIT_S:.0f} s: try again") from None

    def _make(self, key: Any, make: Callable[[], Any], future: Future) -> Any:
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
            total = sum(self.size(v) for v in self.kept.values())
            while total > self.capacity and len(self.kept) > 1:
                total -= self.size(self.kept.popitem(last=False)[1])
        future.set_result(value)
        return value

    def clear(self) -> None:
        """Let go of what is kept (what sessions still draw stays theirs)."""
        with self.lock:
            self.kept.clear()


def _in_script() -> bool:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    return get_script_run_ctx(suppress_warning=True) is not None
