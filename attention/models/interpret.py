"""Reading attention weights: how much each key really moves the output, attention across layers, what heads do.

    norm-based attention (Kobayashi et al. 2020):  ||alpha_ij f(x_j)||,   f(x_j) = (x_j W_V + b_V) W_O^head
    attention rollout (Abnar & Zuidema 2020):      A'_l = rownorm(0.5 A_l + 0.5 I),   R_l = A'_l ... A'_1
    head behaviour scores: one number in [0, 1] per (layer, head) for previous token, next token,
    [CLS]/[SEP] sink, same word and coreference, on one sentence (coreference: the weight from a pronoun to
    the antecedent `coreference_pair` guesses, on any sentence).

Pure functions on tensors: they read the pretrained model (`attention.models.minilm`) and toy results alike.
A toy `Result` of one layer passes `result.weights[None]` where a layer axis is expected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch

from ..basics.params import Param

BEHAVIOURS = ("previous_token", "next_token", "sink", "same_word", "coreference")
# The head gallery's setting (URL key behaviour): what it scores every head for
SETTINGS: dict[str, Param] = {
    "behaviour": Param(
        "choice",
        "Behaviour",
        "What the head gallery scores every head for.",
        default="previous_token",
        choices=BEHAVIOURS,
    ),
}


# norm-based attention -------------------------------------------------------------------------------


def transformed_values(values: torch.Tensor, w_out: torch.Tensor | None) -> torch.Tensor:
    """f(x_j) = v_j W_O^head: each head's values through its own rows of the output projection.

    values (h, T_k, d_v) already hold the value bias; w_out (h*d_v, d_out), used as x @ W, or None for f = v.
    """
    if w_out is None:
        return values
    h, _, d_v = values.shape
    w = w_out.reshape(h, d_v, -1)  # (h, d_v, d_out): head k owns rows k*d_v .. (k+1)*d_v
    return values @ w  # (h, T_k, d_out)


def norm_attention(weights: torch.Tensor, transformed: torch.Tensor) -> torch.Tensor:
    """||alpha_ij f(x_j)|| = alpha_ij ||f(x_j)|| (weights are never negative): (h, T_q, T_k)."""
    value_norms = torch.linalg.vector_norm(transformed, dim=-1)  # (h, T_k)
    return weights * value_norms[:, None, :]  # (h, T_q, T_k)


def share(matrix: torch.Tensor, columns: Sequence[int]) -> torch.Tensor:
    """Each row's share of its total that lies in the given columns: (..., T_q, T_k) -> (..., T_q).

    A row whose total is 0 (a query that sees no key) has share 0.
    """
    total = matrix.sum(dim=-1)  # (..., T_q)
    part = matrix[..., list(columns)].sum(dim=-1)  # (..., T_q)
    return torch.where(total > 0, part / torch.where(total > 0, total, 1.0), 0.0)


@dataclass(frozen=True, eq=False)
class NormAttention:
    """Attention weight next to how much each key actually moves the output; h heads."""

    transformed: torch.Tensor  # (h, T_k, d_out) f(x_j) = (x_j W_V + b_V) W_O^head
    value_norms: torch.Tensor  # (h, T_k) ||f(x_j)||
    weights: torch.Tensor  # (h, T_q, T_k) alpha_ij
    norms: torch.Tensor  # (h, T_q, T_k) ||alpha_ij f(x_j)||
    weight_share: torch.Tensor  # (h, T_q) share of each query's weight on the special keys
    norm_share: torch.Tensor  # (h, T_q) share of each query's summed norms on the special keys


def norm_based(
    weights: torch.Tensor, values: torch.Tensor, w_out: torch.Tensor | None, special: Sequence[int] = ()
) -> NormAttention:
    """Kobayashi et al.'s ||alpha f(x)|| for every head, and the share of [CLS]/[SEP] (`special`) under each.

    weights (h, T_q, T_k), values (h, T_k, d_v) with their bias, w_out (h*d_v, d_out) or None.
    """
    transformed = transformed_values(values, w_out)  # (h, T_k, d_out)
    norms = norm_attention(weights, transformed)  # (h, T_q, T_k)
    return NormAttention(
        transformed=transformed,
        value_norms=torch.linalg.vector_norm(transformed, dim=-1),
        weights=weights,
        norms=norms,
        weight_share=share(weights, special),
        norm_share=share(norms, special),
    )


# attention rollout ----------------------------------------------------------------------------------


def average_heads(weights: torch.Tensor) -> torch.Tensor:
    """One attention matrix a layer: the mean over heads, (L, h, T, T) -> (L, T, T)."""
    return weights.mean(dim=1)


def add_residual(averaged: torch.Tensor, residual: float = 0.5) -> torch.Tensor:
    """A' = (1 - r) A + r I with rows renormalised to sum to 1: the residual connection as attention to oneself."""
    eye = torch.eye(averaged.shape[-1], dtype=averaged.dtype)
    mixed = (1 - residual) * averaged + residual * eye  # (L, T, T)
    return mixed / mixed.sum(dim=-1, keepdim=True)


@dataclass(frozen=True, eq=False)
class Rollout:
    """Attention rollout over L layers of T tokens; rollout[l] is how layer l's outputs mix the inputs."""

    averaged: torch.Tensor  # (L, T, T) heads averaged
    with_residual: torch.Tensor  # (L, T, T) A'_l
    rollout: torch.Tensor  # (L, T, T) R_l = A'_l @ R_(l-1), R_0 = A'_0


def rollout(weights: torch.Tensor, residual: float = 0.5) -> Rollout:
    """Abnar & Zuidema's attention rollout of (L, h, T, T) weights, every layer's product kept."""
    averaged = average_heads(weights)  # (L, T, T)
    mixed = add_residual(averaged, residual)  # (L, T, T)
    products = [mixed[0]]
    for layer in mixed[1:]:
        products.append(layer @ products[-1])  # (T, T)
    return Rollout(averaged=averaged, with_residual=mixed, rollout=torch.stack(products))


# head behaviour scores ------------------------------------------------------------------------------
# Each takes weights (..., T, T), queries in rows, and gives one number in [0, 1] per leading index.


def previous_token(weights: torch.Tensor) -> torch.Tensor:
    """Mean weight a query puts on the token just before it: mean over i = 1..T-1 of A[i, i-1]."""
    below = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)  # (..., T-1)
    return below.mean(dim=-1) if below.shape[-1] else weights.new_zeros(weights.shape[:-2])


def next_token(weights: torch.Tensor) -> torch.Tensor:
    """Mean weight a query puts on the token just after it: mean over i = 0..T-2 of A[i, i+1]."""
    above = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)  # (..., T-1)
    return above.mean(dim=-1) if above.shape[-1] else weights.new_zeros(weights.shape[:-2])


def sink(weights: torch.Tensor, special: Sequence[int]) -> torch.Tensor:
    """Mean over all queries of the weight on the special keys ([CLS], [SEP]): mean_i sum_{j special} A[i, j]."""
    return weights[..., list(special)].sum(dim=-1).mean(dim=-1)


def same_word_pairs(words: Sequence[int | None], tokens: Sequence[str] | None = None) -> torch.Tensor:
    """(T, T) bool: i != j, neither unlabelled (None: [CLS]/[SEP]), and the same word, or the identical token.

    `words` labels the word each token comes from (subword pieces share a label); with `tokens`, two
    labelled tokens with the same string ("the" ... "the") are a pair too.
    """
    t = len(words)
    labelled = torch.tensor([w is not None for w in words], dtype=torch.bool)  # (T,)
    ids = torch.tensor([-1 if w is None else w for w in words])  # (T,)
    same = ids[:, None] == ids[None, :]  # (T, T)
    if tokens is not None:
        index = {s: k for k, s in enumerate(dict.fromkeys(tokens))}
        codes = torch.tensor([index[s] for s in tokens])  # (T,)
        same |= codes[:, None] == codes[None, :]
    return same & labelled[:, None] & labelled[None, :] & ~torch.eye(t, dtype=torch.bool)


def same_word(weights: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """Mean over the queries that have a partner of the weight on their partners: sum_{j: pair(i, j)} A[i, j].

    pairs (T, T) bool from `same_word_pairs`; 0 when no query has a partner.
    """
    eligible = pairs.any(dim=-1)  # (T,)
    if not bool(eligible.any()):
        return weights.new_zeros(weights.shape[:-2])
    on_partners = (weights * pairs).sum(dim=-1)  # (..., T)
    return on_partners[..., eligible].mean(dim=-1)


def coreference(weights: torch.Tensor, pronoun: int, antecedent: int) -> torch.Tensor:
    """The weight from the pronoun's token to its antecedent's ("it" -> "animal"): A[pronoun, antecedent]."""
    return weights[..., pronoun, antecedent]


# English third-person pronouns (and the relative ones that point back the same way), lower case
PRONOUNS = frozenset(
    "it its itself he him his himself she her hers herself they them their theirs themselves who whom whose "
    "which".split()
)
# words that open a noun phrase: the word after one is taken for a noun ("the animal", "her sister")
DETERMINERS = frozenset("the a an this that these those my your our his her its their some every each".split())
# words that are never the antecedent: determiners, pronouns, auxiliaries, conjunctions, prepositions, negation
_NOT_NOUNS = (
    DETERMINERS
    | PRONOUNS
    | frozenset(
        "i me you we us is are was were be been being am do does did have has had will would can could shall should "
        "may might must not no and or but because so if when while as than then there here to of in on at by for "
        "with from into onto over under about after before up down out too very didn't don't doesn't isn't wasn't "
        "i'm it's n't".split()
    )
)
_ENDS = frozenset(".!?;")


def _word(token: str) -> str:
    return token.lower().strip("\"'“”‘’,.;:!?()")


def coreference_pair(tokens: Sequence[str]) -> tuple[int, int] | None:
    """(pronoun, antecedent) token indices on any sentence, by a documented heuristic; None when there is no pair.

    The pronoun is the first token in PRONOUNS with a word before it. Its antecedent is taken as English readers
    first guess it, the subject (first-mention) preference: the first noun of the pronoun's sentence, a noun
    being a word after a determiner ("the animal", "my sister"), else any word that is neither a function word
    nor a pronoun ("Mary said she ..."); when its sentence has none before it, the nearest such word earlier. It
    is a guess, not a resolution: "The trophy didn't fit in the suitcase because it was too small" names
    "trophy". Model tokens work too: [CLS]/[SEP] are skipped and "##" pieces belong to the word before them.
    """
    words = [_word(t) for t in tokens]
    skip = [
        t.startswith("[") and t.endswith("]") or t.startswith("##") or not w for t, w in zip(tokens, words, strict=True)
    ]
    pronoun = next((i for i, w in enumerate(words) if w in PRONOUNS and not skip[i] and i > 0), None)
    if pronoun is None:
        return None
    start = max((i + 1 for i in range(pronoun) if tokens[i][-1:] in _ENDS or words[i] in _ENDS), default=0)

    def before(i: int) -> str:  # the word before token i ("" at the start)
        j = i - 1
        while j >= 0 and skip[j]:
            j -= 1
        return words[j] if j >= 0 else ""

    def nouns(lo: int, hi: int) -> list[int]:
        candidates = [i for i in range(lo, hi) if not skip[i] and words[i] not in _NOT_NOUNS and words[i].isalpha()]
        return [i for i in candidates if before(i) in DETERMINERS] or candidates

    here = nouns(start, pronoun)
    if here:
        return pronoun, here[0]  # the subject of the pronoun's own sentence
    earlier = nouns(0, start)
    return (pronoun, earlier[-1]) if earlier else None


def find_token(tokens: Sequence[str], token: str) -> int | None:
    """Index of the first token equal to `token` (the model's lower-case piece, e.g. "it"), else None."""
    return tokens.index(token) if token in tokens else None


@dataclass(frozen=True, eq=False)
class HeadScores:
    """One score in [0, 1] per (layer, head) for each named behaviour, on one sentence."""

    previous_token: torch.Tensor  # (L, h) mean A[i, i-1]
    next_token: torch.Tensor  # (L, h) mean A[i, i+1]
    sink: torch.Tensor  # (L, h) mean weight on [CLS]/[SEP]
    same_word: torch.Tensor  # (L, h) mean weight on the other pieces of one's word or identical tokens
    coreference: torch.Tensor | None  # (L, h) A[pronoun, antecedent]; None when no pair was given

    def scores(self) -> dict[str, torch.Tensor]:
        """The behaviours that were scored, by name, in BEHAVIOURS order."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {name: v for name, v in values.items() if v is not None}


def head_scores(
    weights: torch.Tensor,
    special: Sequence[int],
    pairs: torch.Tensor,
    pronoun: int | None = None,
    antecedent: int | None = None,
) -> HeadScores:
    """Score every head of (L, h, T, T) weights; coreference only when both the pronoun and antecedent are given."""
    coref = None if pronoun is None or antecedent is None else coreference(weights, pronoun, antecedent)
    return HeadScores(
        previous_token=previous_token(weights),
        next_token=next_token(weights),
        sink=sink(weights, special),
        same_word=same_word(weights, pairs),
        coreference=coref,
    )


def best_heads(scores: HeadScores) -> dict[str, tuple[int, int]]:
    """The (layer, head) with the highest score for each scored behaviour (the first one on a tie)."""
    best = {}
    for name, s in scores.scores().items():
        index = int(torch.argmax(s))  # over the flattened (L, h) grid
        best[name] = (index // s.shape[-1], index % s.shape[-1])
    return best


# decoder head scores (causal weights: query 0 sees only itself, so it is left out of every mean) -------------


def first_token(weights: torch.Tensor) -> torch.Tensor:
    """Attention sink: mean over queries i = 1..T-1 of A[i, 0], the weight on the first token."""
    t = weights.shape[-1]
    return weights[..., 1:, 0].mean(dim=-1) if t > 1 else weights.new_zeros(weights.shape[:-2])


def self_token(weights: torch.Tensor) -> torch.Tensor:
    """Mean over queries i = 1..T-1 of A[i, i], the weight a token puts on itself."""
    diagonal = torch.diagonal(weights, dim1=-2, dim2=-1)[..., 1:]  # (..., T-1)
    return diagonal.mean(dim=-1) if diagonal.shape[-1] else weights.new_zeros(weights.shape[:-2])


def induction_targets(ids: Sequence[int]) -> torch.Tensor:
    """(T, T) bool: key j is the token right after an earlier copy of query i's token (ids[j-1] = ids[i], j <= i).

    An induction head attends there, to copy what came next last time (Olsson et al. 2022)."""
    x = torch.as_tensor(list(ids))
    t = x.shape[0]
    same = x[:, None] == x[None, :]  # (T, T): ids[i] == ids[j]
    earlier = torch.ones(t, t, dtype=torch.bool).tril(diagonal=-1)  # j < i
    targets = torch.zeros(t, t, dtype=torch.bool)
    targets[:, 1:] = (same & earlier)[:, :-1]  # key j + 1 after each earlier copy j
    return targets


def induction(weights: torch.Tensor, ids: Sequence[int]) -> torch.Tensor:
    """Mean, over the queries whose token appeared before, of the weight on the tokens after its earlier copies;
    0 when no token repeats. weights (..., T, T) -> (...)."""
    targets = induction_targets(ids)  # (T, T)
    rows = targets.any(dim=-1)  # (T,) queries that can induct
    if not bool(rows.any()):
        return weights.new_zeros(weights.shape[:-2])
    on_targets = (weights * targets).sum(dim=-1)  # (..., T)
    return on_targets[..., rows].mean(dim=-1)
