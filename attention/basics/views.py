"""Read-only views of a Result for the dashboard: the shape of every tensor, and checks value by value.

Nothing here computes attention; these functions only describe what `compute` returned
(shapes along the multi-head pipeline) or compare a preset's printed numbers with it
one value at a time, at the same tolerance `presets.verify` uses for the whole check.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from .core import Result
from .presets import Check, Outcome, tolerance


@dataclass(frozen=True)
class ShapeStep:
    """One tensor along the way from the inputs to the output."""

    step: str  # what happens to get it
    tensor: str  # its name, as the tutorials write it
    dims: str  # its shape in symbols, e.g. "(h, T_q, d_k)"
    shape: tuple[int, ...]  # its shape in numbers for this config


def shape_steps(result: Result) -> list[ShapeStep]:
    """The shape of every tensor from x to the output, with the numbers of this config.

    The split layout (nn.MultiheadAttention) projects once to (T, h·d_k), views that as
    (T, h, d_k) and transposes to (h, T, d_k); the independent layout projects per head.
    """
    h, t_q, d_k = result.queries.shape
    t_k, d_v = result.values.shape[1:]
    d_model = result.embeddings.shape[1]
    split = result.config.head_layout == "split"
    cross = result.config.is_cross
    tq, tk = ("T_q", "T_k") if cross else ("T", "T")
    steps = [ShapeStep("query inputs" if cross else "inputs", "x", f"({tq}, d_model)", (t_q, d_model))]
    if cross:
        steps.append(ShapeStep("key/value inputs", "x_kv", f"({tk}, d_model)", (t_k, d_model)))
    if split:
        steps += [
            ShapeStep("project once: x @ W_q", "x W_q", f"({tq}, h·d_k)", (t_q, h * d_k)),
            ShapeStep("split: view into heads", "x W_q", f"({tq}, h, d_k)", (t_q, h, d_k)),
            ShapeStep("transpose heads to the front", "Q", f"(h, {tq}, d_k)", (h, t_q, d_k)),
        ]
    else:
        steps.append(ShapeStep("project per head: x @ W_q⁽ⁱ⁾, stacked", "Q", f"(h, {tq}, d_k)", (h, t_q, d_k)))
    how = "same split and transpose" if split else "project per head"
    steps += [
        ShapeStep(f"keys: {how}", "K", f"(h, {tk}, d_k)", tuple(result.keys.shape)),
        ShapeStep(f"values: {how}", "V", f"(h, {tk}, d_v)", tuple(result.values.shape)),
        ShapeStep("scores: Q Kᵀ", "omega", f"(h, {tq}, {tk})", tuple(result.omega.shape)),
        ShapeStep("scale, mask, softmax over the keys", "weights", f"(h, {tq}, {tk})", tuple(result.weights.shape)),
        ShapeStep("weights @ V", "context", f"(h, {tq}, d_v)", tuple(result.context.shape)),
        ShapeStep("transpose heads back", "context", f"({tq}, h, d_v)", (t_q, h, d_v)),
        ShapeStep("concatenate the heads", "concat", f"({tq}, h·d_v)", tuple(result.concat.shape)),
    ]
    if result.w_out is not None:
        steps.append(
            ShapeStep("output projection: concat @ W_out", "output", f"({tq}, d_out)", tuple(result.output.shape))
        )
    return steps


@dataclass(frozen=True)
class ValueCheck:
    """One printed number of a check beside the computed one."""

    index: tuple[int, ...]  # position inside the checked part
    printed: float
    computed: float
    error: float  # |computed - printed|
    tolerance: float  # half a unit of the last printed digit (plus slack)
    ok: bool


def check_values(outcome: Outcome) -> list[ValueCheck]:
    """Each printed number of a checked value against the computed one (empty for shape-only checks).

    Uses the same elementwise tolerance as `presets.verify`, so every value is ok exactly
    when the whole check is ok (given matching shapes).
    """
    check = outcome.check
    if check.shape_only or not isinstance(outcome.computed, torch.Tensor):
        return []
    expected = torch.tensor(check.expected, dtype=torch.float64)
    got = outcome.computed.to(torch.float64)
    if got.shape != expected.shape:
        return []
    err = (got - expected).abs()
    tol = tolerance(check, expected)
    out = []
    for index in itertools.product(*(range(n) for n in expected.shape)):
        e, g, d, t = (float(x[index]) for x in (expected, got, err, tol))
        out.append(ValueCheck(tuple(index), e, g, d, t, d <= t))
    return out


def where(check: Check) -> str:
    """Where a check looks in the Result, as Python indexing: 'weights[0, 1]', 'embeddings[:, 2]'."""
    if not check.index:
        return check.tensor
    return f"{check.tensor}[{', '.join(':' if i is None else str(i) for i in check.index)}]"


def printed_text(check: Check, x: float) -> str:
    """A printed number as the tutorial wrote it: its decimals, or its significant digits."""
    if check.significant is not None:
        return f"{x:.{check.significant - 1}e}"
    return f"{x:.{check.decimals or 0}f}"


def computed_text(check: Check, x: float) -> str:
    """A computed number written two digits finer than the tutorial printed it."""
    if check.significant is not None:
        return f"{x:.{check.significant + 1}e}"
    return f"{x:.{(check.decimals or 0) + 2}f}"
