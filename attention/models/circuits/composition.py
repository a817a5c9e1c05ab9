"""Q-, K- and V-composition (Elhage et al. 2021) between every head and every head of a later layer, grouped-query
aware: query head h reads key/value head h // group.

Row vectors (x @ W), per query head h of a layer with its K/V head g = h // group:

    W_QK^h = W_Q^h (W_K^g)^T        W_OV^h = W_V^g W_O^h                                  (d_model, d_model)
    Q(i -> j) = ||W_OV^i W_QK^j||_F        / (||W_OV^i||_F ||W_QK^j||_F)    i writes what j's query reads
    K(i -> j) = ||W_OV^i (W_QK^j)^T||_F    / (||W_OV^i||_F ||W_QK^j||_F)    ... what j's key reads
    V(i -> j) = ||W_OV^i W_OV^j||_F        / (||W_OV^i||_F ||W_OV^j||_F)    ... what j's value reads

Each score lies in [0, 1] (||AB|| <= ||A|| ||B||). No norm gain is folded in and RoPE is ignored (the matrices as
stored). Computed exactly through d_head x d_head factors, never a d_model x d_model matrix: with the thin QR
W_V^g = Q R, ||W_V^g W_O^i X|| = ||R W_O^i X|| (Q has orthonormal columns), so the writer is A_i = R W_O^i
(d_head, d_model) and each reader a (d_model, d_head) factor B_j:

    Q: B_j = W_Q^j (R_K^g)^T        (W_K^g = Q_K R_K)
    K: B_j = W_K^g (R_Q^j)^T        (W_Q^j = Q_Q R_Q)
    V: B_j = W_V^g (R_O^j)^T        ((W_O^j)^T = Q_O R_O)
    numerator = ||A_i B_j||_F, ||W_OV^i|| = ||A_i||, ||W_QK^j|| = ||W_Q^j (R_K^g)^T||

One pass over the layers in order (each layer's weights are read once, then dropped): a layer's readers are scored
against the writers of every earlier layer with one matrix product a kind, then its own writers are kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import torch


class HeadMatrices(NamedTuple):
    """One layer's attention matrices, x @ W, split into heads."""

    w_query: torch.Tensor  # (h, d_model, d_head)
    w_key: torch.Tensor  # (h_kv, d_model, d_head)
    w_value: torch.Tensor  # (h_kv, d_model, d_head)
    w_out: torch.Tensor  # (h, d_head, d_model)


class Composition(NamedTuple):
    """Every pair (i, j) of the N = layers x heads heads, row i the earlier (writing) head, column j the later
    (reading) one; 0 where j's layer is not later than i's (see `later`)."""

    heads: tuple[tuple[int, int], ...]  # N (layer, head) pairs in order
    q: torch.Tensor  # (N, N) Q-composition
    k: torch.Tensor  # (N, N) K-composition
    v: torch.Tensor  # (N, N) V-composition
    later: torch.Tensor  # (N, N) bool: j's layer is later than i's (where the scores are defined)
    ov_norms: torch.Tensor  # (N,) ||W_OV^i||_F
    qk_norms: torch.Tensor  # (N,) ||W_QK^i||_F


def split_heads(w_query, w_key, w_value, w_out, heads: int, kv_heads: int) -> HeadMatrices:
    """A layer's (d_model, h*d_head) projections and (h*d_head, d_model) output as per-head stacks."""
    d = w_query.shape[0]
    d_head = w_query.shape[1] // heads
    return HeadMatrices(
        w_query.reshape(d, heads, d_head).transpose(0, 1), w_key.reshape(d, kv_heads, d_head).transpose(0, 1),
        w_value.reshape(d, kv_heads, d_head).transpose(0, 1), w_out.reshape(heads, d_head, -1),
    )  # fmt: skip


def _r(w: torch.Tensor) -> torch.Tensor:
    """R of the thin QR of a stack (n, d_model, d_head) of tall matrices: (n, d_head, d_head)."""
    return torch.linalg.qr(w.double(), mode="r").R.float()


def factors(m: HeadMatrices) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
    """A layer's writers A (h, d_head, d_model), readers B per kind {q, k, v: (h, d_model, d_head)}, ||W_QK||s."""
    h, kv = m.w_query.shape[0], m.w_key.shape[0]
    g = torch.arange(h) // (h // kv)  # (h,) each query head's K/V head
    r_key, r_value = _r(m.w_key)[g], _r(m.w_value)[g]  # (h, d_head, d_head)
    r_query, r_out = _r(m.w_query), _r(m.w_out.transpose(1, 2))  # (h, d_head, d_head)
    writers = r_value @ m.w_out  # (h, d_head, d_model)
    readers = {
        "q": m.w_query @ r_key.transpose(1, 2),  # (h, d_model, d_head)
        "k": m.w_key[g] @ r_query.transpose(1, 2),
        "v": m.w_value[g] @ r_out.transpose(1, 2),
    }
    return writers, readers, torch.linalg.matrix_norm(readers["q"])


def composition(layers: Iterable[HeadMatrices]) -> Composition:
    """Q-, K- and V-composition of every earlier head into every later head; `layers` in order (may be lazy)."""
    writers: list[torch.Tensor] = []  # per layer (h, d_head, d_model)
    rows: dict[str, list[torch.Tensor]] = {"q": [], "k": [], "v": []}  # per reader layer (N_before, h)
    ov_norms, qk_norms = [], []
    stacked = torch.empty(0)  # (N_before * d_head, d_model) every earlier writer, grown a layer at a time
    for m in layers:
        a, readers, qk = factors(m)
        h, d_head, d_model = a.shape
        ov = torch.linalg.matrix_norm(a)  # (h,)
        n = len(writers) * h
        before_ov = torch.cat(ov_norms) if ov_norms else a.new_zeros(0)  # (n,)
        # the three kinds of reader in one product: (d_model, 3 * h * d_head)
        b = torch.cat([readers[kind].transpose(0, 1).reshape(d_model, h * d_head) for kind in "qkv"], dim=1)
        product = stacked[: n * d_head] @ b if n else a.new_zeros(0, 3 * h * d_head)  # (n*d_head, 3*h*d_head)
        norms = product.reshape(n, d_head, 3, h, d_head).pow(2).sum((1, 4)).sqrt()  # (n, 3, h)
        for index, kind in enumerate("qkv"):
            reader = ov if kind == "v" else qk  # (h,)
            rows[kind].append(norms[:, index] / (before_ov[:, None] * reader[None, :]))
        if not writers:
            stacked = a.new_empty(0, d_model)
        stacked = torch.cat((stacked, a.reshape(h * d_head, d_model)))
        writers.append(a)
        ov_norms.append(ov)
        qk_norms.append(qk)
    n_layers, h = len(writers), writers[0].shape[0]
    total = n_layers * h
    out = {}
    for kind, blocks in rows.items():
        full = torch.zeros(total, total)
        for layer, block in enumerate(blocks):
            full[: block.shape[0], layer * h : (layer + 1) * h] = block
        out[kind] = full
    layer_of = torch.arange(total) // h
    heads = tuple((i // h, i % h) for i in range(total))
    later = layer_of[None, :] > layer_of[:, None]  # (N, N)
    return Composition(heads, out["q"], out["k"], out["v"], later, torch.cat(ov_norms), torch.cat(qk_norms))


def reference(m_i: HeadMatrices, head_i: int, m_j: HeadMatrices, head_j: int) -> dict[str, float]:
    """The three scores of one pair from the full d_model x d_model matrices (the formula as written; tests)."""

    def ov(m, h):
        return m.w_value[h // (m.w_query.shape[0] // m.w_key.shape[0])] @ m.w_out[h]

    def qk(m, h):
        return m.w_query[h] @ m.w_key[h // (m.w_query.shape[0] // m.w_key.shape[0])].T

    f = torch.linalg.matrix_norm
    a, q, o = ov(m_i, head_i).double(), qk(m_j, head_j).double(), ov(m_j, head_j).double()
    return {
        "q": float(f(a @ q) / (f(a) * f(q))),
        "k": float(f(a @ q.T) / (f(a) * f(q))),
        "v": float(f(a @ o) / (f(a) * f(o))),
    }
