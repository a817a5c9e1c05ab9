"""What the whole server shares (server/shared.py): a visitor's held value survives a memory eviction while they
use it (issue 50: every run that waited for memory cleared the chat page's runs and generations), and the fair queue
of turns the chat page's generating visitors take one model step at a time in."""

from __future__ import annotations

import threading
import time

import pytest

from server.shared import Shared, Turns


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def held_cache(present: set[str], clock: Clock, hold_bytes: int = 100) -> Shared:
    return Shared(1000, lambda v: v, hold_bytes=hold_bytes, hold_s=90.0, alive=present.__contains__, clock=clock)


def test_an_eviction_spares_what_a_visitor_is_stepping_through_and_lets_go_of_the_rest() -> None:
    present, clock = {"a", "b"}, Clock()
    shared = held_cache(present, clock)
    shared.get("a-prompt", lambda: 30, holder="a")
    shared.get("b-prompt", lambda: 30, holder="b")
    shared.get("nobody's", lambda: 30)
    shared.let_go()  # what server/budget.py calls for a run that waits for memory
    assert set(shared.kept) == {"a-prompt", "b-prompt"}
    made = shared.made
    assert shared.get("a-prompt", lambda: pytest.fail("made again"), holder="a") == 30 and shared.made == made


def test_a_hold_ends_when_its_visitor_leaves_idles_or_holds_another() -> None:
    present, clock = {"a", "b", "c"}, Clock()
    shared = held_cache(present, clock)
    for who in "abc":
        shared.get(who, lambda: 10, holder=who)
    present.discard("a")  # a's tab closed
    clock.now = 60.0
    shared.get("b", lambda: 10, holder="b")  # b clicks again; c has not since
    clock.now = 120.0  # c idle for 120 s > hold_s; b for 60 s
    shared.get("c2", lambda: 10, holder="c")  # ... and c's next click holds another value: one hold a visitor
    shared.let_go()
    assert set(shared.kept) == {"b", "c2"}


def test_holds_are_bounded_in_bytes_and_the_visitors_who_held_first_keep_theirs() -> None:
    """Round-robin steppers must not each lose theirs in turn: who held first keeps, a later one beyond pays."""
    present, clock = {"a", "b", "c"}, Clock()
    shared = held_cache(present, clock, hold_bytes=70)
    for who in "abc":
        clock.now += 1
        shared.get(who, lambda: 30, holder=who)
    for who in "cba":  # the latest user is a: still, c (the third to hold) is the one beyond the bound
        clock.now += 1
        shared.get(who, lambda: 30, holder=who)
    shared.let_go()
    assert set(shared.kept) == {"a", "b"}


def test_a_new_value_over_capacity_lets_go_of_unheld_ones_never_of_held_ones() -> None:
    present, clock = {"a"}, Clock()
    shared = Shared(50, lambda v: v, hold_bytes=40, alive=present.__contains__, clock=clock)
    shared.get("held", lambda: 40, holder="a")
    shared.get("x", lambda: 30)
    shared.get("y", lambda: 30)
    assert list(shared.kept) == ["held", "y"]


def test_generating_visitors_take_turns_one_step_each_in_the_order_they_asked() -> None:
    turns = Turns(slots=1)
    order: list[str] = []
    gate = threading.Event()

    def visitor(name: str, steps: int) -> None:
        for _ in range(steps):
            with turns.turn(30):
                order.append(name)
                gate.wait(10)
                time.sleep(0.01)

    threads = []
    for name in "abc":  # a asks for many, b and c a few; all ask at about the same time
        threads.append(threading.Thread(target=visitor, args=(name, 5 if name == "a" else 2)))
        threads[-1].start()
        while turns.waiting() + turns.busy < len(threads):
            time.sleep(0.005)
    gate.set()
    for t in threads:
        t.join(30)
    assert order[:6] == ["a", "b", "c", "a", "b", "c"] and order[6:] == ["a"] * 3  # nobody waits for a's five


def test_a_turn_not_given_in_time_is_a_timeout_and_leaves_the_line() -> None:
    turns = Turns(slots=1)
    told: list[int] = []
    with turns.turn(1):
        with pytest.raises(TimeoutError):
            with turns.turn(0.3, told.append):
                pass
        assert turns.waiting() == 0 and told == [1]
    with turns.turn(1):  # the line moves on
        assert turns.busy == 1
