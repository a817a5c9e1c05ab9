"""The course's questions: predict, then see. Each question's right answer is computed by the package from the
learner's inputs at that moment; no answer is stored anywhere.

    question.py  what a question is (`Question`: its prompt, choices, answer and check), the inputs it reads and their
                 defaults, where it gets a model's run (`RUNS`, `runner`)
    toy.py       lessons 1 to 9, on the toy computation: the soft lookup to FlashAttention's tiles
    models.py    lessons 10 to 12, on real runs: MiniLM's special tokens, SmolLM2's induction head, a tiny model's fall
    two_layers.py  lesson 13, on lesson 12's run: which first-layer head the induction head reads (K-composition)

Every word of the course counts tokens, heads and layers from 1; the inputs keep the pages' 0-based URL values.
"""

from .models import (
    ENCODER,
    FALL,
    INDUCTION,
    INDUCTION_LENGTH,
    LESSON_RUN,
    induction_head,
    induction_prompt,
    induction_query,
    lesson_settings,
    steepest_fall,
)
from .question import (
    DEFAULT_RUNNERS,
    RUNS,
    Question,
    Truth,
    Verdict,
    fingerprint,
    forward,
    inputs_for,
    query_token,
    rope_width,
    runner,
    sentence_problem,
    tokenize,
    toy_config,
    toy_problem,
    toy_result,
)
from .toy import CROSS, FLASH, KV_CACHE, MASKS, MULTI_HEAD, POSITION, SCALING, SOFT_LOOKUP, SOFTMAX, SWEEP_SEEDS
from .two_layers import TWO_LAYERS, Reading, reading

# The course's questions in its order, by id
QUESTIONS = {
    q.id: q
    for q in (
        SOFT_LOOKUP, SOFTMAX, SCALING, MASKS, MULTI_HEAD, POSITION, CROSS, KV_CACHE, FLASH, ENCODER, INDUCTION, FALL,
        TWO_LAYERS,
    )
}  # fmt: skip


__all__ = [
    "DEFAULT_RUNNERS",
    "INDUCTION_LENGTH",
    "LESSON_RUN",
    "QUESTIONS",
    "RUNS",
    "Reading",
    "SWEEP_SEEDS",
    "Question",
    "Truth",
    "Verdict",
    "fingerprint",
    "forward",
    "induction_head",
    "induction_prompt",
    "induction_query",
    "inputs_for",
    "lesson_settings",
    "query_token",
    "reading",
    "rope_width",
    "runner",
    "sentence_problem",
    "steepest_fall",
    "tokenize",
    "toy_config",
    "toy_problem",
    "toy_result",
]
