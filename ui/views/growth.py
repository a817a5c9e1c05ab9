"""Watch it learn's composition chart: how much the second layer's task head reads what the first layer's
previous-token head writes (Elhage et al.'s K-, Q- and V-composition), snapshot by snapshot.

What belongs here: the cached growth of a run (`attention.models.circuits.trained.growth`, kept a few runs at a
time: a snapshot never changes, so a run with the same snapshots gives the same curve) and its frame and chart,
drawn with the training page's own curve spec. The numbers come from `attention.models.circuits`.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from attention.models import tiny
from attention.models.circuits import trained

from . import watch_it_learn

_KEPT = 8  # runs' curves kept (a few hundred floats each)


def growth(run: tiny.Run) -> trained.Growth | None:
    """The composition of the previous-token head into the task head at every snapshot so far (None for one layer),
    computed once per run and number of snapshots."""
    key = (repr(run.settings), len(run.snapshots), run.snapshots[-1].step if run.snapshots else None)
    return _growth(key, run)


# bounded, shared by the sessions: no module state here
@st.cache_resource(max_entries=_KEPT, ttl=3600, show_spinner=False)
def _growth(key: tuple, _run: tiny.Run) -> trained.Growth | None:
    """`trained.growth` of the run `key` names (the run itself is not hashed: its key says which it is)."""
    return trained.growth(_run)


def frame(g: trained.Growth, task: str) -> pd.DataFrame:
    """Long table: step, value, series (the three compositions and the reader's task score)."""
    writer, reader = (f"L{layer}H{head}" for layer, head in (g.writer, g.reader))
    series = {f"K-composition {writer} → {reader}": g.k, f"Q-composition {writer} → {reader}": g.q,
              f"V-composition {writer} → {reader}": g.v, f"{reader}'s {task} score": g.score}  # fmt: skip
    rows = [(step, float(v), name) for name, values in series.items() for step, v in zip(g.steps, values, strict=True)]
    return pd.DataFrame(rows, columns=["step", "value", "series"])


def chart(g: trained.Growth, task: str, at: int | None = None) -> None:
    """The curves over the steps, a grey rule at the step shown."""
    writer, reader = (f"L{layer}H{head}" for layer, head in (g.writer, g.reader))
    spec = watch_it_learn.curve_spec(f"How much {reader} reads what {writer} writes", "score (0 to 1)", "series",
                               current=at, y_max=1.0, height=170)  # fmt: skip
    watch_it_learn.curve(frame(g, task), spec, key="tr:composition")
