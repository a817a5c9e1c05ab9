"""The Position page's numbers: the permutation experiment and RoPE's pair scores, against their definitions."""

from __future__ import annotations

import cmath
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention import Config, compute
from attention.basics.position import apply_rope, rope_angles
from attention.lessons.permutation import RTOL, apply_order, permutation_check, shuffled_order
from attention.lessons.rope_demo import (
    omega_before_rotation,
    pair_scores,
    sinusoidal_pair_scores,
    spread,
    wrapped_angles,
)

SETTINGS = settings(max_examples=40, deadline=None)
WORDS = st.lists(st.sampled_from(["the", "cat", "sat", "on", "mat", "a", "dog"]), min_size=1, max_size=9)
# the page's own setting: several heads with signed nn.Linear weights (torch.rand weights saturate the softmax)
PAGE = {"heads": 4, "init": "linear", "mask": "none", "dropout": 0.0}


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def contexts(words: list[str], perm: torch.Tensor, **fields) -> tuple[torch.Tensor, torch.Tensor]:
    """The context of a sentence and of the same words shuffled by perm, through compute."""
    original = compute(Config(sentence=" ".join(words), **fields)).context
    shuffled = compute(Config(sentence=" ".join(apply_order(words, perm)), **fields)).context
    return original, shuffled


# the shuffle -------------------------------------------------------------------------------------------------


@SETTINGS
@given(WORDS, st.integers(0, 10_000))
def test_shuffled_order_is_a_seeded_permutation_that_changes_the_order(words: list[str], seed: int) -> None:
    perm = shuffled_order(words, seed)
    assert sorted(perm.tolist()) == list(range(len(words)))
    assert torch.equal(perm, shuffled_order(words, seed))  # the same seed, the same shuffle
    shuffled = apply_order(words, perm)
    assert shuffled == [words[p] for p in perm.tolist()]
    if len(set(words)) > 1:
        assert shuffled != words  # another word order whenever there is one
    else:
        assert perm.tolist() == list(range(len(words)))  # one word, or all equal: nothing to shuffle
    if len(words) >= 3 and len(set(words)) > 1:
        assert perm.tolist() != list(range(len(words)))[::-1]  # never the mirror image (see ALiBi below)


def test_different_seeds_give_different_shuffles() -> None:
    words = "Life is short eat dessert first".split()
    assert len({tuple(shuffled_order(words, seed).tolist()) for seed in range(20)}) > 10


# the check ---------------------------------------------------------------------------------------------------


@SETTINGS
@given(st.integers(1, 4), st.integers(1, 8), st.integers(1, 6), st.integers(0, 10_000))
def test_check_is_the_largest_difference_after_reordering(h: int, t: int, d: int, seed: int) -> None:
    context = randn(h, t, d, seed=seed)
    perm = torch.randperm(t, generator=torch.Generator().manual_seed(seed))
    exact = torch.stack([context[:, p] for p in perm.tolist()], dim=1)  # row i of the shuffle is row perm[i]
    check = permutation_check(context, exact, perm)
    assert check.max_difference == 0.0 and check.equivariant
    assert check.largest == pytest.approx(float(context.abs().max()))
    nudged = exact.clone()
    nudged[h - 1, t - 1, d - 1] += 0.5
    check = permutation_check(context, nudged, perm)
    assert check.max_difference == pytest.approx(0.5, abs=1e-6) and not check.equivariant
    assert permutation_check(context, exact + 1e-3 * RTOL, perm).equivariant  # rounding passes


def test_check_refuses_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="equal shapes"):
        permutation_check(torch.zeros(1, 3, 2), torch.zeros(1, 4, 2), torch.arange(3))
    with pytest.raises(ValueError, match="one index per row"):
        permutation_check(torch.zeros(1, 3, 2), torch.zeros(1, 3, 2), torch.arange(2))


# the experiment, through compute -----------------------------------------------------------------------------


@SETTINGS
@given(WORDS, st.integers(0, 10_000), st.integers(1, 4), st.sampled_from(["rand-transposed", "linear"]))
def test_without_position_attention_is_permutation_equivariant(words, seed, heads, init) -> None:
    perm = shuffled_order(words, seed)
    original, shuffled = contexts(words, perm, seed=seed, heads=heads, init=init)
    check = permutation_check(original, shuffled, perm)
    assert check.equivariant, check


@pytest.mark.parametrize("kind", ["sinusoidal", "learned", "rope", "alibi"])
@pytest.mark.parametrize("seed", [0, 123, 2024])
def test_every_encoding_breaks_equivariance(kind: str, seed: int) -> None:
    words = "Life is short eat dessert first".split()
    perm = shuffled_order(words, seed)
    original, shuffled = contexts(words, perm, position=kind, seed=seed, **PAGE)
    check = permutation_check(original, shuffled, perm)
    assert not check.equivariant
    assert check.max_difference > 1e3 * RTOL * check.largest  # far beyond rounding


def test_alibi_cannot_tell_a_sentence_from_its_mirror_image() -> None:
    """Why the shuffle avoids the reversal: |i - j| is the same both ways, so ALiBi (symmetric, unmasked) is blind."""
    words = "Life is short eat dessert first".split()
    mirror = torch.arange(len(words)).flip(0)
    original, shuffled = contexts(words, mirror, position="alibi", **PAGE)
    assert permutation_check(original, shuffled, mirror).equivariant
    original, shuffled = contexts(words, mirror, position="rope", **PAGE)
    assert not permutation_check(original, shuffled, mirror).equivariant


# RoPE's pair scores ------------------------------------------------------------------------------------------


def rotated_by_hand(x: list[float], p: float, base: float) -> list[complex]:
    """Pair (x_i, x_{i+d/2}) as the complex number x_i + i x_{i+d/2}, turned by p * base^(-2i/d)."""
    half = len(x) // 2
    return [complex(x[i], x[i + half]) * cmath.exp(1j * p * base ** (-2 * i / len(x))) for i in range(half)]


@SETTINGS
@given(st.integers(1, 12), st.integers(-6, 6), st.integers(0, 50), st.sampled_from([100.0, 10000.0, 5e5]),
       st.integers(0, 10_000))  # fmt: skip
def test_pair_scores_depend_on_the_distance_only(half: int, distance: int, start: int, base: float, seed: int):
    query, key = randn(2 * half, seed=seed), randn(2 * half, seed=seed + 1)
    positions = list(range(max(start, -distance), max(start, -distance) + 16))
    scores = pair_scores(query, key, distance, positions, base)
    assert scores.shape == (16,)
    # the definition: rotate both by their own positions, complex pair by pair, then the real dot product
    for n, score in zip(positions, scores.tolist(), strict=True):
        q = rotated_by_hand(query.tolist(), n + distance, base)
        k = rotated_by_hand(key.tolist(), n, base)
        expected = sum((a * b.conjugate()).real for a, b in zip(q, k, strict=True))
        assert score == pytest.approx(expected, rel=1e-4, abs=1e-4)
    # constant: the score of the same pair where the first of the two stands at position 0
    q0 = apply_rope(query, rope_angles(torch.tensor([max(distance, 0)]), 2 * half, base))[0]  # (d,)
    k0 = apply_rope(key, rope_angles(torch.tensor([max(-distance, 0)]), 2 * half, base))[0]  # (d,)
    at_zero = float((q0 * k0).sum())
    torch.testing.assert_close(scores, torch.full_like(scores, at_zero), rtol=1e-4, atol=1e-4)
    assert spread(scores) <= 1e-4 * max(1.0, abs(at_zero))


def test_pair_scores_are_the_entries_of_ropes_omega() -> None:
    result = compute(Config(position="rope", **PAGE))
    t = len(result.tokens)
    for h in range(result.heads):
        for i in range(t):
            for j in range(t):
                q, k = result.unrotated_queries[h, i], result.unrotated_keys[h, j]
                (score,) = pair_scores(q, k, i - j, [j], result.config.rope_base).tolist()
                assert score == pytest.approx(float(result.omega[h, i, j]), rel=1e-4, abs=1e-4)


def test_sinusoidal_pair_scores_are_the_entries_of_its_omega_and_move() -> None:
    config = Config(position="sinusoidal", **PAGE)
    result, raw = compute(config), compute(config.replace(position="none"))
    t = len(result.tokens)
    for h in range(result.heads):
        for i in range(t):
            for j in range(t):
                (score,) = sinusoidal_pair_scores(
                    raw.embeddings[i], raw.embeddings[j], result.w_query[h], result.w_key[h], i - j, [j]
                ).tolist()
                assert score == pytest.approx(float(result.omega[h, i, j]), rel=1e-4, abs=1e-4)
    moved = sinusoidal_pair_scores(raw.embeddings[1], raw.embeddings[0], result.w_query[0], result.w_key[0], 1,
                                   range(24))  # fmt: skip
    assert spread(moved) > 0.1 * float(moved.abs().max())  # an absolute table: the pair's score moves


def test_pair_scores_refuse_negative_positions() -> None:
    v = torch.ones(4)
    with pytest.raises(ValueError, match="count from 0"):
        pair_scores(v, v, -3, [0, 1, 2])
    with pytest.raises(ValueError, match="one position a step"):
        pair_scores(v, v, 1, [[0, 1]])


@pytest.mark.parametrize("seed", [0, 7, 123])
def test_omega_before_rotation_is_omega_without_position(seed: int) -> None:
    config = Config(position="rope", seed=seed, **PAGE)
    before = omega_before_rotation(compute(config))
    torch.testing.assert_close(before, compute(config.replace(position="none")).omega, rtol=1e-5, atol=1e-5)


@SETTINGS
@given(st.lists(st.floats(-1e4, 1e4), min_size=1, max_size=20))
def test_wrapped_angles_are_the_same_turn_within_one_turn(values: list[float]) -> None:
    angles = torch.tensor(values, dtype=torch.float64)
    wrapped = wrapped_angles(angles)
    assert bool((wrapped >= -math.pi).all()) and bool((wrapped < math.pi).all())
    torch.testing.assert_close(wrapped.cos(), angles.cos(), rtol=0, atol=1e-9)
    torch.testing.assert_close(wrapped.sin(), angles.sin(), rtol=0, atol=1e-9)
