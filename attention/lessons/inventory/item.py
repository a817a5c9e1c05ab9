"""What an inventory item is: a two-tier question (an answer, then the reason) drawn as a twin from a seed.

An `Item` is one idea of the course. Its `draw(rng)` makes a `Draft`: the prompt with the twin's own numbers and
tokens, the right answer computed by the package for those numbers, and each wrong answer with the misconception it
stands for (the value that misconception would give on the same numbers). `twin(item, seed)` shuffles the choices
with the seed and returns a `Form`, the item as a learner sees it, with its keys. Nothing right is stored: a draft
whose misconceptions coincide with the right answer on its numbers is drawn again, so every wrong choice stays wrong.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

DRAWS = 64  # drafts tried before an item gives up on a seed (each item's draw succeeds in a few)


class Option(NamedTuple):
    """One choice of a tier: its words and the misconception it stands for (None: the right one)."""

    text: str
    misconception: str | None = None


class Draft(NamedTuple):
    """One twin before shuffling: the prompt, the right answer and reason first, then the wrong ones."""

    prompt: str
    answers: tuple[Option, ...]  # answers[0] is right
    reasons: tuple[Option, ...]  # reasons[0] is right
    value: object  # the computed quantity behind the right answer (a count, a token, a vector), for the reveal
    why: str  # one sentence with the twin's numbers, said at the reveal


@dataclass(frozen=True)
class Item:
    """One idea of the inventory: its id, the idea in a few words, its misconceptions, and how to draw a twin."""

    id: str
    idea: str
    misconceptions: Mapping[str, str]  # id -> the misconception in a learner's words
    draw: Callable[[random.Random], Draft | None]  # None: these numbers cannot tell a misconception apart


class Graded(NamedTuple):
    """One learner's response to one form: each tier right or not, and the misconceptions their choices stand for."""

    answer_right: bool
    reason_right: bool
    misconceptions: tuple[str, ...]

    @property
    def right(self) -> bool:
        """Two-tier: right only when the answer and the reason are both right."""
        return self.answer_right and self.reason_right


@dataclass(frozen=True)
class Form:
    """An item's twin as a learner sees it, with its keys (computed when the twin was drawn)."""

    item: str
    idea: str
    seed: int
    prompt: str
    answers: tuple[str, ...]
    reasons: tuple[str, ...]
    answer_key: int
    reason_key: int
    answer_misconceptions: Mapping[int, str]  # index of a wrong answer -> its misconception
    reason_misconceptions: Mapping[int, str]
    value: object
    why: str

    def grade(self, answer: int | None, reason: int | None) -> Graded:
        """The response (indices into answers and reasons; None when a tier was left out) against the keys."""
        found = tuple(
            m
            for m in (self.answer_misconceptions.get(answer), self.reason_misconceptions.get(reason))  # type: ignore[arg-type]
            if m is not None
        )
        return Graded(answer == self.answer_key, reason == self.reason_key, tuple(dict.fromkeys(found)))


def _distinct(options: tuple[Option, ...]) -> bool:
    texts = [o.text for o in options]
    return len(set(texts)) == len(texts)


def _shuffled(options: tuple[Option, ...], rng: random.Random) -> tuple[tuple[str, ...], int, dict[int, str]]:
    order = list(range(len(options)))
    rng.shuffle(order)
    texts = tuple(options[k].text for k in order)
    key = order.index(0)
    wrong = {i: options[k].misconception for i, k in enumerate(order) if k != 0}
    return texts, key, {i: m for i, m in wrong.items() if m is not None}


def twin(item: Item, seed: int) -> Form:
    """The item's twin for `seed`: numbers, tokens and the order of the choices all follow the seed."""
    rng = random.Random(f"{item.id}:{seed}")
    for _ in range(DRAWS):
        draft = item.draw(rng)
        if draft is not None and _distinct(draft.answers) and _distinct(draft.reasons):
            break
    else:  # pragma: no cover - every item draws a usable twin within a few tries
        raise RuntimeError(f"item {item.id} drew no usable twin for seed {seed}")
    for option in (*draft.answers[1:], *draft.reasons[1:]):
        if option.misconception is not None and option.misconception not in item.misconceptions:
            raise ValueError(f"item {item.id}: misconception {option.misconception!r} is not listed")
    answers, answer_key, answer_wrong = _shuffled(draft.answers, rng)
    reasons, reason_key, reason_wrong = _shuffled(draft.reasons, rng)
    return Form(item.id, item.idea, seed, draft.prompt, answers, reasons, answer_key, reason_key,
                MappingProxyType(answer_wrong), MappingProxyType(reason_wrong), draft.value, draft.why)  # fmt: skip
