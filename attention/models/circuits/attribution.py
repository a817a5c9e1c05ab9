"""Direct logit attribution: the final residual stream at one position as a sum of parts, each read by the
unembedding through the final norm with its scale frozen (TransformerLens's `apply_ln_to_stack`).

    x_L = e + sum_{l,h} head_{l,h} + sum_l mlp_l                     the residual stream (d_model,), exact sum
    s   = sqrt(mean(x_L^2) + eps)                                    RMSNorm's scale on the WHOLE residual
    u   = g * W_U[:, t]                                              the norm's gain times the target's row
    value_c = (c / s) . u        sum_c value_c = (x_L / s * g) . W_U[:, t] = logit_t
    difference of two tokens a, b: u = g * (W_U[:, a] - W_U[:, b]), the parts then sum to logit_a - logit_b

A model without a final norm (the tiny one) has s = 1 and g = 1. The split is exact (a sum of linear parts); what
it does not say is what a part would do alone, since s is frozen at the whole residual's value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch


class Component(NamedTuple):
    """One part of the residual stream: "embed", "head" (layer, head) or "mlp" (layer; head None)."""

    kind: str
    layer: int | None
    head: int | None


class Attribution(NamedTuple):
    """Every intermediate of a direct logit attribution at one position (N parts of the residual stream)."""

    components: tuple[Component, ...]  # N labels, in the order of `parts`
    parts: torch.Tensor  # (N, d_model) each part's vector in the residual stream
    residual: torch.Tensor  # (d_model,) x_L, the whole stream the forward pass normalised
    scale: torch.Tensor  # () s = sqrt(mean(x_L^2) + eps), or 1 without a norm
    normed: torch.Tensor  # (N, d_model) parts / s * g: each part after the frozen norm
    direction: torch.Tensor  # (d_model,) the unembedding row (or the difference of two), un-normalised
    values: torch.Tensor  # (N,) normed . direction: each part's share of the logit
    logit: torch.Tensor  # () the sum of values: the logit (or the logit difference)


def rms_scale(residual: torch.Tensor, eps: float) -> torch.Tensor:
    """s = sqrt(mean(x^2) + eps) over the last dimension: RMSNorm divides by this (the forward's expression)."""
    return torch.sqrt(residual.pow(2).mean(-1) + eps)  # (...)


def attribute(
    components: Sequence[Component],
    parts: torch.Tensor,
    direction: torch.Tensor,
    gain: torch.Tensor | None = None,
    eps: float | None = None,
    residual: torch.Tensor | None = None,
) -> Attribution:
    """Split the logit along `direction` (d_model,) into the parts (N, d_model) of the residual stream.

    gain/eps: the final RMSNorm's weight and epsilon (None: no norm, s = 1); residual: the stream the forward pass
    normalised, whose scale is frozen (default: the sum of the parts, equal to it up to float rounding)."""
    if parts.shape[0] != len(components):
        raise ValueError(f"{parts.shape[0]} parts but {len(components)} labels")
    residual = parts.sum(0) if residual is None else residual  # (d_model,)
    scale = rms_scale(residual, eps) if eps is not None else residual.new_ones(())
    normed = parts / scale  # (N, d_model)
    if gain is not None:
        normed = normed * gain
    values = normed @ direction  # (N,)
    return Attribution(tuple(components), parts, residual, scale, normed, direction, values, values.sum())


def by_head(attribution: Attribution, layers: int, heads: int) -> torch.Tensor:
    """The heads' values as a (layers, heads) grid (the page's heatmap); parts that are no head are left out."""
    grid = torch.zeros(layers, heads)
    for c, v in zip(attribution.components, attribution.values.tolist(), strict=True):
        if c.kind == "head":
            grid[c.layer, c.head] = v
    return grid


def totals(attribution: Attribution) -> dict[str, float]:
    """The values summed by kind of part: {"embed": ..., "head": ..., "mlp": ...} (the kinds present)."""
    out: dict[str, float] = {}
    for c, v in zip(attribution.components, attribution.values.tolist(), strict=True):
        out[c.kind] = out.get(c.kind, 0.0) + v
    return out


def rows(attribution: Attribution) -> list[dict[str, object]]:
    """The parts as JSON rows: {"kind", "layer", "head", "value"} (layer/head None where they do not apply)."""
    return [
        {"kind": c.kind, "layer": c.layer, "head": c.head, "value": v}
        for c, v in zip(attribution.components, attribution.values.tolist(), strict=True)
    ]
