"""Attention masks, in PyTorch's one convention.

A mask is a boolean (T_q, T_k) tensor, True where query i MAY attend to key j,
as `torch.nn.functional.scaled_dot_product_attention` takes it. Blocked scores
are filled with -inf before the softmax, so blocked weights are exactly 0.
Tutorials disagree: LLMs-from-scratch marks *blocked* cells True (triu), and
the annotated transformer fills -1e9; we translate them to this convention.
A row with no allowed key gets zero weights and a zero context (never NaN).
"""

from __future__ import annotations

import torch


def causal(t_q: int, t_k: int) -> torch.Tensor:
    """Query i sees keys 0..i (top-left aligned, as SDPA's is_causal)."""
    return torch.ones(t_q, t_k, dtype=torch.bool).tril()  # (T_q, T_k)


def padding(t_q: int, t_k: int, n: int) -> torch.Tensor:
    """The last n keys are padding: no query sees them."""
    mask = torch.ones(t_q, t_k, dtype=torch.bool)
    if n > 0:
        mask[:, max(t_k - n, 0) :] = False
    return mask


def window(t_q: int, t_k: int, w: int) -> torch.Tensor:
    """Causal sliding window (Mistral-style): query i sees keys i-w+1 .. i."""
    i = torch.arange(t_q).unsqueeze(1)  # (T_q, 1)
    j = torch.arange(t_k).unsqueeze(0)  # (1, T_k)
    return (j <= i) & (j > i - w)


def build(kind: str, t_q: int, t_k: int, *, n_padding: int = 0, width: int = 3, custom=None) -> torch.Tensor:
    """The (T_q, T_k) boolean mask for a mask kind ('none' allows everything)."""
    if kind == "none":
        return torch.ones(t_q, t_k, dtype=torch.bool)
    if kind == "causal":
        return causal(t_q, t_k)
    if kind == "padding":
        return padding(t_q, t_k, n_padding)
    if kind == "window":
        return window(t_q, t_k, width)
    if kind == "custom":
        return torch.as_tensor(custom, dtype=torch.bool).reshape(t_q, t_k)
    raise ValueError(f"unknown mask kind {kind!r}")
