"""One head (or one layer) of SmolLM2 as an `attention.Config` the panels draw, and every head's behaviour scores."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ...basics.config import Config
from ...basics.core import Result, compute, scores
from .decoder import Run
from .reader import Model


@dataclass(frozen=True, eq=False)
class HeadWeights:
    """One query head's projections and the K/V head it reads, used as x @ W (float32)."""

    w_query: torch.Tensor  # (d_model, d_head), rows in Llama's rotate-half order
    w_key: torch.Tensor  # (d_model, d_head) of K/V head head // group
    w_value: torch.Tensor  # (d_model, d_head)
    w_out: torch.Tensor  # (d_head, d_model) the head's rows of W_o


def head_weights(model: Model, layer: int, head: int) -> HeadWeights:
    """Query head `head` of `layer` and its K/V head (head // group): only these rows are dequantized."""
    lw, d = model.layers[layer], model.d_head
    q_rows, kv_rows = slice(head * d, (head + 1) * d), slice((head // model.group) * d, (head // model.group + 1) * d)
    return HeadWeights(
        w_query=lw.w_query.dequantize(q_rows).T, w_key=lw.w_key.dequantize(kv_rows).T,
        w_value=lw.w_value.dequantize(kv_rows).T, w_out=lw.w_out.dequantize()[:, q_rows].T,
    )  # fmt: skip


def head_config(model: Model, run: Run, layer: int, head: int) -> Config:
    """The config whose `attention.compute` is this head on this prompt: the normalized input entering the layer,
    the head's real W_q and its K/V head's W_k, W_v, RoPE at the model's base, causal, scaled by sqrt(d_head).

    For a run over a whole prompt (start 0); rows are labelled x1..xT: show the prompt's tokens beside it."""
    if run.start:
        raise ValueError("a head's config is built from a run over the whole prompt (start 0)")
    w = head_weights(model, layer, head)
    return Config.from_embeddings(
        run.normed[layer], d_k=model.d_head, d_v=model.d_head, heads=1, init="given", w_query=w.w_query,
        w_key=w.w_key, w_value=w.w_value, bias=False, scale="sqrt", position="rope", rope_base=model.rope_base,
        mask="causal",
    )  # fmt: skip


def layer_config(model: Model, run: Run, layer: int) -> Config:
    """All 9 query heads of a layer with their 3 shared K/V heads (kv_heads = 3) as one Config: `compute` gives
    the layer's attention, grouped-query heads included."""
    if run.start:
        raise ValueError("a layer's config is built from a run over the whole prompt (start 0)")
    lw = model.layers[layer]
    return Config.from_embeddings(
        run.normed[layer], d_k=model.d_head, d_v=model.d_head, heads=model.heads, kv_heads=model.kv_heads,
        init="given", w_query=lw.w_query.dequantize().T, w_key=lw.w_key.dequantize().T,
        w_value=lw.w_value.dequantize().T, bias=False, scale="sqrt", position="rope", rope_base=model.rope_base,
        mask="causal",
    )  # fmt: skip


def head_result(model: Model, run: Run, layer: int, head: int, tokens: Sequence[str] | None = None) -> Result:
    """`compute` of the head, rows and columns labelled with the prompt's tokens when given."""
    result = compute(head_config(model, run, layer, head))
    if tokens is None:
        return result
    return dataclasses.replace(result, tokens=tuple(tokens), key_tokens=tuple(tokens))


def omega_without_rope(result: Result) -> torch.Tensor:
    """Q K^T of the queries and keys before RoPE turned them: (h, T_q, T_k), beside `result.omega` (after)."""
    return scores(result.unrotated_queries, result.unrotated_keys)


# behaviour scores and presets ------------------------------------------------------------------------------


BEHAVIOURS = {
    "sink": "first-token sink",
    "previous_token": "previous token",
    "induction": "induction",
    "self": "self (own token)",
}


def head_scores(weights: torch.Tensor, ids: Sequence[int]) -> dict[str, torch.Tensor]:
    """Every behaviour score of every head: weights (L, h, T, T) -> {behaviour: (L, h)} (attention.models.interpret)."""
    from .. import interpret

    return {
        "sink": interpret.first_token(weights),
        "previous_token": interpret.previous_token(weights),
        "induction": interpret.induction(weights, ids),
        "self": interpret.self_token(weights),
    }


def induction_ids(model: Model, length: int = 20, seed: int = 0, repeats: int = 2) -> tuple[int, ...]:
    """A random run of `length` ordinary tokens, repeated: the preset where induction heads show (Olsson et al.
    2022). Tokens are drawn, seeded, from ids above the 17 control tokens, each once."""
    g = torch.Generator().manual_seed(seed)
    first = 1000  # skip control tokens and the byte alphabet's single characters
    run = (torch.randperm(model.vocab_size - first, generator=g)[:length] + first).tolist()
    return tuple(run * repeats)
