"""all-MiniLM-L6-v2's forward pass: the embeddings, then each BERT layer (self-attention through
`attention.basics.core`'s projection and scores, the feed-forward, residuals, LayerNorms), every intermediate kept."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ...basics.core import merge_heads, project, scores
from .reader import Layer, Model
from .tokens import Encoding, encode


def embed(model: Model, ids: torch.Tensor) -> torch.Tensor:
    """x_0 = LayerNorm(word + position + token type 0): (T,) ids -> (T, d_model)."""
    t = ids.shape[0]
    x = model.word_embeddings[ids] + model.position_embeddings[:t] + model.token_type_embeddings[0]  # (T, d_model)
    return F.layer_norm(x, (model.d_model,), model.norm_weight, model.norm_bias, model.eps)


@dataclass(frozen=True, eq=False)
class LayerRun:
    """Every intermediate of one encoder layer; h heads of d_head, T tokens."""

    queries: torch.Tensor  # (h, T, d_head)
    keys: torch.Tensor  # (h, T, d_head)
    values: torch.Tensor  # (h, T, d_head)
    weights: torch.Tensor  # (h, T, T) softmax(Q K^T / sqrt(d_head))
    context: torch.Tensor  # (h, T, d_head) weights @ values
    attention_output: torch.Tensor  # (T, d_model) concat(context) @ W_O + b_O
    attended: torch.Tensor  # (T, d_model) LayerNorm(x + attention_output)
    intermediate: torch.Tensor  # (T, d_ff) GELU(attended @ W_1 + b_1)
    output: torch.Tensor  # (T, d_model) LayerNorm(attended + intermediate @ W_2 + b_2)


def encoder_layer(layer: Layer, x: torch.Tensor, heads: int, eps: float) -> LayerRun:
    """One BERT layer in eval mode (no dropout): self-attention, then the feed-forward, each + residual + LayerNorm."""
    d_model = x.shape[1]
    queries = project(x, layer.w_query, layer.b_query, heads)  # (h, T, d_head)
    keys = project(x, layer.w_key, layer.b_key, heads)  # (h, T, d_head)
    values = project(x, layer.w_value, layer.b_value, heads)  # (h, T, d_head)
    scaled = scores(queries, keys) / math.sqrt(queries.shape[-1])  # (h, T, T)
    weights = torch.softmax(scaled, dim=-1)  # (h, T, T)
    context = weights @ values  # (h, T, d_head)
    concat = merge_heads(context)  # (T, h*d_head)
    attention_output = torch.addmm(layer.b_out, concat, layer.w_out)  # (T, d_model)
    attended = F.layer_norm(x + attention_output, (d_model,), layer.norm1_weight, layer.norm1_bias, eps)
    intermediate = F.gelu(torch.addmm(layer.b_ff1, attended, layer.w_ff1))  # (T, d_ff), exact erf GELU
    ff = torch.addmm(layer.b_ff2, intermediate, layer.w_ff2)  # (T, d_model)
    output = F.layer_norm(attended + ff, (d_model,), layer.norm2_weight, layer.norm2_bias, eps)
    return LayerRun(queries, keys, values, weights, context, attention_output, attended, intermediate, output)


@dataclass(frozen=True, eq=False)
class ModelRun:
    """Every intermediate of the model on one sentence: L layers, h heads of d_head, T subword tokens."""

    sentence: str
    encoding: Encoding
    hidden_states: torch.Tensor  # (L+1, T, d_model): the embeddings, then each layer's output
    queries: torch.Tensor  # (L, h, T, d_head)
    keys: torch.Tensor  # (L, h, T, d_head)
    values: torch.Tensor  # (L, h, T, d_head), value bias included
    weights: torch.Tensor  # (L, h, T, T) attention probabilities
    context: torch.Tensor  # (L, h, T, d_head) per-head context
    attention_output: torch.Tensor  # (L, T, d_model) concat(context) @ W_O + b_O, before the residual
    attended: torch.Tensor  # (L, T, d_model) after the attention's residual + LayerNorm
    intermediate: torch.Tensor  # (L, T, d_ff) after GELU

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.encoding.tokens

    @property
    def ids(self) -> tuple[int, ...]:
        return self.encoding.ids

    @property
    def special(self) -> tuple[int, ...]:
        return self.encoding.special


@torch.no_grad()
def forward(model: Model, sentence: str) -> ModelRun:
    """Tokenize, embed and run every layer, keeping every intermediate (float32, eval, deterministic).

    Each layer's intermediates are written into the run's tensors as the layer finishes and then let go of, so the
    pass holds the run and one layer's temporaries, not the run twice (a list of layers, then its stack).
    """
    encoding = encode(model, sentence)
    x = embed(model, torch.tensor(encoding.ids))  # (T, d_model)
    n, h, t, d, d_ff = len(model.layers), model.heads, x.shape[0], model.d_head, model.layers[0].w_ff1.shape[1]
    hidden_states = x.new_empty(n + 1, t, model.d_model)
    hidden_states[0] = x
    shapes = {"queries": (h, t, d), "keys": (h, t, d), "values": (h, t, d), "weights": (h, t, t),
              "context": (h, t, d), "attention_output": (t, model.d_model), "attended": (t, model.d_model),
              "intermediate": (t, d_ff)}  # fmt: skip
    kept = {name: x.new_empty(n, *shape) for name, shape in shapes.items()}
    for i, layer in enumerate(model.layers):
        run = encoder_layer(layer, hidden_states[i], model.heads, model.eps)
        for name, out in kept.items():
            out[i] = getattr(run, name)
        hidden_states[i + 1] = run.output
        del run
    return ModelRun(sentence=sentence, encoding=encoding, hidden_states=hidden_states, **kept)


def sentence_embedding(run: ModelRun) -> torch.Tensor:
    """all-MiniLM-L6-v2's sentence vector: the mean of the last hidden states over the tokens, L2-normalised."""
    return F.normalize(run.hidden_states[-1].mean(dim=0), dim=-1)  # (d_model,)
