"""The permutation experiment: shuffle the words, and see whether attention's output is the same rows reordered.

Self-attention without positions is permutation-equivariant: with shuffled[i] = words[perm[i]],

    context(shuffled)[:, i] = context(words)[:, perm[i]]      i.e.  context(shuffled) = context(words)[:, perm]

because every word keeps its vector and the softmax sums over the keys in any order. Any positional encoding
breaks this: the same word at another position is another vector (a table), another rotation (RoPE) or another
bias (ALiBi).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

# Reordering rows changes only the order of the softmax's and the matmuls' sums: float32 rounding, ~1e-7 of the
# largest value. Any encoding moves the rows by far more (typically a tenth of it).
RTOL = 1e-5


def shuffled_order(tokens: Sequence[str], seed: int) -> torch.Tensor:
    """A seeded permutation perm (T,) long, with shuffled[i] = tokens[perm[i]] a different word order when one exists.

    Draws torch.randperm from a generator seeded with `seed` until the words come out in another order (a draw
    can give back the same words, e.g. by swapping two equal ones) and, from three words on, not simply reversed:
    ALiBi's penalty depends on |i - j| only, which a reversal keeps, so it cannot tell a sentence from its mirror
    image. Failing that, the words turn by one place, which changes the order of any words that are not all
    equal. One word, or all words equal: the identity.
    """
    n = len(tokens)
    identity = torch.arange(n)
    if len(set(tokens)) <= 1:
        return identity
    mirror = identity.flip(0).tolist() if n >= 3 else None
    g = torch.Generator().manual_seed(seed)
    for _ in range(32):
        perm = torch.randperm(n, generator=g)  # (T,)
        if apply_order(tokens, perm) != list(tokens) and perm.tolist() != mirror:
            return perm
    return identity.roll(-1)  # unreachable in practice: a draw is kept with probability >= 1/3


def apply_order(tokens: Sequence[str], perm: torch.Tensor) -> list[str]:
    """The words in the shuffled order: [tokens[p] for p in perm]."""
    return [tokens[p] for p in perm.tolist()]


class PermutationCheck(NamedTuple):
    """How far the shuffled sentence's rows are from the original rows reordered, and whether that is rounding."""

    max_difference: float  # max |context(shuffled) - context(words)[:, perm]| over every head, row and column
    largest: float  # max |context(words)|: the scale the difference is measured against
    equivariant: bool  # max_difference <= RTOL * max(largest, 1)


def permutation_check(context: torch.Tensor, shuffled_context: torch.Tensor, perm: torch.Tensor) -> PermutationCheck:
    """Compare context(shuffled) (..., T, d_v) with context(words)[..., perm, :]: equal up to rounding or not.

    Pass the (h, T, d_v) contexts of two Results (the sentence, and the sentence shuffled by `perm`).
    """
    if context.shape != shuffled_context.shape or perm.shape != (context.shape[-2],):
        raise ValueError(
            f"contexts {tuple(context.shape)} and {tuple(shuffled_context.shape)} with a permutation of "
            f"{tuple(perm.shape)} rows: need equal shapes and one index per row"
        )
    reordered = context[..., perm, :]  # (..., T, d_v) the original rows in the shuffled order
    difference = float((shuffled_context - reordered).abs().max()) if context.numel() else 0.0
    largest = float(context.abs().max()) if context.numel() else 0.0
    return PermutationCheck(difference, largest, difference <= RTOL * max(largest, 1.0))
