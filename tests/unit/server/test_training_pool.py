"""The training pool keeps each visitor's runs while they are there, one run of their own a visitor, and cancels the
runs of visitors who left (issue 38). A fake trainer stands in for tiny.advance: these test the pool, not the
math, in milliseconds; tests/app/test_watch_it_learn.py trains for real."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from attention.models import tiny
from server import training

# the largest settings (about 44 MB kept each): three fit KEPT_BYTES, a fourth does not
LARGE = tiny.Settings(layers=3, heads=4, d_model=64, steps=1000, every=5)
SMALL = tiny.Settings(steps=50, every=25)


class FakeTrainer:
    """tiny.advance without torch: each chunk returns its snapshots at once (one small real snapshot, repeated),
    unless its setting's gate is closed; records every chunk it was asked for."""

    def __init__(self) -> None:
        self.snapshot = tiny.train(tiny.Settings(layers=1, heads=1, d_model=8, steps=1, every=1)).snapshots[0]
        self.gates: dict[int, threading.Event] = {}  # seed -> open?
        self.asked: list[int] = []  # the seeds of the chunks trained

    def hold(self, seed: int) -> threading.Event:
        return self.gates.setdefault(seed, threading.Event())

    def __call__(self, settings: dict, state: dict | None, steps: int) -> tuple[dict, list, None]:
        self.asked.append(settings["seed"])
        gate = self.gates.get(settings["seed"])
        if gate is not None:
            assert gate.wait(30), "a gate was never opened"
        at = (state or {"step": 0})["step"]
        steps = min(steps, settings["steps"] - at)  # as tiny.Trainer: never past the run's steps
        snaps = [self.snapshot.to_dict()] * (steps // settings["every"])
        return {"step": at + steps}, snaps, None


class Visitors:
    """Which sessions are connected (the pool's `alive`)."""

    def __init__(self) -> None:
        self.present: set[str] = set()

    def come(self, *names: str) -> None:
        self.present.update(names)

    def leave(self, name: str) -> None:
        self.present.discard(name)

    def __call__(self, session: str) -> bool:
        return session in self.present


@pytest.fixture
def trainer(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTrainer]:
    fake = FakeTrainer()
    monkeypatch.setattr(tiny, "advance", fake)
    yield fake
    for gate in fake.gates.values():
        gate.set()


@pytest.fixture
def visitors() -> Visitors:
    return Visitors()


@pytest.fixture
def service(trainer: FakeTrainer, visitors: Visitors) -> Iterator[training.Service]:
    """Training in the server's process, one run at a time; a tab gone counts as left at once (grace 0)."""
    s = training.Service(processes=False, grace_s=0.0, sweep_s=3600.0, alive=visitors)
    yield s
    s.shutdown()


def wait(job: training.Job, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not job.finished_training:
        assert time.monotonic() < end, f"{job.status} at step {job.step}"
        time.sleep(0.01)


def test_three_visitors_at_the_largest_settings_each_keep_their_run(
    service: training.Service, visitors: Visitors
) -> None:
    visitors.come("a", "b", "c", "d")
    jobs: dict[str, training.Job] = {}
    settings = {name: LARGE.replace(seed=i) for i, name in enumerate("abcd")}
    presses = [threading.Thread(target=lambda n=n: jobs.__setitem__(n, service.start(settings[n], n))) for n in "abc"]
    for t in presses:
        t.start()
    for t in presses:
        t.join()
    for name in "abc":
        wait(jobs[name])
    assert {n: j.status for n, j in jobs.items()} == {"a": "done", "b": "done", "c": "done"}
    for name in "abc":  # every finished run is still there for its visitor
        assert service.see(settings[name], name) is jobs[name]
        assert len(jobs[name].snapshots) == LARGE.steps // LARGE.every  # the fake's: one a snapshot interval
    assert service.kept_bytes_used() == 3 * LARGE.run_bytes <= training.KEPT_BYTES
    # a fourth large run does not fit beside them: refused before Play, and Play takes nothing away
    said = service.room(settings["d"], "d")
    assert said is not None and said.startswith(f"This run would keep {LARGE.run_bytes / 2**20:.0f} MB of weights")
    with pytest.raises(training.NoRoom, match="Play is back when one of them leaves"):
        service.start(settings["d"], "d")
    assert [j.settings for j in service.kept()] == [settings[n] for n in "abc"]
    # a small run still fits in what is left
    assert service.room(SMALL, "d") is None
    # once a visitor leaves, their run makes the room: theirs goes, the others stay
    visitors.leave("a")
    service.sweep()
    assert service.room(settings["d"], "d") is None
    fourth = service.start(settings["d"], "d")
    wait(fourth)
    assert service.get(settings["a"]) is None
    assert all(service.get(settings[n]) is not None for n in "bcd")


def test_a_run_that_finished_seconds_ago_is_not_evicted_for_a_newer_one(
    service: training.Service, visitors: Visitors
) -> None:
    """The LRU used to evict the oldest finished run whatever its visitor was doing (one visitor's run vanished when
    another pressed Play): now only unheld ones go, least recently used first."""
    service.kept_bytes = 2 * LARGE.run_bytes
    visitors.come("a", "b", "c")
    old = service.start(LARGE.replace(seed=1), "a")
    wait(old)
    visitors.leave("a")  # a's run is unheld now: it may go
    mine = service.start(LARGE.replace(seed=2), "b")
    wait(mine)
    third = service.start(LARGE.replace(seed=3), "c")  # needs room: the unheld one goes, not b's
    wait(third)
    assert service.get(LARGE.replace(seed=1)) is None
    assert service.get(LARGE.replace(seed=2)) is mine and service.get(LARGE.replace(seed=3)) is third


def test_unheld_runs_go_least_recently_used_first(service: training.Service, visitors: Visitors) -> None:
    service.kept_bytes = 3 * LARGE.run_bytes
    visitors.come("x")
    runs = [service.start(LARGE.replace(seed=i)) for i in range(3)]  # no visitor: none held
    for job in runs:
        wait(job)
    runs[0].used = time.monotonic()  # the first is the most recently used, the second the least
    service.start(LARGE.replace(seed=9), "x")
    assert [j.settings.seed for j in service.kept()] == [0, 2, 9]


def test_a_queued_run_whose_visitor_left_is_cancelled_and_never_trains(
    service: training.Service, visitors: Visitors, trainer: FakeTrainer
) -> None:
    visitors.come("a", "d")
    gate = trainer.hold(1)
    first = service.start(SMALL.replace(seed=1), "a")
    fourth = service.start(SMALL.replace(seed=4), "d")
    while first.status != "training":
        time.sleep(0.01)
    assert fourth.status == "queued" and service.queue_position(fourth) == 1
    visitors.leave("d")
    service.sweep()
    assert fourth.status == "cancelled" and fourth.message == "its visitors left"
    assert service.get(SMALL.replace(seed=4)) is None
    gate.set()
    wait(first)
    time.sleep(0.1)  # the driver picks the cancelled one up, and drops it
    assert 4 not in trainer.asked and first.status == "done"


def test_a_training_run_whose_visitors_left_stops_between_chunks(
    service: training.Service, visitors: Visitors, trainer: FakeTrainer
) -> None:
    visitors.come("a", "b")
    gate = trainer.hold(1)
    job = service.start(SMALL.replace(seed=1), "a")
    service.see(SMALL.replace(seed=1), "b")  # b watches a's run
    while job.status != "training":
        time.sleep(0.01)
    visitors.leave("a")
    service.sweep()
    assert job.status == "training", "b still watches it"
    visitors.leave("b")
    gate.set()
    wait(job)
    # one chunk of this run, then nobody to train it for (a run of an earlier test may still finish its chunk)
    assert job.status == "cancelled" and trainer.asked.count(1) == 1


def test_one_queued_run_a_visitor_a_second_play_replaces_the_first(
    service: training.Service, visitors: Visitors, trainer: FakeTrainer
) -> None:
    visitors.come("a", "b", "c")
    gate = trainer.hold(0)
    busy = service.start(SMALL.replace(seed=0), "c")
    while busy.status != "training":
        time.sleep(0.01)
    first = service.start(SMALL.replace(seed=1), "a")
    assert service.own("a") is first and first.status == "queued"
    second = service.start(SMALL.replace(seed=2), "a")
    assert first.status == "cancelled" and first.message == "its visitor started another run"
    assert service.get(SMALL.replace(seed=1)) is None
    assert service.own("a") is second and service.queue_position(second) == 1  # c's ahead, none of a's own
    # a run another visitor looks at too is not a's alone: a's next Play leaves it queued
    assert service.see(SMALL.replace(seed=2), "b") is second
    third = service.start(SMALL.replace(seed=3), "a")
    assert second.status == "queued" and service.own("a") is third
    gate.set()
    for job in (busy, second, third):
        wait(job)
    assert [busy.status, second.status, third.status] == ["done"] * 3 and 1 not in trainer.asked


def test_a_tab_that_reconnects_within_the_grace_keeps_its_runs(trainer: FakeTrainer, visitors: Visitors) -> None:
    service = training.Service(processes=False, grace_s=60.0, sweep_s=3600.0, alive=visitors)
    try:
        visitors.come("a")
        gate = trainer.hold(1)
        job = service.start(SMALL.replace(seed=1), "a")
        visitors.leave("a")
        service.sweep()
        assert job.status in ("queued", "training")
        visitors.come("a")
        service.sweep()
        gate.set()
        wait(job)
        assert job.status == "done"
    finally:
        service.shutdown()


def test_a_held_run_is_held_for_hold_s_after_its_last_use_at_most(
    service: training.Service, visitors: Visitors
) -> None:
    service.kept_bytes = LARGE.run_bytes
    visitors.come("a", "b")
    first = service.start(LARGE.replace(seed=1), "a")
    wait(first)
    assert service.room(LARGE.replace(seed=2), "b") is not None
    service.hold_s = 0.0  # "a" is still connected, but has not used it for longer than the stated time
    assert service.room(LARGE.replace(seed=2), "b") is None
    service.start(LARGE.replace(seed=2), "b")
    assert service.get(LARGE.replace(seed=1)) is None


def test_a_service_shut_down_trains_no_further_chunk(
    service: training.Service, visitors: Visitors, trainer: FakeTrainer
) -> None:
    visitors.come("a")
    gate = trainer.hold(5)
    job = service.start(SMALL.replace(seed=5), "a")
    while job.status != "training":
        time.sleep(0.01)
    service.shutdown()
    gate.set()
    end = time.monotonic() + 30
    while job.status == "training":
        assert time.monotonic() < end
        time.sleep(0.01)
    time.sleep(0.1)
    assert job.status == "cancelled" and job.message == "the server stopped" and trainer.asked.count(5) == 1


def test_a_run_larger_than_what_the_server_keeps_is_said_so(service: training.Service) -> None:
    service.kept_bytes = LARGE.run_bytes - 1
    said = service.room(LARGE, "a")
    assert said is not None and "more than the" in said and "this server keeps for all its visitors' runs" in said


def test_the_budget_being_short_lets_go_of_unheld_runs_and_the_scrub_cache(
    service: training.Service, visitors: Visitors
) -> None:
    visitors.come("a")
    held = service.start(SMALL.replace(seed=1), "a")
    spare = service.start(SMALL.replace(seed=2))
    wait(held)
    wait(spare)
    service.see(SMALL.replace(seed=1), "a")
    service.scrub.get("k", lambda: bytearray(10), "a", nbytes=len)
    training._let_go()  # what server/budget.py calls when a large run does not fit
    assert [j.settings.seed for j in service.kept()] == [1] and len(service.scrub) == 0


def test_three_tabs_at_the_largest_setting_never_turn_the_default_run_off(
    service: training.Service, visitors: Visitors
) -> None:
    """Issue 50: three visitors holding the largest kept runs filled the room, and Play was off for everyone for
    up to 30 minutes, the default setting and the course's lesson 12 included. Small runs have a reserve."""
    from attention.lessons.course.models import lesson_settings

    service.kept_bytes = 3 * LARGE.run_bytes  # full to the byte with the three largest
    visitors.come("a", "b", "c", "d", "e")
    for i, name in enumerate("abc"):
        wait(service.start(LARGE.replace(seed=i), name))
    assert service.room(LARGE.replace(seed=9), "d") is not None  # a fourth large one still waits, and is told so
    for small in (tiny.Settings(), lesson_settings({"train_seed": 3})):
        assert service.room(small, "d") is None, small
    default = service.start(tiny.Settings(), "d")
    lesson = service.start(lesson_settings({"train_seed": 3}), "e")
    wait(default)
    wait(lesson)
    assert all(service.get(LARGE.replace(seed=i)) is not None for i in range(3))  # the large ones stay theirs


def test_a_reserve_full_of_small_runs_lets_the_oldest_finished_one_go(
    service: training.Service, visitors: Visitors
) -> None:
    service.kept_bytes = 3 * LARGE.run_bytes
    service.reserve_bytes = 2 * SMALL.run_bytes
    visitors.come("a", "b", "c", "s", "t", "u")
    for i, name in enumerate("abc"):
        wait(service.start(LARGE.replace(seed=i), name))
    first = service.start(SMALL.replace(seed=1), "s")
    wait(first)
    second = service.start(SMALL.replace(seed=2), "t")
    wait(second)
    second.used = time.monotonic()
    first.used = second.used - 10  # s looked at theirs longest ago
    assert service.room(SMALL.replace(seed=3), "u") is None
    wait(service.start(SMALL.replace(seed=3), "u"))
    assert service.get(SMALL.replace(seed=1)) is None and service.get(SMALL.replace(seed=2)) is second
    assert all(service.get(LARGE.replace(seed=i)) is not None for i in range(3))


def test_a_small_run_that_finds_even_the_reserve_training_is_told_to_wait_not_to_change_it(
    service: training.Service, visitors: Visitors, trainer: FakeTrainer
) -> None:
    """The course's lesson 12 cannot change its run's size: a refusal there names no setting to change."""
    service.kept_bytes = 0
    service.reserve_bytes = SMALL.run_bytes
    visitors.come("a", "b")
    trainer.hold(1)
    service.start(SMALL.replace(seed=1), "a")
    said = service.room(SMALL.replace(seed=2), "b")
    assert said is not None and "starts as soon as one of them finishes" in said
    assert "smaller" not in said and "fewer steps" not in said
