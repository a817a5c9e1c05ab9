"""The server's admission (server/budget.py, `Admission`): fair and sized. Runs that wait are served in the order
they asked, a small run that fits goes ahead of a large one that does not (within a bounded share), no run waits
while what it needs is free, and a wait or a refusal names the limit that holds it with its numbers.

The memory reading and the clock are injected: the order is decided by `ask`/`serve`/`finish` alone, no thread and
no sleep (except where `acquire` itself is the subject).
"""

from __future__ import annotations

import logging

import pytest

from server import budget
from server.budget import MB, Admission, Refused, Shortage

MIB = 2**20


def under_a_limit(memory: list[int], **kw) -> Admission:
    """An admission under a 1,000 MB ceiling, the process holding memory[0] bytes (besides the runs computing)."""
    return Admission(1000 * MB, ceiling=1000 * MB, memory=lambda: memory[0], **kw)


# --------------------------------------------------------------------------- the order


def test_a_small_run_goes_ahead_of_a_large_one_that_does_not_fit() -> None:
    memory = [900 * MB]
    b = under_a_limit(memory)
    large = b.ask(300 * MB)  # 900 + 300 > 1000: waits
    small = b.ask(50 * MB)  # 900 + 50 fits now: not held behind it
    assert large.ticket is None
    assert small.ticket is not None and small.ticket.passed
    b.finish(small.ticket)
    memory[0] = 600 * MB  # the memory came down: the large one goes in at the next look
    b.serve()
    assert large.ticket is not None and not large.ticket.passed


def test_runs_of_one_size_keep_their_order() -> None:
    b = Admission(100, small=40, pass_share=60)
    held = b.try_acquire(100)
    large_1, large_2 = b.ask(90), b.ask(80)
    small_1, small_2 = b.ask(30), b.ask(20)
    b.finish(held, keep=75)  # 25 free: small_2 (20) fits, but small_1 (30) asked first and does not
    assert [w.ticket for w in (large_1, large_2, small_1, small_2)] == [None] * 4
    b.release(75 - 15)  # 85 free: large_2 (80) fits, large_1 (90) asked first; both smalls fit past them
    assert large_1.ticket is None and large_2.ticket is None
    assert small_1.ticket is not None and small_2.ticket is not None  # in one pass, in their order
    assert small_1.ticket.passed and small_2.ticket.passed
    b.finish(small_1.ticket)
    b.finish(small_2.ticket)
    b.release(15)  # all free: the larges in the order they asked, as far as they fit
    assert large_1.ticket is not None and large_2.ticket is None
    b.finish(large_1.ticket)
    assert large_2.ticket is not None


def test_no_run_waits_while_what_it_needs_is_free() -> None:
    memory = [200 * MB]
    b = under_a_limit(memory)
    held = b.try_acquire(700 * MB)
    assert held is not None  # free: at once, with no one waiting
    waiting = b.ask(400 * MB)  # 700 of the budget's 1000 taken: waits for the budget
    assert waiting.ticket is None
    assert "hold 700 MB of the 1000 MB" in b.shortage(400 * MB, waiting).reason()
    b.finish(held)  # at the release itself, not at a later poll
    assert waiting.ticket is not None


def test_the_share_small_runs_may_take_past_a_large_one_is_bounded() -> None:
    """With 80 MB for small runs going ahead of a large one that they keep out, a third small run waits until the
    first has finished computing (what a finished run keeps no longer counts), so the large one is delayed by at most
    that much."""
    memory = [400 * MB]
    b = under_a_limit(memory, small=100 * MB, pass_share=80 * MB)
    held = b.try_acquire(500 * MB)  # another visitor's large run, computing
    large = b.ask(300 * MB)  # 400 + 500 + 300 > 1000: waits
    first, second = b.ask(50 * MB), b.ask(20 * MB)  # 70 MB passing, within the share
    assert large.ticket is None and first.ticket is not None and second.ticket is not None
    b.finish(held)  # 400 + 70 computing + 300 = 770: the large one fits, and goes in at once
    assert large.ticket is not None
    b.finish(large.ticket)
    memory[0] = 640 * MB
    later_large = b.ask(300 * MB)  # 640 + 70 + 300 = 1010: kept out by the small runs gone ahead alone
    third = b.ask(40 * MB)  # 640 + 70 + 40 fits the memory, but 110 MB passing is over the share
    assert later_large.ticket is None and third.ticket is None and b.passing == 70 * MB
    assert "1 run that asked earlier is served first" in b.shortage(40 * MB, third).reason()
    b.finish(first.ticket, keep=10 * MB)  # 20 + 40 passing is within the share again; 640 + 60 + 300 = 1000
    assert third.ticket is not None and third.ticket.passed
    assert later_large.ticket is not None and not later_large.ticket.passed


def test_a_small_run_is_not_held_behind_a_large_one_that_waits_for_other_runs_memory() -> None:
    """The soak's stall (issue 37): a chat step that went ahead computes slowly and fills the share, while the large
    run that waits could not start anyway (the process holds too much without the small runs). Another small run
    that fits goes in at once instead of waiting behind the large one, as it did for 114 s."""
    memory = [900 * MB]
    b = under_a_limit(memory, small=64 * MB, pass_share=64 * MB)
    large = b.ask(123 * MB)  # 900 + 123 > 1000 whatever the small runs do
    slow = b.ask(57 * MB)  # goes ahead, and keeps computing
    assert large.ticket is None and slow.ticket is not None and slow.ticket.passed
    step = b.ask(30 * MB)  # 57 + 30 passing is over the share, but the large one is not waiting for them
    assert step.ticket is not None and step.ticket.passed
    memory[0] = 750 * MB  # memory came free: 750 + 87 computing + 123 = 960, the large one fits now
    b.serve()
    assert large.ticket is not None


def test_runs_computing_count_for_what_they_may_allocate_and_a_finished_one_for_its_memory() -> None:
    """A run beside others counts what they may still allocate (their estimates, until they finish); once they
    have finished, what they keep is in the process's memory, which is read again."""
    memory = [500 * MB]
    b = under_a_limit(memory)
    first = b.try_acquire(300 * MB)
    assert first is not None
    assert b.try_acquire(250 * MB) is None  # 500 + 300 computing + 250 > 1000
    memory[0] = 650 * MB  # it finished, keeping 150 MB of a Result
    b.finish(first, keep=150 * MB)
    assert b.computing == 0 and b.used == 150 * MB
    assert b.try_acquire(250 * MB) is not None  # 650 + 250: the Result held is not counted twice


def test_memory_that_comes_free_goes_to_a_small_run_before_a_large_one_that_asked_earlier() -> None:
    """Served in the order they asked, the large run would take the freed memory for its whole run and the chat step
    would wait through it; the small one goes first, and the large one once the rest is free."""
    memory = [960 * MB]
    b = under_a_limit(memory)
    large = b.ask(300 * MB)
    small = b.ask(60 * MB)  # 960 + 60 > 1000: both wait for memory
    assert large.ticket is None and small.ticket is None
    memory[0] = 700 * MB  # 700 + 300 would fit the large one alone
    b.serve()
    assert small.ticket is not None and small.ticket.passed and large.ticket is None
    b.finish(small.ticket)
    b.serve()
    assert large.ticket is not None


def test_a_page_drawing_a_finished_run_counts_under_the_ceiling_until_it_is_drawn() -> None:
    """What a page allocates while it draws a run is not in the run's ticket: six heavy pages drawn at once took
    the server 100 MB past its ceiling and the kernel killed it (issue 50). A drawing counts under the ceiling until
    its script run says it is drawn; the run that waited for it goes in then."""
    memory = [600 * MB]
    b = under_a_limit(memory)
    first = b.ask(300 * MB)
    assert first.ticket is not None
    memory[0] = 800 * MB  # the run computed: its Result is in the memory now
    b.finish(first.ticket, keep=200 * MB)
    b.draw("session-1", 50 * MB)  # its page draws it
    later = b.ask(180 * MB)  # 800 + 180 fits the memory alone, not with the drawing's 50
    assert later.ticket is None and b.drawing == 50 * MB
    assert "pages drawing finished runs now may take 50 MB more" in b.shortage(180 * MB).reason()
    b.drawn("session-1")
    assert later.ticket is not None and b.drawing == 0  # let in at once, no poll


def test_a_script_run_counts_one_drawing_the_largest_and_a_stale_one_stops_counting() -> None:
    clock = [0.0]
    b = Admission(1000 * MB, ceiling=1000 * MB, memory=lambda: 0, clock=lambda: clock[0])
    b.draw("a", 30 * MB)
    b.draw("a", 20 * MB)  # the same script run draws a second run after the first: one drawing, the larger
    b.draw("b", 40 * MB)
    assert b.drawing == 70 * MB
    b.draw("a", 45 * MB)
    assert b.drawing == 85 * MB
    clock[0] = 100.0
    b.draw("c", 10 * MB)
    b.drawn_before(50.0)  # "a" and "b" never said they were drawn
    assert b.drawing == 10 * MB
    b.drawn("a")  # said twice, or never drawn: nothing changes
    b.drawn("nobody")
    assert b.drawing == 10 * MB


def test_a_large_run_goes_before_a_later_large_one_as_soon_as_it_fits() -> None:
    memory = [900 * MB]
    b = under_a_limit(memory)
    large = b.ask(300 * MB)
    memory[0] = 650 * MB  # 650 + 300 fits; 650 + 300 + 100 would not
    later = b.ask(100 * MB)
    assert large.ticket is not None and later.ticket is None


def test_withdrawing_gives_back_what_was_admitted_and_lets_the_next_in() -> None:
    b = Admission(100)
    first = b.ask(100)
    second = b.ask(70)
    assert first.ticket is not None and second.ticket is None
    b.withdraw(first)  # its caller stopped before taking it: not its bytes
    assert second.ticket is not None and b.used == 70


# --------------------------------------------------------------------------- the words


def test_the_words_name_the_ceiling_what_the_process_holds_and_what_the_run_needs() -> None:
    shortage = Shortage(need=55 * MB, used=59 * MB, capacity=200 * MB, memory=548 * MB, computing=0,
                        ceiling=578 * MB, limit=690 * MIB, ahead=0)  # fmt: skip
    reason = shortage.reason()
    assert "holds 548 MB" in reason and "up to 578 MB" in reason and "690 MiB limit" in reason
    assert "needs 55 MB, which would pass that by 25 MB" in reason
    assert "other visitors' large runs" not in reason  # the budget (59 of 200 MB) had room: it is not the reason
    computing = Shortage(need=55 * MB, used=59 * MB, capacity=200 * MB, memory=500 * MB, computing=40 * MB,
                         ceiling=578 * MB, limit=690 * MIB, ahead=0)  # fmt: skip
    assert "holds 500 MB, runs computing now may take 40 MB more," in computing.reason()
    assert "needs 55 MB, which would pass that by 17 MB" in computing.reason()
    over_budget = Shortage(need=55 * MB, used=180 * MB, capacity=200 * MB, memory=None, computing=0, ceiling=None,
                      limit=None, ahead=0)  # fmt: skip
    assert "hold 180 MB of the 200 MB" in over_budget.reason() and "needs 55 MB" in over_budget.reason()
    words = budget.waiting_words(12.4, 120, shortage)
    assert "12 s so far, at most 108 s more" in words and "holds 548 MB" in words


def test_a_wait_is_told_as_it_moves() -> None:
    ticks = iter(range(0, 10_000))
    memory = [990 * MB]
    b = under_a_limit(memory, clock=lambda: next(ticks) * 0.5)  # half a second a reading of the clock
    told: list[tuple[float, str]] = []
    assert b.acquire(50 * MB, timeout=3, on_wait=lambda s, why: told.append((s, why.reason()))) is None
    seconds = [s for s, _ in told]
    assert len(seconds) >= 2 and seconds == sorted(set(seconds))  # every poll later than the one before
    assert all("holds 990 MB" in why and "needs 50 MB" in why for _, why in told)
    assert b.used == 0 and not b._waiting


def test_bytes_given_back_without_finishing_the_run_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    """The head atlas's leak (issue 37): a run's bytes released while its ticket stays unfinished left it counted as
    computing for ever. Admission cannot tell whose bytes they were, but it sees the books not balance, and says so."""
    b = Admission(100 * MB)
    ticket = b.try_acquire(40 * MB)
    assert ticket is not None
    with caplog.at_level(logging.ERROR, logger="server.budget"):
        b.release(40 * MB)  # instead of b.finish(ticket)
    assert b.computing == 40 * MB and b.used == 0
    assert "released of runs still computing" in caplog.text
    caplog.clear()
    fresh = Admission(100 * MB)
    with caplog.at_level(logging.ERROR, logger="server.budget"):
        fresh.finish(fresh.try_acquire(40 * MB), keep=10 * MB)
        fresh.release(10 * MB)  # what a finished run kept, given back when its value goes: the books balance
    assert not caplog.text and fresh.used == fresh.computing == 0


def test_a_refusal_says_the_real_limit_with_its_numbers_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    memory = [400 * MB]
    b = Admission(200 * MB, ceiling=578 * MB, memory=lambda: memory[0], limit=690 * MIB)
    held = b.try_acquire(59 * MB)  # another visitor's run: 59 of the budget's 200 MB, held once it is done
    assert held is not None
    b.finish(held, keep=59 * MB)
    memory[0] = 548 * MB
    with caplog.at_level(logging.WARNING, logger="server.budget"), pytest.raises(Refused) as refused:
        budget.admit(55 * MB, budget=b, wait_s=0.3, advice="or in a minute")
    words = str(refused.value)
    assert "holds 548 MB" in words and "up to 578 MB" in words and "needs 55 MB" in words
    assert "waited 0 s: try again in a moment, or in a minute" in words
    assert "taken by other visitors" not in words
    lines = [r.getMessage() for r in caplog.records if r.name == "server.budget"]
    assert len(lines) == 1 and "refused 55.0 MB" in lines[0]
    assert "holds 548.0 MB" in lines[0] and "ceiling 578.0 MB" in lines[0] and "limit 723.5 MB" in lines[0]
    b.release(59 * MB)
    assert b.used == 0 and b.computing == 0
