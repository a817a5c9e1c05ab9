"""Experiments on the mechanism itself: why divide by sqrt(d_k), common mistakes, A/B differences, soft lookup.

Pure functions over tensors, Configs and Results (no Streamlit); randomness only from seeded
`torch.Generator`s, never torch's global generator. The dashboard's Experiments pages draw
what these return:

- `scaling_sweep`: spread of the scores, entropy and largest weight of the softmax over d_k,
  with and without the 1/sqrt(d_k) scaling, for many seeds at once;
- `pitfalls`: the correct computation and seven common mistakes on the same inputs, each
  checked against the `invariants` correct attention weights keep;
- `saturation`: why the tutorial's all-positive torch.rand weights give one-hot rows at every d_k;
- `diff`: what changes between two Results (the largest weight change and where);
- `soft_lookup`: one query's weights over the keys and the value rows they mix;
- `mask_json` and `cli_args`: a custom mask as the command line's `--custom-mask` file.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch

from ..basics import masks
from ..basics.config import SETTINGS, Config
from ..basics.core import Result, apply_mask, compute, merge_heads, softmax
from ..basics.params import flag
from ..basics.weights import generator

# --------------------------------------------------------------------------- why divide by sqrt(d_k)

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


# --------------------------------------------------------------------------- pitfalls

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


# --------------------------------------------------------------------------- compare A/B

# fields that do nothing unless another field selects them
_INERT = {
    "padding": lambda c: c.mask == "padding",
    "window": lambda c: c.mask == "window",
    "custom_mask": lambda c: c.mask == "custom",
    "temperature": lambda c: c.scale == "temperature",
}
# fields compared as used: a left-out d_k is 24, or d_model / heads in the split layout
_AS_USED = {"d_k": lambda c: c.head_dims[0], "d_v": lambda c: c.head_dims[1]}


def changed_fields(a: Config, b: Config) -> dict[str, tuple[Any, Any]]:
    """Config fields whose values differ and matter (a window width is ignored unless a mask uses it)."""
    out = {}
    for f in fields(Config):
        value = _AS_USED.get(f.name, lambda c, name=f.name: getattr(c, name))
        x, y = value(a), value(b)
        used = _INERT.get(f.name, lambda c: True)
        if x != y and (used(a) or used(b)):
            out[f.name] = (x, y)
    return out


_SIZES = ("heads", "kv_heads", "d_k", "d_v", "d_out", "head_layout")


def redrawn(a: Config, b: Config) -> tuple[str, ...]:
    """What else changed between A and B because of how the weights are drawn, in words (empty when only what
    the learner changed did). Stable draws keep every head's columns; the tutorial's order, a new d_model or the
    split layout's d_model / heads cannot."""
    changed = changed_fields(a, b)
    if not changed or "seed" in changed or "init" in changed or "draws" in changed:
        return ()  # new random numbers, or another distribution: every weight is new, and that is the change
    notes = []
    sizes = [n for n in _SIZES if n in changed]
    drawn = {a.init, b.init} - {"identity", "given"}
    if "d_model" in changed and drawn:
        notes.append(
            "every weight was redrawn because d_model changed: each column of W_query, W_key, W_value is d_model long"
        )
    elif sizes and drawn and not (weights_stable(a) and weights_stable(b)) and not _head_by_head(a, b, sizes):
        notes.append(
            f"head 1's W_key and W_value were redrawn because {', '.join(sizes)} changed and the weights are drawn "
            "in the tutorial's order (every head of W_query before the first number of W_key), so a change of size "
            "moves every later draw; stable draws (the dashboard's default) keep head 1"
        )
    elif "heads" in changed and "split" in (a.head_layout, b.head_layout) and a.d_k is None and drawn:
        notes.append(
            "the split layout cuts d_model into heads, so d_k changed with the heads: head 1 keeps its first "
            f"{min(a.head_dims[0], b.head_dims[0])} columns and the rest differ"
        )
    if a.out_proj and b.out_proj and drawn and ({"heads", "d_v"} & set(changed)):
        notes.append("W_out was redrawn: its rows are heads × d_v")
    return tuple(notes)


def _head_by_head(a: Config, b: Config, sizes: list[str]) -> bool:
    """The linear init's tutorial order, independent layout: one module (q, k, v) a head, drawn head by head, so
    a change of heads alone keeps head 1."""
    linear = a.init == b.init == "linear" and a.head_layout == b.head_layout == "independent"
    return linear and set(sizes) <= {"heads", "kv_heads"}


def weights_stable(config: Config) -> bool:
    """Whether a config draws its weights a column at a time (attention.basics.weights.stable)."""
    return config.draws == "stable" or config.init == "normal"


@dataclass(frozen=True, eq=False)
class Diff:
    """B - A for one head of each Result: the matrices that can be compared, and the largest weight change."""

    changed: dict[str, tuple[Any, Any]]  # field -> (A's value, B's value)
    omega: torch.Tensor | None  # (T_q, T_k) B - A; None when the token counts differ
    weights: torch.Tensor | None  # (T_q, T_k) B - A of the weights after dropout
    context: torch.Tensor | None  # (T_q, d_v) B - A; None also when d_v differs
    largest: float  # max |B - A| over the weights (0 when not comparable)
    query: int  # where it is
    key: int
    before: float  # A's weight there
    after: float  # B's weight there
    also: tuple[str, ...] = ()  # what else changed with it (`redrawn`): weights the learner did not touch

    def summary(self, tokens: Sequence[str], key_tokens: Sequence[str]) -> str:
        """One line in words: what B changes, and the largest weight change with its tokens (plain text).

        tokens and key_tokens label the rows and columns: pass distinct labels ("2 is") when words repeat.
        """
        if not self.changed:
            what = "A and B are the same setting"
        else:
            what = "B changes " + ", ".join(f"{n} {_short(x)} → {_short(y)}" for n, (x, y) in self.changed.items())
        if self.also:
            what += " (and with it: " + "; ".join(self.also) + ")"
        if self.weights is None:
            return f"{what}; the token counts differ, so the matrices cannot be compared cell by cell."
        if self.largest == 0:
            return f"{what}; every weight is the same."
        q, k = tokens[self.query], key_tokens[self.key]
        return (
            f"{what}. Largest weight change: query “{q}” → key “{k}”, "
            f"{self.before:.3f} → {self.after:.3f} ({self.after - self.before:+.3f})."
        )


def _short(value: Any) -> str:
    if isinstance(value, tuple):
        return f"({len(value)}×{len(value[0]) if value else 0} matrix)"
    if isinstance(value, str):
        return f"“{value if len(value) <= 30 else value[:29] + '…'}”"
    return f"{value:g}" if isinstance(value, float) else str(value)


def diff(a: Result, b: Result, head_a: int = 0, head_b: int = 0) -> Diff:
    """Compare head_a of A with head_b of B: omega, weights (after dropout) and context as B - A."""
    changed = changed_fields(a.config, b.config)
    also = redrawn(a.config, b.config)
    if a.omega.shape[1:] != b.omega.shape[1:]:
        return Diff(changed, None, None, None, 0.0, 0, 0, 0.0, 0.0, also)
    wa, wb = a.dropped_weights[head_a], b.dropped_weights[head_b]  # (T_q, T_k)
    dw = wb - wa
    flat = int(dw.abs().argmax())
    i, j = divmod(flat, dw.shape[1])
    ca, cb = a.context[head_a], b.context[head_b]  # (T_q, d_v)
    return Diff(
        changed=changed,
        omega=b.omega[head_b] - a.omega[head_a],
        weights=dw,
        context=cb - ca if ca.shape == cb.shape else None,
        largest=float(dw.abs().max()),
        query=i,
        key=j,
        before=float(wa[i, j]),
        after=float(wb[i, j]),
        also=also,
    )


# --------------------------------------------------------------------------- soft lookup


@dataclass(frozen=True, eq=False)
class SoftLookup:
    """Query i of one head as a soft dictionary lookup: z_i = sum_j a_ij v_j."""

    head: int
    query: int
    weights: torch.Tensor  # (T_k,) a_ij, after dropout
    allowed: torch.Tensor  # (T_k,) bool: the mask's row
    values: torch.Tensor  # (T_k, d_v) v_j
    weighted: torch.Tensor  # (T_k, d_v) a_ij v_j: each value row scaled by its weight
    context: torch.Tensor  # (d_v,) z_i = weighted.sum(0), as compute returned it


def soft_lookup(result: Result, head: int, i: int) -> SoftLookup:
    """For query i of a head: its weights over the keys, the value rows, and their weighted sum."""
    weights = result.dropped_weights[head, i]  # (T_k,)
    values = result.values[head]  # (T_k, d_v)
    return SoftLookup(
        head=head,
        query=i,
        weights=weights,
        allowed=result.mask[i],
        values=values,
        weighted=weights[:, None] * values,  # (T_k, d_v)
        context=result.context[head, i],  # (d_v,)
    )


# --------------------------------------------------------------------------- mask export


def mask_json(mask: Sequence[Sequence[bool]] | torch.Tensor, tokens: Sequence[str] = (),
              key_tokens: Sequence[str] | None = None, *, config: Config | None = None) -> str:  # fmt: skip
    """A (T_q, T_k) mask (True = may attend) as the command line's --custom-mask file.

    {"mask": rows of true/false, "tokens": [...], "key_tokens": [...]}; the command line reads "mask".
    With a config, its sentences come too ("sentence", "cross_sentence"): `cli_args` reads them from here
    (--sentence-file), so no user text has to pass through a shell.
    """
    rows = mask.tolist() if isinstance(mask, torch.Tensor) else [list(r) for r in mask]
    data: dict[str, Any] = {"mask": [[bool(x) for x in row] for row in rows]}
    if tokens:
        data["tokens"] = list(tokens)
        data["key_tokens"] = list(tokens if key_tokens is None else key_tokens)
    if config is not None:
        data.update({name: getattr(config, name) for name in _TEXT_FIELDS if getattr(config, name) is not None})
    return json.dumps(data)


# the mask file decides the mask: the mask setting and those used only with one of its values
_NOT_FLAGS = ("mask", *(name for name, s in SETTINGS.items() if s.when and s.when[0] == "mask"))
# user text: read from the mask file, never typed into a shell
_TEXT_FIELDS = tuple(name for name, s in SETTINGS.items() if s.kind == "text")
# Characters that every shell passes on as they are (bash, zsh, PowerShell, cmd.exe): no quotes, spaces, &, |,
# <, >, ^, %, !, $, `, ;, (, ), {, }, *, ?, # or newline, which one shell or another acts on.
_SHELL_SAFE = re.compile(r"[A-Za-z0-9._=/-]+")


def cli_args(config: Config, mask_path: str = "mask.json") -> list[str]:
    """Command-line arguments that recompute a config from the file `mask_json(..., config=config)` saved at
    mask_path (its mask and its sentences).

    Every other field that differs from Config()'s default becomes a flag; each one is a name, a number or
    a choice, inert in any shell (ValueError otherwise, and for matrix fields, which need JSON files).
    """
    changes = config.changes()
    args: list[str] = []
    for name, s in SETTINGS.items():
        value = getattr(config, name)
        if name in _NOT_FLAGS or name not in changes:
            continue
        if s.kind in ("matrix", "vector", "mask") and value is not None:
            raise ValueError(f"{name} is a {s.kind}: give it to the command line as a JSON file")
        if name in _TEXT_FIELDS and value is not None:
            args += [flag(name) + "-file", mask_path]
        elif s.kind == "bool":
            args.append(flag(name) if value else "--no-" + flag(name)[2:])
        elif value is None:
            raise ValueError(f"{name} cannot be left out on the command line")
        else:
            args.append(f"{flag(name)}={value}")  # one argument, so a value starting with - is no flag
            if not _SHELL_SAFE.fullmatch(args[-1]):
                raise ValueError(f"{name}={value!r} is no value a shell would pass on unchanged")
    return [*args, "--custom-mask", mask_path]
