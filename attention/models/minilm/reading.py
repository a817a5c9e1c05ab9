"""What the Real model page keeps of a sentence (`Reading`): the hidden states, the rollout and the head scores,
without every layer's weights when the sentence is long; and the bytes of each before it is made."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import interpret
from .encoder import ModelRun, embed, encoder_layer
from .reader import Model
from .tokens import Encoding, encode


@dataclass(frozen=True, eq=False)
class Reading:
    """What the Real model page draws of the model on a sentence, without the run's (L, h, T, T) weights when the
    sentence is long: 12 MB at 512 tokens instead of the whole run's 122 MB.

    Every head's matrices follow from the hidden states (`layer_attention`, `head_result`), so only the hidden
    states are kept, with what needs every layer's weights at once: the rollout and the head scores.
    """

    sentence: str
    encoding: Encoding
    hidden_states: torch.Tensor  # (L+1, T, d_model): the embeddings, then each layer's output
    rollout: torch.Tensor  # (L, T, T) interpret.rollout(weights).rollout
    scores: interpret.HeadScores  # head_scores with the default pronoun and antecedent
    weights: torch.Tensor | None  # (L, h, T, T) when T <= weights_upto (the model view), else None

    tokens = ModelRun.tokens
    ids = ModelRun.ids
    special = ModelRun.special

    @property
    def nbytes(self) -> int:
        """Bytes of its tensors (the scores' included)."""
        tensors = [self.hidden_states, self.rollout, self.weights, *self.scores.scores().values()]
        return sum(x.nbytes for x in tensors if x is not None)


def reading_bytes(tokens: int, layers: int = 6, heads: int = 12, d_model: int = 384, weights_upto: int = 64) -> int:
    """The bytes of a `Reading` of this many tokens (float32), before it is made: at most this (its coreference
    scores are counted whether or not the sentence has a pronoun)."""
    numbers = (layers + 1) * tokens * d_model + layers * tokens * tokens + 5 * layers * heads
    numbers += layers * heads * tokens * tokens if tokens <= weights_upto else 0
    return 4 * numbers


def forward_bytes(tokens: int, heads: int = 12, d_model: int = 384, d_ff: int = 1536) -> int:
    """The most one layer's temporaries hold while `read` or `forward` runs it: scores, weights (twice while the
    softmax runs), queries, keys, values, context and the feed-forward's (T, d_ff) activations."""
    return 4 * (3 * heads * tokens * tokens + 8 * tokens * d_model + 2 * tokens * d_ff)


@torch.no_grad()
def read(model: Model, sentence: str, weights_upto: int = 64) -> Reading:
    """Run the model on the sentence keeping a `Reading`: the hidden states, and of each layer's weights only the
    rollout's product and the head scores (and the weights themselves up to `weights_upto` tokens). Each layer's
    temporaries are let go of before the next layer runs."""
    encoding = encode(model, sentence)
    x = embed(model, torch.tensor(encoding.ids))  # (T, d_model)
    n, h, t = len(model.layers), model.heads, x.shape[0]
    hidden_states = x.new_empty(n + 1, t, model.d_model)
    hidden_states[0] = x
    rollout = x.new_empty(n, t, t)
    weights = x.new_empty(n, h, t, t) if t <= weights_upto else None
    p, a = interpret.coreference_pair(encoding.tokens) or (None, None)  # any pronoun, its likely antecedent
    pairs = interpret.same_word_pairs(encoding.words, encoding.tokens)
    scores = []
    for i, layer in enumerate(model.layers):
        run = encoder_layer(layer, hidden_states[i], model.heads, model.eps)
        hidden_states[i + 1] = run.output
        if weights is not None:
            weights[i] = run.weights
        scores.append(interpret.head_scores(run.weights[None], encoding.special, pairs, p, a))
        mixed = interpret.add_residual(interpret.average_heads(run.weights[None]))[0]  # (T, T)
        rollout[i] = mixed if i == 0 else mixed @ rollout[i - 1]
        del run, mixed
    joined = {f: None if getattr(scores[0], f) is None else torch.cat([getattr(s, f) for s in scores])
              for f in ("previous_token", "next_token", "sink", "same_word", "coreference")}  # fmt: skip
    return Reading(sentence, encoding, hidden_states, rollout, interpret.HeadScores(**joined), weights)
