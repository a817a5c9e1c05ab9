"""A training run as data: its snapshots (losses, every head's scores, the weights), and the moment a head formed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .model import Weights
from .settings import CHANCE, FORMED_SCORE, Settings


@dataclass(frozen=True, eq=False)
class Snapshot:
    """The model at one step: losses, every head's scores on the evaluation batch, and its weights."""

    step: int
    loss: float  # the mean training loss over the steps since the last snapshot (at step 0: on the eval batch)
    task_loss: float  # the loss on the answer positions of the evaluation batch (the repeated half)
    accuracy: float  # the share of those answers right
    scores: dict[str, list[list[float]]]  # per layer, then per head
    weights: Weights

    def score(self, name: str) -> float:
        """The best head's score."""
        return max(max(row) for row in self.scores[name])

    def to_dict(self, with_weights: bool = True) -> dict[str, Any]:
        out = {"step": self.step, "loss": self.loss, "task_loss": self.task_loss, "accuracy": self.accuracy,
               "scores": self.scores}  # fmt: skip
        if with_weights:
            out["weights"] = self.weights.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Snapshot:
        return cls(step=d["step"], loss=d["loss"], task_loss=d["task_loss"], accuracy=d["accuracy"],
                   scores=d["scores"], weights=Weights.from_dict(d["weights"]))  # fmt: skip


@dataclass(frozen=True, eq=False)
class Run:
    """A training run: its settings, its snapshots in order, and why it stopped early (None: it did not)."""

    settings: Settings
    snapshots: tuple[Snapshot, ...]
    stopped: str | None = None

    @property
    def formed(self) -> Formation | None:
        return formation(self.snapshots, self.settings)

    def to_dict(self) -> dict[str, Any]:
        return {"settings": self.settings.to_dict(), "snapshots": [s.to_dict() for s in self.snapshots],
                "stopped": self.stopped}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Run:
        snapshots = tuple(Snapshot.from_dict(s) for s in d["snapshots"])
        return cls(settings=Settings.from_dict(d["settings"]), snapshots=snapshots, stopped=d.get("stopped"))


@dataclass(frozen=True)
class Formation:
    """The moment a head formed: the first snapshot from which the best task score in the task's layers stays above
    FORMED_SCORE and the task loss below half of chance, at every later snapshot."""

    step: int
    layer: int
    head: int
    score: float

    @property
    def name(self) -> str:
        return f"L{self.layer}H{self.head}"


def best_head(snapshot: Snapshot, settings: Settings, layers: Iterable[int] | None = None) -> tuple[int, int] | None:
    """(layer, head) of the highest task score among `layers` (the task's own, `Settings.task_layers`, by default);
    None when there are none."""
    rows = snapshot.scores[settings.score_name]
    heads = [(i, j) for i in (settings.task_layers if layers is None else layers) for j in range(len(rows[i]))]
    return max(heads, key=lambda ij: rows[ij[0]][ij[1]]) if heads else None


def formed(snapshot: Snapshot, settings: Settings) -> bool:
    """Whether a head does the task at this snapshot: a head in one of the task's layers (`FIRST_LAYER`) scores
    above 0.4 and the task loss is below half of chance."""
    best = best_head(snapshot, settings)
    if best is None or snapshot.task_loss >= CHANCE / 2:
        return False
    return snapshot.scores[settings.score_name][best[0]][best[1]] > FORMED_SCORE


def formation(snapshots: Iterable[Snapshot], settings: Settings) -> Formation | None:
    """The first snapshot from which every later one has `formed`; None if the last one has not."""
    snapshots = list(snapshots)
    first = None
    for i in range(len(snapshots) - 1, -1, -1):
        if not formed(snapshots[i], settings):
            break
        first = i
    if first is None:
        return None
    s = snapshots[first]
    layer, head = best_head(s, settings)
    return Formation(step=s.step, layer=layer, head=head, score=s.scores[settings.score_name][layer][head])


def at_step(run: Run, step: int | None = None) -> Snapshot:
    """The snapshot at a step (the last at or before it), or the last one."""
    if not run.snapshots:
        raise ValueError("the run has no snapshot yet")
    if step is None:
        return run.snapshots[-1]
    before = [s for s in run.snapshots if s.step <= step]
    return before[-1] if before else run.snapshots[0]
