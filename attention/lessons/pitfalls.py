"""Common mistakes: the Experiments page "Pitfalls".

`pitfalls`: the correct computation and seven common mistakes on the same inputs, each checked against the
`invariants` correct attention weights keep; `saturation`: why the tutorial's all-positive torch.rand weights
give one-hot rows at every d_k (the numbers its "all-positive weights" pitfall quotes); `pitfalls_bytes`: the
most that holds in memory, known before.
Pure functions over Configs and Results (no Streamlit); randomness only from seeded `torch.Generator`s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..basics import masks
from ..basics.config import Config
from ..basics.core import apply_mask, compute, merge_heads, softmax
from ..basics.sizes import result_bytes
from .scaling import mean_row_stats

INVARIANTS = ("rows sum to 1", "masked weights are 0", "shapes")


def invariants(weights: torch.Tensor, mask: torch.Tensor, expected_shape: Sequence[int]) -> dict[str, bool]:
    """What correct attention weights (..., T_q, T_k) keep, under a (T_q, T_k) mask (True = may attend).

    rows sum to 1: every finite, each row sums to 1 (0 for a query whose every key is blocked);
    masked weights are 0: exactly 0 where the mask blocks (NaN is not 0); shapes: as expected.
    """
    allowed = mask.any(dim=-1).to(weights.dtype)  # (T_q,): 1, or 0 for an empty row
    sums = weights.sum(dim=-1)  # (..., T_q)
    rows = bool(torch.isfinite(weights).all()) and bool(((sums - allowed).abs() <= 1e-5).all())
    blocked = weights.masked_select(~mask.expand(weights.shape))
    return {
        "rows sum to 1": rows,
        "masked weights are 0": bool((blocked == 0).all()),
        "shapes": tuple(weights.shape) == tuple(expected_shape),
    }


@dataclass(frozen=True, eq=False)
class Pitfall:
    """One way of computing attention (the correct one, or a mistake) on the correct version's inputs."""

    name: str
    what_goes_wrong: str  # one line
    code: str  # the line that differs, as one would write it
    shown: str  # which matrix makes the mistake visible: "weights" or "output"
    weights: torch.Tensor  # (h, T_q, T_k); (h, h, T_q, T_k) when every head meets every head
    context: torch.Tensor  # weights @ values: (h, T_q, d_v); (h, h, T_q, d_v)
    output: torch.Tensor  # what the layer returns: (T_q, d_out), the correct shape
    invariants: dict[str, bool]  # INVARIANTS -> kept

    @property
    def broken(self) -> tuple[str, ...]:
        return tuple(name for name, ok in self.invariants.items() if not ok)

    @property
    def row_sums(self) -> torch.Tensor:
        """(..., T_q) each query's weights summed over the keys (1 when correct)."""
        return self.weights.sum(dim=-1)

    @property
    def row_sum_range(self) -> tuple[float, float]:
        """The smallest and the largest row sum (NaN when a row holds NaN)."""
        sums = self.row_sums
        if not bool(torch.isfinite(sums).all()):
            return math.nan, math.nan
        return float(sums.min()), float(sums.max())

    @property
    def mean_largest_weight(self) -> float:
        """Each query's largest weight, averaged over queries and heads: 1 when every row is one-hot."""
        return float(self.weights.amax(dim=-1).mean())

    def head_weights(self, head: int) -> torch.Tensor:
        """(T_q, T_k) the weights of one head's queries (every-head mistake: against the next head's keys)."""
        if self.weights.dim() == 4:
            h = self.weights.shape[0]
            return self.weights[head, (head + 1) % h]
        return self.weights[head]

    def matrix(self, what: str, head: int) -> torch.Tensor:
        """The 2-D matrix to draw: 'weights' (one head's, T_q x T_k) or 'output' (T_q x d_out)."""
        return self.head_weights(head) if what == "weights" else self.output


def pitfall_config(config: Config) -> Config:
    """The setting the pitfalls are computed in: the output projection on, no dropout, and a mask that
    blocks something (causal, when the config's own mask allows every key), so every mistake can show.
    """
    t_q, t_k = len(config.tokens), len(config.key_tokens)
    mask = masks.build(
        config.mask, t_q, t_k, n_padding=config.padding, width=config.window, custom=config.custom_mask
    )  # (T_q, T_k)
    changes: dict[str, Any] = {"out_proj": True, "dropout": 0.0}
    if bool(mask.all()):
        changes.update(mask="causal", custom_mask=None)
    return config.replace(**changes)


SATURATION_D_KS = (1, 8, 24, 64, 256)


@dataclass(frozen=True, eq=False)
class Saturation:
    """omega and the weights of one config's inputs under one init, at several d_k (one head, no mask).

    spread: std of omega's entries; scaled_spread: the same after / sqrt(d_k); entropy: mean row entropy of the
    weights (nats, at most ln T_k); top: mean largest weight of a row (1 when one-hot).
    """

    init: str
    d_ks: tuple[int, ...]
    spread: tuple[float, ...]
    scaled_spread: tuple[float, ...]
    entropy: tuple[float, ...]
    top: tuple[float, ...]
    max_entropy: float  # ln T_k


@torch.no_grad()
def saturation(config: Config, init: str = "rand-transposed", d_ks: Sequence[int] = SATURATION_D_KS) -> Saturation:
    """The spread of omega and the row entropy at each d_k, for the config's inputs and an init (in the tutorials'
    order of draws; "normal" is the dashboard's).

    With torch.rand weights (never negative) every coordinate of q is about 0.5 x (the sum of x's coordinates):
    all d_k products q_i k_i share a sign and a size, so omega's spread grows like d_k, not sqrt(d_k), and dividing
    by sqrt(d_k) leaves it growing like sqrt(d_k): the softmax saturates to one key a row.
    """
    spread, scaled, entropy, top = [], [], [], []
    for d_k in d_ks:
        c = config.replace(init=init, draws="tutorial", d_k=int(d_k), heads=1, kv_heads=None, mask="none",
                           custom_mask=None, dropout=0.0, score_bias=None, d_out=None)  # fmt: skip
        r = compute(c)
        spread.append(float(r.omega[0].std()) if r.omega[0].numel() > 1 else 0.0)
        scaled.append(float(r.scaled[0].std()) if r.scaled[0].numel() > 1 else 0.0)
        e, t = mean_row_stats(r.weights, r.mask)
        entropy.append(e)
        top.append(t)
    t_k = len(config.key_tokens)
    return Saturation(init, tuple(int(d) for d in d_ks), tuple(spread), tuple(scaled), tuple(entropy), tuple(top),
                      math.log(t_k))  # fmt: skip


def _numbers(xs: Sequence[float]) -> str:
    return ", ".join(f"{x:.2g}" if x < 10 else f"{x:.0f}" for x in xs)


def saturation_words(positive: Saturation, normal: Saturation) -> str:
    """The lesson in numbers: 'omega's spread (std) is 3.5, 23, 57, 155, 595 at d_k 1, 8, 24, 64, 256 ...'."""
    return (
        f"on these inputs omega's spread (std) is {_numbers(positive.spread)} at d_k "
        f"{', '.join(map(str, positive.d_ks))}: it grows like d_k, so after dividing by √d_k it is still "
        f"{_numbers(positive.scaled_spread)}, and a row's largest weight averages {_numbers(positive.top)}. "
        f"With zero-mean weights (the dashboard's scaled normal) the scaled spread stays at "
        f"{_numbers(normal.scaled_spread)}"
    )


@torch.no_grad()
def pitfalls(config: Config) -> list[Pitfall]:
    """The correct version first, then seven mistakes, all on the same queries, keys, values and W_out.

    Shapes: h heads, T_q queries, T_k keys. Each mistake changes one line of
    weights = softmax(mask(Q K^T / sqrt(d_k)), dim=-1), context = weights V, output = concat W_out + b.
    """
    r = compute(pitfall_config(config))
    h, t_q, t_k = r.weights.shape
    mask, v = r.mask, r.values  # (T_q, T_k), (h, T_k, d_v)
    want_weights, want_output = (h, t_q, t_k), tuple(r.output.shape)

    def project(context: torch.Tensor) -> torch.Tensor:
        concat = merge_heads(context) if context.dim() == 3 else context.permute(2, 0, 1, 3).reshape(t_q, -1)
        if concat.shape[1] != r.w_out.shape[0]:
            return concat  # (T_q, h*h*d_v): W_out no longer fits
        return concat @ r.w_out if r.b_out is None else torch.addmm(r.b_out, concat, r.w_out)  # (T_q, d_out)

    def version(name: str, what: str, code: str, weights: torch.Tensor, *, shown: str = "weights",
                output: torch.Tensor | None = None) -> Pitfall:  # fmt: skip
        context = weights @ v  # (h, T_q, d_v), or (h, h, T_q, d_v) by broadcasting over the key heads
        output = project(context) if output is None else output
        checks = invariants(weights, mask, want_weights)
        checks["shapes"] = checks["shapes"] and tuple(output.shape) == want_output
        return Pitfall(name, what, code, shown, weights, context, output, checks)

    every_head = torch.einsum("aid,bjd->abij", r.queries, r.keys) / r.scale  # (h, h, T_q, T_k): Q_a K_b^T
    # the same inputs and setting with the tutorial's torch.rand weights
    positive = compute(pitfall_config(config).replace(init="rand-transposed", draws="tutorial"))
    numbers = saturation_words(saturation(config), saturation(config, init="normal"))
    return [
        version(
            "Correct",
            "Nothing: each row is a distribution over the keys the mask allows, and the heads are mixed by W_out.",
            "weights = torch.softmax(scores.masked_fill(~mask, -inf), dim=-1)",
            r.weights,
        ),
        version(
            "Softmax over the wrong dimension",
            "Normalised over the queries (each column sums to 1), so the rows no longer sum to 1; "
            "Self-Attention from Scratch's multi-head cell takes it over dim 0, the heads.",
            "weights = torch.softmax(masked_scores, dim=-2)",
            torch.softmax(r.masked, dim=-2),
        ),
        version(
            "No scaling",
            "Passes every check, yet the scores grow like sqrt(d_k), so the softmax saturates towards one key "
            "per row and its gradients vanish as d_k grows.",
            "scores = queries @ keys.T  # no / sqrt(d_k)",
            softmax(apply_mask(r.omega, mask), r.empty_rows),
        ),
        version(
            "All-positive weights (torch.rand)",
            "Passes every check, yet with weights that are never negative every query and key shares one "
            f"direction, so the rows come out nearly one-hot: {numbers}. Self-Attention from Scratch draws its "
            "weights with torch.rand: its printed numbers are right, and its rows are nearly one-hot.",
            "W_query = torch.nn.Parameter(torch.rand(d_k, d_model))  # never negative",
            positive.weights,
        ),
        version(
            "Masking after the softmax",
            "The blocked weights are zeroed after normalising and the rest are not renormalised, "
            "so the rows of masked queries sum to less than 1.",
            "weights = torch.softmax(scores, dim=-1).masked_fill(~mask, 0)",
            torch.softmax(r.scaled, dim=-1).masked_fill(~mask, 0.0),
        ),
        version(
            "Masking with 0 instead of −∞",
            "A score of 0 is an ordinary score: e⁰ = 1, so blocked keys keep a share of the weight "
            "(the future leaks into a causal model).",
            "weights = torch.softmax(scores.masked_fill(~mask, 0), dim=-1)",
            torch.softmax(r.scaled.masked_fill(~mask, 0.0), dim=-1),
        ),
        version(
            "Every head's queries with every head's keys",
            "Queries of head a meet keys of head b: an (h, h, T_q, T_k) omega, an h times too wide "
            "context and an output W_out no longer fits (Self-Attention from Scratch's multi-head cell).",
            "omega = queries[:, None] @ keys.transpose(-2, -1)  # (h, 1, T, d) @ (h, d, T) -> (h, h, T, T)",
            softmax(apply_mask(every_head, mask), r.empty_rows),
        ),
        version(
            "Forgetting the output projection",
            "The heads are only concatenated, never mixed, and the output has width h·d_v instead of "
            "d_model (when they happen to be equal, only the numbers tell).",
            "output = concat  # no @ W_out + b_out",
            r.weights,
            shown="output",
            output=r.concat,
        ),
    ]


def pitfalls_bytes(config: Config) -> int:
    """The most `pitfalls` holds at once: six Results' worth of the setting it computes (the correct version, the
    all-positive weights' version, every query head against every key head, and the mistakes' weights, contexts
    and outputs). Measured at the largest setting (64 tokens, 16 heads, d 256): 123 MB at the peak, 48 MB kept,
    against 139 MB here."""
    return 6 * result_bytes(pitfall_config(config))
