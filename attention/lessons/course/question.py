"""The course's questions: predict, then see. Each question's right answer is computed by the package from the
learner's inputs at that moment; no answer is stored anywhere.

A question is generic so that any front end can ask it (the course page, a class poll on phones): an id, a prompt
written from the inputs, a kind ("choice", "number" or "cell": a cell of a row of weights, one of the keys), the
choices, `answer(inputs)` (the package's result) and `check(inputs, raw)` (a Verdict: right, wrong, or a plain
sentence saying what is asked when the answer cannot be read). `inputs` maps setting names (the Config's field
names, as in the URL: sentence, d_k, seed, mask, ...; and the views' token, block_size, kv_model) to values;
`inputs_for(question, given)` fills what is not given from the declared defaults.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

import torch

from ...basics.config import SETTINGS, Config, tokenize
from ...basics.core import Result, compute
from ...llm import kv_memory
from ...models import smollm2, tiny

Inputs = Mapping[str, Any]
SCALAR = ("int", "float", "bool", "choice")

# The settings of the toy computation a question may read, at the dashboard's starting values (what a new learner
# sees); a question reads only the ones it names in `reads`.
TOY = {n: s.start for n, s in SETTINGS.items() if s.dashboard is not None and s.kind in SCALAR}
TOY["sentence"] = SETTINGS["sentence"].start
# The views' own inputs: the query followed, FlashAttention's block size, the published model whose cache is sized.
VIEW = {"token": 1, "block_size": 2, "kv_model": next(iter(kv_memory.MODELS))}
VIEW["cross_sentence"] = SETTINGS["cross_sentence"].start
VIEW.update({"layer": 3, "head": 1})  # the Real model page's head (its layers and heads count from 0)
# Watch it learn's training settings, under the page's train_ prefix (its URL keys: train_seed, train_lr, ...)
TRAIN = {"train_" + n: p.default for n, p in tiny.SETTINGS.items()}


def forward(ids: tuple[int, ...]) -> smollm2.Run:
    return smollm2.run_ids(smollm2.load(), ids)


# Where a question gets a model's run: by default the package runs it (a notebook, the tests, the lesson plans); a
# server passes its own in the inputs, under RUNS: SmolLM2's run from the chat page's shared, budgeted cache, a
# training run from its pool (kept for every visitor), so that a lesson never runs a model a second time. No answer
# depends on which runner made the run, so RUNS is never one of a question's `reads`.
RUNS = "runs"
DEFAULT_RUNNERS: Mapping[str, Callable[[Any], Any]] = MappingProxyType({"smollm2": forward, "tiny": tiny.train})


def runner(inputs: Inputs, name: str) -> Callable[[Any], Any]:
    """The run of model `name` for these inputs (smollm2: ids -> smollm2.Run with weights; tiny: Settings -> a
    finished tiny.Run): the server's own where the inputs carry it, else the package's."""
    return {**DEFAULT_RUNNERS, **(inputs.get(RUNS) or {})}[name]


class Truth(NamedTuple):
    """What the package computed: the right answer and the words that go with it at the reveal."""

    value: Any  # a choice's index, or a number
    shown: str  # the answer as the reveal writes it
    why: str  # one or two sentences: why it comes out so, with the numbers
    accepted: frozenset[int] = frozenset()  # choice: every index that counts as right (ties)


class Verdict(NamedTuple):
    """The outcome of one answer: ok None when the answer could not be read (message says what is asked)."""

    ok: bool | None
    message: str
    prediction: Any = None  # the answer as read (a choice's index, a number)
    truth: Truth | None = None


@dataclass(frozen=True)
class Question:
    """One prediction: what is asked, how the answer is computed and how close a number must come."""

    id: str
    kind: str  # "choice" | "number" | "cell"
    reads: tuple[str, ...]  # the inputs the answer depends on: another value re-asks the question
    ask: Callable[[Inputs], str]  # the prompt, written from the inputs
    solve: Callable[[Inputs], Truth]  # the package's answer
    options: Callable[[Inputs], tuple[str, ...]] | None = None  # choice / cell: the labels offered
    lo: float = 0.0  # number: the range an answer may take
    hi: float = 1e12
    tolerance: float = 0.0  # number: how far from the computed value an answer may be and still count
    relative: bool = False  # tolerance as a fraction of the computed value
    defaults: Mapping[str, Any] = field(default_factory=dict)  # the lesson's own starting inputs (Masks: causal)
    bounds: Callable[[Inputs], tuple[float, float]] | None = None  # number: a range that follows the inputs

    def prompt(self, inputs: Inputs) -> str:
        return self.ask(inputs)

    def choices(self, inputs: Inputs) -> tuple[str, ...]:
        return self.options(inputs) if self.options is not None else ()

    def answer(self, inputs: Inputs) -> Truth:
        return self.solve(inputs)

    def range(self, inputs: Inputs) -> tuple[float, float]:
        """The numbers an answer may take on these inputs (0 to T × T zeros for a sentence of T tokens)."""
        return self.bounds(inputs) if self.bounds is not None else (self.lo, self.hi)

    def margin(self, truth: Truth) -> float:
        return self.tolerance * abs(float(truth.value)) if self.relative else self.tolerance

    def tolerance_words(self) -> str:
        if self.kind != "number":
            return ""
        if self.tolerance == 0:
            return "exactly"
        return f"within {self.tolerance:.0%}" if self.relative else f"within ±{self.tolerance:g}"

    def read(self, inputs: Inputs, raw: Any) -> tuple[Any, str | None]:
        """The answer as a choice's index or a number, or None and the sentence that says what is asked."""
        if self.kind in ("choice", "cell"):
            labels = self.choices(inputs)
            if raw is None or raw == "":
                return None, "Pick one of the answers before you look."
            if isinstance(raw, int) and 0 <= raw < len(labels):
                return raw, None
            if isinstance(raw, str) and raw in labels:
                return labels.index(raw), None
            return None, f"Pick one of the {len(labels)} answers offered."
        text = str(raw if raw is not None else "").strip().replace(",", "")
        lo, hi = self.range(inputs)
        asked = f"a number from {lo:g} to {hi:g}"
        if not text:
            return None, f"Type your prediction first: {asked}."
        try:
            value = float(text)
        except ValueError:
            return None, f"“{text[:40]}” is not a number: type {asked}."
        if not math.isfinite(value) or not lo <= value <= hi:
            return None, f"{value:g} is out of range: type {asked}."
        return value, None

    def check(self, inputs: Inputs, raw: Any) -> Verdict:
        """The verdict on an answer against the package's answer on these inputs."""
        prediction, problem = self.read(inputs, raw)
        if problem is not None:
            return Verdict(None, problem)
        truth = self.answer(inputs)
        if self.kind == "number":
            ok = abs(prediction - float(truth.value)) <= self.margin(truth) + 1e-9
            said = f"{prediction:g}"
        else:
            ok = prediction in (truth.accepted or {truth.value})
            said = self.choices(inputs)[prediction]
        head = "Right" if ok else "Not quite"
        off = "" if ok or self.kind != "number" else f" (right means {self.tolerance_words()})"
        return Verdict(ok, f"{head}: you said {said}, the lab computed {truth.shown}{off}. {truth.why}", prediction,
                       truth)  # fmt: skip


def inputs_for(question: Question, given: Inputs) -> dict[str, Any]:
    """The inputs a question reads: the given values, else the lesson's own default, else the dashboard's."""
    start = {**TOY, **VIEW, **TRAIN, **question.defaults}
    out = {n: given[n] if n in given else start[n] for n in question.reads}
    if RUNS in given:
        out[RUNS] = given[RUNS]
    return out


def fingerprint(question: Question, inputs: Inputs) -> str:
    """What the answer depends on, as text: an answer given on other inputs is asked again, not graded."""
    return repr(tuple((n, inputs.get(n)) for n in question.reads))


def toy_config(inputs: Inputs, **overrides: Any) -> Config:
    """The toy Config these inputs describe (the dashboard's starting values for the rest), at inference."""
    fields = {n: inputs.get(n, v) for n, v in TOY.items() if n not in ("cross_sentence", "kv_heads")}
    if fields["head_layout"] == "split":
        fields.update(d_k=None, d_v=None)
    return Config(**{**fields, "dropout": 0.0, **overrides})


def toy_result(inputs: Inputs, **overrides: Any) -> Result:
    return compute(toy_config(inputs, **overrides))


def query_token(inputs: Inputs) -> int:
    """The query followed, within the sentence."""
    n = len(tokenize(str(inputs["sentence"])))
    return min(max(int(inputs.get("token", 1)), 0), max(n - 1, 0))


def numbered(tokens: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """One label a token, numbered so that repeated words stay apart ('2 the')."""
    return tuple(f"{i + 1} {t}" for i, t in enumerate(tokens))


def top_keys(row: torch.Tensor) -> frozenset[int]:
    """The indices within rounding of a row's largest value (ties all count)."""
    top = float(row.max())
    return frozenset(int(j) for j in torch.nonzero(row >= top - 1e-6).flatten())


def followed_word(inputs: Inputs) -> str:
    """The followed query as a prompt names it: “is” (token 2)."""
    i = query_token(inputs)
    return f"“{tokenize(str(inputs['sentence']))[i]}” (token {i + 1})"
