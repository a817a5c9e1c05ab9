"""The head atlas: every head of a real model scored for what it does, over a corpus or one text.

With A a head's weights (rows: queries i; columns: keys j), each score is a mean over the queries that have what
it needs (Olsson et al. 2022, TransformerLens's head detector, Clark et al. 2019 for encoders):

    previous_token   A[i, i-1]                                         queries i >= 1
    first_token      A[i, 0]: the sink's share ([CLS] for MiniLM)     queries i >= 1
    duplicate_token  sum of A[i, j] over earlier j with ids[j] = ids[i]     queries with an earlier copy
    induction        sum of A[i, j+1] over earlier j with ids[j] = ids[i], j + 1 < i    queries with one
    entropy          -sum_j A[i, j] log A[i, j] / log(keys row i may attend)         rows with > 1 key
    mean_distance    sum_j A[i, j] |i - j|, in tokens                  every query
    special          share on [CLS] and [SEP] (encoder)                every query
    sep              share on [SEP] alone (encoder): where Clark et al. found BERT's middle layers park   every query
    punctuation      share on punctuation tokens (encoder)             every query, when a text has one

`drop_first` leaves the first token out (its row and its column) and renormalises every row before scoring, so a
sink stops drowning the rest: the scores then say where the attention that is *not* parked goes. `first_token`
is still the share parked on the first token (what was left out). Scores pool over texts as sums and counts
(`Tallies`): a corpus score is the mean over every counted query of every text. Pure tensors; the models are run
by `model_atlas`, which reads `attention.models` lazily.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ...basics.params import Param

SCORES = ("previous_token", "first_token", "duplicate_token", "induction", "entropy", "mean_distance")
# MiniLM's: Clark et al.'s [CLS]/[SEP], [SEP] alone (a head can park on it while [CLS] is first_token) and punctuation
ENCODER_SCORES = (*SCORES, "special", "sep", "punctuation")
# SmolLM2's circuit scores (attention.models.circuits; the atlas page adds them): what a head writes, not where it looks
CIRCUIT_SCORES = ("logit_attribution", "copying")
NAMES = {
    "previous_token": "previous-token",
    "first_token": "first-token (sink)",
    "duplicate_token": "duplicate-token",
    "induction": "induction",
    "entropy": "entropy",
    "mean_distance": "mean distance",
    "special": "[CLS]/[SEP]",
    "sep": "[SEP]",
    "punctuation": "punctuation",
    "logit_attribution": "direct logit attribution",
    "copying": "copying",
}
DEFINITIONS = {
    "previous_token": "A[i, i−1], the weight on the token just before (queries i ≥ 1)",
    "first_token": "A[i, 0], the weight parked on the first token (queries i ≥ 1)",
    "duplicate_token": "Σ A[i, j] over earlier j holding the same token as i (queries with an earlier copy)",
    "induction": "Σ A[i, j+1] over earlier j holding the same token as i, j + 1 < i: the token after an earlier "
    "copy (queries with one)",
    "entropy": "−Σ A[i, j] log A[i, j] ÷ log(keys row i may attend): 0 on one key, 1 spread evenly (rows with "
    "more than one key)",
    "mean_distance": "Σ A[i, j]·|i − j|: how far back (or ahead) a query reads, in tokens",
    "special": "Σ A[i, j] over j = [CLS], [SEP]",
    "sep": "Σ A[i, j] over j = [SEP]: the end marker, where Clark et al. (2019) found BERT's middle layers park",
    "punctuation": "Σ A[i, j] over the punctuation tokens j",
    "logit_attribution": "the head's output c W_O at i, through the final norm (its scale frozen) onto the unembedding "
    "row of the token that comes next: how much the head itself raises that logit (queries i < T − 1)",
    "copying": "Σλ / Σ|λ| over the eigenvalues of the OV circuit W_E W_V W_O W_U (Elhage et al. 2021): +1 copies "
    "what it reads, −1 suppresses it (from the weights alone)",
}
# The scores that need a token to repeat: a text without one has no query to average them over
NEED_REPEATS = ("duplicate_token", "induction")
MAX_TOKENS = 64  # the atlas reads at most this many tokens of a text ([CLS] and [SEP] included for MiniLM)
REPEAT_LENGTH = 20  # the probe: REPEAT_LENGTH random tokens, then the same again (Olsson et al. 2022)
REPEAT_SEEDS = (0, 1, 2, 3)  # four probes pooled

MODELS = {"smollm2": "SmolLM2-135M-Instruct", "minilm": "all-MiniLM-L6-v2"}
INPUTS = {"corpus": "the shipped corpus", "repeated": "repeated random tokens", "text": "your own text"}
COLOURS = ("layer", "kv_group")
# The Head atlas page's settings (its URL keys are these names under the atlas_ prefix); the command line reads
# model and text (as --sentence)
SETTINGS: dict[str, Param] = {
    "model": Param("choice", "Model", "Whose heads the atlas scores.", default="smollm2", choices=tuple(MODELS)),
    "input": Param("choice", "Scored on", "The shipped corpus (sentences, code, a list, dialogue), random tokens "
                   "said twice (where induction heads show), or a text you type.", default="corpus",
                   choices=tuple(INPUTS)),
    "text": Param("text", "Your text", f"The atlas reads its first {MAX_TOKENS} tokens.",
                  default="The cat sat on the mat. The cat sat on the mat because the mat was warm."),
    "drop_first": Param("bool", "Leave the first token out", "Score each head with the first token's row and "
                        "column removed and every row renormalised, so a sink does not drown the rest.",
                        default=False),
    "x": Param("choice", "Across (x)", "The score along the horizontal axis.", default="previous_token",
               choices=(*ENCODER_SCORES, *CIRCUIT_SCORES)),
    "y": Param("choice", "Up (y)", "The score along the vertical axis.", default="induction",
               choices=(*ENCODER_SCORES, *CIRCUIT_SCORES)),
    "colour": Param("choice", "Colour by", "Each head's layer, or the key/value head it reads (SmolLM2: 3 query "
                    "heads a K/V head).", default="layer", choices=COLOURS),
}  # fmt: skip


# scores on one text ---------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Tallies:
    """Each score's sum over the queries it counts, per head, and how many queries it counted: scores pool over
    texts by adding both. sums: {score: (L, h) float64}; counts: {score: queries}."""

    sums: dict[str, torch.Tensor]
    counts: dict[str, int]
    texts: int = 1
    tokens: int = 0

    def __add__(self, other: Tallies) -> Tallies:
        return Tallies(
            {k: self.sums[k] + other.sums[k] for k in self.sums},
            {k: self.counts[k] + other.counts[k] for k in self.counts},
            self.texts + other.texts,
            self.tokens + other.tokens,
        )

    def scores(self) -> dict[str, torch.Tensor]:
        """{score: (L, h)} the means; NaN where no query had what the score needs."""
        return {k: (s / self.counts[k] if self.counts[k] else torch.full_like(s, math.nan)).float()
                for k, s in self.sums.items()}  # fmt: skip


def renormalised_without_first(weights: torch.Tensor) -> torch.Tensor:
    """(..., T, T) -> (..., T-1, T-1): the first query and key left out, each row divided by what is left of it."""
    rest = weights[..., 1:, 1:]
    return rest / rest.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(weights.dtype).tiny)


def repeat_targets(ids: Sequence[int] | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, T) bool masks: duplicate[i, j] = j < i holds the same token as i; induction[i, k] = k < i and the token
    before k is an earlier copy of i's (k = j + 1 for an earlier copy j)."""
    x = torch.as_tensor(list(ids) if not isinstance(ids, torch.Tensor) else ids)
    t = x.shape[0]
    same = x[:, None] == x[None, :]  # (T, T)
    earlier = torch.ones(t, t, dtype=torch.bool).tril(diagonal=-1)  # j < i
    after_copy = torch.zeros(t, t, dtype=torch.bool)
    after_copy[:, 1:] = same[:, :-1]  # key k = j + 1 where ids[j] = ids[i]
    return same & earlier, after_copy & earlier


def _masked(weights: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Sum over the rows with any True of each row's weight on its True keys: (..., T, T) -> (...), rows."""
    rows = mask.any(dim=-1)  # (T,)
    on = (weights * mask).sum(dim=-1)  # (..., T)
    return on[..., rows].sum(dim=-1), int(rows.sum())


def tallies(
    weights: torch.Tensor,
    ids: Sequence[int],
    *,
    causal: bool,
    special: Sequence[int] = (),
    sep: Sequence[int] = (),
    punctuation: Sequence[int] | None = None,
    drop_first: bool = False,
) -> Tallies:
    """Every score's sums and counts for one text: weights (L, h, T, T) of a causal (decoder) or bidirectional
    (encoder) model, the text's token ids (T,); special ([CLS] and [SEP]), sep ([SEP] alone) and punctuation key
    positions for the encoder scores (punctuation None: not scored). With drop_first, the first token is left out
    and rows renormalised."""
    w = weights.double()
    t = w.shape[-1]
    if len(ids) != t:
        raise ValueError(f"{len(ids)} token ids for weights over {t} tokens")
    sums, counts = {}, {}
    sums["first_token"], counts["first_token"] = w[..., 1:, 0].sum(dim=-1), t - 1  # what a sink parks, always
    if drop_first:
        w, ids, t = renormalised_without_first(w), list(ids)[1:], t - 1
        special, sep = [j - 1 for j in special if j > 0], [j - 1 for j in sep if j > 0]
        punctuation = None if punctuation is None else [j - 1 for j in punctuation if j > 0]
    i = torch.arange(t)
    allowed = i[None, :] <= i[:, None] if causal else torch.ones(t, t, dtype=torch.bool)  # (T, T) keys a row may read
    sums["previous_token"] = torch.diagonal(w, offset=-1, dim1=-2, dim2=-1).sum(dim=-1)
    counts["previous_token"] = max(t - 1, 0)
    duplicate, induction = repeat_targets(ids)
    sums["duplicate_token"], counts["duplicate_token"] = _masked(w, duplicate)
    sums["induction"], counts["induction"] = _masked(w, induction)
    keys = allowed.sum(dim=-1)  # (T,)
    rows = keys > 1
    entropy = -torch.special.xlogy(w, w).sum(dim=-1)  # (L, h, T) in nats
    sums["entropy"] = (entropy[..., rows] / keys[rows].double().log()).sum(dim=-1)
    counts["entropy"] = int(rows.sum())
    distance = (i[:, None] - i[None, :]).abs().double()  # (T, T)
    sums["mean_distance"], counts["mean_distance"] = (w * distance).sum(dim=(-2, -1)), t
    if not causal:
        sums["special"] = w[..., list(special)].sum(dim=(-2, -1))
        counts["special"] = t if special else 0
        sums["sep"] = w[..., list(sep)].sum(dim=(-2, -1))
        counts["sep"] = t if sep else 0
    if punctuation is not None:
        sums["punctuation"] = w[..., list(punctuation)].sum(dim=(-2, -1))
        counts["punctuation"] = t if punctuation else 0
    order = [k for k in ENCODER_SCORES if k in sums]
    return Tallies({k: sums[k] for k in order}, {k: counts[k] for k in order}, 1, t)


def head_scores(weights: torch.Tensor, ids: Sequence[int], **kw: Any) -> dict[str, torch.Tensor]:
    """Every score of every head on one text: weights (L, h, T, T) -> {score: (L, h)} (`tallies`' keywords)."""
    return tallies(weights, ids, **kw).scores()


def is_punctuation(token: str) -> bool:
    """A token made of ASCII punctuation alone ("," "." "##." "?!"); [CLS], [SEP] and [UNK] are not."""
    text = token.removeprefix("##")
    return bool(text) and all(c in string.punctuation for c in text) and not token.startswith("[")
