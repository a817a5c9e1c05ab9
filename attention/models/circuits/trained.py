"""The circuits of the tiny model trained live (`attention.models.tiny`): no norm, no MLP, learned positions.

    x_L = token[t] + position[T-1] + sum_{l,h} c_h W_O^h         the residual stream at the last position, exact
    logit_t = x_L . W_U[:, t]                                   so each part's value is part . W_U[:, t] (s = 1)

A head's output is the layer run with every other head switched off (`tiny.attention_layer`'s `off`): the model's
own code, so the parts cannot drift from the forward pass. Composition over training: between the first layer's
previous-token head and the second layer's head doing the task (induction), at every snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from .. import tiny
from .attribution import Component, attribute
from .composition import Composition, HeadMatrices, composition, split_heads
from .ov import copying_score, ov_tokens
from .qk import QKSplit, qk_split


class Trace(NamedTuple):
    """The parts of the residual stream of one sequence (T tokens), every position."""

    ids: torch.Tensor  # (T,)
    token: torch.Tensor  # (T, d_model) token embeddings
    position: torch.Tensor  # (T, d_model) position embeddings
    heads: torch.Tensor  # (L, h, T, d_model) each head's output
    residual: torch.Tensor  # (L+1, T, d_model) the stream entering each layer, then the last
    logits: torch.Tensor  # (T, V) the model's own logits


@torch.no_grad()
def trace(weights: tiny.Weights, ids: torch.Tensor, heads: int) -> Trace:
    """The forward pass on one sequence (T,), and each head's output (the layer with the other heads off)."""
    fwd = tiny.forward(weights, ids[None], heads)
    t = ids.shape[0]
    outs = []
    for layer, lw in enumerate(weights.layers):
        x = fwd.residual[layer]  # (1, T, d_model)
        alone = [tiny.attention_layer(lw, x, heads, [o for o in range(heads) if o != h])[0][0] for h in range(heads)]
        outs.append(torch.stack(alone))  # (h, T, d_model)
    return Trace(ids, weights.token[ids], weights.position[:t], torch.stack(outs),
                 torch.stack(fwd.residual)[:, 0], fwd.logits[0])  # fmt: skip


def components(layers: int, heads: int) -> tuple[Component, ...]:
    """embed (the token), position, then every head: the order of `attribution`'s parts."""
    heads_ = [Component("head", layer, h) for layer in range(layers) for h in range(heads)]
    return (Component("embed", None, None), Component("position", None, None), *heads_)


def attribution(weights: tiny.Weights, t: Trace, target: int, versus: int | None = None, at: int = -1):
    """Direct logit attribution of `target` (minus `versus`) at position `at` (the last by default)."""
    direction = weights.unembed[:, target]
    if versus is not None:
        direction = direction - weights.unembed[:, versus]
    layers, heads = t.heads.shape[:2]
    parts = torch.cat([t.token[at, None], t.position[at, None], t.heads[:, :, at].reshape(layers * heads, -1)])
    return attribute(components(layers, heads), parts, direction, residual=t.residual[-1, at])


def _matrices(weights: tiny.Weights, layer: int, heads: int) -> HeadMatrices:
    w = weights.layers[layer]
    return split_heads(w.w_query, w.w_key, w.w_value, w.w_out, heads, heads)


def head_ov_tokens(weights: tiny.Weights, heads: int, layer: int, head: int, sources: Sequence[int], k: int = 5):
    """Rows of W_E W_V W_O W_U of a head for the source tokens (k tokens written most each)."""
    m = _matrices(weights, layer, heads)
    src = torch.tensor(list(sources))
    unembed = lambda x: x @ weights.unembed  # noqa: E731
    return ov_tokens(weights.token[src], src, m.w_value[head], m.w_out[head], unembed, k)


def copying_scores(weights: tiny.Weights, heads: int) -> torch.Tensor:
    """Every head's copying score (L, h), from W_O (W_U W_E) W_V."""
    gram = weights.unembed @ weights.token  # (d_model, d_model) W_U W_E
    out = torch.zeros(len(weights.layers), heads)
    for layer in range(len(weights.layers)):
        m = _matrices(weights, layer, heads)
        for h in range(heads):
            out[layer, h] = copying_score(m.w_value[h], m.w_out[h], gram).score
    return out


def qk(weights: tiny.Weights, t: Trace, layer: int, head: int, query: int, key: int) -> QKSplit:
    """The score of a query and a key split by what the key's residual holds: its token, its position, and each
    earlier head's output (exact: no norm; no RoPE, so the rotation adds 0)."""
    m = _matrices(weights, layer, t.heads.shape[1])
    q = t.residual[layer, query] @ m.w_query[head]  # (d_head,)
    names = ["key's token", "key's position"]
    rows = [t.token[key], t.position[key]]
    for earlier in range(layer):
        for h in range(t.heads.shape[1]):
            names.append(f"L{earlier}H{h} at the key")
            rows.append(t.heads[earlier, h, key])
    return qk_split(names, q, torch.stack(rows) @ m.w_key[head])


def head_composition(weights: tiny.Weights, heads: int) -> Composition:
    """Q-, K-, V-composition of every head into every head of a later layer."""
    return composition(_matrices(weights, layer, heads) for layer in range(len(weights.layers)))


class Growth(NamedTuple):
    """The composition of one writer head into one reader head at every snapshot of a run."""

    writer: tuple[int, int]  # (layer, head): the first layer's previous-token head (at the last snapshot)
    reader: tuple[int, int]  # (layer, head): the best task head of a later layer (at the last snapshot)
    steps: tuple[int, ...]  # S snapshot steps
    q: torch.Tensor  # (S,) Q-composition at each snapshot
    k: torch.Tensor  # (S,) K-composition (how an induction head finds its key)
    v: torch.Tensor  # (S,) V-composition
    score: torch.Tensor  # (S,) the reader's task score at each snapshot


def growth(run: tiny.Run) -> Growth | None:
    """Composition of the previous-token head of layer 0 into the best task head of a later layer, snapshot by
    snapshot (the pair chosen at the last snapshot); None for a one-layer model or an empty run."""
    s = run.settings
    if s.layers < 2 or not run.snapshots:
        return None
    last = run.snapshots[-1]
    prev = last.scores["previous_token"][0]
    writer = (0, max(range(s.heads), key=lambda h: prev[h]))
    reader = tiny.best_head(last, s, range(1, s.layers))
    i, j = writer[0] * s.heads + writer[1], reader[0] * s.heads + reader[1]
    rows = [head_composition(snap.weights, s.heads) for snap in run.snapshots]
    pick = lambda kind: torch.tensor([float(getattr(c, kind)[i, j]) for c in rows])  # noqa: E731
    score = torch.tensor([snap.scores[s.score_name][reader[0]][reader[1]] for snap in run.snapshots])
    return Growth(writer, reader, tuple(snap.step for snap in run.snapshots), pick("q"), pick("k"), pick("v"), score)
