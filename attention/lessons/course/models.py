"""Lessons 10 to 12: the real models' questions (MiniLM's special tokens, SmolLM2's induction head, the tiny model's
fall), answered from runs the server passes in (`RUNS`) or the package makes."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ...models import interpret, minilm, smollm2, tiny
from .question import (
    Inputs,
    Question,
    Truth,
    numbered,
    quoted,
    runner,
    sentence_problem,
    top_keys,
)

# The course counts layers, heads and tokens from 1 in all its words; the inputs (the URL's layer, head, token) keep
# the pages' own 0-based values, so a prompt says layer + 1.

# 10. A real encoder's heads: what share of the weight goes to the special tokens ------------------------------------
SHARES = ("Under a quarter", "A quarter to a half", "A half to three quarters", "Over three quarters")
EDGE = 0.02  # a share this close to a boundary counts on either side of it


def _share(share: float, where: str, why: str) -> Truth:
    buckets = frozenset(min(int(x * 4), 3) for x in (share - EDGE, share, share + EDGE) if 0 <= x <= 1)
    k = min(int(share * 4), 3)
    return Truth(k, f"{share:.0%} ({SHARES[k].lower()})", f"{where} {why}", buckets | {k})


MINILM_LAYERS, MINILM_HEADS = 6, 12  # all-MiniLM-L6-v2's shape (the Real model page's layer and head pickers)


def _encoder_problem(inputs: Inputs) -> str | None:
    layer, head = int(inputs["layer"]), int(inputs["head"])
    if not 0 <= layer < MINILM_LAYERS or not 0 <= head < MINILM_HEADS:
        return (f"all-MiniLM-L6-v2 has {MINILM_LAYERS} layers of {MINILM_HEADS} heads: pick layer 1 to "
                f"{MINILM_LAYERS} and head 1 to {MINILM_HEADS} under Your inputs.")  # fmt: skip
    return sentence_problem(inputs)


def _encoder(inputs: Inputs) -> Truth:
    model = minilm.load()
    reading = minilm.read(model, str(inputs["sentence"]))
    layer, head = int(inputs["layer"]), int(inputs["head"])
    share = float(reading.scores.sink[layer, head])
    return _share(share, f"Layer {layer + 1}, head {head + 1} puts {share:.0%} of each query's weight on [CLS] and "
                  "[SEP].", "Many trained heads park weight there when they have nothing to read: a large weight on "
                  "a token whose value moves almost nothing (Kobayashi et al. 2020).")  # fmt: skip


ENCODER = Question(
    "real_model",
    "choice",
    ("sentence", "layer", "head"),
    lambda i: (
        f"all-MiniLM-L6-v2 reads {quoted(str(i['sentence']))}; in layer {int(i['layer']) + 1} of {MINILM_LAYERS}, "
        f"head {int(i['head']) + 1} of {MINILM_HEADS}, what share of each query's weight goes to the special tokens "
        "[CLS] and [SEP] (mean over the queries)?"
    ),
    _encoder,
    options=lambda i: SHARES,
    defaults={"sentence": minilm.DEFAULT_SENTENCE, "layer": 3, "head": 1},
    misconceptions=lambda i: {"under a quarter: two tokens out of a dozen get their fair share": 0},
    refuse=_encoder_problem,
)


# 11. A chat model's sinks and induction heads: where the strongest induction head looks -----------------------------
INDUCTION_LENGTH = 20  # the chat page's induction preset: 20 random tokens, then the same 20 again


def induction_prompt(inputs: Inputs) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The repeated random tokens of these inputs (smollm2.induction_ids, seeded by `seed`) and their labels."""
    model = smollm2.load()
    ids = smollm2.induction_ids(model, INDUCTION_LENGTH, seed=int(inputs["seed"]))
    return ids, numbered(tuple(_shown(t) for t in smollm2.labels(model, ids)))


def _shown(token: str) -> str:
    """A token with its white space visible (␣ a leading space), as the chat page shows it."""
    return "".join({" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}.get(c, c) for c in token) or "∅"


def induction_query(inputs: Inputs) -> int:
    """The query followed, within the two copies."""
    return min(max(int(inputs["token"]), 0), 2 * INDUCTION_LENGTH - 1)


class Induction(NamedTuple):
    """The strongest induction head of a run and the row of weights of the query followed."""

    layer: int
    head: int
    score: float
    row: torch.Tensor  # (i + 1,) the query's weights on the keys 0..i (causal)


def induction_head(inputs: Inputs) -> Induction:
    """The head with the largest induction score (attention.models.interpret) on these inputs' repeated tokens, from the
    run the server keeps (RUNNERS), and its row for the followed query."""
    ids, _ = induction_prompt(inputs)
    run = runner(inputs, "smollm2")(ids)
    scores = interpret.induction(run.weights, ids)  # (L, h)
    layer, head = divmod(int(scores.argmax()), scores.shape[1])
    i = induction_query(inputs)
    return Induction(layer, head, float(scores[layer, head]), run.weights[layer, head, i, : i + 1])


def _induction(inputs: Inputs) -> Truth:
    _, keys = induction_prompt(inputs)
    found = induction_head(inputs)
    i, n = induction_query(inputs), INDUCTION_LENGTH
    best = top_keys(found.row)
    j = min(best)
    weight = float(found.row[j])
    head = f"Layer {found.layer + 1}, head {found.head + 1} (induction score {found.score:.2f})"
    target = i - n + 1 if i >= n else None  # the token after the earlier copy of the query's token
    if i == 0:
        why = f"{head}: {keys[0]} is the first token and can only read itself, so all its weight is there."
    elif j == target:
        why = (f"{head} puts {weight:.0%} on {keys[j]}, the token right after the earlier copy of {keys[i]}: it "
               "finds where this token came before and reads what followed, so the model can copy it.")  # fmt: skip
    elif j == 0:
        why = f"{head} parks {weight:.0%} on the first token, the sink: " + (
            "in the first copy the token has no earlier copy to look up, so the head has nothing to read."
            if target is None
            else "here it has not found the earlier copy."
        )
    else:
        where = ("the earlier copy of the same token, one before the token that followed it" if i >= n and j == i - n
                 else "the query itself" if j == i else "the token just before the query" if j == i - 1
                 else "a token of the " + ("first" if j < n else "second") + " copy")  # fmt: skip
        first = " In the first copy the token has no earlier copy to look up." if target is None else ""
        why = f"{head} puts {weight:.0%} on {keys[j]}, {where}.{first}"
    if target is not None and j != target:
        why += f" The token after the earlier copy, {keys[target]}, gets {float(found.row[target]):.0%}."
    return Truth(j, f"{keys[j]} (weight {weight:.2f})", why, best)


def _induction_misconceptions(inputs: Inputs) -> dict[str, float]:
    i, n = induction_query(inputs), INDUCTION_LENGTH
    wrong = {"itself: the query's own token": i}
    if i >= 1:
        wrong["the token just before the query"] = i - 1
    if i >= n:
        wrong["the earlier copy of the same token, not the token after it"] = i - n
    return wrong


def _induction_words(inputs: Inputs) -> str:
    i, n = induction_query(inputs), INDUCTION_LENGTH
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
    options=lambda i: induction_prompt(i)[1][: induction_query(i) + 1],
    defaults={"seed": 0, "token": 30},
    misconceptions=_induction_misconceptions,
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
    head = (f" Layer {formed.layer + 1}'s head {formed.head + 1} formed at step {formed.step}." if formed is not None
            else " No head formed in this run.")  # fmt: skip
    how = (f"It falls suddenly: {share:.0%} of the whole fall ({fall.start:.2f} → {fall.end:.2f} nats) happens "
           f"between step {fall.before} and {fall.step}, once a head finds the token after the earlier copy."
           if sudden else f"It falls slowly: no stretch of {settings.every} steps carries much of the fall "
           f"({fall.start:.2f} → {fall.end:.2f} nats); the steepest is between step {fall.before} and "
           f"{fall.step}.")  # fmt: skip
    return Truth(fall.step, f"step {fall.step} ({fall.drop:.2f} nats lost since step {fall.before})", how + head)


def _fall_words(inputs: Inputs) -> str:
    s = lesson_settings(inputs)
    return (
        f"A {s.layers}-layer attention-only model with {s.heads} heads a layer learns to continue a repeated run of "
        f"tokens ({s.steps} steps, seed {s.seed}, its loss measured every {s.every} steps). Near which step does its "
        f"loss on the repeated half fall fastest? Right means within ±{FALL_TOLERANCE} steps of the lab's step, or "
        f"within half its distance from step {s.every} where that is less."
    )


FALL_TOLERANCE = 80  # four snapshots either side, a tenth of the run


FALL = Question(
    "watch_it_learn",
    "number",
    ("train_seed",),
    _fall_words,
    _fall,
    lo=0,
    hi=tiny.SETTINGS["steps"].hi,
    tolerance=FALL_TOLERANCE,
    bounds=lambda i: (0, LESSON_RUN["steps"]),
    # a loss that falls fastest at the start (a textbook curve) would fall fastest by the first snapshot; where the
    # lab's step is that close, the margin narrows to half the distance (Question._margin)
    misconceptions=lambda i: {"at the start, as a textbook learning curve falls": lesson_settings(i).every},
)
