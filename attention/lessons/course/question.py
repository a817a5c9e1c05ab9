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
from ...llm import flash, kv_memory
from ...models import minilm, smollm2, tiny
from .. import interpret, permutation, scaling, soft_lookup

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


def _forward(ids: tuple[int, ...]) -> smollm2.Run:
    return smollm2.run_ids(smollm2.load(), ids)


# Where a question gets a model's run: by default the package runs it (a notebook, the tests, the lesson plans); a
# server passes its own in the inputs, under RUNS: SmolLM2's run from the chat page's shared, budgeted cache, a
# training run from its pool (kept for every visitor), so that a lesson never runs a model a second time. No answer
# depends on which runner made the run, so RUNS is never one of a question's `reads`.
RUNS = "runs"
DEFAULT_RUNNERS: Mapping[str, Callable[[Any], Any]] = MappingProxyType({"smollm2": _forward, "tiny": tiny.train})


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


def _token(inputs: Inputs) -> int:
    """The query followed, within the sentence."""
    n = len(tokenize(str(inputs["sentence"])))
    return min(max(int(inputs.get("token", 1)), 0), max(n - 1, 0))


def _labels(tokens: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """One label a token, numbered so that repeated words stay apart ('2 the')."""
    return tuple(f"{i + 1} {t}" for i, t in enumerate(tokens))


def _best(row: torch.Tensor) -> frozenset[int]:
    """The indices within rounding of a row's largest value (ties all count)."""
    top = float(row.max())
    return frozenset(int(j) for j in torch.nonzero(row >= top - 1e-6).flatten())


def _word(inputs: Inputs) -> str:
    """The followed query as a prompt names it: “is” (token 2)."""
    i = _token(inputs)
    return f"“{tokenize(str(inputs['sentence']))[i]}” (token {i + 1})"


# 1. Soft lookup ---------------------------------------------------------------------------------------------------
def _lookup(inputs: Inputs) -> Truth:
    result = toy_result(inputs)
    look = soft_lookup.soft_lookup(result, 0, _token(inputs))
    keys = _labels(result.key_tokens)
    best = _best(look.weights)
    j = min(best)
    return Truth(j, f"{keys[j]} (weight {float(look.weights[j]):.2f})",
                 f"Its key has the largest dot product with the query, so the softmax gives it the most weight; "
                 f"the context is {float(look.weights[j]):.0%} its value and the rest a blend of the others.",
                 best)  # fmt: skip


SOFT_LOOKUP = Question(
    "soft_lookup",
    "cell",
    ("sentence", "seed", "d_k", "token"),
    lambda i: f"Which key will the query {_word(i)} put the most weight on? Pick the cell of its row.",
    _lookup,
    options=lambda i: _labels(tokenize(str(i["sentence"]))),
)


# 2. Scores and softmax ---------------------------------------------------------------------------------------------
SOFTMAX_CHOICES = ("It rises", "It falls", "It stays the same")


def _double(inputs: Inputs) -> Truth:
    i = _token(inputs)
    base = toy_result(inputs, mask="none")
    doubled = toy_result(inputs, mask="none", scale="temperature", temperature=base.scale / 2)  # omega·2/√d_k
    before, after = float(base.weights[0, i].max()), float(doubled.weights[0, i].max())
    change = 0 if after > before + 1e-6 else 1 if after < before - 1e-6 else 2
    why = (
        "Doubling every score doubles the gaps between them, and the softmax turns gaps into ratios of e^gap: the "
        "winner takes more."
        if change == 0
        else "With one key there is nothing to take weight from: the only weight is 1 whatever the score."
        if len(base.key_tokens) == 1
        else "The scores of this row are all equal: doubled, they are still equal, and so are the weights."
    )
    return Truth(change, f"{SOFTMAX_CHOICES[change].lower()}: {before:.3f} → {after:.3f}", why)


SOFTMAX = Question(
    "softmax",
    "choice",
    ("sentence", "seed", "d_k", "token"),
    lambda i: (
        f"Double every score (omega × 2) before the softmax: does the largest weight of {_word(i)}'s row rise or fall?"
    ),
    _double,
    options=lambda i: SOFTMAX_CHOICES,
)


# 3. Why divide by √d_k --------------------------------------------------------------------------------------------
SWEEP_SEEDS = 8


def _spread(inputs: Inputs) -> Truth:
    d_k = int(inputs["d_k"])
    t = min(max(len(tokenize(str(inputs["sentence"]))), 2), 32)  # the Scaling page's sweep length
    seed = int(inputs["seed"])
    sweep = scaling.scaling_sweep((d_k,), seeds=range(seed, seed + SWEEP_SEEDS), tokens=t)
    spread = float(sweep.band("spread", "unscaled")[0])
    return Truth(round(spread, 2), f"{spread:.2f}",
                 f"q·k adds up {d_k} products of variance 1, so its variance is {d_k} and its spread √{d_k} = "
                 f"{math.sqrt(d_k):.2f}; dividing by √d_k brings it back to about 1.")  # fmt: skip


SCALING = Question(
    "scaling",
    "number",
    ("sentence", "seed", "d_k"),
    lambda i: (
        f"q and k have d_k = {int(i['d_k'])} numbers, each drawn from N(0, 1). Before any scaling, what is the "
        "spread (standard deviation) of the scores q·k?"
    ),
    _spread,
    lo=0,
    hi=1000,
    tolerance=0.2,
    relative=True,
)


# 4. Masks ---------------------------------------------------------------------------------------------------------
def _zeros(inputs: Inputs) -> Truth:
    result = toy_result(inputs)
    t = len(result.tokens)
    blocked = int((~result.mask).sum())
    return Truth(blocked, f"{blocked} of {t * t}",
                 f"Each blocked score is −∞ before the softmax, and e^−∞ = 0 exactly: under the {result.config.mask} "
                 f"mask {blocked} of the {t} × {t} weights are zero.")  # fmt: skip


MASKS = Question(
    "masks",
    "number",
    ("sentence", "mask", "window", "padding"),
    lambda i: (
        f"Under the {i['mask']} mask, how many of the {len(tokenize(str(i['sentence'])))} × "
        f"{len(tokenize(str(i['sentence'])))} softmax weights are exactly zero?"
    ),
    _zeros,
    lo=0,
    hi=512 * 512,
    defaults={"mask": "causal"},
    bounds=lambda i: (0, len(tokenize(str(i["sentence"]))) ** 2),
)


# 5. Several heads -------------------------------------------------------------------------------------------------
def _favourites(inputs: Inputs) -> Truth:
    result = toy_result(inputs)
    i = _token(inputs)
    keys = _labels(result.key_tokens)
    tops = [int(result.weights[h, i].argmax()) for h in range(result.heads)]
    n = len(set(tops))
    listed = ", ".join(f"head {h + 1}: {keys[j]}" for h, j in enumerate(tops))
    return Truth(n, str(n), f"Each head has its own W_q and W_k, so its own idea of a match ({listed}).")


MULTI_HEAD = Question(
    "multi_head",
    "number",
    ("sentence", "seed", "d_k", "heads", "token"),
    lambda i: (
        f"{int(i['heads'])} heads each pick the key they weigh most for the query {_word(i)}. How many "
        "different keys are picked?"
    ),
    _favourites,
    lo=1,
    hi=16,
    defaults={"heads": 4},
    bounds=lambda i: (1, int(i["heads"])),
)


# 6. Where words are -----------------------------------------------------------------------------------------------
POSITION_CHOICES = ("The same rows, only reordered", "Different numbers")


def _shuffle(inputs: Inputs) -> Truth:
    tokens = tokenize(str(inputs["sentence"]))
    perm = permutation.shuffled_order(tokens, seed=0)
    pinned = {"mask": "none"}
    context = toy_result(inputs, **pinned).context
    shuffled = toy_result(inputs, sentence=" ".join(permutation.apply_order(tokens, perm)), **pinned).context
    check = permutation.permutation_check(context, shuffled, perm)
    k = 0 if check.equivariant else 1
    why = (
        "Without positions attention sees a bag of words: each word's context is the same, wherever it stands "
        f"(largest difference {check.max_difference:.1g})."
        if k == 0
        else f"The {inputs['position']} encoding tells the words apart by where they stand, so a word's context "
        f"changes with the order (largest difference {check.max_difference:.2g})."
    )
    return Truth(k, POSITION_CHOICES[k].lower(), why)


POSITION = Question(
    "position",
    "choice",
    ("sentence", "seed", "d_k", "position"),
    lambda i: (
        f"Shuffle the words of the sentence (position encoding: {i['position']}). Each word's context "
        "vector: the same numbers, only in another row, or different numbers?"
    ),
    _shuffle,
    options=lambda i: POSITION_CHOICES,
    defaults={"position": "rope"},
)


# 7. Cross-attention -----------------------------------------------------------------------------------------------
def _columns(inputs: Inputs) -> Truth:
    result = toy_result(inputs, cross_sentence=str(inputs["cross_sentence"]))
    t_q, t_k = result.weights.shape[-2:]
    return Truth(int(t_k), str(int(t_k)),
                 f"Queries come from the first sentence ({t_q} rows), keys and values from the second: one column "
                 f"per key, {t_k}, whatever the length of the first.")  # fmt: skip


CROSS = Question(
    "cross_attention",
    "number",
    ("sentence", "cross_sentence", "seed", "d_k"),
    lambda i: (
        f"Queries from “{str(i['sentence'])[:60]}”, keys and values from “{str(i['cross_sentence'])[:60]}”. "
        "How many columns does the weight matrix have?"
    ),
    _columns,
    lo=1,
    hi=512,
)


# 8. Grouped-query heads and the KV cache ---------------------------------------------------------------------------
def _cache(inputs: Inputs) -> Truth:
    model = kv_memory.MODELS[str(inputs["kv_model"])]
    numbers = model.cache_bytes(1, bytes_per_number=1)
    full = model.cache_bytes(1, bytes_per_number=1, kv_heads=model.heads)
    shared = (f"its {model.heads} query heads share {model.kv_heads} K/V heads, {model.heads // model.kv_heads}× "
              f"fewer than the {full:,} of one K/V head a query head" if model.kv_heads < model.heads
              else "every query head keeps its own K/V head")  # fmt: skip
    return Truth(numbers, f"{numbers:,}",
                 f"{model.layers} layers × {model.kv_heads} K/V heads × {model.d_head} numbers × 2 (a key and a "
                 f"value): {shared}.")  # fmt: skip


KV_CACHE = Question(
    "kv_cache",
    "number",
    ("kv_model",),
    lambda i: (
        f"How many numbers does {i['kv_model']}'s KV cache hold for each token of the context (every layer, "
        "keys and values)?"
    ),
    _cache,
    lo=1,
    hi=1e9,
    tolerance=0.05,
    relative=True,
)


# 9. FlashAttention's tiles ----------------------------------------------------------------------------------------
def _tiles(inputs: Inputs) -> Truth:
    n = len(tokenize(str(inputs["sentence"])))
    size = min(int(inputs["block_size"]), n)
    memory = flash.memory_numbers(n, n, size, int(inputs["heads"]))
    held = memory.tile_scores + memory.statistics
    return Truth(held, f"{held:,} (the ordinary form: {memory.full_scores:,})",
                 f"One tile of {size} × {size} scores and two numbers (m and l) for each of the {n} rows: "
                 f"{memory.tile_scores:,} + {memory.statistics:,}.")  # fmt: skip


FLASH = Question(
    "flash_attention",
    "number",
    ("sentence", "block_size", "heads"),
    lambda i: (
        f"Tiles of {int(i['block_size'])} × {int(i['block_size'])} over {len(tokenize(str(i['sentence'])))} "
        "tokens: how many score numbers does the tiled form hold at once, the running max m and sum l included?"
    ),
    _tiles,
    lo=0,
    hi=1e9,
    tolerance=0.1,
    relative=True,
)


# 10. A real encoder's heads: what share of the weight goes to the special tokens ------------------------------------
SHARES = ("Under a quarter", "A quarter to a half", "A half to three quarters", "Over three quarters")
EDGE = 0.02  # a share this close to a boundary counts on either side of it


def _share(share: float, where: str, why: str) -> Truth:
    buckets = frozenset(min(int(x * 4), 3) for x in (share - EDGE, share, share + EDGE) if 0 <= x <= 1)
    k = min(int(share * 4), 3)
    return Truth(k, f"{share:.0%} ({SHARES[k].lower()})", f"{where} {why}", buckets | {k})


def _encoder(inputs: Inputs) -> Truth:
    model = minilm.load()
    reading = minilm.read(model, str(inputs["sentence"]))
    layer, head = int(inputs["layer"]), int(inputs["head"])
    share = float(reading.scores.sink[layer, head])
    return _share(share, f"Layer {layer}, head {head} puts {share:.0%} of each query's weight on [CLS] and [SEP].",
                  "Many trained heads park weight there when they have nothing to read: a large weight on a "
                  "token whose value moves almost nothing (Kobayashi et al. 2020).")  # fmt: skip


ENCODER = Question(
    "real_model",
    "choice",
    ("sentence", "layer", "head"),
    lambda i: (
        f"all-MiniLM-L6-v2 reads “{str(i['sentence'])[:80]}”. In layer {int(i['layer'])}, head "
        f"{int(i['head'])}, what share of each query's weight goes to the special tokens [CLS] and [SEP] (mean over "
        "the queries)?"
    ),
    _encoder,
    options=lambda i: SHARES,
    defaults={"sentence": minilm.DEFAULT_SENTENCE, "layer": 3, "head": 1},
)


# 11. A chat model's sinks and induction heads: where the strongest induction head looks -----------------------------
INDUCTION_LENGTH = 20  # the chat page's induction preset: 20 random tokens, then the same 20 again


def induction_prompt(inputs: Inputs) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The repeated random tokens of these inputs (smollm2.induction_ids, seeded by `seed`) and their labels."""
    model = smollm2.load()
    ids = smollm2.induction_ids(model, INDUCTION_LENGTH, seed=int(inputs["seed"]))
    return ids, _labels(tuple(_shown(t) for t in smollm2.labels(model, ids)))


def _shown(token: str) -> str:
    """A token with its white space visible (␣ a leading space), as the chat page shows it."""
    return "".join({" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}.get(c, c) for c in token) or "∅"


def _query(inputs: Inputs) -> int:
    """The query followed, within the two copies."""
    return min(max(int(inputs["token"]), 0), 2 * INDUCTION_LENGTH - 1)


class Induction(NamedTuple):
    """The strongest induction head of a run and the row of weights of the query followed."""

    layer: int
    head: int
    score: float
    row: torch.Tensor  # (i + 1,) the query's weights on the keys 0..i (causal)


def induction_head(inputs: Inputs) -> Induction:
    """The head with the largest induction score (attention.interpret) on these inputs' repeated tokens, from the
    run the server keeps (RUNNERS), and its row for the followed query."""
    ids, _ = induction_prompt(inputs)
    run = runner(inputs, "smollm2")(ids)
    scores = interpret.induction(run.weights, ids)  # (L, h)
    layer, head = divmod(int(scores.argmax()), scores.shape[1])
    i = _query(inputs)
    return Induction(layer, head, float(scores[layer, head]), run.weights[layer, head, i, : i + 1])


def _induction(inputs: Inputs) -> Truth:
    ids, keys = induction_prompt(inputs)
    found = induction_head(inputs)
    i, n = _query(inputs), INDUCTION_LENGTH
    best = _best(found.row)
    j = min(best)
    weight = float(found.row[j])
    head = f"Layer {found.layer}, head {found.head} (induction score {found.score:.2f})"
    if i >= n and j == i - n + 1:
        why = (
            f"{head} puts {weight:.0%} on {keys[j]}, the token right after the earlier copy of {keys[i]}: it "
            "finds where this token came before and reads what followed, so the model can copy it."
        )
    elif j == 0:
        why = f"{head} parks {weight:.0%} on the first token, the sink: " + (
            "in the first copy the token has no earlier copy to look up, so the head has nothing to read."
            if i < n
            else "here it has not found the earlier copy."
        )
    else:
        why = f"{head} puts {weight:.0%} on {keys[j]}."
    return Truth(j, f"{keys[j]} (weight {weight:.2f})", why, best)  # fmt: skip


def _induction_words(inputs: Inputs) -> str:
    i, n = _query(inputs), INDUCTION_LENGTH
    copy = "second" if i >= n else "first"
    return (
        f"SmolLM2 reads {n} random tokens (seed {int(inputs['seed'])}), then the same {n} again. From token {i + 1} "
        f"(in the {copy} copy), which earlier token will its strongest induction head put the most weight on?"
    )  # written without the model's tokens: a list of the course's prompts (the poll's) does not read the model


INDUCTION = Question(
    "chat_model",
    "cell",
    ("seed", "token"),
    _induction_words,
    _induction,
    options=lambda i: induction_prompt(i)[1][: _query(i) + 1],
    defaults={"seed": 0, "token": 30},
)


# 12. Watch one form: when the loss on the repeated half falls fastest ------------------------------------------------
# The page's default model (2 layers, 2 heads, d_model 32, AdamW lr 1e-2) over 800 steps instead of 1,000: it trains
# in seconds on one thread, and its induction head forms within them (steps 400 to 700 for seeds 0, 1, 2 and 4)
LESSON_RUN = {"steps": 800, "every": 20}


def lesson_settings(inputs: Inputs) -> tiny.Settings:
    """The lesson's training setting: the inputs' train_ settings over the lesson's small run."""
    given = {n.removeprefix("train_"): v for n, v in inputs.items() if n.startswith("train_")}
    return tiny.Settings(**{**LESSON_RUN, **given})


class Fall(NamedTuple):
    """Where a run's loss on its answers falls fastest: between two snapshots, and by how much."""

    before: int  # the step of the snapshot before the steepest fall
    step: int  # the step of the snapshot after it (the answer)
    drop: float  # nats lost between them
    start: float  # the loss at the first snapshot
    end: float  # the loss at the last snapshot


def steepest_fall(run: tiny.Run) -> Fall:
    """The two consecutive snapshots between which the task loss falls most per step."""
    snaps = run.snapshots
    rates = [(a.task_loss - b.task_loss) / (b.step - a.step) for a, b in zip(snaps, snaps[1:], strict=False)]
    k = max(range(len(rates)), key=rates.__getitem__)
    a, b = snaps[k], snaps[k + 1]
    return Fall(a.step, b.step, a.task_loss - b.task_loss, snaps[0].task_loss, snaps[-1].task_loss)


def _fall(inputs: Inputs) -> Truth:
    settings = lesson_settings(inputs)
    run = runner(inputs, "tiny")(settings)
    fall = steepest_fall(run)
    total = fall.start - fall.end
    share = fall.drop / total if total > 0 else 0.0
    sudden = share >= 0.1 and fall.step - fall.before <= settings.steps // 10
    formed = run.formed
    head = f" {formed.name} formed at step {formed.step}." if formed is not None else " No head formed in this run."
    how = (f"Suddenly: {share:.0%} of the whole fall ({fall.start:.2f} → {fall.end:.2f} nats) happens between step "
           f"{fall.before} and {fall.step}, once a head finds the token after the earlier copy." if sudden
           else f"Slowly: no stretch of {settings.every} steps carries much of the fall ({fall.start:.2f} → "
           f"{fall.end:.2f} nats).")  # fmt: skip
    return Truth(fall.step, f"step {fall.step} ({fall.drop:.2f} nats lost since step {fall.before})", how + head)


FALL = Question(
    "watch_it_learn",
    "number",
    ("train_seed",),
    lambda i: (
        f"A 2-layer attention-only model learns to continue a repeated run of tokens ({LESSON_RUN['steps']} steps, "
        f"seed {int(i['train_seed'])}). Will its loss fall slowly or suddenly? Near which step does it fall fastest?"
    ),
    _fall,
    lo=0,
    hi=tiny.SETTINGS["steps"].hi,
    tolerance=80,  # four snapshots either side, a tenth of the run
    bounds=lambda i: (0, LESSON_RUN["steps"]),
)


QUESTIONS = {
    q.id: q
    for q in (
        SOFT_LOOKUP, SOFTMAX, SCALING, MASKS, MULTI_HEAD, POSITION, CROSS, KV_CACHE, FLASH, ENCODER, INDUCTION, FALL
    )
}  # fmt: skip
