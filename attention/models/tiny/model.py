"""The tiny attention-only transformer: its weights and its forward pass, through `attention.basics.core`'s own
projection, scores, mask, softmax and head merge."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

import torch

from ...basics import core
from .settings import MAX_POSITIONS, VOCAB, Settings


@dataclass(frozen=True, eq=False)
class LayerWeights:
    """One attention layer, every matrix used as x @ W; head k owns columns k*d_head .. (k+1)*d_head."""

    w_query: torch.Tensor  # (d_model, h*d_head)
    w_key: torch.Tensor  # (d_model, h*d_head)
    w_value: torch.Tensor  # (d_model, h*d_head)
    w_out: torch.Tensor  # (h*d_head, d_model)


@dataclass(frozen=True, eq=False)
class Weights:
    """The whole model: about 11,000 numbers at the defaults."""

    token: torch.Tensor  # (VOCAB+1, d_model)
    position: torch.Tensor  # (MAX_POSITIONS, d_model)
    layers: tuple[LayerWeights, ...]
    unembed: torch.Tensor  # (d_model, VOCAB+1)

    def tensors(self) -> list[torch.Tensor]:
        out = [self.token, self.position]
        for layer in self.layers:
            out += [layer.w_query, layer.w_key, layer.w_value, layer.w_out]
        return out + [self.unembed]

    def detached(self) -> Weights:
        """A copy that training no longer changes (a snapshot's weights)."""
        return _rebuild([t.detach().clone() for t in self.tensors()])

    def to_dict(self) -> dict[str, Any]:
        return {
            "token": self.token.tolist(),
            "position": self.position.tolist(),
            "layers": [{f.name: getattr(layer, f.name).tolist() for f in fields(layer)} for layer in self.layers],
            "unembed": self.unembed.tolist(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Weights:
        t = lambda x: torch.tensor(x, dtype=torch.float32)  # noqa: E731
        layers = tuple(LayerWeights(**{k: t(v) for k, v in layer.items()}) for layer in d["layers"])
        return cls(token=t(d["token"]), position=t(d["position"]), layers=layers, unembed=t(d["unembed"]))

    @property
    def parameters(self) -> int:
        return sum(t.numel() for t in self.tensors())


def _rebuild(tensors: list[torch.Tensor]) -> Weights:
    token, position, *rest, unembed = tensors
    layers = tuple(LayerWeights(*rest[i : i + 4]) for i in range(0, len(rest), 4))
    return Weights(token=token, position=position, layers=layers, unembed=unembed)


def init_weights(settings: Settings, g: torch.Generator) -> Weights:
    """Every matrix drawn N(0, init_std^2), in the order of the architecture."""
    d, s = settings.d_model, settings.init_std
    draw = lambda *shape: torch.randn(shape, generator=g) * s  # noqa: E731
    token, position = draw(VOCAB + 1, d), draw(MAX_POSITIONS, d)
    layers = tuple(LayerWeights(draw(d, d), draw(d, d), draw(d, d), draw(d, d)) for _ in range(settings.layers))
    return Weights(token=token, position=position, layers=layers, unembed=draw(d, VOCAB + 1))


def _heads(x: torch.Tensor, w: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, T, d_model) @ (d_model, h*d_head) -> (B, h, T, d_head), through core.project on the B*T rows."""
    b, t, d = x.shape
    return core.project(x.reshape(b * t, d), w, None, heads).view(heads, b, t, -1).transpose(0, 1)


def attention_layer(
    layer: LayerWeights, x: torch.Tensor, heads: int, off: Iterable[int] = ()
) -> tuple[torch.Tensor, torch.Tensor]:
    """One causal attention layer on a batch: (what it adds to the residual stream (B, T, d_model), weights
    (B, h, T, T)). Heads in `off` are switched off: their context is zero, so they add nothing."""
    b, t, _ = x.shape
    queries = _heads(x, layer.w_query, heads)  # (B, h, T, d_head)
    keys = _heads(x, layer.w_key, heads)  # (B, h, T, d_head)
    values = _heads(x, layer.w_value, heads)  # (B, h, T, d_head)
    scaled = core.scores(queries, keys) / math.sqrt(queries.shape[-1])  # (B, h, T, T)
    mask = torch.ones(t, t, dtype=torch.bool).tril()  # (T, T) True = may attend
    weights = core.softmax(core.apply_mask(scaled, mask), torch.zeros(t, dtype=torch.bool))  # (B, h, T, T)
    context = weights @ values  # (B, h, T, d_head)
    off = list(off)
    if off:
        keep = torch.ones(heads)
        keep[off] = 0.0
        context = context * keep[:, None, None]
    concat = context.transpose(1, 2).reshape(b, t, -1)  # (B, T, h*d_head), core.merge_heads a sequence
    return concat @ layer.w_out, weights


@dataclass(frozen=True, eq=False)
class Forward:
    """The model on a batch: logits, each layer's attention and the residual stream entering each layer."""

    logits: torch.Tensor  # (B, T, VOCAB+1)
    weights: tuple[torch.Tensor, ...]  # L x (B, h, T, T)
    residual: tuple[torch.Tensor, ...]  # L+1 x (B, T, d_model): the embeddings, then after each layer


def forward(weights: Weights, ids: torch.Tensor, heads: int, off: Iterable[tuple[int, int]] = ()) -> Forward:
    """The model on a (B, T) batch of ids; `off` lists (layer, head) pairs switched off."""
    t = ids.shape[1]
    x = weights.token[ids] + weights.position[:t]  # (B, T, d_model)
    residual, attn = [x], []
    for i, layer in enumerate(weights.layers):
        added, w = attention_layer(layer, x, heads, [h for (l_, h) in off if l_ == i])
        x = x + added  # the residual stream
        residual.append(x)
        attn.append(w)
    return Forward(logits=x @ weights.unembed, weights=tuple(attn), residual=tuple(residual))
