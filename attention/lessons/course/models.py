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
    runner,
    top_keys,
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
    """The head with the largest induction score (attention.interpret) on these inputs' repeated tokens, from the
    run the server keeps (RUNNERS), and its row for the followed query."""
    ids, _ = induction_prompt(inputs)
    run = runner(inputs, "smollm2")(ids)
    scores = interpret.induction(run.weights, ids)  # (L, h)
    layer, head = divmod(int(scores.argmax()), scores.shape[1])
    i = induction_query(inputs)
    return Induction(layer, head, float(scores[layer, head]), run.weights[layer, head, i, : i + 1])


def _induction(inputs: Inputs) -> Truth:
    ids, keys = induction_prompt(inputs)
    found = induction_head(inputs)
    i, n = induction_query(inputs), INDUCTION_LENGTH
    best = top_keys(found.row)
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
