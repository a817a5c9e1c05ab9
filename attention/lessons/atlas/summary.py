"""An atlas of every head: its scores as a table, the strongest heads and what the atlas says in sentences a learner
can check, all computed from the scores."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from .scores import INPUTS, NAMES, NEED_REPEATS, Tallies


@dataclass(frozen=True, eq=False)
class Atlas:
    """Every head of a model scored over some input: scores {score: (L, h)} (NaN: no query had what it needs)."""

    model: str  # a key of MODELS
    source: str  # a key of INPUTS
    drop_first: bool
    scores: dict[str, torch.Tensor]
    counts: dict[str, int]  # queries each score averaged over
    texts: int
    tokens: int
    group: int  # query heads that read one K/V head (1: every head its own)

    @property
    def layers(self) -> int:
        return next(iter(self.scores.values())).shape[0]

    @property
    def heads(self) -> int:
        return next(iter(self.scores.values())).shape[1]

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.scores.values())

    def missing_words(self) -> str:
        """Why scores are missing, in a sentence ("" when none is)."""
        repeats = [NAMES[k] for k in self.missing() if k in NEED_REPEATS]
        out = []
        if repeats:
            out.append(f"The {' and '.join(repeats)} scores need a token that appears twice, and this input has "
                       "none: they are left out rather than shown as zeros.")  # fmt: skip
        if "punctuation" in self.missing():
            out.append("The punctuation score needs a punctuation mark, and this input has none: it is left out.")
        return " ".join(out)

    def missing(self) -> list[str]:
        """The scores no query of the input could be averaged over (no repeated token: duplicate, induction)."""
        return [k for k, n in self.counts.items() if n == 0]

    def rows(self) -> list[dict[str, Any]]:
        """One dict a head, layer by layer: layer, head, kv_group (grouped-query models), then each score (None
        where missing)."""
        out = []
        for layer in range(self.layers):
            for head in range(self.heads):
                row: dict[str, Any] = {"layer": layer, "head": head}
                if self.group > 1:
                    row["kv_group"] = head // self.group
                for k, s in self.scores.items():
                    v = float(s[layer, head])
                    row[k] = None if math.isnan(v) else round(v, 6)
                out.append(row)
        return out


def atlas(model: str, source: str, tallied: Tallies, group: int, drop_first: bool) -> Atlas:
    return Atlas(model, source, drop_first, tallied.scores(), dict(tallied.counts), tallied.texts, tallied.tokens,
                 group)  # fmt: skip


def head_name(layer: int, head: int) -> str:
    return f"L{layer}H{head}"


def ranked(scores: torch.Tensor, n: int | None = None) -> list[tuple[int, int, float]]:
    """Heads by a score, highest first (ties: lower layer, then lower head): [(layer, head, score)]."""
    heads = scores.shape[1]
    flat = scores.flatten()
    order = sorted(range(flat.numel()), key=lambda k: (-float(flat[k]), k))
    out = [(k // heads, k % heads, float(flat[k])) for k in order if not math.isnan(float(flat[k]))]
    return out[:n] if n is not None else out


# What counts as a head "doing" a behaviour, for the sentences below: a score past these lines (of 1)
STRONG = {"previous_token": 0.5, "first_token": 0.5, "duplicate_token": 0.3, "induction": 0.3, "special": 0.5,
          "sep": 0.5, "punctuation": 0.3}  # fmt: skip
SINK_LAYER = 0.5  # a layer whose heads park, on average, more than half their attention on the first token


def top_sentences(a: Atlas, n: int = 3) -> list[str]:
    """Each score's strongest heads in a sentence: "L18H6 is the strongest induction head on repeated random
    tokens: 0.91; then L14H0 (0.62), L20H3 (0.55)." Scores with no query to average are said to be missing."""
    out = []
    for k, s in a.scores.items():
        if a.counts[k] == 0:
            continue
        top = ranked(s, n)
        what = "broadest" if k == "entropy" else "farthest-reading" if k == "mean_distance" else "strongest"
        noun = f"{NAMES[k]} head" if k not in ("entropy", "mean_distance") else "head"
        fmt = "{:.1f}" if k == "mean_distance" else "{:.2f}"
        rest = ", ".join(f"{head_name(lay, h)} ({fmt.format(v)})" for lay, h, v in top[1:])
        lay, h, v = top[0]
        unit = " tokens" if k == "mean_distance" else ""
        then = f"; then {rest}." if rest else "."
        if k in STRONG and v < STRONG[k]:  # a weak best is no "strongest X head": said as the highest score
            out.append(f"No head reaches {STRONG[k]} as {_a(NAMES[k])} head on {INPUTS[a.source]}; the highest "
                       f"score is {head_name(lay, h)}'s, {fmt.format(v)}{then}")  # fmt: skip
            continue
        out.append(f"{head_name(lay, h)} is the {what} {noun} on {INPUTS[a.source]}: {fmt.format(v)}{unit}{then}")
    return out


def _a(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def _layers_in_words(layers: list[int], total: int) -> str:
    """Where a set of layers sits in a model of `total` layers: "layers 0-3 (early)"."""
    lo, hi, mid = min(layers), max(layers), sorted(layers)[len(layers) // 2]
    part = "early" if mid < total / 3 else "in the middle" if mid < 2 * total / 3 else "late"
    if len(layers) == 1:
        return f"layer {lo}, {part} in the model's {total}"
    span = f"layer {lo}" if lo == hi else f"layers {lo}–{hi}"
    return f"{span}, most of them {part} (median layer {mid} of {total})"


def _special_split(a: Atlas) -> list[str]:
    """Which of [CLS] and [SEP] an encoder's special-token heads park on: a head whose [CLS]/[SEP] share is strong
    parks mostly on [SEP] when [SEP] alone holds more than half of it. Clark et al. (2019) found BERT's middle
    layers parking on [SEP]; a model distilled for sentence embeddings need not."""
    if not (a.counts.get("special") and a.counts.get("sep")):
        return []
    strong = [(lay, h) for lay, h, _ in ranked(a.scores["special"]) if _ >= STRONG["special"]]
    if not strong:
        return []
    on_sep = [(lay, h) for lay, h in strong if float(a.scores["sep"][lay, h]) > float(a.scores["special"][lay, h]) / 2]
    on_cls = len(strong) - len(on_sep)
    where = f" ({_layers_in_words([lay for lay, _ in on_sep], a.layers)})" if on_sep else ""
    return [f"Of the {len(strong)} heads that park on [CLS]/[SEP], {len(on_sep)} park mostly on [SEP]{where} and "
            f"{on_cls} mostly on [CLS]. Clark et al. (2019) found BERT's middle layers parking on [SEP]."]  # fmt: skip


def findings(a: Atlas) -> list[str]:
    """What the atlas says about the model, in sentences a learner can check against the scatter and table: where
    sinks start, where previous-token, duplicate and induction heads sit, which heads park on [CLS]/[SEP] or
    punctuation, how entropy changes with depth. Every number is computed from the scores."""
    out = []
    total, heads = a.layers, a.heads
    if a.counts.get("first_token"):
        per_layer = a.scores["first_token"].mean(dim=1)  # (L,)
        sunk = [lay for lay in range(total) if float(per_layer[lay]) > SINK_LAYER]
        if sunk:
            start = next(lay for lay in range(total) if all(float(per_layer[m]) > SINK_LAYER for m in range(lay, total))
                         ) if float(per_layer[-1]) > SINK_LAYER else None  # fmt: skip
            where = (f"from layer {start} on, every layer's heads" if start is not None else
                     f"in {len(sunk)} of {total} layers (from {sunk[0]} to {sunk[-1]}), the heads")  # fmt: skip
            then = ("The other scores here leave it out." if a.drop_first else
                    "Switch on “Leave the first token out” to see where the rest goes.")  # fmt: skip
            out.append(f"Sinks: {where} park more than half of their attention on the first token, on average "
                       f"(layer means up to {float(per_layer.max()):.2f}). {then}")  # fmt: skip
        else:
            out.append(f"No layer parks more than half of its attention on the first token on average (the largest "
                       f"layer mean is {float(per_layer.max()):.2f}, layer {int(per_layer.argmax())}).")  # fmt: skip
    for k in ("previous_token", "duplicate_token", "induction", "special", "sep", "punctuation"):
        if k not in a.scores or not a.counts[k]:
            continue
        strong = [(lay, h, v) for lay, h, v in ranked(a.scores[k]) if v >= STRONG[k]]
        if strong:
            out.append(f"{len(strong)} of {total * heads} heads score {STRONG[k]} or more as {NAMES[k]} heads: "
                       f"{_layers_in_words([lay for lay, _, _ in strong], total)}.")  # fmt: skip
        else:
            best = ranked(a.scores[k], 1)[0]
            out.append(f"No head scores {STRONG[k]} or more as {_a(NAMES[k])} head here (the best, "
                       f"{head_name(best[0], best[1])}, {best[2]:.2f}).")  # fmt: skip
    out.extend(_special_split(a))
    if a.counts.get("entropy"):
        per_layer = a.scores["entropy"].mean(dim=1)
        first, last = float(per_layer[0]), float(per_layer[-1])
        trend = "spreads wider" if last > first + 0.05 else "narrows" if last < first - 0.05 else "stays as wide"
        out.append(f"Entropy: attention {trend} with depth (layer 0's heads average {first:.2f} of the most a row "
                   f"could spread, layer {total - 1}'s {last:.2f}).")  # fmt: skip
    return out
