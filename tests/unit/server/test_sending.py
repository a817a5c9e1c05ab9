"""What the server has drawn and not yet sent (server/sending.py): each websocket's send queue counts its bytes and
calls what waits for it once it has sent everything, so a page's drawing counts under the memory ceiling until
the browser has taken its messages (issue 50: Streamlit holds them, up to 500 a session, in memory until then)."""

from __future__ import annotations

import asyncio

from server import budget, sending
from server.budget import MB, Admission


def test_a_queue_counts_what_it_holds_and_calls_what_waits_once_it_has_sent_it() -> None:
    async def scenario() -> list[str]:
        queue = sending._CountedQueue(500)
        before = sending.queued_bytes()
        told: list[str] = []
        queue.put_nowait(b"x" * 1000)
        queue.put_nowait(b"y" * 500)
        queue.when_sent(lambda: told.append("sent"))
        assert queue.bytes == 1500 and sending.queued_bytes() == before + 1500
        assert await queue.get() == b"x" * 1000
        assert told == [] and queue.bytes == 500  # one message still to send
        queue.put_nowait(b"z" * 10)  # put before the queue emptied: waited for too
        await queue.get()
        assert told == []
        await queue.get()
        assert told == ["sent"] and queue.bytes == 0 and sending.queued_bytes() == before
        queue.put_nowait(b"w")
        await queue.get()
        assert told == ["sent"]  # told once
        queue.put_nowait(b"v" * 7)
        queue.when_sent(lambda: told.append("closed"))
        queue.drop()  # the websocket closed: nothing more will be sent
        assert told == ["sent", "closed"] and sending.queued_bytes() == before
        return told

    asyncio.run(scenario())


def test_without_a_server_a_session_has_nothing_queued() -> None:
    told: list[int] = []
    sending.when_sent("no such session", lambda: told.append(1))
    assert told == [1]


def test_a_drawing_counts_until_the_sessions_messages_are_sent(monkeypatch) -> None:
    """At the end of its run a page's drawing is handed over to its messages: it counts until they are sent, and
    the session's next run counts a drawing of its own, which that sending does not let go of."""
    b = Admission(1000 * MB, ceiling=1000 * MB, memory=lambda: 0)
    waiting: list = []
    monkeypatch.setattr(budget, "_script_run", lambda: "s1")
    monkeypatch.setattr(sending, "when_sent", lambda session, fn: waiting.append((session, fn)))
    b.draw("s1", 40 * MB)
    budget.drawn(b)  # the run ended: its messages are on their way
    assert b.drawing == 40 * MB and [s for s, _ in waiting] == ["s1"]
    b.draw("s1", 30 * MB)  # the session's next run draws
    assert b.drawing == 70 * MB
    waiting.pop()[1]()  # the first run's messages are sent
    assert b.drawing == 30 * MB


def test_a_runtime_without_sessions_sends_at_once(monkeypatch) -> None:
    """AppTest's runtime is a stand-in with no session manager: a page run there is drawn when it ends."""
    from streamlit import runtime

    monkeypatch.setattr(runtime, "exists", lambda: True)
    monkeypatch.setattr(runtime, "get_instance", lambda: object())
    told: list[int] = []
    sending.when_sent("a session", lambda: told.append(1))
    assert told == [1]
