"""The tiny model's settings, declared once (the page, its link and `--train` read them), and the constants of its
tasks: the vocabulary, the run lengths, the bounds on a run's snapshots and memory."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from ...basics.params import Param, declarations, setting

VOCAB = 32  # run tokens are 1..VOCAB; token 0 is the separator of reverse and sort
SEP = 0
NAMES = ("|",) + tuple("abcdefghijklmnopqrstuvwxyzABCDEF")  # a token's label, NAMES[id]
MAX_RUN = 32  # the longest run any evaluation uses
MAX_POSITIONS = 2 * MAX_RUN + 1  # the position table: a run, a separator, the answer
TRAIN_LENGTHS = (4, 16)  # a varying run length is drawn from 4..16 each batch
TASKS = ("induction", "reverse", "sort", "previous_token")
SCORE_NAMES = {"induction": "induction", "reverse": "reverse", "sort": "sort", "previous_token": "previous_token"}
CHANCE = math.log(VOCAB)  # the loss of a uniform guess over the run tokens, in nats
FORMED_SCORE = 0.4  # a head "forms" when its task score passes this and the task loss falls below CHANCE / 2
# The first layer where a task's head can form. An induction head finds "the token after the earlier copy" by reading
# what a previous-token head below it wrote, so it sits in layer 1 or above of a model of two layers or more; a
# layer-0 head that scores on the induction keys can only have found them by position (the fixed-length shortcut).
# The other tasks' patterns are a query-key match a single layer can make.
FIRST_LAYER = {"induction": 1, "reverse": 0, "sort": 0, "previous_token": 0}
EVAL_BATCH = 32
PROBE_SEED = 20_24  # the probe and evaluation sequences: the same for every seed, so runs compare on one input
MAX_SNAPSHOTS = 500  # a run's weights are kept at every snapshot: bounded, so is its memory (`run_bytes`)
MAX_RUN_BYTES = 48 * 2**20  # and so is what they weigh together: a server keeps runs for every visitor
IGNORE = -100  # cross_entropy's ignore_index: positions that are not scored


@dataclass(frozen=True)
class Settings:
    """Everything that decides a training run; defaults form an induction head in a few hundred steps."""

    # fmt: off
    task: str = setting(
        "induction", "choice", "Task", "induction: a random run of tokens, then the same run again; reverse and sort: "
        "the run, a separator, then the run reversed or sorted; previous_token: name the token before each one.",
        choices=TASKS, dashboard=True,
    )
    layers: int = setting(2, "int", "Layers", "Attention layers (an induction head needs two).", lo=1, hi=3,
                          dashboard=True)
    heads: int = setting(2, "int", "Heads", "Heads a layer; each is d_model / heads wide.", lo=1, hi=4,
                         dashboard=True)
    d_model: int = setting(32, "int", "d_model", "Width of the residual stream.", lo=8, hi=128,
                           dashboard=(8, 64))
    lr: float = setting(1e-2, "float", "Learning rate", "AdamW's learning rate.", lo=1e-4, hi=1.0,
                         dashboard=(1e-3, 0.1))
    batch: int = setting(32, "int", "Batch", "Sequences a training step.", lo=1, hi=256,
                         dashboard=(4, 128))
    steps: int = setting(1000, "int", "Steps", "Training steps.", lo=1, hi=5000,
                         dashboard=(50, 3000))
    seed: int = setting(0, "int", "Seed", "Seeds the weights and the training batches.", lo=0,
                        hi=2**31 - 1, dashboard=(0, 9999))
    fixed: bool = setting(
        False, "bool", "Fixed run length", "Train on one run length only (the pitfall): the model can then find the "
        "answer by position alone, and fails at every other length.", dashboard=True,
    )
    length: int = setting(
        8, "int", "Run length", "The run length when fixed, and the probe's run length.", lo=2, hi=MAX_RUN,
        dashboard=(2, 24),
    )
    every: int = setting(25, "int", "Snapshot every", "Steps between saved snapshots.", lo=1, hi=1000,
                         dashboard=(5, 100))
    init_std: float = setting(0.1, "float", "Init σ", "Standard deviation of the initial weights.",
                              lo=1e-3, hi=10.0, dashboard=(0.01, 1.0))
    # fmt: on

    def __post_init__(self) -> None:
        for name, p in SETTINGS.items():
            value = getattr(self, name)
            if p.kind == "float" and isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, name, float(value))
            p.check(name, getattr(self, name))
        if self.steps // self.every > MAX_SNAPSHOTS:
            raise ValueError(f"steps={self.steps} with a snapshot every {self.every} makes {self.steps // self.every} "
                             f"snapshots; at most {MAX_SNAPSHOTS}: take one every {-(-self.steps // MAX_SNAPSHOTS)} "
                             "steps or more")  # fmt: skip
        if self.run_bytes > MAX_RUN_BYTES:
            fit = MAX_RUN_BYTES // (self.parameters * 4) - 2  # snapshots that fit
            advice = (
                f"take one every {-(-self.steps // fit)} steps or more, or a smaller model"
                if fit > 0
                else "pick a smaller d_model or fewer layers"
            )
            raise ValueError(f"this run would keep {self.run_bytes / 2**20:.0f} MB of weights "
                             f"({self.steps // self.every} snapshots of {self.parameters:,} numbers); "
                             f"at most {MAX_RUN_BYTES // 2**20} MB: {advice}")  # fmt: skip
        if self.d_model % self.heads:
            raise ValueError(f"d_model={self.d_model} must divide into heads={self.heads} equal heads: pick a d_model "
                             f"that {self.heads} divides")  # fmt: skip

    @property
    def d_head(self) -> int:
        return self.d_model // self.heads

    @property
    def parameters(self) -> int:
        """Numbers in the model: embeddings, position table, 4 d_model x d_model matrices a layer, unembedding."""
        d = self.d_model
        return (VOCAB + 1) * d * 2 + MAX_POSITIONS * d + 4 * d * d * self.layers

    @property
    def run_bytes(self) -> int:
        """What a finished run keeps: float32 weights at every snapshot (known before training)."""
        return (self.steps // self.every + 2) * self.parameters * 4

    @property
    def score_name(self) -> str:
        """The name of the task's attention score: induction, reverse, sort or previous_token."""
        return SCORE_NAMES[self.task]

    @property
    def task_layers(self) -> range:
        """The layers where a head doing the task counts as formed (`FIRST_LAYER`): empty for an induction head in a
        one-layer model, which cannot have one."""
        return range(FIRST_LAYER[self.task], self.layers)

    @property
    def train_lengths(self) -> tuple[int, ...]:
        return (self.length,) if self.fixed else tuple(range(TRAIN_LENGTHS[0], TRAIN_LENGTHS[1] + 1))

    def replace(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Settings:
        return cls(**d)


SETTINGS: dict[str, Param] = declarations(Settings)
