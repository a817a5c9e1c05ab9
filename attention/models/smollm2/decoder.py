"""SmolLM2's forward pass over new tokens after a KV cache: RMSNorm, RoPE, grouped-query attention through
`attention.basics.core`'s own functions, SwiGLU, the tied unembedding; every intermediate kept in a `Run`."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ...basics import masks, position
from ...basics.core import apply_mask, expand, merge_heads, project, scores, softmax, split_heads
from . import packed
from .quantized import Quantized
from .reader import NAME, Layer, Model
from .tokens import Prompt, prompt

# vocabulary rows dequantized at a time for the logits: 512 x 576 x 4 bytes = 1.2 MB, which stays in the core's
# cache between dequantizing and multiplying (8192 rows, 19 MB, went out to memory and back: 1.8x slower a step)
UNEMBED_CHUNK = 512


@dataclass(frozen=True, eq=False)
class LayerWeights:
    """One layer's matrices dequantized to float32, as used: x @ W (views of the (out, in) matrices)."""

    w_query: torch.Tensor  # (d_model, heads * d_head)
    w_key: torch.Tensor  # (d_model, kv_heads * d_head)
    w_value: torch.Tensor  # (d_model, kv_heads * d_head)
    w_out: torch.Tensor  # (heads * d_head, d_model)
    w_gate: torch.Tensor  # (d_model, d_ff)
    w_up: torch.Tensor  # (d_model, d_ff)
    w_down: torch.Tensor  # (d_ff, d_model)


def rms_norm(x: torch.Tensor, gain: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * gain over the last dimension (Llama's RMSNorm, in transformers' order)."""
    return gain * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _matrices(layer: Layer) -> tuple[Quantized, ...]:
    """The layer's seven matrices in `LayerWeights`' order."""
    return (layer.w_query, layer.w_key, layer.w_value, layer.w_out, layer.w_gate, layer.w_up, layer.w_down)


def layer_weights(layer: Layer, out: torch.Tensor | None = None) -> LayerWeights:
    """Dequantize one layer's seven matrices (3.5 M weights, 14 MB float32), transposed to x @ W.

    out: a flat float32 buffer of `layer_numbers(layer)` numbers the matrices are written into (views of it, valid
    until the buffer is written again): a run reuses one buffer for every layer (`Quantized.dequantize`)."""
    out = torch.empty(layer_numbers(layer)) if out is None else out
    views, at = [], 0
    for w in _matrices(layer):
        views.append(w.dequantize(out=out[at:]).T)
        at += w.shape[0] * w.shape[1]
    return LayerWeights(*views)


def layer_numbers(layer: Layer) -> int:
    """How many numbers `layer_weights` writes for the layer: the seven matrices' sizes."""
    return sum(w.shape[0] * w.shape[1] for w in _matrices(layer))


def unembed(model: Model, x: torch.Tensor) -> torch.Tensor:
    """logits = x @ embedding^T, the tied table dequantized UNEMBED_CHUNK rows at a time into one buffer:
    (T, d) -> (T, V)."""
    out = torch.empty(x.shape[0], model.vocab_size)
    chunk = torch.empty(UNEMBED_CHUNK * model.d_model)  # 1.2 MB, written again for each chunk of rows
    for start in range(0, model.vocab_size, UNEMBED_CHUNK):
        rows = slice(start, min(start + UNEMBED_CHUNK, model.vocab_size))
        out[:, rows] = x @ model.embeddings.dequantize(rows, out=chunk).T  # (T, chunk)
    return out


@dataclass(eq=False)
class Cache:
    """The KV cache: every layer's keys (after RoPE) and values, (kv_heads, T, d_head) each, grown by each step."""

    keys: list[torch.Tensor]  # L x (kv_heads, T, d_head)
    values: list[torch.Tensor]  # L x (kv_heads, T, d_head)

    @property
    def length(self) -> int:
        return self.keys[0].shape[1] if self.keys else 0

    def layer_bytes(self) -> list[int]:
        """Bytes each layer's cache holds: 2 (K and V) x kv_heads x T x d_head x 4 (float32)."""
        return [
            k.numel() * k.element_size() + v.numel() * v.element_size()
            for k, v in zip(self.keys, self.values, strict=True)
        ]

    def copy(self) -> Cache:
        return Cache(list(self.keys), list(self.values))  # tensors are never written in place: sharing is safe


@dataclass(frozen=True, eq=False)
class Run:
    """Every intermediate of a forward over T new tokens at positions start .. start+T-1 (T_k = start + T keys).

    With `keep=False` only the logits and the cache are kept (the per-layer fields are empty tensors)."""

    ids: tuple[int, ...]  # the T new tokens
    start: int  # position of the first new token (the cache's length before)
    hidden_states: torch.Tensor  # (L+1, T, d_model): the embeddings, then each layer's output (the residual stream)
    normed: torch.Tensor  # (L, T, d_model) RMSNorm(x) * g_attn: the input each layer's attention reads
    queries: torch.Tensor  # (L, h, T, d_head) after RoPE
    keys: torch.Tensor  # (L, h_kv, T_k, d_head) after RoPE, the cache included
    values: torch.Tensor  # (L, h_kv, T_k, d_head)
    weights: torch.Tensor  # (L, h, T, T_k) attention probabilities
    context: torch.Tensor  # (L, h, T, d_head) per-head context
    logits: torch.Tensor  # (T, V), or (1, V) for the last token only
    cache: Cache  # after this run: start + T positions

    @property
    def t_k(self) -> int:
        return self.start + len(self.ids)


def _head_mask(ablate: Collection[tuple[int, int]], layer: int, heads: int) -> torch.Tensor | None:
    off = [head for (at, head) in ablate if at == layer]
    if not off:
        return None
    keep = torch.ones(heads, 1, 1)
    keep[off] = 0.0
    return keep


@torch.no_grad()
def run_ids(
    model: Model,
    ids: Sequence[int],
    cache: Cache | None = None,
    *,
    keep: bool = True,
    all_logits: bool = False,
    ablate: Collection[tuple[int, int]] = (),
    int4: bool = True,
) -> Run:
    """The decoder over new tokens `ids`, after the `cache`'s tokens (a fresh forward when None).

    keep: store every layer's intermediates (a page's run); all_logits: logits for every new token, not only the
    last; ablate: (layer, head) pairs whose context is zeroed before the output projection (the head switched off);
    int4: a run over one token (a generation step) multiplies the layers' 4-bit matrices packed (`packed.py`,
    float32's numbers from torch's int4 kernel) instead of dequantizing every layer to float32 (False: the latter,
    as a run over several tokens always does: there the dequantized matrix serves every token).
    """
    ids = tuple(int(i) for i in ids)
    if not ids:
        raise ValueError("no tokens to run")
    cache = Cache([], []) if cache is None else cache.copy()
    start, t, h, hk = cache.length, len(ids), model.heads, model.kv_heads
    if start + t > model.context_length:
        raise ValueError(f"{NAME} reads at most {model.context_length} tokens; got {start + t}")
    positions = torch.arange(start, start + t)  # (T,)
    angles = position.rope_angles(positions, model.d_head, model.rope_base)  # (T, d_head/2)
    mask = masks.causal(t, start + t, "bottom-right")  # (T, T_k): query i at position start + i
    empty = ~mask.any(dim=-1)  # (T,) never true: every token sees itself
    scale = math.sqrt(model.d_head)

    x = model.embeddings.dequantize(torch.tensor(ids))  # (T, d_model)
    hidden, kept = [x], []  # the residual stream; per layer (normed, queries, keys, values, weights, context)
    four_bit = packed.packed(model) if int4 and t == 1 and packed.available() else None  # a step's matrices
    # else one buffer every layer's dequantized matrices are written into in turn
    buffer = torch.empty(max(map(layer_numbers, model.layers))) if four_bit is None else None
    for i, layer in enumerate(model.layers):
        w = layer_weights(layer, buffer) if four_bit is None else four_bit.layers[i]
        n = rms_norm(x, layer.attn_norm, model.eps)  # (T, d_model)
        if four_bit is None:
            queries, keys, values = (project(n, w.w_query, None, h), project(n, w.w_key, None, hk),
                                     project(n, w.w_value, None, hk))  # fmt: skip
        else:
            q, k, v = packed.matvec(n, w.qkv).split((h * model.d_head, hk * model.d_head, hk * model.d_head), 1)
            queries, keys, values = split_heads(q, h), split_heads(k, hk), split_heads(v, hk)
        queries = position.apply_rope(queries, angles)  # (h, T, d_head)
        keys = position.apply_rope(keys, angles)  # (h_kv, T, d_head)
        if start:
            keys = torch.cat((cache.keys[i], keys), dim=1)  # (h_kv, T_k, d_head)
            values = torch.cat((cache.values[i], values), dim=1)
        if i < len(cache.keys):
            cache.keys[i], cache.values[i] = keys, values
        else:
            cache.keys.append(keys)
            cache.values.append(values)
        omega = scores(queries, expand(keys, h))  # (h, T, T_k): each K/V head read by its group of query heads
        weights = softmax(apply_mask(omega / scale, mask), empty)  # (h, T, T_k)
        context = weights @ expand(values, h)  # (h, T, d_head)
        off = _head_mask(ablate, i, h)
        merged = merge_heads(context if off is None else context * off)  # (T, h d_head)
        x = x + (merged @ w.w_out if four_bit is None else packed.matvec(merged, w.out))  # (T, d_model)
        m = rms_norm(x, layer.ffn_norm, model.eps)
        if four_bit is None:
            x = x + (F.silu(m @ w.w_gate) * (m @ w.w_up)) @ w.w_down  # (T, d_model) SwiGLU
        else:
            gate, up = packed.matvec(m, w.gate_up).chunk(2, dim=1)  # (1, d_ff) each
            x = x + packed.matvec(F.silu(gate) * up, w.down)
        if keep:
            hidden.append(x)
            kept.append((n, queries, keys, values, weights, context))
    final = rms_norm(x if all_logits else x[-1:], model.out_norm, model.eps)
    logits = unembed(model, final)  # (T or 1, V)
    stacked = [torch.stack(field) for field in zip(*kept, strict=True)] if keep else [torch.empty(0)] * 6
    return Run(ids, start, torch.stack(hidden) if keep else torch.empty(0), *stacked, logits=logits, cache=cache)


def run_bytes(model: Model, new: int, cached: int = 0, keep: bool = True, int4: bool = True) -> int:
    """An upper bound of the memory `run_ids` takes for `new` tokens after a cache of `cached`, before it returns:
    the Run's tensors (every layer's intermediates with keep, else the logits), the new cache (the old one is
    copied), and the temporaries of the largest step: one layer's dequantized float32 matrices and its
    activations, or a chunk of the unembedding. From the shapes alone (4 bytes a number), before any is made
    (tests/unit/attention/models/test_smollm2.py holds it above what a Run holds). A one-token run with int4 also
    packs the layers where they are not packed yet (`packed.pack_bytes`, about 100 MB; 0 once packed): hold the
    copy with `packed.pinned` from this sizing to the run, so that it is still there."""
    L, d, h, kv, dh = model.n_layers, model.d_model, model.heads, model.kv_heads, model.d_head
    t_k = cached + new
    d_ff = max(layer.w_gate.shape[0] for layer in model.layers)
    numbers = 2 * L * kv * t_k * dh + model.vocab_size * (new if keep else 1)  # the cache, the logits
    if keep:  # hidden states, normed inputs, queries, keys, values, weights, context
        numbers += (2 * L + 1) * new * d + 2 * L * h * new * dh + 2 * L * kv * t_k * dh + L * h * new * t_k
    # one layer's matrices dequantized (float32), with the 8-byte integers their unpacking goes through: 3 numbers
    layer = 3 * (2 * d * d + 2 * d * kv * dh + 3 * d * d_ff)
    activations = new * (4 * d + 3 * d_ff) + 3 * h * new * t_k  # x, q, k, v, the MLP's, omega/weights/softmax
    temporaries = max(layer + activations, UNEMBED_CHUNK * d + new * UNEMBED_CHUNK)
    packing = packed.pack_bytes(model) if int4 and new == 1 and packed.available() else 0
    return 4 * (numbers + temporaries) + packing


def slim(run: Run) -> Run:
    """The run without the per-layer tensors a page does not draw (residual stream, queries, context; the keys and
    values stay in the cache): what a server keeps for a prompt is the attention, the normalized inputs (a head's
    `compute` starts there), the cache and the logits: about 12 MB at 64 tokens instead of 29."""
    empty = torch.empty(0)
    return dataclasses.replace(run, hidden_states=empty, queries=empty, keys=empty, values=empty, context=empty)


def forward(model: Model, text: str, max_tokens: int | None = None, **kwargs) -> tuple[Prompt, Run]:
    """`prompt` then `run_ids` over it from an empty cache: every intermediate of the prompt."""
    p = prompt(model, text, max_tokens)
    return p, run_ids(model, p.ids, **kwargs)


def step(model: Model, run: Run, token: int, **kwargs) -> Run:
    """One generation step: the new token through the model reading `run`'s KV cache (which is left as it was)."""
    return run_ids(model, (token,), run.cache, **kwargs)
