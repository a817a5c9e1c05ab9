"""The head atlas: every head of a real model scored for what it does, over a corpus or one text.

scores.py   the scores' definitions (previous_token, first_token, duplicate_token, induction, entropy, mean_distance;
            MiniLM's special and punctuation) on a head's weights, pooled over texts as sums and counts
summary.py  an atlas: its table, the strongest heads and what it says, in sentences computed from the scores
runs.py     the models run on the shipped corpus (atlas_corpus.json), the repeated-token probe or a learner's text
shipped.py  the corpus's and the probe's atlases of both models, computed once and shipped (shipped_atlases.pt),
            keyed by the models' SHA-256: read instead of computed (`python -m attention.lessons.atlas` remakes them)
"""

from .runs import (
    MiniLM,
    Runner,
    SmolLM2,
    Text,
    circuit_scores,
    corpus,
    inputs,
    model_atlas,
    model_atlases,
    repeated_tokens,
    runner,
    ship,
)
from .scores import (
    CIRCUIT_SCORES,
    COLOURS,
    DEFINITIONS,
    ENCODER_SCORES,
    INPUTS,
    MAX_TOKENS,
    MODELS,
    NAMES,
    NEED_REPEATS,
    REPEAT_LENGTH,
    REPEAT_SEEDS,
    SCORES,
    SETTINGS,
    Tallies,
    head_scores,
    is_punctuation,
    renormalised_without_first,
    repeat_targets,
    tallies,
)
from .summary import SINK_LAYER, STRONG, Atlas, atlas, findings, head_name, ranked, top_sentences

__all__ = [
    "CIRCUIT_SCORES",
    "COLOURS",
    "DEFINITIONS",
    "ENCODER_SCORES",
    "INPUTS",
    "MAX_TOKENS",
    "MODELS",
    "NAMES",
    "NEED_REPEATS",
    "REPEAT_LENGTH",
    "REPEAT_SEEDS",
    "SCORES",
    "SETTINGS",
    "SINK_LAYER",
    "STRONG",
    "Atlas",
    "MiniLM",
    "Runner",
    "SmolLM2",
    "Tallies",
    "Text",
    "atlas",
    "circuit_scores",
    "corpus",
    "findings",
    "head_name",
    "head_scores",
    "inputs",
    "is_punctuation",
    "model_atlas",
    "model_atlases",
    "ranked",
    "renormalised_without_first",
    "repeat_targets",
    "repeated_tokens",
    "runner",
    "ship",
    "tallies",
    "top_sentences",
]
