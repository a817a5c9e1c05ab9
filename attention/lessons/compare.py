"""Compare A/B: what changes between two Results (the largest weight change and where), and which settings
changed and which weights they redraw: the Experiments page "Compare A/B".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch

from ..basics.config import Config
from ..basics.core import Result

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
