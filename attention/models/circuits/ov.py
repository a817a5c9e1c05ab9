"""A head's OV circuit: what it writes into the logits when it reads a token, and its copying score.

Row vectors throughout (x @ W). The full OV circuit is the (V, V) matrix

    M = W_E W_V^h W_O^h W_U          row s: the logits head h adds, per unit of attention, when it reads token s

computed here one source row at a time (never the V x V matrix: 49152^2 numbers for SmolLM2). Norms: a model's
RMSNorm gains are folded in (W_E -> W_E diag(g_attn), W_U -> diag(g_out) W_U, as TransformerLens's fold_ln does);
the per-token 1 / rms scale is left out, as in Elhage et al.: it multiplies a row by a positive number and so never
changes which tokens a row ranks first.

Copying score (Elhage et al. 2021): sum(lambda) / sum(|lambda|) over the eigenvalues of M, in [-1, 1], +1 when
every eigenvalue is positive real (the head copies what it reads). M = A B with A = W_E W_V (V, d_head) and
B = W_O W_U (d_head, V); the nonzero eigenvalues of AB are those of BA = W_O (W_U W_E) W_V, a d_head x d_head
matrix, so the score is exact from that small matrix and the (d_model, d_model) product W_U W_E, computed once.
sum(lambda) = trace(BA) is real; sum(|lambda|) takes the moduli of the complex eigenvalues.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch


class OVTokens(NamedTuple):
    """The top of W_E W_V W_O W_U for a few source tokens (n rows)."""

    sources: torch.Tensor  # (n,) the token ids read
    read: torch.Tensor  # (n, d_model) each source's embedding row, gains folded in
    written: torch.Tensor  # (n, d_model) read @ W_V @ W_O: what the head adds to the stream per unit of attention
    logits: torch.Tensor  # (n, V) written @ W_U: the whole row of the OV circuit
    top_values: torch.Tensor  # (n, k) the largest logits of each row
    top_ids: torch.Tensor  # (n, k) their token ids
    self_rank: torch.Tensor  # (n,) where the source token itself ranks in its row (0: written most)


class Copying(NamedTuple):
    """The copying score and the eigenvalues it comes from."""

    small: torch.Tensor  # (d_head, d_head) B A = W_O (W_U W_E) W_V
    eigenvalues: torch.Tensor  # (d_head,) complex: the nonzero eigenvalues of the V x V circuit (and zeros)
    score: torch.Tensor  # () sum(lambda).real / sum(|lambda|), in [-1, 1]


def ov_tokens(
    read: torch.Tensor,
    sources: torch.Tensor,
    w_value: torch.Tensor,
    w_out: torch.Tensor,
    unembed: Callable[[torch.Tensor], torch.Tensor],
    k: int = 10,
) -> OVTokens:
    """Rows of the OV circuit for source embeddings `read` (n, d_model): through W_V (d_model, d_head) and W_O
    (d_head, d_model), then `unembed` ((n, d_model) -> (n, V), the output norm's gain already in it)."""
    written = read @ w_value @ w_out  # (n, d_model)
    logits = unembed(written)  # (n, V)
    top = logits.topk(min(k, logits.shape[-1]), dim=-1)  # (n, k)
    own = logits.gather(1, sources[:, None])  # (n, 1)
    self_rank = (logits > own).sum(-1)  # (n,)
    return OVTokens(sources, read, written, logits, top.values, top.indices, self_rank)


def copying_score(w_value: torch.Tensor, w_out: torch.Tensor, unembed_embed: torch.Tensor) -> Copying:
    """Elhage et al.'s copying score of one head from the small matrix W_O (W_U W_E) W_V.

    w_value (d_model, d_head), w_out (d_head, d_model), unembed_embed (d_model, d_model) = W_U W_E (gains folded)."""
    small = w_out @ unembed_embed @ w_value  # (d_head, d_head)
    eigenvalues = torch.linalg.eigvals(small.double())  # (d_head,) complex
    total = eigenvalues.abs().sum()
    score = eigenvalues.sum().real / total if total > 0 else total
    return Copying(small, eigenvalues, score.float())


def copying_score_full(
    w_embed: torch.Tensor, w_value: torch.Tensor, w_out: torch.Tensor, w_unembed: torch.Tensor
) -> torch.Tensor:
    """The same score from the whole (V, V) matrix W_E W_V W_O W_U: for small vocabularies and the tests."""
    full = w_embed.double() @ w_value.double() @ w_out.double() @ w_unembed.double()  # (V, V)
    eigenvalues = torch.linalg.eigvals(full)  # (V,)
    return eigenvalues.sum().real / eigenvalues.abs().sum()
