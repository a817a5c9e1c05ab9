"""What the pages show of a trained model: a layer as a `Config` the panels draw, the model at other run lengths,
and a head switched off."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import torch

from ...basics import core
from ...basics.config import Config
from .data import labels, probe
from .model import forward
from .settings import Settings
from .snapshots import Run, Snapshot, at_step
from .trainer import Measure, measure


def layer_config(snapshot: Snapshot, settings: Settings, layer: int, ids: torch.Tensor) -> Config:
    """The Config whose `attention.compute` is this layer of the snapshot on one sequence of ids (T,): the residual
    stream entering the layer, the layer's W_query/W_key/W_value/W_out, causal, scaled by sqrt(d_head)."""
    with torch.no_grad():
        fwd = forward(snapshot.weights, ids[None], settings.heads)
    w = snapshot.weights.layers[layer]
    d = settings.d_head
    return Config.from_embeddings(
        fwd.residual[layer][0], heads=settings.heads, d_k=d, d_v=d, init="given", w_query=w.w_query, w_key=w.w_key,
        w_value=w.w_value, out_proj=True, out_bias=False, w_out=w.w_out, mask="causal", scale="sqrt",
    )  # fmt: skip


def layer_result(snapshot: Snapshot, settings: Settings, layer: int, ids: torch.Tensor | None = None) -> core.Result:
    """`attention.compute` of a layer at a snapshot, on the probe sequence unless ids are given, rows and columns
    labelled with the tokens: any panel that draws a Result draws it."""
    ids = probe(settings).ids[0] if ids is None else ids
    result = core.compute(layer_config(snapshot, settings, layer, ids))
    names = labels(ids.tolist())
    return replace(result, tokens=names, key_tokens=names)


@dataclass(frozen=True)
class LengthTest:
    """The trained model at one run length."""

    length: int
    seen: bool  # whether training used this length
    task_loss: float
    accuracy: float
    score: float  # the best head's task score


def evaluate_lengths(run: Run, lengths: Iterable[int] | None = None, step: int | None = None) -> list[LengthTest]:
    """The model (last snapshot, or the one at `step`) on run lengths, seen in training or not: default 2..24."""
    s = run.settings
    snap = at_step(run, step)
    out = []
    for n in range(2, 25) if lengths is None else lengths:
        m = measure(snap.weights, s, n)
        out.append(
            LengthTest(n, n in s.train_lengths, m.task_loss, m.accuracy, max(max(r) for r in m.scores[s.score_name]))
        )
    return out


@dataclass(frozen=True)
class Ablation:
    """One head switched off: the task loss, accuracy and best task score (of the heads still on), before and
    after."""

    layer: int
    head: int
    task_loss: float
    task_loss_off: float
    score: float
    score_off: float
    accuracy: float
    accuracy_off: float


def ablate(run: Run, layer: int, head: int, step: int | None = None) -> Ablation:
    """Switch one head off (its context is zero) in the model at a snapshot, on the evaluation batch."""
    s = run.settings
    if not (0 <= layer < s.layers and 0 <= head < s.heads):
        raise ValueError(f"the model has layers 0..{s.layers - 1} and heads 0..{s.heads - 1}; got L{layer}H{head}")
    snap = at_step(run, step)
    on, off = measure(snap.weights, s), measure(snap.weights, s, off=[(layer, head)])

    def best(m: Measure, skip: tuple[int, int] | None = None) -> float:  # a switched-off head's weights do nothing
        rows = m.scores[s.score_name]
        return max(rows[i][j] for i in range(s.layers) for j in range(s.heads) if (i, j) != skip)

    return Ablation(
        layer, head, on.task_loss, off.task_loss, best(on), best(off, (layer, head)), on.accuracy, off.accuracy
    )
