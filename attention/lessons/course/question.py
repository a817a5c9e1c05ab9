"""The course's questions: predict, then see. Each question's right answer is computed by the package from the
learner's inputs at that moment; no answer is stored anywhere.

A question is generic so that any front end can ask it (the course page, a class poll on phones): an id, a prompt
written from the inputs, a kind ("choice", "number" or "cell": a cell of a row of weights, one of the keys), the
choices, `answer(inputs)` (the package's result) and `check(inputs, raw)` (a Verdict: right, wrong, or a plain
sentence saying what is asked when the answer cannot be read). `inputs` maps setting names (the Config's field
names, as in the URL: sentence, d_k, seed, mask, ...; and the views' token, block_size, kv_model) to values;
`inputs_for(question, given)` fills what is not given from the declared defaults.

Three promises hold on every input a lesson's controls can take (test_course_properties.py tests them):
- the prompt names, in the learner's words, every input the answer reads (or says which one the lesson pins), and
  counts tokens, heads and layers from 1, as every word of the course does;
- each question lists its common wrong answers (`misconceptions`: the value each would give on these inputs), and no
  tolerance accepts one that differs from the right answer (`Truth.margin` narrows where one comes close);
- inputs a question cannot be asked on (a sentence with no words, a custom mask with no cells) get one sentence
  (`problem`: the prompt says it, `check` returns it with ok None, `answer` a Truth with value None), never an
  exception.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

import torch

from ...basics.config import MAX_TOKENS, SETTINGS, Config, tokenize
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

    value: Any  # a choice's index, or a number; None: nothing to grade on these inputs (`why` says what is asked)
    shown: str  # the answer as the reveal writes it
    why: str  # one or two sentences: why it comes out so, with the numbers
    accepted: frozenset[int] = frozenset()  # choice: every index that counts as right (ties)
    margin: float | None = None  # number: how far an answer may be on these inputs (Question.answer sets it)


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
    # The common wrong answers, next to the question: each one's name (the reasoning, in words) and the value it
    # gives on these inputs (a choice's index, or a number). One that gives the right answer is right there; every
    # other is marked wrong (a number's margin narrows to half its distance where the tolerance would take it).
    misconceptions: Callable[[Inputs], Mapping[str, float]] | None = None
    # Why the question cannot be asked on these inputs, in one sentence (None: it can)
    refuse: Callable[[Inputs], str | None] | None = None

    def problem(self, inputs: Inputs) -> str | None:
        """The sentence that says why these inputs cannot be asked (a sentence with no words), or None."""
        return self.refuse(inputs) if self.refuse is not None else None

    def prompt(self, inputs: Inputs) -> str:
        return self.problem(inputs) or self.ask(inputs)

    def choices(self, inputs: Inputs) -> tuple[str, ...]:
        if self.options is None or self.problem(inputs) is not None:
            return ()
        return self.options(inputs)

    def wrong_answers(self, inputs: Inputs) -> dict[str, float]:
        """The misconceptions' values on these inputs (see `misconceptions`); none where the question is not asked."""
        if self.misconceptions is None or self.problem(inputs) is not None:
            return {}
        return dict(self.misconceptions(inputs))

    def answer(self, inputs: Inputs) -> Truth:
        problem = self.problem(inputs)
        if problem is not None:
            return Truth(None, "—", problem)
        truth = self.solve(inputs)
        if self.kind != "number":
            return truth
        return truth._replace(margin=self._margin(truth, self.wrong_answers(inputs).values()))

    def range(self, inputs: Inputs) -> tuple[float, float]:
        """The numbers an answer may take on these inputs (0 to T × T zeros for a sentence of T tokens)."""
        return self.bounds(inputs) if self.bounds is not None else (self.lo, self.hi)

    def stated_margin(self, value: float) -> float:
        """The tolerance the prompt states, around a computed value."""
        return self.tolerance * abs(float(value)) if self.relative else self.tolerance

    def _margin(self, truth: Truth, wrong: Any) -> float:
        """The stated tolerance, narrowed to half the distance to any common wrong answer it would otherwise take."""
        right = float(truth.value)
        margin = self.stated_margin(right)
        for value in wrong:
            gap = abs(float(value) - right)
            if gap > 1e-9 and gap <= margin:
                margin = gap / 2
        return margin

    def margin(self, truth: Truth) -> float:
        return truth.margin if truth.margin is not None else self.stated_margin(truth.value or 0)

    def tolerance_words(self, truth: Truth | None = None) -> str:
        """The tolerance in words; with a truth whose margin was narrowed (a wrong answer close by), that margin."""
        if self.kind != "number":
            return ""
        if truth is not None and truth.value is not None:
            margin = self.margin(truth)
            if margin < self.stated_margin(truth.value) - 1e-12:
                return f"within ±{margin:.3g} here, closer than a common wrong answer"
        if self.tolerance == 0:
            return "exactly"
        return f"within {self.tolerance:.0%}" if self.relative else f"within ±{self.tolerance:g}"

    def read(self, inputs: Inputs, raw: Any) -> tuple[Any, str | None]:
        """The answer as a choice's index or a number, or None and the sentence that says what is asked."""
        problem = self.problem(inputs)
        if problem is not None:
            return None, problem
        if self.kind in ("choice", "cell"):
            labels = self.choices(inputs)
            if raw is None or raw == "":
                return None, "Pick one of the answers before you look."
            if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw < len(labels):
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
        if truth.value is None:
            return Verdict(None, truth.why)
        if self.kind == "number":
            ok = abs(prediction - float(truth.value)) <= self.margin(truth) + 1e-9
            said = f"{prediction:g}"
        else:
            ok = prediction in (truth.accepted or {truth.value})
            said = self.choices(inputs)[prediction]
        head = "Right" if ok else "Not quite"
        off = "" if ok or self.kind != "number" else f" (right means {self.tolerance_words(truth)})"
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


def rope_width(inputs: Inputs) -> int | None:
    """RoPE rotates pairs of numbers: an odd d_k under RoPE runs one wider (the even width returned), else None."""
    d_k = inputs.get("d_k", TOY["d_k"])
    if inputs.get("position", TOY["position"]) == "rope" and d_k is not None and int(d_k) % 2:
        return int(d_k) + 1
    return None


def toy_config(inputs: Inputs, **overrides: Any) -> Config:
    """The toy Config these inputs describe (the dashboard's starting values for the rest), at inference. An odd
    d_k under RoPE runs one wider (`rope_width`; the prompt says so), as RoPE rotates pairs of numbers."""
    fields = {n: inputs.get(n, v) for n, v in TOY.items() if n not in ("cross_sentence", "kv_heads")}
    if fields["head_layout"] == "split":
        fields.update(d_k=None, d_v=None)
    elif (wider := rope_width({**fields, **overrides})) is not None:
        fields["d_k"] = wider
    return Config(**{**fields, "dropout": 0.0, **overrides})


def toy_result(inputs: Inputs, **overrides: Any) -> Result:
    return compute(toy_config(inputs, **overrides))


def words_of(inputs: Inputs, name: str = "sentence") -> tuple[str, ...]:
    return tokenize(str(inputs.get(name) or ""))


def sentence_problem(inputs: Inputs, name: str = "sentence", what: str = "The sentence") -> str | None:
    """A sentence no lesson can ask about (no word, or more than the lab takes), in one sentence; else None."""
    n = len(words_of(inputs, name))
    if n == 0:
        return f"{what} has no words yet: type at least one word under Your inputs (punctuation alone is no word)."
    if n > MAX_TOKENS:
        return f"{what} has {n:,} words and the lab takes at most {MAX_TOKENS}: shorten it under Your inputs."
    return None


def toy_problem(inputs: Inputs, **overrides: Any) -> str | None:
    """Why the toy computation cannot run on these inputs, in one sentence (the Config's own words), or None."""
    problem = sentence_problem(inputs)
    if problem is None and overrides.get("cross_sentence") is not None:
        problem = sentence_problem(overrides, "cross_sentence", "The key/value sentence")
    if problem is not None:
        return problem
    try:
        toy_config(inputs, **overrides)
    except ValueError as e:
        return f"The lab cannot compute these inputs: {e}."
    return None


def quoted(text: str, limit: int = 300) -> str:
    """A sentence in quotes, whole up to `limit` characters; a longer one by its start and its length in words."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return f"“{text}”"
    return f"“{text[: limit - 40].rsplit(' ', 1)[0]} …” (your {len(tokenize(text)):,}-word sentence)"


def weights_words(inputs: Inputs) -> str:
    """The random weights' inputs, as a prompt names them: seed and d_k (and the width RoPE runs at)."""
    d_k = int(inputs["d_k"])
    wider = rope_width(inputs)
    width = f"d_k = {d_k}" if wider is None else f"d_k = {d_k}, run as {wider} since RoPE rotates pairs of numbers"
    return f"random weights of seed {int(inputs['seed'])}, {width}"


def query_token(inputs: Inputs) -> int:
    """The query followed (0-based, as the URL's token), within the sentence."""
    n = len(words_of(inputs))
    return min(max(int(inputs.get("token", 1)), 0), max(n - 1, 0))


def numbered(tokens: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """One label a token, numbered from 1 so that repeated words stay apart ('2 the')."""
    return tuple(f"{i + 1} {t}" for i, t in enumerate(tokens))


def top_keys(row: torch.Tensor) -> frozenset[int]:
    """The indices within rounding of a row's largest value (ties all count)."""
    top = float(row.max())
    return frozenset(int(j) for j in torch.nonzero(row >= top - 1e-6).flatten())


def followed_word(inputs: Inputs) -> str:
    """The followed query as a prompt names it: “is” (token 2), counted from 1."""
    i = query_token(inputs)
    return f"“{words_of(inputs)[i]}” (token {i + 1})"
