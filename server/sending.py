"""What the server has drawn and not yet sent: Streamlit queues each session's messages, serialized, until its
websocket takes them, and holds them in memory meanwhile (up to 500 messages a session: bounded in number, not in
bytes). A heavy page's run is over in milliseconds once its Result is computed, while its 5-10 MB of messages wait
for the browser: a phone on a slow network, or six visitors at once, keep them for seconds, and under the hosted
limit that memory was in no count (issue 50: six heavy pages drawn at once took the process 80-100 MB past its
ceiling, after every run had been admitted). So a page's drawing counts under the ceiling until its messages are
sent (server/budget.py, `drawn`), told here by the session's own send queue.

`install()` (once a process, server.start) makes every websocket's send queue a `_CountedQueue`: the bytes it
holds, and what to do once it has sent everything it was given. `when_sent(session_id, fn)` calls fn once that
session's queue has sent what it holds (at once where there is no such queue: AppTest, another server).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)
_LOCK = threading.Lock()  # the callbacks are added from script threads and called on the event loop


class _Counts:
    """The process's own: the bytes every session's send queue holds now (benchmarks, tests), and whether the
    queues are counted (None until `install` is first called)."""

    def __init__(self) -> None:
        self.queued = 0
        self.installed: bool | None = None


COUNTS = _Counts()


class _CountedQueue(asyncio.Queue):
    """A websocket's send queue (Streamlit's own, an asyncio.Queue of serialized messages) that counts the bytes it
    holds and calls what waits for it once it has handed out everything it was given."""

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self.bytes = 0
        self.waiting: list[Callable[[], None]] = []

    def put_nowait(self, item: Any) -> None:
        super().put_nowait(item)
        with _LOCK:
            self.bytes += len(item)
            COUNTS.queued += len(item)

    def get_nowait(self) -> Any:
        item = super().get_nowait()  # asyncio.Queue.get() ends here too
        with _LOCK:
            self.bytes -= len(item)
            COUNTS.queued -= len(item)
            done, self.waiting = (self.waiting, []) if self.empty() else ([], self.waiting)
        _call(done)
        return item

    def when_sent(self, fn: Callable[[], None]) -> None:
        """fn() once this queue has handed out what it holds and what is put into it before then: the run that
        asks has ended, so its last messages (Streamlit's "script finished" at least) are still to come."""
        with _LOCK:
            self.waiting.append(fn)

    def drop(self) -> None:
        """The websocket closed: nothing more is sent; what waited for it goes on now."""
        with _LOCK:
            done, self.waiting = self.waiting, []
            COUNTS.queued -= self.bytes
            self.bytes = 0
        _call(done)


def _call(fns: list[Callable[[], None]]) -> None:
    for fn in fns:
        try:
            fn()
        except Exception:  # noqa: BLE001 -- one callback must not stop the queue
            log.exception("a callback waiting for a session's messages failed")


def queued_bytes() -> int:
    """The bytes every session's send queue holds now."""
    return COUNTS.queued


def _queue_of(session_id: str) -> _CountedQueue | None:
    from streamlit import runtime

    if not runtime.exists():
        return None
    try:  # Streamlit's own runtime; AppTest's is a stand-in without sessions
        info = runtime.get_instance()._session_mgr.get_active_session_info(session_id)
    except AttributeError:
        return None
    queue = getattr(getattr(info, "client", None), "_send_queue", None)
    return queue if isinstance(queue, _CountedQueue) else None


def when_sent(session_id: str, fn: Callable[[], None]) -> None:
    """fn() once the session's messages queued now and until then are sent; at once where the session has no
    counted queue (no server, a closed websocket, a server this module does not know)."""
    queue = _queue_of(session_id)
    if queue is None:
        fn()
    else:
        queue.when_sent(fn)


def install() -> bool:
    """Count every websocket's send queue from now on (once a process). False where Streamlit's server is not the
    Starlette one this knows."""
    with _LOCK:
        if COUNTS.installed is None:
            COUNTS.installed = _install()
        return COUNTS.installed


def _install() -> bool:
    try:
        from streamlit.web.server.starlette import starlette_websocket
    except ImportError:
        return False
    client = getattr(starlette_websocket, "StarletteSessionClient", None)
    if client is None or not hasattr(client, "aclose"):
        return False
    init, aclose = client.__init__, client.aclose

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        # the sender task looks the queue up at each message, and starts once the event loop runs again
        self._send_queue = _CountedQueue(self._send_queue.maxsize)

    async def close(self: Any) -> None:
        try:
            await aclose(self)
        finally:
            if isinstance(getattr(self, "_send_queue", None), _CountedQueue):
                self._send_queue.drop()

    client.__init__, client.aclose = __init__, close
    return True
