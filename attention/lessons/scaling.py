"""Why divide by sqrt(d_k): the Experiments page "Why divide by √d_k".

`scaling_sweep`: spread of the scores, entropy and largest weight of the softmax over d_k, with and without
the 1/sqrt(d_k) scaling, for many seeds at once.

Pure functions over tensors and Configs (no Streamlit); randomness only from seeded `torch.Generator`s, never
torch's global generator.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from ..basics.weights import generator

# 1 .. 512 on a log grid: three points an octave, rounded to whole widths
DK_GRID: tuple[int, ...] = tuple(sorted({round(2 ** (k / 3)) for k in range(28)}))
VARIANTS = ("unscaled", "scaled")  # omega as it is, and omega / sqrt(d_k)


@dataclass(frozen=True, eq=False)
class ScalingSweep:
    """Statistics of softmax(omega / s) over widths d_k and seeds; G widths, S seeds, axis 0 = VARIANTS.

    spread: std of the scores the softmax sees (unscaled: about sqrt(d_k); scaled: about 1).
    entropy: mean row entropy of the weights in nats, between 0 (one-hot) and ln T (uniform).
    top: mean of each row's largest weight, between 1/T (uniform) and 1 (one-hot).
    """

    d_ks: torch.Tensor  # (G,) widths, ascending
    seeds: tuple[int, ...]  # (S,) one generator each
    tokens: int  # T queries and T keys per draw
    temperature: float  # every score is also divided by this
    spread: torch.Tensor  # (2, G, S)
    entropy: torch.Tensor  # (2, G, S)
    top: torch.Tensor  # (2, G, S)

    @property
    def max_entropy(self) -> float:
        """ln T: the entropy of a uniform row, the most a row of T weights can have."""
        return math.log(self.tokens)

    def band(self, metric: str, variant: str, lo: float = 0.1, hi: float = 0.9) -> tuple[torch.Tensor, ...]:
        """(mean, lo-quantile, hi-quantile) of a metric across the seeds, each (G,)."""
        x = getattr(self, metric)[VARIANTS.index(variant)]  # (G, S)
        q = torch.quantile(x, torch.tensor([lo, hi], dtype=x.dtype), dim=1)  # (2, G)
        return x.mean(dim=1), q[0], q[1]


def row_stats(weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Row entropy -sum_j a_j ln a_j (nats; 0 ln 0 = 0) and largest weight max_j a_j: (..., T_k) -> (...)."""
    return -torch.special.xlogy(weights, weights).sum(dim=-1), weights.amax(dim=-1)


def mean_row_stats(weights: torch.Tensor, mask: torch.Tensor) -> tuple[float, float]:
    """`row_stats` of (..., T_q, T_k) weights averaged over the queries that may attend to some key."""
    entropy, top = row_stats(weights)  # (..., T_q)
    rows = mask.any(dim=-1).expand(entropy.shape)  # a query with every key blocked has no distribution
    if not bool(rows.any()):
        return 0.0, 0.0
    return float(entropy[rows].mean()), float(top[rows].mean())


@torch.no_grad()
def scaling_sweep(
    d_ks: Iterable[int] = DK_GRID,
    seeds: Iterable[int] = range(32),
    tokens: int = 6,
    temperature: float = 1.0,
) -> ScalingSweep:
    """Why divide by sqrt(d_k): q, k ~ N(0, 1) of width d_k, omega = q k^T, softmax(omega / s).

    For each seed, q and k are (T, max d_k) draws from `torch.Generator(seed)`; width d_k uses
    their first d_k columns (the same numbers whatever the largest width), so var(q . k) = d_k.
    omega for every width is one cumulative sum over column blocks: (G, S, T, T).
    s = temperature (unscaled) or sqrt(d_k) * temperature (scaled).
    """
    widths = sorted({int(d) for d in d_ks})
    seeds = tuple(int(s) for s in seeds)
    if not widths or widths[0] < 1:
        raise ValueError("d_ks must be whole numbers of at least 1")
    if not seeds:
        raise ValueError("give at least one seed")
    if tokens < 2:
        raise ValueError("tokens must be at least 2: one key gives a weight of 1 whatever the scores")
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    d_max = widths[-1]
    # one (D, 2, T) draw per seed, feature by feature: width d's numbers are the same whatever the largest width
    draws = torch.stack([torch.randn(d_max, 2, tokens, generator=generator(s)) for s in seeds])  # (S, D, 2, T)
    queries, keys = draws[:, :, 0].transpose(1, 2), draws[:, :, 1].transpose(1, 2)  # (S, T, D) each
    edges = [0, *widths]
    blocks = torch.stack(
        [queries[..., a:b] @ keys[..., a:b].transpose(-2, -1) for a, b in zip(edges, edges[1:], strict=False)]
    )  # (G, S, T, T): the columns a..b-1 of each width's dot products
    omega = blocks.cumsum(dim=0)  # (G, S, T, T): omega of width d_k = sum of its blocks
    d = torch.tensor(widths, dtype=torch.float32)  # (G,)
    factor = torch.stack([torch.ones_like(d), d.sqrt()]) * temperature  # (2, G)
    scores = omega / factor[:, :, None, None, None]  # (2, G, S, T, T)
    entropy, top = row_stats(torch.softmax(scores, dim=-1))  # (2, G, S, T)
    return ScalingSweep(
        d_ks=torch.tensor(widths),
        seeds=seeds,
        tokens=tokens,
        temperature=float(temperature),
        spread=scores.flatten(-2).std(dim=-1),  # (2, G, S)
        entropy=entropy.mean(dim=-1),
        top=top.mean(dim=-1),
    )
