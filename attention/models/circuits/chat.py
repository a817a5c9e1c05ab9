"""The circuits of SmolLM2-135M (`attention.models.smollm2`): direct logit attribution at the last position, a
head's OV tokens and copying score, the QK split of one score, and the composition of all 270 heads.

Weights are read through the package's own accessors (`layer_weights`, `head_weights`, the embeddings'
`dequantize`, `unembed`), so however the package stores them, these see the float32 matrices the forward uses.

    per layer l: x_(l+1) = x_l + sum_h c_h W_O^h + mlp_l        c_h the head's context at the position (d_head,)
    the parts at the last position: e (the token's embedding), c_h W_O^h for 270 heads, mlp_l for 30 layers
    mlp_l = x_(l+1) - x_l - sum_h c_h W_O^h (the forward's own residual stream, so the parts sum to x_L)
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import torch

from .. import smollm2
from .attribution import Attribution, Component, attribute, rms_scale
from .composition import Composition, HeadMatrices, composition, split_heads
from .ov import Copying, OVTokens, copying_score, ov_tokens
from .qk import QKSplit, qk_split


class Trace(NamedTuple):
    """What the circuits read from one forward pass over a prompt (no attention matrices kept)."""

    ids: tuple[int, ...]  # the T tokens
    hidden: torch.Tensor  # (L+1, T, d_model) the residual stream: the embeddings, then after each layer
    heads: torch.Tensor  # (L, h, d_model) each head's output c_h W_O^h at the last position
    mlps: torch.Tensor  # (L, d_model) each MLP's output at the last position
    logits: torch.Tensor  # (V,) the model's own logits at the last position


@torch.no_grad()
def trace(model: smollm2.Model, ids: Sequence[int]) -> Trace:
    """One forward pass (`smollm2.run_ids`), then every head's and MLP's output at the last position."""
    run = smollm2.run_ids(model, ids)
    hidden = run.hidden_states  # (L+1, T, d)
    heads, mlps = [], []
    for layer in range(model.n_layers):
        w_out = model.layers[layer].w_out.dequantize().T  # (h*d_head, d_model), x @ W
        per_head = w_out.reshape(model.heads, model.d_head, -1)  # (h, d_head, d_model)
        out = (run.context[layer, :, -1, None, :] @ per_head)[:, 0]  # (h, d_model)
        heads.append(out)
        mlps.append(hidden[layer + 1, -1] - hidden[layer, -1] - out.sum(0))  # (d_model,)
    return Trace(run.ids, hidden, torch.stack(heads), torch.stack(mlps), run.logits[-1])


def components(model: smollm2.Model) -> tuple[Component, ...]:
    """embed, then per layer its 9 heads and its MLP: the order of `parts`."""
    out = [Component("embed", None, None)]
    for layer in range(model.n_layers):
        out += [Component("head", layer, h) for h in range(model.heads)] + [Component("mlp", layer, None)]
    return tuple(out)


def parts(model: smollm2.Model, t: Trace) -> torch.Tensor:
    """(1 + L*(h+1), d_model): the embedding, each layer's heads then MLP, at the last position."""
    rows = [t.hidden[0, -1:]]
    for layer in range(model.n_layers):
        rows += [t.heads[layer], t.mlps[layer, None]]
    return torch.cat(rows)


def unembedding(model: smollm2.Model, token: int) -> torch.Tensor:
    """The token's row of the (tied) unembedding: (d_model,)."""
    return model.embeddings.dequantize(torch.tensor([token]))[0]


def attribution(model: smollm2.Model, t: Trace, target: int, versus: int | None = None) -> Attribution:
    """Direct logit attribution of `target`'s logit (or of logit[target] - logit[versus]) at the last position."""
    direction = unembedding(model, target)
    if versus is not None:
        direction = direction - unembedding(model, versus)
    return attribute(components(model), parts(model, t), direction, model.out_norm, model.eps, t.hidden[-1, -1])


@torch.no_grad()
def next_token_attribution(model: smollm2.Model, ids: Sequence[int]) -> torch.Tensor:
    """Each head's direct logit attribution to the token that actually comes next, at every position t < T-1:
    (L, h, T-1). value[l, h, t] = (c_{l,h,t} W_O^h) . (g * W_U[ids[t+1]]) / s_t, s_t the final norm's scale of
    x_L at t (the direction is taken through W_O first: no (T, d_model) output a head is made)."""
    run = smollm2.run_ids(model, ids)
    x = run.hidden_states[-1, :-1]  # (T-1, d_model)
    u = model.embeddings.dequantize(torch.tensor(list(ids[1:]))) * model.out_norm  # (T-1, d_model)
    u = u / rms_scale(x, model.eps)[:, None]
    out = []
    for layer in range(model.n_layers):
        w_out = model.layers[layer].w_out.dequantize().T.reshape(model.heads, model.d_head, -1)  # (h, d_head, d)
        through = w_out @ u.T  # (h, d_head, T-1)
        out.append((run.context[layer, :, :-1] * through.transpose(1, 2)).sum(-1))  # (h, T-1)
    return torch.stack(out)


# the OV circuit --------------------------------------------------------------------------------------------


def head_ov_tokens(model: smollm2.Model, layer: int, head: int, sources: Sequence[int], k: int = 10) -> OVTokens:
    """What the head writes, read as logits, when it reads each source token (rows of W_E W_V W_O W_U, gains
    folded: the layer's attention norm gain on W_E, the output norm's on W_U)."""
    w = smollm2.head_weights(model, layer, head)
    src = torch.tensor(list(sources))
    read = model.embeddings.dequantize(src) * model.layers[layer].attn_norm  # (n, d_model)
    return ov_tokens(read, src, w.w_value, w.w_out, lambda x: smollm2.unembed(model, x * model.out_norm), k)


@functools.lru_cache(maxsize=1)
def _gram(model: smollm2.Model) -> torch.Tensor:
    """E^T E (d_model, d_model) over the whole vocabulary, smollm2.UNEMBED_CHUNK rows at a time (tied W_E = W_U^T)."""
    out = torch.zeros(model.d_model, model.d_model, dtype=torch.float64)
    for start in range(0, model.vocab_size, smollm2.UNEMBED_CHUNK):
        e = model.embeddings.dequantize(slice(start, min(start + smollm2.UNEMBED_CHUNK, model.vocab_size))).double()
        out += e.T @ e  # (d_model, d_model)
    return out.float()


def unembed_embed(model: smollm2.Model, layer: int) -> torch.Tensor:
    """W_U W_E with the gains folded: diag(g_out) E^T E diag(g_attn of the layer), (d_model, d_model)."""
    return model.out_norm[:, None] * _gram(model) * model.layers[layer].attn_norm[None, :]


def head_copying(model: smollm2.Model, layer: int, head: int) -> Copying:
    """The head's copying score from its d_head x d_head matrix W_O (W_U W_E) W_V."""
    w = smollm2.head_weights(model, layer, head)
    return copying_score(w.w_value, w.w_out, unembed_embed(model, layer))


@functools.lru_cache(maxsize=1)
def copying_scores(model: smollm2.Model) -> torch.Tensor:
    """Every head's copying score: (L, h) (fixed weights: once per process)."""
    out = torch.zeros(model.n_layers, model.heads)
    for layer in range(model.n_layers):
        m = _matrices(model, layer)
        g = torch.arange(model.heads) // model.group
        gram = unembed_embed(model, layer)
        for h in range(model.heads):
            out[layer, h] = copying_score(m.w_value[g[h]], m.w_out[h], gram).score
    return out


# the QK circuit --------------------------------------------------------------------------------------------


def qk(model: smollm2.Model, t: Trace, layer: int, head: int, query: int, key: int) -> QKSplit:
    """Split the score of query position `query` and key position `key` (key <= query) of a head: the key's
    residual is its token's embedding plus what earlier layers wrote there, both through the attention norm with
    the scale of the whole residual frozen; each part with and without RoPE's rotation."""
    if not 0 <= key <= query < len(t.ids):
        raise ValueError(f"a query sees keys 0..itself; got query {query}, key {key} of {len(t.ids)} tokens")
    w = smollm2.head_weights(model, layer, head)
    gain = model.layers[layer].attn_norm
    x_q, x_k = t.hidden[layer, query], t.hidden[layer, key]  # (d_model,)
    q = smollm2.rms_norm(x_q, gain, model.eps) @ w.w_query  # (d_head,) before RoPE
    scale = rms_scale(x_k, model.eps)
    token = t.hidden[0, key]
    key_parts = torch.stack([token, x_k - token]) / scale * gain @ w.w_key  # (2, d_head)
    return qk_split(("key's token", "earlier layers at the key"), q, key_parts, query, key, model.rope_base)


# composition -----------------------------------------------------------------------------------------------


def _matrices(model: smollm2.Model, layer: int) -> HeadMatrices:
    lw = model.layers[layer]  # the four attention matrices only (x @ W), not the MLP's
    w = [m.dequantize().T for m in (lw.w_query, lw.w_key, lw.w_value, lw.w_out)]
    return split_heads(*w, model.heads, model.kv_heads)


def _layers(model: smollm2.Model) -> Iterator[HeadMatrices]:
    for layer in range(model.n_layers):
        yield _matrices(model, layer)


# The composition of the official file's 270 heads, computed once by `save_composition` (tens of seconds on one
# thread) and shipped: the entries where the reader's layer is later, float32, with the file's SHA-256; a thorough
# test recomputes them from the weights (tests/unit/attention/models/test_circuits.py).
SHIPPED = Path(__file__).with_name("smollm2_composition.pt")


def compute_composition(model: smollm2.Model) -> Composition:
    """Q-, K-, V-composition of all 270 heads from the weights, one layer's attention matrices at a time."""
    return composition(_layers(model))


def save_composition(model: smollm2.Model, path: Path = SHIPPED) -> None:
    """Compute the composition and write what `head_composition` reads back (the later-layer entries only)."""
    c = compute_composition(model)
    torch.save({"sha256": smollm2.GGUF.sha256, "layers": model.n_layers, "heads": model.heads,
                "q": c.q[c.later].clone(), "k": c.k[c.later].clone(), "v": c.v[c.later].clone(),
                "ov_norms": c.ov_norms, "qk_norms": c.qk_norms}, path)  # fmt: skip


def _shipped(model: smollm2.Model, path: Path) -> Composition | None:
    """The shipped composition, when it is there and of this file and shape; None otherwise."""
    try:
        data = torch.load(path, weights_only=True)
    except (FileNotFoundError, RuntimeError, EOFError):
        return None
    if data.get("sha256") != smollm2.GGUF.sha256 or (data["layers"], data["heads"]) != (model.n_layers, model.heads):
        return None
    n, h = model.n_layers * model.heads, model.heads
    layer_of = torch.arange(n) // h
    later = layer_of[None, :] > layer_of[:, None]  # (N, N)
    full = {}
    for kind in "qkv":
        full[kind] = torch.zeros(n, n)
        full[kind][later] = data[kind]
    heads = tuple((i // h, i % h) for i in range(n))
    return Composition(heads, full["q"], full["k"], full["v"], later, data["ov_norms"], data["qk_norms"])


@functools.lru_cache(maxsize=1)
def head_composition(model: smollm2.Model) -> Composition:
    """Q-, K-, V-composition of all 270 heads (fixed weights): the shipped numbers, else computed once per
    process."""
    return _shipped(model, SHIPPED) or compute_composition(model)


# tokens by their text ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _by_label(model: smollm2.Model) -> dict[str, list[int]]:
    """Every token's display text (`smollm2.labels`) -> the ids that show so (once per process)."""
    out: dict[str, list[int]] = {}
    for i, label in enumerate(smollm2.labels(model, range(model.vocab_size))):
        out.setdefault(label, []).append(i)
    return out


def token_id(model: smollm2.Model, text: str) -> int:
    """The id of the one token whose text (as `smollm2.labels` shows it, leading space included: " River") is
    `text`; ValueError naming the tokens it makes when it is not exactly one token."""
    ids = model.tokenizer.encode(text).ids if text else []
    if len(ids) == 1 and smollm2.labels(model, ids)[0] == text:
        return ids[0]
    found = _by_label(model).get(text, [])
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise ValueError(f"{text!r} is the text of {len(found)} tokens ({', '.join(map(str, found[:5]))}): "
                         "give one that is a single token")  # fmt: skip
    pieces = " + ".join(repr(t) for t in smollm2.labels(model, ids)) or "no token"
    raise ValueError(f"{text!r} is not one token of {smollm2.NAME} (it is {pieces}); give the text of exactly one "
                     "token, leading space included")  # fmt: skip
