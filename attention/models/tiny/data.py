"""The tasks' sequences: random runs of tokens laid out for induction, reverse, sort or previous_token, with the
positions each task scores and the keys a head solving it reads."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from .settings import EVAL_BATCH, IGNORE, NAMES, PROBE_SEED, SEP, VOCAB, Settings


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
