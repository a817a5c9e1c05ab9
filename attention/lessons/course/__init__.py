"""The course's questions: predict, then see. Each question's right answer is computed by the package from the
learner's inputs at that moment; no answer is stored anywhere.

    question.py  what a question is (`Question`: its prompt, choices, answer and check), the inputs it reads and their
                 defaults, where it gets a model's run (`RUNS`, `runner`)
    toy.py       lessons 1 to 9, on the toy computation: the soft lookup to FlashAttention's tiles
    models.py    lessons 10 to 12, on real runs: MiniLM's special tokens, SmolLM2's induction head, a tiny model's fall
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
    runner,
    tokenize,
    toy_config,
    toy_result,
)
from .toy import CROSS, FLASH, KV_CACHE, MASKS, MULTI_HEAD, POSITION, SCALING, SOFT_LOOKUP, SOFTMAX, SWEEP_SEEDS

# The course's questions in its order, by id
QUESTIONS = {
    q.id: q
    for q in (
        SOFT_LOOKUP, SOFTMAX, SCALING, MASKS, MULTI_HEAD, POSITION, CROSS, KV_CACHE, FLASH, ENCODER, INDUCTION, FALL
    )
}  # fmt: skip

__all__ = [
    "DEFAULT_RUNNERS",
    "INDUCTION_LENGTH",
    "LESSON_RUN",
    "QUESTIONS",
    "RUNS",
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
    "runner",
    "steepest_fall",
    "tokenize",
    "toy_config",
    "toy_result",
]
