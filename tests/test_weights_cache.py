"""The projection-draw cache: same numbers as a fresh draw, callers isolated, bounded in bytes."""

from __future__ import annotations

import torch

from attention import Config, weights

SMALL = Config(sentence="the cat sat", d_model=16, d_k=8, d_v=8, heads=2, seed=5)
LARGE = Config(sentence="the cat sat", d_model=256, d_k=256, d_v=256, heads=16, seed=5)


def fresh(config: Config) -> tuple[weights.Projections, torch.Generator]:
    g = weights.generator(config.seed)
    return weights.projections(config, g), g


def test_cached_and_uncached_draws_equal_a_fresh_draw_and_leave_the_generator_where_it_would_be() -> None:
    for config in (SMALL, LARGE):
        for _ in range(2):  # the second call of SMALL is a cache hit
            got, g = weights.seeded_projections(config)
            want, g_want = fresh(config)
            for a, b in zip(got, want, strict=True):
                assert (a is None and b is None) or torch.equal(a, b)
            assert torch.equal(torch.rand(4, generator=g), torch.rand(4, generator=g_want))


def test_a_caller_editing_its_projections_in_place_changes_no_one_else() -> None:
    first, _ = weights.seeded_projections(SMALL)
    first.w_query.zero_()
    second, _ = weights.seeded_projections(SMALL)
    assert second.w_query.abs().sum() > 0


def test_the_cache_is_bounded_in_entries_and_holds_no_large_draw() -> None:
    weights._drawn.cache_clear()
    weights.seeded_projections(LARGE)
    assert weights._drawn.cache_info().currsize == 0  # too large to keep: drawn afresh each time
    for seed in range(20):
        weights.seeded_projections(Config(sentence="a b", d_model=16, seed=seed))
    info = weights._drawn.cache_info()
    assert info.currsize == info.maxsize == 8
    assert weights.projection_numbers(LARGE) > weights.CACHED_PROJECTION_NUMBERS >= weights.projection_numbers(SMALL)
