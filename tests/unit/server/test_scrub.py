"""The timeline's scrub cache: bounded by bytes, inside the memory budget, let go of when its visitors leave (issue 38:
it was 256 whole Results outside the budget, +118 MiB that stayed after the visitor left)."""

from __future__ import annotations

import pytest
import torch

from attention.models import tiny
from server import budget, sessions
from server.scrub import ScrubCache
from server.training import Service
from ui.views import watch_it_learn


def tensor(kb: int) -> torch.Tensor:
    return torch.zeros(kb * 256)  # kb kB of float32


def test_the_cache_holds_at_most_its_capacity_and_its_bytes_of_the_budget() -> None:
    server = budget.Admission(10_000_000)
    cache = ScrubCache(capacity=100_000, server=server)
    for i in range(50):  # 50 entries of 10 kB into 100 kB: the oldest go
        cache.get(i, lambda: tensor(10), "a")
        assert cache.used <= 100_000 and server.used == cache.used
    assert len(cache) == 9 and cache.used == 9 * 10_240
    assert 49 in cache._entries and 0 not in cache._entries
    made = []
    assert cache.get(49, lambda: made.append(1) or tensor(10), "a").numel() == 2560 and not made  # a hit
    cache.clear()
    assert server.used == 0 and cache.used == 0


def test_an_entry_the_budget_has_no_room_for_is_drawn_but_not_kept() -> None:
    server = budget.Admission(50_000)
    cache = ScrubCache(capacity=1_000_000, server=server)
    assert server.try_acquire(45_000)  # another visitor's large run holds most of the budget
    value = cache.get("k", lambda: tensor(10), "a")
    assert value.numel() == 2560 and len(cache) == 0 and server.used == 45_000
    big = cache.get("big", lambda: tensor(2000), "a")  # larger than the cache: never kept
    assert big.numel() == 512_000 and len(cache) == 0


def test_what_only_the_visitors_who_left_drew_goes_with_them() -> None:
    server = budget.Admission(10_000_000)
    cache = ScrubCache(capacity=1_000_000, server=server)
    cache.get("a's", lambda: tensor(10), "a")
    cache.get("shared", lambda: tensor(10), "a")
    cache.get("shared", lambda: tensor(10), "b")
    cache.get("b's", lambda: tensor(10), "b")
    cache.forget(["a"])
    assert set(cache._entries) == {"shared", "b's"} and server.used == 2 * 10_240
    cache.forget(["b"])
    assert len(cache) == 0 and server.used == 0


def test_scrubbing_a_whole_run_stays_within_the_bound_and_a_sweep_releases_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The page's own cache (`ui.views.watch_it_learn.layer_result` through the service's scrub cache): scrubbing every
    snapshot of a run keeps at most the cache's bound, and the visitor's leaving gives
    the bytes back to the server's budget."""
    settings = tiny.Settings(layers=1, heads=2, d_model=16, steps=6, every=1, length=24)
    run = tiny.train(settings)
    present = {"a"}
    service = Service(processes=False, grace_s=0.0, sweep_s=3600.0, alive=present.__contains__)
    service.scrub.capacity = 63_000  # three snapshots: 20,736 bytes of weights and mask each
    monkeypatch.setattr(watch_it_learn, "service", lambda: service)
    monkeypatch.setattr(sessions, "current", lambda: "a")
    before = budget.SERVER.used
    try:
        drawn = [watch_it_learn.layer_result(run, i, layer) for i in range(len(run.snapshots)) for layer in [0]]
        one = drawn[-1]
        assert one.weights.shape == (2, 48, 48) and len(one.tokens) == 48
        full = tiny.layer_result(run.snapshots[-1], settings, 0)
        assert torch.equal(one.weights, full.weights) and torch.equal(one.mask, full.mask)
        assert service.scrub.used == 3 * 20_736 and len(service.scrub) == 3 < len(drawn)
        assert budget.SERVER.used - before == service.scrub.used
        service.see(settings, "a")  # the visitor's page: their session is known to the pool
        present.clear()  # the tab closed
        service.sweep()
        assert len(service.scrub) == 0 and budget.SERVER.used == before
    finally:
        service.shutdown()
