"""What a head writes and why it looks where it looks: direct logit attribution, OV and QK circuits, and the
composition of heads (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits").

The math is model-free, on tensors: attribution (the residual stream's parts read by the unembedding through the
frozen final norm), ov (a head's rows of W_E W_V W_O W_U and its copying score), qk (one score split by what the
key carries and by RoPE's rotation), composition (Q-, K-, V-composition, grouped-query aware). `chat` applies them
to SmolLM2-135M, `trained` to the tiny model trained live (and the composition growing over its snapshots).
"""

from .attribution import Attribution, Component, attribute, by_head, rms_scale, rows, totals
from .composition import Composition, HeadMatrices, composition, reference, split_heads
from .ov import Copying, OVTokens, copying_score, copying_score_full, ov_tokens
from .qk import QKSplit, qk_split

__all__ = [
    "Attribution",
    "Component",
    "Composition",
    "Copying",
    "HeadMatrices",
    "OVTokens",
    "QKSplit",
    "attribute",
    "by_head",
    "composition",
    "copying_score",
    "copying_score_full",
    "ov_tokens",
    "qk_split",
    "reference",
    "rms_scale",
    "rows",
    "split_heads",
    "totals",
]
