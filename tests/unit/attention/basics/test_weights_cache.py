"""The projection-draw cache: same numbers as a fresh draw, callers isolated, bounded in bytes."""

from __future__ import annotations

import torch

from attention import Config
from attention.basics import weights

SMALL = Config(sentence="the cat sat", d_model=16, d_k=8, d_v=8, heads=2, seed=5)
LARGE = Config(sentence="the cat sat", d_model=256, d_k=256, d_v=256, heads=16, seed=5)
# keys and values from an input 3 wide (kdim = vdim = 3), in both layouts, with grouped-query heads
NARROW_KEYS = [Config.from_embeddings([[1.0] * 8] * 2, [[0.5, 1.0, -1.0]] * 4, heads=4, kv_heads=2, d_k=4, d_v=2,
                                      seed=9, init=init, head_layout=layout, out_proj=True, d_out=d_out)
               for init in ("rand", "linear") for layout, d_out in (("independent", None), ("split", 16))]  # fmt: skip


def fresh(config: Config) -> tuple[weights.Projections, torch.Generator]:
    g = weights.generator(config.seed)
    return weights.projections(config, g), g


def test_cached_and_uncached_draws_equal_a_fresh_draw_and_leave_the_generator_where_it_would_be() -> None:
    for config in (SMALL, LARGE, *NARROW_KEYS):
        for _ in range(2):  # the second call of a small one is a cache hit
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


def test_keys_of_another_width_are_cached_apart_from_keys_of_the_query_width() -> None:
    weights._drawn.cache_clear()
    narrow = NARROW_KEYS[0]
    wide = narrow.replace(cross_embeddings=[[0.5] * 8] * 4)  # the same but for the key input's width
    a, _ = weights.seeded_projections(narrow)
    b, _ = weights.seeded_projections(wide)
    assert a.w_key.shape == (3, 8) and b.w_key.shape == (8, 8)  # (d_kv, kv_heads * d_k)
    weights.seeded_projections(narrow)
    info = weights._drawn.cache_info()
    assert (info.currsize, info.hits) == (2, 1)


def test_stable_draws_are_cached_apart_from_the_tutorials_order_and_equal_a_fresh_draw() -> None:
    weights._drawn.cache_clear()
    tutorial, stable = SMALL.replace(init="rand"), SMALL.replace(init="rand", draws="stable")
    a, g_a = weights.seeded_projections(tutorial)
    b, g_b = weights.seeded_projections(stable)
    assert not torch.equal(a.w_key, b.w_key)  # the order of draws is part of the cache key
    for config in (stable, SMALL.replace(init="normal"), LARGE.replace(init="linear", draws="stable")):
        for _ in range(2):  # a miss, then (small ones) a hit
            got, g = weights.seeded_projections(config)
            want = weights.projections(config, weights.generator(config.seed))
            for x, y in zip(got, want, strict=True):
                assert (x is None and y is None) or torch.equal(x, y)
            # what is drawn after the weights comes from its own generator, not the inputs' (seeded with seed)
            after = weights.after_stable(config)
            assert torch.equal(torch.rand(4, generator=g), torch.rand(4, generator=after))
