"""Lesson 13, "Why two layers?": which head of the first layer the induction head reads through to find its key
(K-composition, Elhage et al. 2021), on the run lesson 12 trains (`lesson_settings`: the same seed, the same run).

An induction head in layer 2 looks, from the second copy of a token, at the token after the earlier copy. Its query
carries the current token; the key it wants is the one whose *previous* token matches it, and a key's residual
stream holds its own token only, unless a head of an earlier layer wrote the token before it there. So the induction
head's keys read what a previous-token head of layer 1 writes: K-composition, ||W_OV^i (W_QK^j)^T|| / (||W_OV^i||
||W_QK^j||) (attention.models.circuits.composition). The answer is the first-layer head with the largest K-composition
into the run's induction head (its best induction score in layer 2 or above), computed from the run's last weights.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ...models import tiny
from ...models.circuits import trained
from .models import lesson_settings
from .question import Inputs, Question, Truth, runner

EDGE = 0.01  # first-layer heads whose K-composition is this close to the largest count as right too (a tie)


class Reading(NamedTuple):
    """How the run's induction head reads the heads of the first layer (h of them), at its last snapshot."""

    reader: tuple[int, int]  # (layer, head) of the induction head, 0-based
    induction: float  # its induction score
    q: torch.Tensor  # (h,) Q-composition of each first-layer head into it
    k: torch.Tensor  # (h,) K-composition: what its keys read
    v: torch.Tensor  # (h,) V-composition
    previous: torch.Tensor  # (h,) each first-layer head's previous-token score
    formed: tiny.Formation | None  # when the run's induction head formed, if it did


def reading(inputs: Inputs) -> Reading:
    """The composition of the first layer's heads into the induction head of the lesson's run (the server's, else
    trained here)."""
    s = lesson_settings(inputs)
    run = runner(inputs, "tiny")(s)
    last = run.snapshots[-1]
    reader = tiny.best_head(last, s, range(1, s.layers))
    c = trained.head_composition(last.weights, s.heads)
    j = reader[0] * s.heads + reader[1]
    first = slice(0, s.heads)  # the first layer's heads are the first h rows
    return Reading(reader, last.scores["induction"][reader[0]][reader[1]], c.q[first, j], c.k[first, j],
                   c.v[first, j], torch.tensor(last.scores["previous_token"][0]), run.formed)  # fmt: skip


def _heads(inputs: Inputs) -> tuple[str, ...]:
    return tuple(f"Layer 1, head {h + 1}" for h in range(lesson_settings(inputs).heads))


def _solve(inputs: Inputs) -> Truth:
    r = reading(inputs)
    k = r.k
    best = int(k.argmax())
    accepted = frozenset(int(i) for i in torch.nonzero(k >= float(k.max()) - EDGE).flatten())
    others = ", ".join(f"head {i + 1}: {float(k[i]):.2f}" for i in range(len(k)) if i != best)
    why = (f"Layer {r.reader[0] + 1}'s head {r.reader[1] + 1} (induction score {r.induction:.2f}) reads layer 1's "
           f"head {best + 1} most through its keys: K-composition {float(k[best]):.2f} ({others}).")  # fmt: skip
    top = int(r.previous.argmax())
    if top == best:
        why += (
            f" That head puts {float(r.previous[best]):.0%} of its weight on the token before each query: it "
            "writes the previous token into every position, and the keys match the current token against it."
        )
    else:
        why += (
            f" The head that looks most at the previous token is head {top + 1} ({float(r.previous[top]):.0%} "
            "of its weight there): the circuit has not settled on it."
        )
    if r.formed is None:
        why += " No induction head formed in this run."
    return Truth(best, f"layer 1, head {best + 1} (K-composition {float(k[best]):.2f})", why, accepted | {best})


def _misconceptions(inputs: Inputs) -> dict[str, float]:
    r = reading(inputs)
    return {
        "the head whose output the induction head's query reads most (Q-composition): the query, not the key, finds "
        "the earlier copy": int(r.q.argmax()),
        "the head whose output its values read most (V-composition): it copies what that head wrote": int(r.v.argmax()),
    }


def _words(inputs: Inputs) -> str:
    s = lesson_settings(inputs)
    return (
        f"Lesson 12's model ({s.layers} layers of {s.heads} heads, {s.steps} steps, seed {s.seed}) has an induction "
        "head in layer 2. To find the token after the earlier copy, its keys must carry the token before each of "
        "them, which only a head of layer 1 can have written there. Which head of layer 1 do its keys read most "
        "(the largest K-composition)?"
    )  # written from the settings alone: a list of the course's prompts (the poll's) trains nothing


TWO_LAYERS = Question(
    "two_layers",
    "choice",
    ("train_seed",),
    _words,
    _solve,
    options=_heads,
    misconceptions=_misconceptions,
)
