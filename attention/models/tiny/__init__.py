"""A tiny attention-only transformer, trained live, so a learner watches a head find a pattern.

    x_0     = token[ids] + position[0..T-1]                        (T, d_model), no LayerNorm, no MLP
    per layer l (h heads of d_head = d_model / h), causal:
      queries, keys, values = x W_q, x W_k, x W_v                   (split into heads)
      weights = softmax(mask(queries keys^T / sqrt(d_head)))        context = weights @ values
      x_(l+1) = x_l + concat(context) W_O                            (the residual stream)
    logits  = x_L W_U                                               (T, vocab)

The attention is `attention.core`'s own functions (project, scores, apply_mask, softmax, merge_heads), and a
snapshot's layer is a `Config` (`layer_config`) whose `attention.compute` is that layer on the probe sequence, so
the existing panels draw any step of the training. Training (`Trainer`, `train`) is AdamW on one torch thread,
seeded by the settings alone: the same `Settings` give the same snapshots, number for number, and a run is a pure
function of its settings (`ui.training` keeps one run a setting for every visitor of the server).

Tasks, on a random run of tokens x (length L): induction (x then x again: predict the repeat), reverse (x, a
separator, x reversed), sort (x, a separator, x sorted), previous_token (predict the token before each one).
The run length is drawn anew each batch (4 to 16), or is fixed: then the model learns a positional shortcut
that fails at every other length (`evaluate_lengths`).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from typing import Any

import torch
import torch.nn.functional as F

from ...basics import core
from ...basics.config import Config
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


# the task's sequences ---------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Sequences:
    """A batch of one task at one run length: B sequences of T tokens."""

    ids: torch.Tensor  # (B, T) token ids
    targets: torch.Tensor  # (B, T) the token each position is trained to predict (IGNORE: none)
    answer: torch.Tensor  # (B, T) bool: positions whose prediction the task scores (the repeated half)
    task_keys: torch.Tensor  # (B, T, T) bool: from each answer query, the key(s) a head solving the task reads
    length: int  # L, the run's length


def sequences(task: str, length: int, batch: int, g: torch.Generator, with_keys: bool = True) -> Sequences:
    """B random runs of `length` tokens laid out for `task`, with the targets and (with_keys) the keys that solve
    it: training needs no keys, and skips building the (B, T, T) grid."""
    run = torch.randint(1, VOCAB + 1, (batch, length), generator=g)  # (B, L)
    n = length
    if task == "induction":
        ids = torch.cat([run, run], 1)  # (B, 2L)
    elif task == "previous_token":
        ids = torch.cat([run, torch.randint(1, VOCAB + 1, (batch, length), generator=g)], 1)  # (B, 2L)
    else:
        tail = run.flip(1) if task == "reverse" else run.sort(1).values
        ids = torch.cat([run, torch.full((batch, 1), SEP), tail], 1)  # (B, 2L+1)
    b, t = ids.shape
    targets = torch.full_like(ids, IGNORE)
    answer = torch.zeros(b, t, dtype=torch.bool)
    keys = torch.zeros(b, t, t, dtype=torch.bool) if with_keys else torch.zeros(b, 0, 0, dtype=torch.bool)
    if task == "previous_token":
        targets[:, 1:] = ids[:, :-1]
        answer[:, 1:] = True
        if with_keys:
            keys[:, torch.arange(1, t), torch.arange(0, t - 1)] = True
    else:
        targets[:, :-1] = ids[:, 1:]  # next-token prediction everywhere
        queries = torch.arange(n, 2 * n - 1) if task == "induction" else torch.arange(n, 2 * n)
        answer[:, queries] = True
        if not with_keys:
            pass
        elif task == "induction":  # query i holds x_(i-L); the token after its first occurrence is at i-L+1
            keys[:, queries, queries - n + 1] = True
        elif task == "reverse":  # query L+k predicts x_(L-1-k)
            keys[:, queries, 2 * n - 1 - queries] = True
        else:  # sort: every position of the run that holds the token to predict
            wanted = targets[:, queries]  # (B, L)
            keys[:, queries, :n] = wanted[:, :, None] == run[:, None, :]
    return Sequences(ids=ids, targets=targets, answer=answer, task_keys=keys, length=n)


def probe(settings: Settings, length: int | None = None, batch: int = EVAL_BATCH) -> Sequences:
    """The fixed evaluation batch at a run length (the settings' by default); its first sequence is the probe."""
    n = settings.length if length is None else length
    g = torch.Generator().manual_seed(PROBE_SEED * 1000 + n)
    return sequences(settings.task, n, batch, g)


def labels(ids: Iterable[int]) -> tuple[str, ...]:
    """The tokens' names, 'a' .. 'F' and '|' for the separator (the heatmaps put the position before each)."""
    return tuple(NAMES[int(i)] for i in ids)


# the model ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LayerWeights:
    """One attention layer, every matrix used as x @ W; head k owns columns k*d_head .. (k+1)*d_head."""

    w_query: torch.Tensor  # (d_model, h*d_head)
    w_key: torch.Tensor  # (d_model, h*d_head)
    w_value: torch.Tensor  # (d_model, h*d_head)
    w_out: torch.Tensor  # (h*d_head, d_model)


@dataclass(frozen=True, eq=False)
class Weights:
    """The whole model: about 11,000 numbers at the defaults."""

    token: torch.Tensor  # (VOCAB+1, d_model)
    position: torch.Tensor  # (MAX_POSITIONS, d_model)
    layers: tuple[LayerWeights, ...]
    unembed: torch.Tensor  # (d_model, VOCAB+1)

    def tensors(self) -> list[torch.Tensor]:
        out = [self.token, self.position]
        for layer in self.layers:
            out += [layer.w_query, layer.w_key, layer.w_value, layer.w_out]
        return out + [self.unembed]

    def detached(self) -> Weights:
        """A copy that training no longer changes (a snapshot's weights)."""
        return _rebuild([t.detach().clone() for t in self.tensors()])

    def to_dict(self) -> dict[str, Any]:
        return {
            "token": self.token.tolist(),
            "position": self.position.tolist(),
            "layers": [{f.name: getattr(layer, f.name).tolist() for f in fields(layer)} for layer in self.layers],
            "unembed": self.unembed.tolist(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Weights:
        t = lambda x: torch.tensor(x, dtype=torch.float32)  # noqa: E731
        layers = tuple(LayerWeights(**{k: t(v) for k, v in layer.items()}) for layer in d["layers"])
        return cls(token=t(d["token"]), position=t(d["position"]), layers=layers, unembed=t(d["unembed"]))

    @property
    def parameters(self) -> int:
        return sum(t.numel() for t in self.tensors())


def _rebuild(tensors: list[torch.Tensor]) -> Weights:
    token, position, *rest, unembed = tensors
    layers = tuple(LayerWeights(*rest[i : i + 4]) for i in range(0, len(rest), 4))
    return Weights(token=token, position=position, layers=layers, unembed=unembed)


def init_weights(settings: Settings, g: torch.Generator) -> Weights:
    """Every matrix drawn N(0, init_std^2), in the order of the architecture."""
    d, s = settings.d_model, settings.init_std
    draw = lambda *shape: torch.randn(shape, generator=g) * s  # noqa: E731
    token, position = draw(VOCAB + 1, d), draw(MAX_POSITIONS, d)
    layers = tuple(LayerWeights(draw(d, d), draw(d, d), draw(d, d), draw(d, d)) for _ in range(settings.layers))
    return Weights(token=token, position=position, layers=layers, unembed=draw(d, VOCAB + 1))


def _heads(x: torch.Tensor, w: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, T, d_model) @ (d_model, h*d_head) -> (B, h, T, d_head), through core.project on the B*T rows."""
    b, t, d = x.shape
    return core.project(x.reshape(b * t, d), w, None, heads).view(heads, b, t, -1).transpose(0, 1)


def attention_layer(
    layer: LayerWeights, x: torch.Tensor, heads: int, off: Iterable[int] = ()
) -> tuple[torch.Tensor, torch.Tensor]:
    """One causal attention layer on a batch: (what it adds to the residual stream (B, T, d_model), weights
    (B, h, T, T)). Heads in `off` are switched off: their context is zero, so they add nothing."""
    b, t, _ = x.shape
    queries = _heads(x, layer.w_query, heads)  # (B, h, T, d_head)
    keys = _heads(x, layer.w_key, heads)  # (B, h, T, d_head)
    values = _heads(x, layer.w_value, heads)  # (B, h, T, d_head)
    scaled = core.scores(queries, keys) / math.sqrt(queries.shape[-1])  # (B, h, T, T)
    mask = torch.ones(t, t, dtype=torch.bool).tril()  # (T, T) True = may attend
    weights = core.softmax(core.apply_mask(scaled, mask), torch.zeros(t, dtype=torch.bool))  # (B, h, T, T)
    context = weights @ values  # (B, h, T, d_head)
    off = list(off)
    if off:
        keep = torch.ones(heads)
        keep[off] = 0.0
        context = context * keep[:, None, None]
    concat = context.transpose(1, 2).reshape(b, t, -1)  # (B, T, h*d_head), core.merge_heads a sequence
    return concat @ layer.w_out, weights


@dataclass(frozen=True, eq=False)
class Forward:
    """The model on a batch: logits, each layer's attention and the residual stream entering each layer."""

    logits: torch.Tensor  # (B, T, VOCAB+1)
    weights: tuple[torch.Tensor, ...]  # L x (B, h, T, T)
    residual: tuple[torch.Tensor, ...]  # L+1 x (B, T, d_model): the embeddings, then after each layer


def forward(weights: Weights, ids: torch.Tensor, heads: int, off: Iterable[tuple[int, int]] = ()) -> Forward:
    """The model on a (B, T) batch of ids; `off` lists (layer, head) pairs switched off."""
    t = ids.shape[1]
    x = weights.token[ids] + weights.position[:t]  # (B, T, d_model)
    residual, attn = [x], []
    for i, layer in enumerate(weights.layers):
        added, w = attention_layer(layer, x, heads, [h for (l_, h) in off if l_ == i])
        x = x + added  # the residual stream
        residual.append(x)
        attn.append(w)
    return Forward(logits=x @ weights.unembed, weights=tuple(attn), residual=tuple(residual))


# measuring ------------------------------------------------------------------------------------------------


def losses(fwd: Forward, seqs: Sequences) -> tuple[torch.Tensor, torch.Tensor]:
    """(the training loss over every scored position, the loss on the answer positions alone), in nats."""
    flat = fwd.logits.reshape(-1, fwd.logits.shape[-1])
    targets = seqs.targets.reshape(-1)
    loss = F.cross_entropy(flat, targets, ignore_index=IGNORE)
    task = F.cross_entropy(flat, torch.where(seqs.answer.reshape(-1), targets, IGNORE), ignore_index=IGNORE)
    return loss, task


def previous_token_scores(weights: torch.Tensor) -> torch.Tensor:
    """Each head's mean weight on the key just before the query, (B, h, T, T) -> (h,), queries 1..T-1."""
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2))


def task_scores(weights: torch.Tensor, seqs: Sequences) -> torch.Tensor:
    """Each head's mean weight, over the answer queries, on the key(s) that solve the task: (B, h, T, T) -> (h,).

    For induction: from the second copy of a token, the weight on the token after its first copy."""
    on_keys = (weights * seqs.task_keys[:, None]).sum(-1)  # (B, h, T)
    answer = seqs.answer[:, None].expand_as(on_keys)
    return (on_keys * answer).sum(dim=(0, 2)) / answer.sum(dim=(0, 2))


@dataclass(frozen=True, eq=False)
class Measure:
    """The model on the evaluation batch: the task loss, accuracy and every head's scores."""

    length: int
    loss: float  # training loss on the batch
    task_loss: float  # on the answer positions
    accuracy: float  # share of answer positions whose most likely token is right
    scores: dict[str, list[list[float]]]  # {"previous_token": [[layer 0's heads], ...], task: [[...]]}


def measure(
    weights: Weights, settings: Settings, length: int | None = None, off: Iterable[tuple[int, int]] = ()
) -> Measure:
    """Loss, accuracy and scores of a model on the fixed evaluation batch at a run length."""
    seqs = probe(settings, length)
    with torch.no_grad():
        fwd = forward(weights, seqs.ids, settings.heads, off)
        loss, task = losses(fwd, seqs)
        right = (fwd.logits.argmax(-1) == seqs.targets) & seqs.answer
    scores = {"previous_token": [previous_token_scores(w).tolist() for w in fwd.weights]}
    scores[settings.score_name] = [task_scores(w, seqs).tolist() for w in fwd.weights]
    return Measure(
        length=seqs.length, loss=float(loss), task_loss=float(task),
        accuracy=float(right.sum() / seqs.answer.sum()), scores=scores,
    )  # fmt: skip


# snapshots and runs ---------------------------------------------------------------------------------------


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


@contextmanager
def one_thread():
    """torch on one intra-op thread while training (the numbers then do not depend on the machine's cores),
    restored after. The thread count is the process's: a server trains in worker processes (`ui.training`)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class Diverged(ValueError):
    """The loss became NaN or infinite."""


class AdamW:
    """torch.optim.AdamW's update (its defaults: betas 0.9 and 0.999, eps 1e-8, weight decay 0.01), written out.

    torch's own optimizers import torch._dynamo the first time one is made (every torch.optim method is wrapped in
    torch._disable_dynamo, which imports it at its first call): about 70 MB and 1 s, for good, in the process that
    trains, which on a hosted copy is the server itself. This is the same arithmetic, op for op, as torch's
    single-tensor AdamW (tests/test_tiny.py holds it to torch's, step by step)."""

    def __init__(self, params: list[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2) -> None:  # fmt: skip
        self.params, self.lr, self.betas, self.eps, self.weight_decay = params, lr, betas, eps, weight_decay
        self.steps = 0
        self.exp_avg = [torch.zeros_like(p) for p in params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        self.steps += 1
        step_size = self.lr / (1 - beta1**self.steps)
        bias_correction2_sqrt = math.sqrt(1 - beta2**self.steps)
        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True):
            if p.grad is None:
                continue
            grad = p.grad
            p.mul_(1 - self.lr * self.weight_decay)
            m.lerp_(grad, 1 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (v.sqrt() / bias_correction2_sqrt).add_(self.eps)
            p.addcdiv_(m, denom, value=-step_size)

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "exp_avg": [m.clone() for m in self.exp_avg],
                "exp_avg_sq": [v.clone() for v in self.exp_avg_sq]}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = state["steps"]
        for mine, saved in zip(self.exp_avg + self.exp_avg_sq, state["exp_avg"] + state["exp_avg_sq"], strict=True):
            mine.copy_(saved)


class Trainer:
    """AdamW on the settings' task, resumable: `advance(n)` trains n more steps; `state()` / `from_state` carry
    it between processes with the same numbers as one uninterrupted run."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.generator = torch.Generator().manual_seed(settings.seed)
        self.weights = init_weights(settings, self.generator)
        for t in self.weights.tensors():
            t.requires_grad_(True)
        self.optimizer = AdamW(list(self.weights.tensors()), lr=settings.lr)
        self.step = 0
        self.loss_sum = 0.0  # training losses since the last snapshot

    def state(self) -> dict[str, Any]:
        return {"settings": self.settings.to_dict(), "weights": [t.detach().clone() for t in self.weights.tensors()],
                "optimizer": self.optimizer.state_dict(), "generator": self.generator.get_state(), "step": self.step,
                "loss_sum": self.loss_sum}  # fmt: skip

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Trainer:
        self = cls(Settings.from_dict(state["settings"]))
        with torch.no_grad():
            for t, saved in zip(self.weights.tensors(), state["weights"], strict=True):
                t.copy_(saved)
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.step, self.loss_sum = state["step"], state["loss_sum"]
        return self

    def snapshot(self) -> Snapshot:
        frozen = self.weights.detached()
        m = measure(frozen, self.settings)
        since = (self.step - 1) % self.settings.every + 1
        loss = m.loss if self.step == 0 else self.loss_sum / since
        return Snapshot(self.step, loss, m.task_loss, m.accuracy, m.scores, frozen)

    def train_step(self) -> float:
        s = self.settings
        length = s.length if s.fixed else int(torch.randint(TRAIN_LENGTHS[0], TRAIN_LENGTHS[1] + 1, (1,),
                                                            generator=self.generator))  # fmt: skip
        seqs = sequences(s.task, length, s.batch, self.generator, with_keys=False)
        loss, _ = losses(forward(self.weights, seqs.ids, s.heads), seqs)
        value = loss.item()
        if not math.isfinite(value):
            raise Diverged(
                f"the loss became {value} at step {self.step + 1}: training stopped. Lower the learning rate "
                f"(now {s.lr:g}) or the init σ (now {s.init_std:g})"
            )
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.step += 1
        return value

    def advance(self, steps: int) -> tuple[list[Snapshot], str | None]:
        """Up to `steps` more steps (never past settings.steps): the snapshots taken, and why it stopped (None)."""
        out = []
        with one_thread():
            if self.step == 0 and steps > 0:
                out.append(self.snapshot())
            for _ in range(min(steps, self.settings.steps - self.step)):
                try:
                    self.loss_sum += self.train_step()
                except Diverged as exc:
                    return out, str(exc)
                if self.step % self.settings.every == 0 or self.step == self.settings.steps:
                    out.append(self.snapshot())
                    self.loss_sum = 0.0
        return out, None

    @property
    def done(self) -> bool:
        return self.step >= self.settings.steps


def warm() -> None:
    """Train two throwaway steps, so that a process's first run starts at once (autograd's first backward pass)."""
    advance(Settings(steps=2, every=1).to_dict(), None, 2)


def worker_init(niceness: int = 19) -> None:
    """A worker process that trains and does nothing else (`ui.training`'s pool): one torch thread for good, and the
    lowest CPU priority, so that a server's pages get the cores first and training takes what is left.

    It warms up (`warm`) first, at the priority it started with, as it imported torch: at nice 19 the import of
    torch._dynamo took a new run's first chunk 5-9 s, or the warm-up 7-19 s after the page opened, on a machine at
    load 7-9 (a nice-19 process gets about 1% of a core against a busy one); Play found the worker still warming."""
    torch.set_num_threads(1)
    parent = os.getppid()

    def watch() -> None:  # a pool's workers outlive a server that is killed: end with it
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()
    warm()
    try:
        os.nice(niceness)
    except (AttributeError, OSError):  # no nice (Windows) or not allowed: train at the same priority
        pass


def worker_ready() -> bool:
    """Submitted to start a worker ahead of the first run (importing torch and `warm` take a few seconds)."""
    return True


def advance(settings: dict[str, Any], state: dict[str, Any] | None, steps: int) -> tuple[dict, list, str | None]:
    """Continue a run by `steps` steps, from its state (None: the start), in plain data that crosses processes:
    (its new state, the new snapshots as dicts, why it stopped or None)."""
    trainer = Trainer(Settings.from_dict(settings)) if state is None else Trainer.from_state(state)
    snapshots, stopped = trainer.advance(steps)
    return trainer.state(), [s.to_dict() for s in snapshots], stopped


def train(settings: Settings, until: Callable[[Snapshot], bool] | None = None) -> Run:
    """The whole run; `until(snapshot)` True stops it at that snapshot (a test stops once the head has formed)."""
    trainer, snaps = Trainer(settings), []
    while not trainer.done:
        new, stopped = trainer.advance(settings.every)
        snaps += new
        if stopped is not None:
            return Run(settings, tuple(snaps), stopped)
        if until is not None and any(until(s) for s in new):
            break
    return Run(settings, tuple(snaps))


# what the pages show --------------------------------------------------------------------------------------


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


def at_step(run: Run, step: int | None = None) -> Snapshot:
    """The snapshot at a step (the last at or before it), or the last one."""
    if not run.snapshots:
        raise ValueError("the run has no snapshot yet")
    if step is None:
        return run.snapshots[-1]
    before = [s for s in run.snapshots if s.step <= step]
    return before[-1] if before else run.snapshots[0]


__all__ = [
    "CHANCE", "Settings", "Run", "Snapshot", "Trainer", "Weights", "ablate", "evaluate_lengths", "formation",
    "layer_result", "train",
]  # fmt: skip
