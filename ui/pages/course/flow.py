"""The course: a path through the lab's pages, each lesson asking before it shows (predict, then see).

What belongs here: the lessons in order (which page, why it matters, the question, the figure that answers it and
one change to try next), the map, a lesson's question → reveal flow, and the progress a learner carries in the
session and in the link (`progress`, `lesson`). The questions and their computed answers are the package's
(`attention.lessons.course`): nothing here knows an answer. Figures are drawn with the pages' own helpers from the
package's results.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attention.lessons import course as questions
from attention.lessons import permutation, soft_lookup
from attention.lessons.course import Question, Verdict
from attention.llm import flash, kv_memory
from attention.models import tiny

from ...charts import band_chart, bars, chart, sweep_frame
from ...heatmaps import heatmap
from ...lessons import clicks
from ...markup import dim_labels, labels, plain
from ...results import compute, scaling_sweep
from ...state import get, put
from .. import poll

PAGE = "pages/course.py"
TITLE = "Predict, then see: a course through attention"
STAGE = "course-stage"  # the container a clicker's press scrolls to the window's top
ANSWERS = "course:answers"  # session: lesson id -> Answer
WAITING = "course:waiting"  # session: lesson id -> (fingerprint, the answer given) while its run trains
REVEAL = object()  # a reveal without a prediction, waiting for its run
WAIT_TICK_S = 0.5  # a lesson waiting for its training run looks this often
MARKS = {"right": "✓", "wrong": "✗", "seen": "◉"}  # not yet: ○ (plain glyphs: no emoji font needed)
NOT_YET = "○"


@dataclass(frozen=True)
class Answer:
    """What the learner committed on one lesson, and on which inputs (other inputs re-ask the question)."""

    fingerprint: str
    verdict: Verdict | None  # None: revealed without a prediction (the room predicted aloud)


@dataclass(frozen=True)
class Lesson:
    id: str
    title: str
    page: str  # the page whose computation the lesson uses
    page_title: str
    minutes: int
    why: str  # two or three sentences: why it matters
    question: Question
    figure: Callable[[dict[str, Any]], None]  # draws what answers the question, from the package's results
    now_try: Callable[[dict[str, Any]], tuple[str, dict[str, Any]]]  # one change to try: its words and values
    controls: tuple[str, ...] = ()  # the inputs the lesson offers to change (the sentence first)
    # a lesson whose answer needs a run that takes a while (a training): None once it is ready, else what it waits
    # for in words (the reveal shows them and waits)
    ready: Callable[[dict[str, Any]], str | None] | None = None


def _result(inputs: dict[str, Any], **overrides: Any):
    return compute(questions.toy_config(inputs, **overrides))  # the pages' shared, bounded cache


def _n(inputs: dict[str, Any]) -> int:
    return len(questions.tokenize(str(inputs["sentence"])))


# ------------------------------------------------------------------------------------------------ the figures
def _fig_lookup(i: dict[str, Any]) -> None:
    result = _result(i)
    q = questions._token(i)
    look = soft_lookup.soft_lookup(result, 0, q)
    keys = labels(result.key_tokens)
    left, right = st.columns(2)
    bars(look.weights, keys, title=f"weights α of query {labels(result.tokens)[q]}", blocked=look.allowed,
         key="co:bars", container=left)  # fmt: skip
    heatmap(look.weighted, keys, dim_labels(result.d_v), title="α · v: each value row times its weight",
            key="co:weighted", container=right, annotate=False)  # fmt: skip


def _fig_softmax(i: dict[str, Any]) -> None:
    base = _result(i, mask="none")
    doubled = _result(i, mask="none", scale="temperature", temperature=base.scale / 2)
    q = questions._token(i)
    keys = labels(base.key_tokens)
    left, right = st.columns(2)
    bars(base.weights[0, q], keys, title="softmax(omega / √d_k)", key="co:before", container=left)
    bars(doubled.weights[0, q], keys, title="softmax(2 · omega / √d_k)", key="co:after", container=right)


def _fig_scaling(i: dict[str, Any]) -> None:
    t = min(max(_n(i), 2), 32)
    sweep = scaling_sweep(t, int(i["seed"]), questions.SWEEP_SEEDS)
    band_chart(sweep_frame(sweep, "spread"), title="Score spread over d_k", y_title="std of the scores",
               current=int(i["d_k"]), key="co:spread")  # fmt: skip
    st.caption("The dashed rule is your d_k: unscaled, the spread grows like √d_k; scaled, it stays near 1.")


def _fig_masks(i: dict[str, Any]) -> None:
    result = _result(i)
    tok = labels(result.tokens)
    heatmap(result.weights[0], tok, tok, title=f"Softmax weights under the {result.config.mask} mask",
            kind="weights", blocked=result.mask, key="co:masked")  # fmt: skip


def _fig_heads(i: dict[str, Any]) -> None:
    result = _result(i)
    tok = labels(result.tokens)
    q = questions._token(i)
    shown = min(result.heads, 8)
    cols = st.columns(min(shown, 4))
    for h in range(shown):
        heatmap(result.weights[h, q][None], [tok[q]], tok, title=f"head {h + 1}: row of {tok[q]}", kind="weights",
                key=f"co:head:{h}", container=cols[h % len(cols)], annotate=False)  # fmt: skip


def _fig_position(i: dict[str, Any]) -> None:
    tokens = questions.tokenize(str(i["sentence"]))
    perm = permutation.shuffled_order(tokens, seed=0)
    shuffled_tokens = permutation.apply_order(tokens, perm)
    context = _result(i, mask="none").context[0]
    shuffled = _result(i, mask="none", sentence=" ".join(shuffled_tokens)).context[0]
    left, right = st.columns(2)
    dims = dim_labels(context.shape[1])
    heatmap(context[perm], labels(shuffled_tokens), dims, title="contexts of the sentence, rows reordered",
            key="co:ctx", container=left, annotate=False)  # fmt: skip
    heatmap(shuffled, labels(shuffled_tokens), dims, title="contexts of the shuffled sentence", key="co:shuf",
            container=right, annotate=False)  # fmt: skip
    st.caption(f"Shuffled: {plain(' '.join(shuffled_tokens))}")


def _fig_cross(i: dict[str, Any]) -> None:
    result = _result(i, cross_sentence=str(i["cross_sentence"]))
    heatmap(result.weights[0], labels(result.tokens), labels(result.key_tokens), title="Cross-attention weights",
            kind="weights", key="co:cross")  # fmt: skip


def _fig_cache(i: dict[str, Any]) -> None:
    frame = pd.DataFrame(
        [
            {"model": m.name, "numbers a token": m.cache_bytes(1, bytes_per_number=1), "yours": m.name == i["kv_model"]}
            for m in kv_memory.MODELS.values()
        ]
    )
    spec = {
        "mark": {"type": "bar"},
        "encoding": {
            "y": {"field": "model", "type": "nominal", "sort": None, "title": None},
            "x": {"field": "numbers a token", "type": "quantitative", "title": "numbers a token in the KV cache"},
            "color": {"field": "yours", "type": "nominal", "legend": None},
        },
    }
    chart(frame, spec, height=160, key="co:cache")


def _fig_flash(i: dict[str, Any]) -> None:
    result = _result(i)
    n = len(result.tokens)
    size = min(int(i["block_size"]), n)
    tok = labels(result.tokens)
    allowed = result.mask.clone()
    allowed[:, size:] = False  # the first key block: all the scores a tile holds
    allowed[size:, :] = False
    heatmap(result.masked[0], tok, tok, title=f"One tile of {size} × {size} scores (coloured) of the {n} × {n}",
            blocked=allowed, key="co:tile", annotate=False)  # fmt: skip
    memory = flash.memory_numbers(n, n, size, result.heads)
    c = st.columns(2)
    c[0].metric("Ordinary: the whole S", f"{memory.full_scores:,}")
    c[1].metric("Tiled: one tile + m and l", f"{memory.tile_scores + memory.statistics:,}")


def _fig_encoder(i: dict[str, Any]) -> None:
    from .. import model as real  # the model's readers only where a lesson asks for them (see ui/pages/model.py)

    _, reading = real.run(str(i["sentence"]))
    layer, head = int(i["layer"]), int(i["head"])
    result = real.head_result(reading, layer, head)
    tok = labels(reading.tokens)
    heatmap(result.weights[0], tok, tok, title=f"Softmax weights, layer {layer} head {head}", kind="weights",
            key="co:encoder", annotate=False)  # fmt: skip
    st.caption("Rows are queries, columns keys: the [CLS] column (first) and the [SEP] column (last) are the sinks.")


def _fig_induction(i: dict[str, Any]) -> None:
    found = questions.induction_head(i)
    ids, tok = questions.induction_prompt(i)
    from .. import chat  # the chat model's run, shared with its page (cached server-wide, within the budget)

    weights = chat.run(ids).weights[found.layer, found.head]
    heatmap(weights, tok, tok, title=f"Layer {found.layer}, head {found.head}: the strongest induction head",
            kind="weights", key="co:induction", annotate=False)  # fmt: skip
    st.caption(
        f"Rows are queries, columns keys. The stripe {questions.INDUCTION_LENGTH - 1} below the diagonal: each token "
        "of the second copy reads the token after its earlier copy (induction). The bright first column: queries "
        "with nothing to read park their weight on token 1 (the sink)."
    )


def _fig_fall(i: dict[str, Any]) -> None:
    from .. import training

    run = _lesson_run(i)
    fall = questions.steepest_fall(run)
    training.curve(training.loss_frame(run), training.curve_spec(
        "Loss", "nats", "series", rule=tiny.CHANCE, rule_label=f"chance: ln {tiny.VOCAB} = {tiny.CHANCE:.2f}",
        mark_step=fall.step, mark_label="falls fastest", height=200,
    ), key="co:loss")  # fmt: skip
    st.caption("The red rule: where the loss on the repeated half falls fastest, between two snapshots.")


# ------------------------------------------------------------------------------------------------ runs
def _smollm2_run(ids: tuple[int, ...]):
    """The chat page's run of these tokens (its shared, budgeted cache); outside a page's run (a script, a test of
    the package in the same process), the package's own."""
    if get_script_run_ctx() is None:
        return questions._forward(ids)
    from .. import chat

    return chat.run(ids)


def _job(settings: tiny.Settings):
    """The training pool's run of the lesson's setting, kept or started for this visitor (as Play does)."""
    from server import sessions
    from server.training import service

    return service().start(settings, sessions.current())


def _pool_run(settings: tiny.Settings) -> tiny.Run:
    """A finished run of this setting from the training pool (kept for every visitor; trained now if nobody has);
    outside a page, the package trains it."""
    if get_script_run_ctx() is None:
        return tiny.train(settings)
    job = _job(settings)
    while not job.finished_training:
        job.wait(len(job.snapshots) + 1, 1.0)
    if job.status not in ("done", "stopped"):
        raise RuntimeError(f"the lesson's training run {job.status}: {job.message}")
    return job.run


# The server's runs for the questions that need a model (attention.lessons.course.runner): passed in every
# lesson's inputs, so a lesson never runs a model a second time.
RUNS = {"smollm2": _smollm2_run, "tiny": _pool_run}


def _lesson_run(i: dict[str, Any]) -> tiny.Run:
    return _pool_run(questions.lesson_settings(i))


def _training(i: dict[str, Any]) -> str | None:
    """None once the lesson's run is trained (kept by the pool), else where it stands, in words."""
    from server.training import NoRoom, service

    from .. import training

    try:
        job = _job(questions.lesson_settings(i))
    except NoRoom as refused:
        return str(refused)
    if job.finished_training:
        return None
    return training.progress(job, service().queue_position(job), service().workers).words


# ------------------------------------------------------------------------------------------------ now try
def _next_token(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    t = (questions._token(i) + 1) % max(_n(i), 1)
    return f"Follow token {t + 1} instead", {"token": t}


def _times_four(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    d = int(i["d_k"])
    new = d * 4 if d * 4 <= 256 else max(d // 4, 1)
    return f"Set d_k = {new}: by how much does the spread change?", {"d_k": new}


def _window(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if i["mask"] == "window":
        return "Try the causal mask", {"mask": "causal"}
    return "Try a sliding window of 2", {"mask": "window", "window": 2}


def _more_heads(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    new = 8 if int(i["heads"]) < 8 else 2
    return f"Try {new} heads", {"heads": new}


def _other_position(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    new = "none" if i["position"] != "none" else "rope"
    return f"Try position = {new}", {"position": new}


def _swap(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "Swap the two sentences", {"sentence": i["cross_sentence"], "cross_sentence": i["sentence"]}


def _other_model(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    names = list(kv_memory.MODELS)
    new = names[(names.index(i["kv_model"]) + 1) % len(names)]
    return f"Try {new}", {"kv_model": new}


def _bigger_block(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    new = min(int(i["block_size"]) * 2, max(_n(i), 1))
    new = new if new != int(i["block_size"]) else 1
    return f"Try a block size of {new}", {"block_size": new}


def _other_layer(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    new = (int(i["layer"]) + 2) % 6
    return f"Try layer {new}, the same head", {"layer": new}


def _next_copy(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    n = questions.INDUCTION_LENGTH
    t = questions._query(i)
    new = t - n if t >= n else t + n
    where = "first" if new < n else "second"
    return f"Follow token {new + 1}, the same token in the {where} copy", {"token": new}


def _next_seed(i: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    new = int(i["train_seed"]) + 1
    return f"Train with seed {new} instead", {"train_seed": new}


Q = questions.QUESTIONS
LESSONS: tuple[Lesson, ...] = (
    Lesson("soft_lookup", "The soft lookup", "pages/soft_lookup.py", "Soft lookup", 5,
           "A dictionary returns the value of the one key that matches; attention returns every value at once, each "
           "scaled by how well its key matches. Every later lesson is this weighted average with another twist.",
           Q["soft_lookup"], _fig_lookup, _next_token, ("sentence", "seed")),
    Lesson("softmax", "Scores and the softmax", "pages/self_attention.py", "Self-attention", 5,
           "The softmax turns any row of scores into weights that are positive and sum to 1. How sharp they come out "
           "depends on the size of the gaps between the scores, not on the scores themselves.",
           Q["softmax"], _fig_softmax, _next_token, ("sentence", "seed")),
    Lesson("scaling", "Why divide by √d_k", "pages/scaling.py", "Why divide by √d_k", 7,
           "Wider queries and keys give bigger dot products. Unscaled, the softmax of a wide model turns into a hard "
           "max and stops learning; the √d_k in every transformer is what keeps it soft.",
           Q["scaling"], _fig_scaling, _times_four, ("sentence", "d_k", "seed")),
    Lesson("masks", "Masks", "pages/masks.py", "Masks and dropout", 5,
           "A mask decides what each token may look at: a chat model must not read the future, a padded batch must "
           "not read its padding. It acts on the scores, so the weights it blocks are exactly zero.",
           Q["masks"], _fig_masks, _window, ("sentence", "mask")),
    Lesson("multi_head", "Several heads", "pages/multi_head.py", "Multi-head", 6,
           "One head computes one weighted average; a model runs many side by side, each with its own projections, "
           "so each can look for something else.",
           Q["multi_head"], _fig_heads, _more_heads, ("sentence", "heads", "seed")),
    Lesson("position", "Where words are", "pages/position.py", "Position", 7,
           "Attention by itself sees a bag of words: shuffle them and each word gets the same context. Positions "
           "are what let a model tell 'dog bites man' from 'man bites dog'.",
           Q["position"], _fig_position, _other_position, ("sentence", "position")),
    Lesson("cross_attention", "Cross-attention", "pages/cross_attention.py", "Cross-attention", 5,
           "A translator's decoder asks questions of another sentence: queries from one, keys and values from the "
           "other. It is the general case; self-attention passes the same sentence twice.",
           Q["cross_attention"], _fig_cross, _swap, ("sentence", "cross_sentence")),
    Lesson("kv_cache", "Grouped-query heads and the KV cache", "pages/kv_cache.py", "KV cache", 6,
           "A chat model keeps every earlier token's keys and values so it computes one new row a step; that cache, "
           "not the weights, fills a GPU on long chats. Grouped-query heads share keys and values to shrink it.",
           Q["kv_cache"], _fig_cache, _other_model, ("kv_model",)),
    Lesson("flash_attention", "FlashAttention's tiles", "pages/flash_attention.py", "FlashAttention", 7,
           "The T × T scores of a long context do not fit in fast memory. FlashAttention visits them a tile at a time "
           "with a running max and sum, and still gets exactly the softmax.",
           Q["flash_attention"], _fig_flash, _bigger_block, ("sentence", "block_size")),
    Lesson("real_model", "A real encoder's heads", "pages/real_model.py", "Real model", 8,
           "A trained model computes exactly what the toy pages compute, with learned weights. Its heads are not "
           "all reading: many park their weight on the special tokens, and a weight is not the same as an effect.",
           Q["real_model"], _fig_encoder, _other_layer, ("sentence", "layer", "head")),
    Lesson("chat_model", "A chat model's sinks and induction heads", "pages/chat_model.py", "Inside a chat model", 8,
           "A chat model that has read a phrase once can continue it the second time: an induction head finds the "
           "earlier copy of the current token and reads what followed. Heads with nothing to read park their weight "
           "on the first token, which is why a cache that drops old tokens keeps the first.",
           Q["chat_model"], _fig_induction, _next_copy, ("seed", "token")),
    Lesson("watch_it_learn", "Watch one form", "pages/watch_it_learn.py", "Watch it learn", 8,
           "Training does not improve a model evenly: for many steps the loss barely moves, then a head finds the "
           "pattern and it falls off a cliff. The induction head of lesson 11 forms this way, in a model small "
           "enough to train while you watch.",
           Q["watch_it_learn"], _fig_fall, _next_seed, ("train_seed",), ready=_training),
)  # fmt: skip
# For the instructor: what to say at the reveal, and a common wrong answer with why people give it (the lesson plans
# in docs/course/ are written from these by scripts/lesson_plans.py; presenter mode shows "Say" at the reveal).
PLANS: dict[str, tuple[str, str]] = {
    "soft_lookup": (
        "The query did not pick one key: every key got some weight, and the context is their blend. The biggest "
        "bar is the key whose vector points most the way the query does.",
        "“Itself” (the query's own word). Self-attention does not favour the diagonal: with random projections "
        "q·k of a word with itself is no larger than with any other.",
    ),
    "softmax": (
        "The softmax only sees differences between scores. Doubling them doubles every gap, and a gap becomes a "
        "ratio e^gap between weights: the largest weight grows, the others shrink.",
        "“It stays the same: the weights are normalised anyway.” Normalising divides by the sum, but the sum of "
        "exponentials does not scale like the scores; only adding a constant leaves the weights alone.",
    ),
    "scaling": (
        "A dot product of d_k random products has variance d_k, so its spread is √d_k. That is exactly the "
        "number every transformer divides by, to bring the spread back to 1 whatever the width.",
        "d_k itself (the variance, not the spread), or 1 (the spread after the scaling). Ask which of the two "
        "the softmax would see without the √d_k.",
    ),
    "masks": (
        "Blocked scores become −∞, and e^−∞ is exactly 0: these weights are not small, they are zero. A causal "
        "mask blocks the triangle above the diagonal: T(T − 1)/2 cells.",
        "Half of the cells, T²/2: the diagonal stays open (a token may read itself), so it is T(T − 1)/2.",
    ),
    "multi_head": (
        "Each head has its own W_q and W_k, so each has its own idea of a match. Several heads can look for "
        "several things at once; a trained model makes them specialise.",
        "“One: they all see the same sentence.” They see the same tokens through different projections, so their "
        "favourite keys usually differ.",
    ),
    "position": (
        "Without positions attention is a function of a set: shuffle the words and every word's context moves "
        "with it, unchanged. A position encoding is what makes order matter.",
        "“Different: the sentence means something else.” Not to attention without positions: it cannot see the "
        "order, only which words are there.",
    ),
    "cross_attention": (
        "A row per query, a column per key: the queries come from one sentence, the keys and values from the "
        "other, and the two lengths need not match.",
        "The length of the query sentence (a square matrix, as in self-attention).",
    ),
    "kv_cache": (
        "Every token keeps a key and a value of d_head numbers per K/V head per layer. Grouped-query attention "
        "shares K/V heads between query heads, which divides the cache by the group size.",
        "Counting the query heads instead of the K/V heads (too big for a GQA model), or forgetting the values "
        "(half the answer).",
    ),
    "real_model": (
        "Trained heads do not spread their weight evenly: many send most of it to [CLS] and [SEP] whatever the "
        "sentence. Those tokens act as a place to park attention; their values barely move the output.",
        "“Under a quarter: two tokens out of a dozen get their fair share.” A trained head is not uniform; the "
        "special tokens are sinks, not just two more words.",
    ),
    "chat_model": (
        "The induction head does not look at the earlier copy of the token: it looks one further, at what came "
        "next, and that is the token the model will predict. The bright first column is the sink: heads park "
        "weight there when they have nothing to read.",
        "The earlier copy of the same token (one cell to the left of the right answer): finding it is half the "
        "circuit; the head reads the token after it, which a previous-token head below has marked.",
    ),
    "watch_it_learn": (
        "For many steps the loss sits near chance while the heads look at nothing useful; then, in a few dozen "
        "steps, a head in layer 1 learns to read the token after the earlier copy and the loss drops: a phase "
        "change, not a slow slope.",
        "“Slowly, a little every step” (as a learning curve in a textbook). Here the model cannot predict the "
        "repeat until two heads in two layers work together, so nothing pays off until both have formed.",
    ),
    "flash_attention": (
        "The tiled form holds one tile of scores and two numbers per row (the running max and sum); the "
        "ordinary form holds the whole T × T. The longer the text, the bigger the saving.",
        "The whole T × T: “it must compute every score, so it must hold every score”. It computes them all, "
        "a tile at a time, and forgets each tile once it is folded into the running output.",
    ),
}
BY_ID = {lesson.id: lesson for lesson in LESSONS}
BY_PAGE = {lesson.page: lesson for lesson in LESSONS}


# ------------------------------------------------------------------------------------------------ progress
def progress() -> dict[str, str]:
    """The learner's marks from the link's `progress` (lesson:right,lesson:wrong,lesson:seen): unknown parts ignored."""
    marks = {}
    for part in str(get("progress")).split(","):
        lesson, _, mark = part.partition(":")
        if lesson in BY_ID and mark in MARKS:
            marks[lesson] = mark
    return marks


def _mark(lesson: str, mark: str) -> None:
    marks = progress()
    marks[lesson] = mark
    put("progress", ",".join(f"{k}:{marks[k]}" for k in BY_ID if k in marks))


def inputs(lesson: Lesson) -> dict[str, Any]:
    """The question's inputs: the parameters as the learner set them (the lesson's own defaults where untouched),
    and the server's runners for its models."""
    return {**{name: get(name) for name in lesson.question.reads}, questions.RUNS: RUNS}


def answer_of(lesson: Lesson, now: dict[str, Any]) -> Answer | None:
    """The learner's answer on these inputs; one given on other inputs is forgotten (the question is asked again)."""
    kept = st.session_state.setdefault(ANSWERS, {}).get(lesson.id)
    if kept is None:
        return None
    if kept.fingerprint != questions.fingerprint(lesson.question, now):
        st.session_state[ANSWERS].pop(lesson.id)
        st.session_state["course:changed"] = lesson.id
        return None
    return kept


def _waits(lesson: Lesson, now: dict[str, Any], raw: Any) -> bool:
    """Whether the lesson's answer still waits for its run (a training): the answer is then kept until it is ready."""
    if lesson.ready is None or lesson.ready(now) is None:
        return False
    st.session_state.setdefault(WAITING, {})[lesson.id] = (questions.fingerprint(lesson.question, now), raw)
    return True


def waiting(lesson: Lesson, now: dict[str, Any]) -> bool:
    """Whether an answer waits for the lesson's run on these inputs; once the run is ready, the answer is graded."""
    kept = st.session_state.get(WAITING, {}).get(lesson.id)
    if kept is None:
        return False
    if kept[0] != questions.fingerprint(lesson.question, now):
        st.session_state[WAITING].pop(lesson.id)
        return False
    if lesson.ready is not None and lesson.ready(now) is not None:
        return True
    st.session_state[WAITING].pop(lesson.id)
    reveal(lesson) if kept[1] is REVEAL else commit(lesson, kept[1])
    return False


def commit(lesson: Lesson, raw: Any) -> None:
    """Grade an answer on the inputs as they are now; keep it unless it could not be read."""
    now = inputs(lesson)
    _, problem = lesson.question.read(now, raw)
    st.session_state["course:problem"] = problem
    if problem is not None or _waits(lesson, now, raw):
        return
    verdict = lesson.question.check(now, raw)
    st.session_state["course:problem"] = verdict.message if verdict.ok is None else None
    if verdict.ok is None:
        return
    st.session_state.setdefault(ANSWERS, {})[lesson.id] = Answer(questions.fingerprint(lesson.question, now), verdict)
    _mark(lesson.id, "right" if verdict.ok else "wrong")


def reveal(lesson: Lesson) -> None:
    """Show the answer without a prediction (a room that predicted aloud, a presenter's clicker)."""
    now = inputs(lesson)
    if _waits(lesson, now, REVEAL):
        return
    st.session_state.setdefault(ANSWERS, {})[lesson.id] = Answer(questions.fingerprint(lesson.question, now), None)
    if lesson.id not in progress():
        _mark(lesson.id, "seen")


def go(lesson_id: str) -> None:
    st.session_state["course:problem"] = None
    put("lesson", lesson_id)


def _try(values: dict[str, Any]) -> None:
    for name, value in values.items():
        put(name, value)


# ------------------------------------------------------------------------------------------------ drawing
def course_map() -> None:
    """The front door: the lessons in order with the learner's marks, and the way out to the pages."""
    st.title(TITLE)
    st.caption(
        f"A course of {len(LESSONS)} short lessons through the lab. Each asks one question about your own sentence "
        "before it shows the answer: commit to a guess, then see the lab compute it."
    )
    marks = progress()
    top = st.container(horizontal=True, vertical_alignment="center")
    first = next((lesson.id for lesson in LESSONS if lesson.id not in marks), LESSONS[0].id)
    if clicks("course", -1) > 0:  # a presenter's PageDown on the map: the first lesson not done yet
        go(first)
        st.rerun()
    top.button("Start the course" if not marks else "Continue", type="primary", key="co:start", on_click=go,
               args=(first,))  # fmt: skip
    top.page_link("pages/self_attention.py", label="Just explore: open Self-attention", icon=":material/explore:")
    for k, lesson in enumerate(LESSONS):
        row = st.container(horizontal=True, vertical_alignment="center", key=f"co-map-{lesson.id}")
        mark = MARKS.get(marks.get(lesson.id, ""), NOT_YET)
        row.button(f"{mark} {k + 1}. {lesson.title}", key=f"co:open:{lesson.id}", on_click=go, args=(lesson.id,))
        row.caption(f"{lesson.minutes} min · the page: {lesson.page_title}")
    st.caption("Your progress travels in this page's link (bookmark it to resume); the server keeps nothing about you.")


def _step(k: int, shown: bool) -> int:
    return 2 * k + (1 if shown else 0)


def _clicker(k: int, lesson: Lesson, shown: bool) -> None:
    """A presenter's PageDown: question → reveal → the next lesson's question; PageUp goes back."""
    move = clicks("course", _step(k, shown), stage=".st-key-" + STAGE)
    if move == 0:
        return
    if move > 0 and not shown:
        reveal(lesson)
    elif move > 0 and k + 1 < len(LESSONS):
        go(LESSONS[k + 1].id)
    elif move > 0:
        go("map")
    elif shown:
        st.session_state.setdefault(ANSWERS, {}).pop(lesson.id, None)
        st.session_state.setdefault(WAITING, {}).pop(lesson.id, None)
    elif k > 0:
        go(LESSONS[k - 1].id)
    st.rerun()


def lesson_view(lesson: Lesson) -> bool:
    """One lesson: why it matters, the question on the learner's inputs, the figure only once they commit (whether
    it is drawn is returned: the page offers its figures' download only then)."""
    k = LESSONS.index(lesson)
    q = lesson.question
    now = inputs(lesson)
    pending = waiting(lesson, now)  # an answer given while the lesson's run trains: graded once it is ready
    done = len(progress())  # read on every run: the link carries the progress on every lesson
    kept = answer_of(lesson, now)
    _clicker(k, lesson, kept is not None or pending)
    nav = st.container(horizontal=True, vertical_alignment="center")
    nav.button("◀ Course map", key="co:map", on_click=go, args=("map",))
    nav.page_link(lesson.page, label=f"Open the page: {lesson.page_title}", icon=":material/open_in_new:")
    nav.caption(f"Lesson {k + 1} of {len(LESSONS)} · {done} done · about {lesson.minutes} min · keys: PageDown "
                "next, PageUp back")  # fmt: skip
    st.subheader(f"{k + 1}. {lesson.title}")
    st.markdown(lesson.why)
    with st.expander("Your inputs", expanded=False):
        _controls(lesson)
    box = st.container(key=STAGE)
    box.markdown(f"**Predict:** {plain(q.prompt(now))}")
    if poll.hosting() is not None:  # this tab opened a class poll: the room is asked this lesson's question
        if lesson.ready is None or lesson.ready(now) is None:
            poll.push(poll.from_course(q, now))
        elif not pending:  # its answer needs the run: the room is asked once it is trained
            _progress(box, lesson, now, "The room is asked once the lab has trained the model that answers it")
    if st.session_state.get("course:changed") == lesson.id and kept is None:
        box.info("Your inputs changed since you answered: predict again on these numbers.")
    if pending:
        _wait(box, lesson, now)
        return
    if kept is None:
        _ask(box, lesson, now)
        return False
    st.session_state.pop("course:changed", None)
    _reveal(box, lesson, now, kept)
    return True


def _controls(lesson: Lesson) -> None:
    from ...widgets import pick, select, slider, text

    for name in lesson.controls:
        if name in ("sentence", "cross_sentence"):
            text(name, container=st, label="Sentence" if name == "sentence" else "Key/value sentence")
        elif name in ("mask", "position", "kv_model"):
            select(name, container=st)
        elif name in ("layer", "head"):
            pick(name, list(range(6 if name == "layer" else 12)), name.capitalize(), container=st)
        else:
            slider(name, container=st)


def _ask(box: Any, lesson: Lesson, now: dict[str, Any]) -> None:
    q = lesson.question
    with box.form(key=f"co:form:{lesson.id}", border=False):
        if q.kind == "cell":  # the cells of the query's row, one to pick
            raw = st.pills("Your prediction: the row's cells, one a key", q.choices(now), key=f"co:pick:{lesson.id}")
        elif q.kind == "choice":
            raw = st.radio("Your prediction", q.choices(now), index=None, key=f"co:pick:{lesson.id}",
                           horizontal=True)  # fmt: skip
        else:
            label = f"Your prediction, a number (right means {q.tolerance_words()})"
            lo, hi = q.range(now)
            raw = st.text_input(label, key=f"co:num:{lesson.id}", placeholder=f"a number from {lo:g} to {hi:g}")
        committed = st.form_submit_button("Commit and see", type="primary")
    if committed:
        commit(lesson, raw)
        if st.session_state.get("course:problem") is None:
            st.rerun()
    problem = st.session_state.get("course:problem")
    if problem:
        box.warning(problem)
    box.button("Show me without predicting", key="co:reveal", on_click=reveal, args=(lesson,))
    box.caption("The figure that answers it appears once you commit.")


def _wait(box: Any, lesson: Lesson, now: dict[str, Any]) -> None:
    """The answer is in; the run that answers it trains (as Play would): its progress, then the reveal by itself."""
    raw = st.session_state[WAITING][lesson.id][1]
    said = "—" if raw is REVEAL else plain(str(raw))
    box.markdown(f"**Your prediction:** {said}")
    _progress(box, lesson, now, "The lab trains the model to answer it, as Play does on the page")


def _progress(box: Any, lesson: Lesson, now: dict[str, Any], what: str) -> None:
    """Where the lesson's run stands, redrawn every WAIT_TICK_S; the whole page runs again once it is ready."""

    @st.fragment(run_every=WAIT_TICK_S)
    def progress_line() -> None:
        words = lesson.ready(now) if lesson.ready is not None else None
        if words is None:
            st.rerun(scope="app")
        st.info(f"{what}: {words}")

    with box:
        progress_line()


def _reveal(box: Any, lesson: Lesson, now: dict[str, Any], kept: Answer) -> None:
    q = lesson.question
    truth = kept.verdict.truth if kept.verdict is not None else q.answer(now)
    # the prediction beside the result on one line, then the figure: on a projector's 768 px the figure is in view
    # right after the press (the stage, scrolled to the window's top, starts at the question)
    said = "—" if kept.verdict is None else q.choices(now)[kept.verdict.prediction] if q.kind != "number" else (
        f"{kept.verdict.prediction:g}")  # fmt: skip
    c = box.columns(2)
    c[0].markdown(f"**Your prediction:** {plain(said)}")
    c[1].markdown(f"**The lab computed:** {plain(truth.shown)}")
    with box:
        lesson.figure(now)
    if kept.verdict is None:
        box.info(truth.why)
    else:
        (box.success if kept.verdict.ok else box.warning)(kept.verdict.message)
    if get("present"):
        box.markdown(f"**Say:** {PLANS[lesson.id][0]}")
    words, values = lesson.now_try(now)
    row = box.container(horizontal=True, vertical_alignment="center")
    row.markdown("**Now try:**")
    row.button(words, key="co:try", on_click=_try, args=(values,))
    k = LESSONS.index(lesson)
    if k + 1 < len(LESSONS):
        row.button(f"Next: {LESSONS[k + 1].title} ▶", key="co:next", type="primary", on_click=go,
                   args=(LESSONS[k + 1].id,))  # fmt: skip
    else:
        row.button("Back to the course map ▶", key="co:end", type="primary", on_click=go, args=("map",))


def current() -> Lesson | None:
    return BY_ID.get(str(get("lesson")))


def lesson_defaults() -> dict[str, Any]:
    """The current lesson's own defaults for `ui.show_url_warnings` (Masks opens causal, Multi-head on four heads)."""
    lesson = current()
    return dict(lesson.question.defaults) if lesson is not None else {}


def lesson_link(page: str) -> None:
    """On a page: a link to its lesson in the course (the lesson links back)."""
    lesson = BY_PAGE.get(page)
    if lesson is None:
        return
    if st.button(f"Lesson {LESSONS.index(lesson) + 1} of the course: {lesson.title}", key="co:lesson-link",
                 type="tertiary", icon=":material/school:"):  # fmt: skip
        go(lesson.id)
        st.switch_page(PAGE)
