"""The course's questions: predict, then see (question.py says how a question is made and checked)."""

from .question import (
    DEFAULT_RUNNERS,
    INDUCTION_LENGTH,
    LESSON_RUN,
    QUESTIONS,
    RUNS,
    SWEEP_SEEDS,
    Question,
    Truth,
    Verdict,
    _forward,
    _query,
    _token,
    fingerprint,
    induction_head,
    induction_prompt,
    inputs_for,
    lesson_settings,
    runner,
    steepest_fall,
    tokenize,
    toy_config,
    toy_result,
)

__all__ = ["DEFAULT_RUNNERS", "INDUCTION_LENGTH", "LESSON_RUN", "QUESTIONS", "RUNS", "SWEEP_SEEDS", "Question", "Truth",
           "Verdict", "_forward", "_query", "_token", "fingerprint", "induction_head", "induction_prompt", "inputs_for",
           "lesson_settings", "runner", "steepest_fall", "tokenize", "toy_config", "toy_result"]  # fmt: skip
