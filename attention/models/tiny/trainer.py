"""Training the tiny model: the losses and scores measured at every snapshot, and AdamW on one torch thread,
resumable a chunk of steps at a time in plain data (`advance`), as a server's worker processes train it."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from .data import Sequences, probe, sequences
from .model import Forward, Weights, forward, init_weights
from .optim import AdamW
from .settings import IGNORE, TRAIN_LENGTHS, Settings
from .snapshots import Run, Snapshot


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


@contextmanager
def one_thread():
    """torch on one intra-op thread while training (the numbers then do not depend on the machine's cores),
    restored after. The thread count is the process's: a server trains in worker processes (`server.training`)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class Diverged(ValueError):
    """The loss became NaN or infinite."""


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
    """A worker process that trains and does nothing else (`server.training`'s pool): one torch thread for good, and
    the lowest CPU priority, so that a server's pages get the cores first and training takes what is left.

    It warms up (`warm`) first, at the priority it started with, as it imported torch: at nice 19 the import of
    torch._dynamo waited for the cores behind every busy process (a nice-19 process gets a sliver of a core against
    a busy one), and Play found the worker still warming (design figures, benchmarks/results/)."""
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
