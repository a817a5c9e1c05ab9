"""The memory budget: a run's size known from its Config (attention/basics/sizes.py), measured against the real
tensors, and the server-wide admission (server/budget.py): bytes held while a Result lives, waiting and refusing
(the order of admission: tests/unit/server/test_admission.py); the pages that need several results hold one at a
time (run here under a budget that fits one).
"""

from __future__ import annotations

import gc
import re
import threading
import time

import pytest
import torch

import ui
import ui.views.chat  # noqa: F401  (registers its evictor)
import ui.views.model  # noqa: F401  (registers its evictor)
import ui.views.watch_it_learn  # noqa: F401  (imports server.training, which registers its evictor)
from attention import Config, compute
from attention.basics import sizes
from attention.lessons import compare, pitfalls
from harness import charts
from server import budget
from server.budget import Admission, Refused

WORDS = " ".join(f"w{i}" for i in range(1, 161))


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


# --------------------------------------------------------------------------- sizes from the Config


VARIANTS = [  # every setting that changes what a Result holds, each at least once beside every position
    {},
    {"mask": "causal", "dropout": 0.3},
    {"scale": "none", "heads": 4, "kv_heads": 2},
    {"scale": "none", "mask": "causal", "cross_sentence": words(23)},
    {"heads": 4, "out_proj": True, "bias": True, "dropout": 0.3},
    {"heads": 4, "kv_heads": 2, "cross_sentence": words(23), "out_proj": True, "mask": "causal"},
]


def configs():
    for position in ("none", "rope", "alibi", "learned", "sinusoidal"):
        for variant in VARIANTS:
            yield Config(sentence=words(37), position=position, d_model=32, d_k=16, d_v=8, **variant)


def test_result_bytes_bounds_the_real_storages_and_is_close_to_them() -> None:
    for config in configs():
        real = sizes.held_bytes(compute(config))
        estimate = sizes.result_bytes(config)
        assert real <= estimate <= real + sizes.OVERHEAD + 2 * 37 * 37 + 0.02 * real, (real, estimate, config)
        assert sizes.compute_bytes(config) > estimate


@pytest.mark.parametrize("position", ["rope", "alibi"])
def test_at_the_largest_size_the_estimate_is_within_a_percent(position: str) -> None:
    config = Config(sentence=words(512), heads=16, d_model=256, d_k=256, d_v=256, position=position, mask="causal",
                    dropout=0.5)  # fmt: skip
    real = sizes.held_bytes(compute(config))
    assert real > 140e6  # the six (16, 512, 512) matrices and the (16, 512, 256) vectors
    assert real <= sizes.result_bytes(config) <= 1.01 * real


def test_score_matrices_counts_only_the_copies_compute_makes() -> None:
    plain = Config(sentence="a b c", mask="none", dropout=0.0, scale="none")
    assert sizes.score_matrices(plain) == 2  # omega is the scaled and the masked scores, weights the dropped
    result = compute(plain)
    assert result.scaled is result.omega and result.masked is result.omega and result.dropped_weights is result.weights
    heavy = plain.replace(mask="causal", dropout=0.1, scale="sqrt", position="alibi")
    assert sizes.score_matrices(heavy) == 6


def test_keep_copies_a_slice_so_the_result_can_go() -> None:
    result = compute(Config(sentence=WORDS, heads=4))
    row = result.weights[1, -1]  # a view: it holds the whole (4, 160, 160) matrix
    assert sizes.held_bytes(row) == result.weights.numel() * 4
    kept = sizes.keep({"row": row, "pair": (row, 3)})
    assert sizes.held_bytes(kept) == 2 * 160 * 4  # each copy its own 160 numbers
    torch.testing.assert_close(kept["row"], row)
    assert kept["pair"][1] == 3


def test_one_head_is_the_results_head_and_diff_reads_it() -> None:
    a = compute(Config(sentence="Life is short, eat dessert first", heads=4, seed=1))
    b = compute(Config(sentence="Life is short, eat dessert first", heads=2, seed=2, mask="causal"))
    va, vb = sizes.one_head(a, 3), sizes.one_head(b, 1)
    for name in ("omega", "weights", "dropped_weights", "context"):
        torch.testing.assert_close(getattr(va, name)[0], getattr(a, name)[3])
    assert (va.heads, va.head, vb.d_v) == (4, 3, b.d_v)
    whole, viewed = compare.diff(a, b, 3, 1), compare.diff(va, vb)
    assert whole.summary(list(a.tokens), list(a.key_tokens)) == viewed.summary(list(a.tokens), list(a.key_tokens))
    torch.testing.assert_close(whole.weights, viewed.weights)
    assert sizes.held_bytes(va) < sizes.held_bytes(a) / 3


# --------------------------------------------------------------------------- the byte semaphore


def test_bytes_are_taken_and_given_back() -> None:
    b = Admission(100)
    assert b.try_acquire(60) and not b.try_acquire(50)
    assert not b.acquire(50, timeout=0.05)
    b.release(60)
    assert b.acquire(50, timeout=0.05) and b.used == 50 and b.peak == 60
    with pytest.raises(ValueError, match="more than the server's whole budget"):
        b.acquire(101, timeout=1)


def test_held_bytes_return_when_the_object_is_gone() -> None:
    b = Admission(100)

    class Held:
        pass

    thing = Held()
    assert b.try_acquire(70)
    b.hold(thing, 70)
    assert b.used == 70
    del thing
    gc.collect()
    assert b.used == 0


def test_evict_is_asked_once_and_what_it_frees_is_used() -> None:
    b = Admission(100)

    class Cached:
        pass

    cache = [Cached()]
    assert b.try_acquire(80)
    b.hold(cache[0], 80)
    calls = []

    def evict() -> None:
        calls.append(1)
        cache.clear()

    assert b.acquire(50, timeout=2, evict=evict)
    assert calls == [1] and b.used == 50


def test_give_up_ends_the_wait() -> None:
    b = Admission(10)
    assert b.try_acquire(10)
    start = time.monotonic()
    assert not b.acquire(5, timeout=30, give_up=lambda: time.monotonic() - start > 0.3)
    assert time.monotonic() - start < 5


def test_under_a_ceiling_a_run_waits_for_the_real_memory_to_go_down() -> None:
    """The kernel's count (anonymous memory) decides too: a run that fits the byte budget but would take the process
    past its ceiling waits, and goes in once memory drops (memory is read again while it waits)."""
    memory = [900]
    b = Admission(1000, ceiling=1000, memory=lambda: memory[0])
    first = b.try_acquire(100)  # 900 + 100 fits
    assert first
    b.finish(first)
    assert not b.try_acquire(150)  # within the budget, past the ceiling
    threading.Timer(0.3, lambda: memory.__setitem__(0, 700)).start()
    start = time.monotonic()
    assert b.acquire(150, timeout=10)
    assert 0.2 < time.monotonic() - start < 5


def test_the_ceiling_is_the_cgroup_limit_less_a_reserve(tmp_path) -> None:
    limit = tmp_path / "memory.limit_in_bytes"
    limit.write_text("723517440\n")  # 690 MiB
    assert budget.memory_limit([str(tmp_path / "missing"), str(limit)]) == 723517440
    assert budget.ceiling_for(723517440) == int(0.94 * 723517440)
    assert budget.ceiling_for(723517440, "100") == 723517440 - 100 * budget.MB
    assert budget.ceiling_for(None) is None  # a laptop: the byte budget alone
    status = tmp_path / "status"
    status.write_text("VmRSS:\t  500000 kB\nRssAnon:\t  300000 kB\nRssFile:\t  200000 kB\n")
    assert budget.anonymous_bytes(str(status)) == 300000 * 1024


def test_a_run_that_does_not_fit_asks_every_registered_cache_to_let_go(monkeypatch: pytest.MonkeyPatch) -> None:
    """ui.results, ui.views.model and ui.views.chat register their caches (budget.evictor): a toy run short of
    memory lets go of what the model pages keep, and they of its."""
    names = {f.__module__ + "." + f.__qualname__ for f in budget.SERVER.evictors}
    assert {"ui.views.model._free_cached", "ui.views.chat._free_cached", "server.training._let_go",
            "server.chat.release_packing"} <= names  # fmt: skip
    fresh = Admission(100)
    monkeypatch.setattr(budget, "SERVER", fresh)

    class Kept:
        pass

    cache = [Kept()]
    assert fresh.try_acquire(80)
    fresh.hold(cache[0], 80)
    fresh.evictors.append(cache.clear)
    assert budget.admit(50)  # only by the registered evictor
    assert fresh.used == 50 and cache == []


# --------------------------------------------------------------------------- admission of Results


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    """A fresh server budget of 200 MB and empty result caches, so that the counts below are this test's."""
    fresh = Admission(200 * budget.MB)
    fresh.evictors = list(budget.SERVER.evictors)
    monkeypatch.setattr(budget, "SERVER", fresh)
    ui.results._cached_large.clear()
    gc.collect()
    yield fresh
    ui.results._cached_large.clear()
    gc.collect()


def test_a_large_result_holds_its_bytes_while_anything_holds_it(server: Admission) -> None:
    config = Config(sentence=WORDS, heads=4, seed=7)
    assert sizes.result_bytes(config) > ui.results.SMALL_RESULT_BYTES
    result = ui.compute(config)
    assert server.used == sizes.result_bytes(config)
    assert server.peak == sizes.compute_bytes(config)  # the temporaries were admitted too, then given back
    ui.results._cached_large.clear()
    assert ui.compute(config) is result  # a session still holds it: shared, not computed again
    assert server.used == sizes.result_bytes(config)
    ui.results._cached_large.clear()
    del result
    gc.collect()
    assert server.used == 0


def test_a_run_is_sized_once_on_the_way_to_its_result(server: Admission, monkeypatch) -> None:
    """ui.compute sizes the config once (`sizes.size`): the budget admits its peak and holds its Result's bytes by
    that one size, which it is handed, rather than sizing the config again."""
    config = Config(sentence=WORDS, heads=4, seed=12)
    sized, result_bytes = [], sizes.result_bytes
    monkeypatch.setattr(sizes, "result_bytes", lambda c: sized.append(c) or result_bytes(c))
    result = ui.compute(config)
    assert sized == [config]
    size = sizes.size(config)
    assert size.held > ui.results.SMALL_RESULT_BYTES and size.peak > size.held
    assert (server.used, server.peak) == (size.held, size.peak)
    del result


def test_a_script_run_counts_its_drawing_until_its_page_is_drawn(server: Admission, monkeypatch) -> None:
    """In a script run, a large Result computed (or shared) counts what its page may allocate drawing it, up to
    DRAW, until the run says its page is drawn (dashboard.py); the same run asking for another admission first
    lets go of its own drawing (it is in the memory by then), so it never waits for itself."""
    run = ["session-1"]
    monkeypatch.setattr(budget, "_script_run", lambda: run[0])
    first, second = Config(sentence=WORDS, heads=4, seed=21), Config(sentence=WORDS, heads=2, seed=22)
    a = ui.compute(first)
    assert server.drawing == min(sizes.result_bytes(first), budget.DRAW) > 0
    b = ui.compute(second)  # admitted with the first one's drawing let go, then counts its own
    assert server.drawing == min(sizes.result_bytes(second), budget.DRAW)
    run[0] = "session-2"
    assert ui.compute(first) is a  # shared with another session: that page draws it too
    assert server.drawing == min(sizes.result_bytes(second), budget.DRAW) + min(sizes.result_bytes(first), budget.DRAW)
    budget.drawn()
    run[0] = "session-1"
    budget.drawn()
    assert server.drawing == 0
    run[0] = None  # outside a script run (a download made, a test): nothing is drawn
    ui.results._cached_large.clear()
    del a, b
    gc.collect()
    ui.compute(Config(sentence=WORDS, heads=4, seed=23))
    assert server.drawing == 0


def test_a_run_that_cannot_be_admitted_in_time_is_told_to_try_again(server: Admission, monkeypatch) -> None:
    monkeypatch.setattr(budget, "WAIT_S", 0.3)
    assert server.try_acquire(server.capacity - 10**6)  # another visitor's run holds all but 1 MB
    with pytest.raises(Refused, match="try again in a moment, or a smaller size"):
        ui.compute(Config(sentence=WORDS, heads=4, seed=8))
    server.release(server.capacity - 10**6)


def test_a_run_larger_than_the_budget_is_refused_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "SERVER", Admission(10**6))
    with pytest.raises(Refused, match="more than the 1 MB this server gives"):
        ui.compute(Config(sentence=WORDS, heads=4, seed=9))


def test_a_waiting_run_takes_the_result_another_session_made(server: Admission) -> None:
    config = Config(sentence=WORDS, heads=4, seed=10)
    assert server.try_acquire(server.capacity)  # full: the run below waits
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(budget.compute(config, ui.results._cached_large)))
    waiter.start()
    time.sleep(0.3)
    made = compute(config)
    budget._LIVE[repr(config)] = made  # as if another session's run had just made it
    waiter.join(5)
    assert got == [made]
    server.release(server.capacity)


# --------------------------------------------------------------------------- pages under a budget that fits one


PAGE_SIZES = {"sentence": WORDS, "heads": "4", "d_model": "64", "d_k": "64", "d_v": "64"}


def one_result_budget(*configs: Config) -> Admission:
    """A budget that admits the largest of these computations, and never two of their Results at once."""
    need = max(sizes.compute_bytes(c) for c in configs)
    smallest = min(sizes.result_bytes(c) for c in configs)
    assert need < 2 * smallest  # so the budget below cannot hold two Results
    one = Admission(need + smallest // 2)
    one.evictors = list(budget.SERVER.evictors)  # the caches let go of their Results when a run needs the room
    return one


@pytest.mark.parametrize(
    ("page", "params", "variants"),
    [
        ("position", {"position": "rope"}, [{"position": p} for p in ("rope", "none", "alibi", "learned")]),
        ("compare", {"b_heads": "4", "b_d_k": "64", "b_d_v": "64"}, [{}]),
        ("scaling", {}, [{"scale": "temperature", "temperature": 1.0}]),
    ],
)
def test_pages_that_draw_several_results_hold_one_at_a_time(page, params, variants, monkeypatch, server) -> None:
    base = Config(sentence=WORDS, heads=4, d_model=64, d_k=64, d_v=64)
    one = one_result_budget(*(base.replace(**v) for v in variants))
    monkeypatch.setattr(budget, "SERVER", one)
    monkeypatch.setattr(budget, "WAIT_S", 3.0)  # a page that needed two at once would be refused
    at = charts.open_page(page, **PAGE_SIZES, **params)
    assert not at.error, [e.value for e in at.error]
    assert one.peak <= one.capacity and one.peak > sizes.result_bytes(base)  # large results were admitted
    assert charts.heatmaps(at)  # and drawn


def test_a_page_refused_by_the_budget_says_why_and_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "SERVER", Admission(10**6))
    at = charts.open_page("position", sentence=WORDS, heads="4", d_model="64", d_k="64", d_v="64")
    errors = [e.value for e in at.error]
    assert errors and "more than the 1 MB this server gives" in errors[0] and "fewer tokens" in errors[0]


def test_a_page_refused_by_the_memory_ceiling_names_it_with_its_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a 690 MiB limit, with the process above what its ceiling leaves for the run, the page's own sentence
    names the ceiling, what the process holds and what the run needs, never "other visitors' large runs"."""
    limited = Admission(200 * budget.MB, ceiling=578 * budget.MB, memory=lambda: 577 * budget.MB,
                        limit=690 * 2**20)  # fmt: skip
    monkeypatch.setattr(budget, "SERVER", limited)
    monkeypatch.setattr(budget, "WAIT_S", 0.5)
    ui.results._cached_large.clear()
    at = charts.open_page("position", **PAGE_SIZES)
    errors = [e.value for e in at.error]
    assert errors, [w.value for w in at.warning]
    assert "cannot be computed: the server process holds 577 MB" in errors[0]
    assert "up to 578 MB (its 690 MiB limit less a reserve" in errors[0]
    assert re.search(r"this run needs \d+ MB, which would pass that by \d+ MB", errors[0])
    assert "It waited 0 s: try again in a moment" in errors[0]
    assert "other visitors' large runs" not in errors[0] and limited.used == 0


def test_runs_in_threads_under_a_budget_of_one_result_all_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two Position-like runs (three results kept in turn, then one held) and a Compare-like one at once, with room
    for one Result: each waits its turn and none is refused (a waiter that let go of the cache only once waited
    out WAIT_S while another run's result went back into the cache)."""
    base = Config(sentence=WORDS, heads=4, d_model=64, d_k=64, d_v=64, position="rope")
    monkeypatch.setattr(budget, "SERVER", one_result_budget(base, base.replace(position="alibi")))
    monkeypatch.setattr(budget, "WAIT_S", 20.0)
    ui.results._cached_large.clear()
    errors: list[BaseException] = []

    def position() -> None:
        try:
            for p in ("none", "alibi", "learned"):
                ui.results.kept(base.replace(position=p, seed=5), lambda r: r.weights[0, -1])
            held = ui.compute(base.replace(seed=5))
            time.sleep(0.3)
            del held
        except BaseException as exc:  # noqa: BLE001  reported below
            errors.append(exc)

    def compare() -> None:
        try:
            for seed in (6, 7):
                ui.results.kept(base.replace(seed=seed), lambda r: sizes.one_head(r, 0))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=f) for f in (position, compare, position)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads) and errors == []
    ui.results._cached_large.clear()
    gc.collect()
    assert budget.SERVER.used == 0


def test_the_pitfalls_fit_their_estimate_and_hold_what_they_keep(server: Admission) -> None:
    config = Config(sentence=words(64), heads=4, d_model=64, d_k=64, d_v=64, mask="causal")
    need = pitfalls.pitfalls_bytes(config)
    versions = ui.results.run_or_stop("The pitfalls", need, lambda: pitfalls.pitfalls(config), holder=lambda v: v[0])
    kept = sizes.held_bytes(versions)
    assert 0 < kept <= need and server.peak == need and server.used == kept
    del versions
    gc.collect()
    assert server.used == 0


def test_every_setting_the_controls_allow_fits_the_budget_alone() -> None:
    """The budget limits how many large runs go at once, never how large one may be: the largest computation the
    dashboard offers (every size at its top, both sentences of 512 tokens, dropout, a mask, every projection) fits."""
    top = {name: int(ui.PARAMS[name].hi) for name in ("d_model", "d_k", "d_v", "heads")}
    assert top["heads"] == 16 and top["d_model"] == 256
    text = words(int(ui.PARAMS["token"].hi) + 1)
    largest = max(
        sizes.compute_bytes(
            Config(
                sentence=text,
                cross_sentence=cross,
                position=p,
                mask="causal",
                dropout=0.5,
                out_proj=True,
                bias=True,
                **top,
            )
        )  # fmt: skip
        for p in ("none", "rope", "alibi", "learned", "sinusoidal")
        for cross in (None, text)
    )
    assert 150e6 < largest <= budget.BUDGET_MB * budget.MB, largest / 1e6


def test_the_housekeeping_thread_runs_every_chore_and_a_failing_one_stops_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """server.start's trim thread runs what caches registered with `budget.chore` (the chat model's packed weights
    let go when idle, server/chat.py), every few seconds; a chore that raises is logged, the others still run."""
    import server

    assert "server.chat.release_idle_packing" in {f.__module__ + "." + f.__qualname__ for f in budget.CHORES}
    ran: list[str] = []
    done = threading.Event()

    def broken() -> None:
        ran.append("broken")
        raise RuntimeError("a cache mid-change")

    def counted() -> None:
        ran.append("counted")
        done.set()

    monkeypatch.setattr(budget, "CHORES", [broken, counted])
    monkeypatch.setattr(budget, "trim_heaps", lambda: None)
    stop = threading.Event()
    server._trim_heaps(every_s=0.01, stop=stop)
    try:
        assert done.wait(10) and ran[:2] == ["broken", "counted"]
    finally:
        stop.set()
