"""What a class poll room can be asked: the demo's three questions on one sentence (answers computed by the
package), and the course's questions at each lesson's own inputs, as `server.poll.PollQuestion`s (plain data). The
projector's list of questions (ui/views/poll.py) offers them; the inventory's tests are ui/views/inventory.py's.
"""

from __future__ import annotations

import functools
from typing import Any

from attention import Config, compute
from attention.lessons import course
from server.poll import PollQuestion


@functools.lru_cache(maxsize=1)
def demo_questions() -> tuple[PollQuestion, ...]:
    """Three questions on one sentence, one of each kind, their answers computed by the package (not written here)."""
    sentence = "the cat sat on the mat"
    result = compute(Config(sentence=sentence, mask="causal"))
    weights = result.weights[0]  # (T_q, T_k)
    sums = {f"{s:g}" for s in weights.sum(-1).round(decimals=4).tolist()}  # every row's, as the choices write it
    choices = ("0", "1", "the number of keys", "it depends on the sentence")
    same = sums.pop() if len(sums) == 1 else None
    allowed = int(result.mask[3].sum()) if result.mask is not None else len(result.tokens)
    rows = [f"{i + 1} {t}" for i, t in enumerate(result.tokens)]
    open_weights = compute(Config(sentence=sentence)).weights[0]  # no mask: every cell may win
    best = divmod(int(open_weights.argmax()), open_weights.shape[1])
    return (
        PollQuestion(
            "demo.rows",
            "After the softmax, what does each row of weights add up to?",
            "choice",
            choices,
            answer=str(choices.index(same)) if same in choices else "3",
        ),
        PollQuestion(
            "demo.causal",
            f"Under a causal mask, how many keys may the 4th token of “{sentence}” attend to?",
            "number",
            lo=0,
            hi=100,
            answer=str(allowed),
        ),
        PollQuestion(
            "demo.cell",
            f"No mask, the default weights: which cell of “{sentence}”'s weights is largest?",
            "cell",
            rows=tuple(rows),
            cols=tuple(rows),
            answer=f"{best[0]},{best[1]}",
        ),
    )


def from_course(question: Any, inputs: dict[str, Any]) -> PollQuestion:
    """The course's question (attention.lessons.course.Question) on these inputs as the poll asks it: its prompt,
    choices (a cell question's cells become choices) or range, and the answer the package computes now."""
    truth = question.answer(inputs)
    if question.kind == "number":
        lo, hi = question.range(inputs)
        return PollQuestion(f"course.{question.id}", question.prompt(inputs), "number", lo=lo, hi=hi,
                        answer=f"{float(truth.value):.6g}", tolerance=question.margin(truth))  # fmt: skip
    return PollQuestion(f"course.{question.id}", question.prompt(inputs), "choice", question.choices(inputs),
                    answer=str(int(truth.value)))  # fmt: skip


@functools.lru_cache(maxsize=1)
def course_questions() -> dict[str, Any]:
    """The course's questions by the poll's id, in the course's order (asked at each lesson's own inputs)."""
    return {f"course.{q.id}": q for q in course.QUESTIONS.values()}


def asked(picked: str) -> PollQuestion:
    """The picked question as the room is asked it: a course question is computed now, at its lesson's inputs."""
    q = course_questions().get(picked)
    if q is None:
        return {d.id: d for d in demo_questions()}[picked]
    return from_course(q, course.inputs_for(q, {}))
