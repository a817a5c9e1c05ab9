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


def offset(t_q: int, t_k: int, align: str = "top-left") -> int:
    """The position of query 0 among the keys: 0 top-left (SDPA's is_causal); T_k - T_q bottom-right, where the
    last query sits on the last key, as in a decoding step whose cache holds the earlier tokens."""
    if align not in ("top-left", "bottom-right"):
        raise ValueError(f"unknown causal alignment {align!r}")
    return 0 if align == "top-left" else t_k - t_q


def causal(t_q: int, t_k: int, align: str = "top-left") -> torch.Tensor:
    """Query i sees keys 0..i + offset (top-left aligned by default, as SDPA's is_causal)."""
    return torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=offset(t_q, t_k, align))  # (T_q, T_k)


def padding(t_q: int, t_k: int, n: int) -> torch.Tensor:
    """The last n keys are padding: no query sees them."""
    mask = torch.ones(t_q, t_k, dtype=torch.bool)
    if n > 0:
        mask[:, max(t_k - n, 0) :] = False
    return mask


def window(t_q: int, t_k: int, w: int, align: str = "top-left") -> torch.Tensor:
    """Causal sliding window (Mistral-style): query i (at key position i + offset) sees the w keys up to it."""
    i = torch.arange(t_q).unsqueeze(1) + offset(t_q, t_k, align)  # (T_q, 1)
    j = torch.arange(t_k).unsqueeze(0)  # (1, T_k)
    return (j <= i) & (j > i - w)


def build(
    kind: str, t_q: int, t_k: int, *, n_padding: int = 0, width: int = 3, custom=None, align: str = "top-left"
) -> torch.Tensor:
    """The (T_q, T_k) boolean mask for a mask kind ('none' allows everything)."""
    if kind == "none":
        return torch.ones(t_q, t_k, dtype=torch.bool)
    if kind == "causal":
        return causal(t_q, t_k, align)
    if kind == "padding":
        return padding(t_q, t_k, n_padding)
    if kind == "window":
        return window(t_q, t_k, width, align)
    if kind == "custom":
        return torch.as_tensor(custom, dtype=torch.bool).reshape(t_q, t_k)
    raise ValueError(f"unknown mask kind {kind!r}")
