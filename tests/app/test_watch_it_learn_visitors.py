"""Watch it learn with several visitors (issue 38): each keeps their finished run while they are there, a run that
cannot be kept is said so beside Play before it is pressed, one run of their own a visitor, and the runs of a
visitor who left are cancelled. Each AppTest is a visitor: the pool tells them apart by session id (`Tabs`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from streamlit.testing.v1 import AppTest

from attention.models import tiny
from harness.charts import open_page
from server import sessions, training
from ui.views import watch_it_learn

STEPS = {"train_steps": "50", "train_every": "25"}


def settings(seed: int) -> tiny.Settings:
    return tiny.Settings(steps=50, every=25, seed=seed)


class Tabs:
    """Visitors' tabs: `sessions.current()` answers the name of the tab whose page runs, and `alive` the tabs open."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.who: str | None = None
        self.open: set[str] = set()
        monkeypatch.setattr(sessions, "current", lambda: self.who)

    def visit(self, name: str, seed: int) -> AppTest:
        self.who = name
        self.open.add(name)
        return open_page("watch_it_learn", train_seed=str(seed), **STEPS)

    def press(self, name: str, at: AppTest, key: str = "tr:play") -> AppTest:
        self.who = name
        at.button(key=key).click().run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    def rerun(self, name: str, at: AppTest) -> AppTest:
        self.who = name
        return at.run()

    def close(self, name: str) -> None:
        self.open.discard(name)


@pytest.fixture
def tabs(monkeypatch: pytest.MonkeyPatch) -> Tabs:
    return Tabs(monkeypatch)


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch, tabs: Tabs) -> Iterator[training.Service]:
    """The page's pool, training in its own thread, keeping three of these runs: as the server keeps three of the
    largest (a run of 50 steps trains in a second here; the largest take minutes)."""
    s = training.Service(processes=False, grace_s=0.0, sweep_s=3600.0, alive=lambda sid: sid in tabs.open)
    s.kept_bytes = 3 * settings(0).run_bytes
    s.small_bytes = 0  # these runs stand for the largest: none takes the small runs' reserve
    monkeypatch.setattr(watch_it_learn, "service", lambda: s)
    yield s
    s.shutdown()


def wait(job: training.Job | None, timeout: float = 120.0) -> None:
    assert job is not None
    end = time.monotonic() + timeout
    while not job.finished_training:
        assert time.monotonic() < end, f"{job.status} at step {job.step}"
        time.sleep(0.05)


def said(at: AppTest) -> str:
    return " ".join(x.value for x in [*at.info, *at.success, *at.warning, *at.error, *at.caption])


def test_three_visitors_keep_their_runs_and_a_fourth_is_told_before_play(service: training.Service, tabs: Tabs) -> None:
    pages = {name: tabs.visit(name, seed) for name, seed in (("a", 1), ("b", 2), ("c", 3))}
    for name, at in pages.items():
        tabs.press(name, at)
    for seed in (1, 2, 3):
        wait(service.get(settings(seed)))
    for name, at in pages.items():  # every visitor's finished run is there, and the page says for how long
        tabs.rerun(name, at)
        assert any(s.value.startswith("Trained: 50 steps") and "Kept for you while this page is open" in s.value
                   for s in at.success), said(at)  # fmt: skip
    fourth = tabs.visit("d", 4)
    assert fourth.button(key="tr:play").disabled and fourth.button(key="tr:step").disabled
    warning = " ".join(w.value for w in fourth.warning)
    assert "This run would keep" in warning and "Play is back when one of them leaves" in warning
    info = " ".join(i.value for i in fourth.info)  # no "Press Play" under a Play that is off
    assert "Press **Play**" not in info and "Play comes back on by itself" in info
    assert [j.settings.seed for j in service.kept()] == [1, 2, 3]
    tabs.close("a")  # a's tab closes: a's run may make room now
    service.sweep()
    tabs.rerun("d", fourth)
    assert not fourth.button(key="tr:play").disabled and not fourth.warning
    assert any("Press **Play**" in i.value for i in fourth.info)
    tabs.press("d", fourth)
    wait(service.get(settings(4)))
    assert [j.settings.seed for j in service.kept()] == [2, 3, 4]
    for name in ("b", "c"):
        tabs.rerun(name, pages[name])
        assert any(s.value.startswith("Trained: 50 steps") for s in pages[name].success), said(pages[name])


def test_a_visitor_has_one_queued_run_and_a_leaver_s_queued_run_is_cancelled(
    service: training.Service, tabs: Tabs, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate, trained = threading.Event(), []
    real = tiny.advance

    def held(settings: dict, *args: object) -> tuple:
        trained.append(settings["seed"])
        gate.wait(60)
        return real(settings, *args)

    monkeypatch.setattr(tiny, "advance", held)
    try:
        first = tabs.press("a", tabs.visit("a", 1))
        page = tabs.press("d", tabs.visit("d", 4))
        assert "Queued: 1 run ahead of this one" in said(page)
        page.number_input(key="w:train_seed").set_value(5)
        tabs.rerun("d", page)  # another setting: the page says that Play here cancels the queued one
        assert "Your run of another setting waits in the queue: Play here cancels it" in said(page)
        tabs.press("d", page)
        assert service.get(settings(4)) is None and "Queued: 1 run ahead of this one" in said(page)
        tabs.close("d")  # d leaves while their run waits
        service.sweep()
        assert service.get(settings(5)) is None and service.queue_position(service.get(settings(1))) == 0
    finally:
        gate.set()
    wait(service.get(settings(1)))
    tabs.rerun("a", first)
    assert any(s.value.startswith("Trained: 50 steps") for s in first.success)
    assert 1 in trained and not {4, 5} & set(trained), "a cancelled run trained"  # (0: the warm-up's steps)


def test_the_small_runs_reserve_keeps_play_on_beside_three_tabs_holding_the_room(
    service: training.Service, tabs: Tabs
) -> None:
    """Issue 50: three tabs holding the largest runs turned Play off for everyone, the default setting included.
    Here runs of 2 snapshots stand for the largest and one of 1 snapshot for the default: it is small, and its Play
    stays on while the three hold every byte of the room."""
    small = tiny.Settings(steps=50, every=50, seed=7)
    service.small_bytes = service.reserve_bytes = small.run_bytes
    pages = {name: tabs.visit(name, seed) for name, seed in (("a", 1), ("b", 2), ("c", 3))}
    for name, at in pages.items():
        tabs.press(name, at)
    for seed in (1, 2, 3):
        wait(service.get(settings(seed)))
    large = tabs.visit("d", 4)  # a fourth large one is still told to wait
    assert large.button(key="tr:play").disabled
    tabs.who = "e"
    tabs.open.add("e")
    page = open_page("watch_it_learn", train_seed="7", train_steps="50", train_every="50")
    assert not page.button(key="tr:play").disabled and not page.warning, said(page)
    tabs.press("e", page)
    wait(service.get(small))
    assert service.get(small).status == "done"
    assert [j.settings.seed for j in service.kept()] == [1, 2, 3, 7]
