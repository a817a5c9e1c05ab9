"""The warm-up waits for the first page while a visitor's script run is in progress, starts at once on a server
nobody has opened, and runs what was registered after the imports, a failing chore not stopping the next."""

from __future__ import annotations

import threading
import time

import pytest

from server import warmup


@pytest.fixture
def fresh(monkeypatch):
    """The module's process-wide state, new for the test."""
    monkeypatch.setattr(warmup, "page_drawn", threading.Event())
    monkeypatch.setattr(warmup, "_started", threading.Event())
    monkeypatch.setattr(warmup, "AFTER", [])
    monkeypatch.setattr(warmup, "WARM", ())


def script_run(stop: threading.Event) -> threading.Thread:
    """A thread named as Streamlit names a session's script run, alive until `stop`."""
    thread = threading.Thread(target=stop.wait, name=warmup.SCRIPT_THREAD, daemon=True)
    thread.start()
    return thread


def test_nobody_waiting_starts_it_once_idle(fresh) -> None:
    t0 = time.monotonic()
    assert warmup.wait_for_first_page(page_wait_s=5, idle_s=0.2) == "idle"
    assert 0.2 <= time.monotonic() - t0 < 2


def test_a_script_run_in_progress_holds_it_until_the_page_is_drawn(fresh) -> None:
    stop = threading.Event()
    script_run(stop)
    try:
        threading.Timer(0.6, warmup.page_drawn.set).start()
        t0 = time.monotonic()
        assert warmup.wait_for_first_page(page_wait_s=5, idle_s=0.1) == "drawn"
        assert time.monotonic() - t0 >= 0.5  # not "idle" after 0.1 s: a visitor's run was in progress
    finally:
        stop.set()


def test_a_run_that_never_draws_is_waited_for_at_most_page_wait_s(fresh) -> None:
    stop = threading.Event()
    script_run(stop)
    try:
        assert warmup.wait_for_first_page(page_wait_s=0.3, idle_s=0.05) == "timeout"
    finally:
        stop.set()


def test_warm_after_runs_every_chore_once_a_failing_one_included(fresh) -> None:
    done = threading.Event()
    ran: list[str] = []

    def broken() -> None:
        ran.append("broken")
        raise RuntimeError("a model missing")

    warmup.after_warm(broken)
    warmup.after_warm(lambda: (ran.append("next"), done.set()))
    finished = threading.Thread(target=lambda: None)
    finished.start()
    warmup.page_drawn.set()
    warmup.warm_after(finished)
    warmup.warm_after(finished)  # once a process
    assert done.wait(5)
    time.sleep(0.1)
    assert ran == ["broken", "next"]


def test_a_test_or_a_shell_starts_nothing(fresh) -> None:
    warmup.after_warm(lambda: pytest.fail("ran"))
    warmup.warm_after(threading.main_thread())
    assert not warmup._started.is_set()
