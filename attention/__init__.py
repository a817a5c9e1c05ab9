"""Attention, one step at a time: every intermediate of self-, masked, multi-head and cross-attention.

from attention import Config, compute, presets
result = compute(Config())             # the Raschka tutorial's setting
result.weights[0]                      # (T_q, T_k) softmax weights of head 0
"""

from .basics import masks, presets
from .basics.config import Config, tokenize
from .basics.core import Batch, Result, compute, compute_batch

__all__ = ["Batch", "Config", "Result", "compute", "compute_batch", "masks", "presets", "tokenize"]
