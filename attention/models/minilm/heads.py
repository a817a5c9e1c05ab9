"""One head of all-MiniLM-L6-v2 as an `attention.Config` the panels draw (or the same head with random weights),
and the analyses on the model: a layer's attention, norm-based attention, every head's behaviour scores."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from ...basics.config import Config
from ...basics.core import Result, compute, project, scores
from .. import interpret
from .encoder import ModelRun
from .reader import Model
from .reading import Reading


@dataclass(frozen=True, eq=False)
class HeadWeights:
    """One head's slices of a layer's projections, used as x @ W."""

    w_query: torch.Tensor  # (d_model, d_head)
    w_key: torch.Tensor  # (d_model, d_head)
    w_value: torch.Tensor  # (d_model, d_head)
    b_query: torch.Tensor  # (d_head,)
    b_key: torch.Tensor  # (d_head,)
    b_value: torch.Tensor  # (d_head,)
    w_out: torch.Tensor  # (d_head, d_model) the head's rows of the attention output dense, W_O^head


def head_weights(model: Model, layer: int, head: int) -> HeadWeights:
    """Head `head` of layer `layer`: columns head*d_head .. (head+1)*d_head of W_q, W_k, W_v (rows of W_O)."""
    p, d = model.layers[layer], model.d_head
    cols = slice(head * d, (head + 1) * d)
    return HeadWeights(
        w_query=p.w_query[:, cols], w_key=p.w_key[:, cols], w_value=p.w_value[:, cols],
        b_query=p.b_query[cols], b_key=p.b_key[cols], b_value=p.b_value[cols], w_out=p.w_out[cols],
    )  # fmt: skip


def _head_config(x: torch.Tensor, w: HeadWeights) -> Config:
    d = w.w_query.shape[1]
    return Config.from_embeddings(
        x, d_k=d, d_v=d, heads=1, init="given", w_query=w.w_query, w_key=w.w_key, w_value=w.w_value,
        bias=True, b_query=w.b_query, b_key=w.b_key, b_value=w.b_value, scale="sqrt",
    )  # fmt: skip


def head_config(model: Model, run: ModelRun | Reading, layer: int, head: int) -> Config:
    """The config whose `attention.compute` is this head on this sentence: the hidden states entering the layer,
    the head's real W_query/W_key/W_value and biases, d_k = d_v = d_head, scaled by sqrt(d_head).

    Its rows are labelled x1..xT (Config's tokenizer is word-level): show `run.tokens` beside it.
    """
    return _head_config(run.hidden_states[layer], head_weights(model, layer, head))


def random_head_config(model: Model, run: ModelRun | Reading, layer: int, head: int, seed: int = 0) -> Config:
    """The same head with random weights (the toy): each matrix and bias drawn N(0, s^2) with s its trained RMS.

    Same inputs, shapes and scale as the real head, so what changes is what training put into the weights.
    """
    g = torch.Generator().manual_seed(seed)
    real = head_weights(model, layer, head)
    draw = lambda t: torch.randn(t.shape, generator=g) * t.square().mean().sqrt()  # noqa: E731
    names = ("w_query", "w_key", "w_value", "b_query", "b_key", "b_value", "w_out")
    toy = HeadWeights(**{n: draw(getattr(real, n)) for n in names})
    return _head_config(run.hidden_states[layer], toy)


def head_result(model: Model, run: ModelRun | Reading, layer: int, head: int, toy_seed: int | None = None) -> Result:
    """`compute` of the head (of `random_head_config` with this seed when toy_seed is given), its rows and columns
    labelled with the model's subword tokens instead of x1..xT."""
    if toy_seed is None:
        config = head_config(model, run, layer, head)
    else:
        config = random_head_config(model, run, layer, head, seed=toy_seed)
    return dataclasses.replace(compute(config), tokens=run.tokens, key_tokens=run.tokens)


# analyses on the model -----------------------------------------------------------------------------


def layer_attention(model: Model, run: ModelRun | Reading, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A layer's (h, T, T) weights and (h, T, d_head) values, from the hidden states entering it: the same
    operations as `encoder_layer`, so the same numbers as a `forward` run's, for a `Reading` that keeps neither."""
    p, x = model.layers[layer], run.hidden_states[layer]
    queries = project(x, p.w_query, p.b_query, model.heads)  # (h, T, d_head)
    keys = project(x, p.w_key, p.b_key, model.heads)
    values = project(x, p.w_value, p.b_value, model.heads)
    weights = torch.softmax(scores(queries, keys) / math.sqrt(queries.shape[-1]), dim=-1)  # (h, T, T)
    return weights, values


@torch.no_grad()
def norm_based(model: Model, run: ModelRun | Reading, layer: int, head: int | None = None) -> interpret.NormAttention:
    """Kobayashi et al.'s ||alpha f(x)|| for every head of a layer (or only `head`: then index 0 is that head),
    with the [CLS]/[SEP] shares."""
    if isinstance(run, ModelRun):
        weights, values = run.weights[layer], run.values[layer]
    else:
        weights, values = layer_attention(model, run, layer)
    w_out = model.layers[layer].w_out
    if head is not None:
        d = model.d_head
        weights, values, w_out = weights[head : head + 1], values[head : head + 1], w_out[head * d : (head + 1) * d]
    return interpret.norm_based(weights, values, w_out, run.special)


def head_scores(run: ModelRun, pronoun: str | None = None, antecedent: str | None = None) -> interpret.HeadScores:
    """Every head's behaviour scores on the run's sentence; coreference from the first `pronoun` token to the first
    `antecedent` token, or, with neither given, from the pair `interpret.coreference_pair` guesses (any pronoun and
    its likely antecedent); left out (None) when there is none."""
    if pronoun is None and antecedent is None:
        p, a = interpret.coreference_pair(run.tokens) or (None, None)
    else:
        p = None if pronoun is None else interpret.find_token(run.tokens, pronoun)
        a = None if antecedent is None else interpret.find_token(run.tokens, antecedent)
    pairs = interpret.same_word_pairs(run.encoding.words, run.tokens)
    return interpret.head_scores(run.weights, run.special, pairs, p, a)
