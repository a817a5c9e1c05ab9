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
    punctuation      share on punctuation tokens (encoder)             every query, when a text has one

`drop_first` leaves the first token out (its row and its column) and renormalises every row before scoring, so a
sink stops drowning the rest: the scores then say where the attention that is *not* parked goes. `first_token`
is still the share parked on the first token (what was left out). Scores pool over texts as sums and counts
(`Tallies`): a corpus score is the mean over every counted query of every text. Pure tensors; the models are run
by `model_atlas`, which reads `attention.models` lazily.
"""

from __future__ import annotations

import functools
import json
import math
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import torch

from ...basics.params import Param

SCORES = ("previous_token", "first_token", "duplicate_token", "induction", "entropy", "mean_distance")
ENCODER_SCORES = (*SCORES, "special", "punctuation")  # MiniLM's: Clark et al.'s [CLS]/[SEP] and punctuation
NAMES = {
    "previous_token": "previous-token",
    "first_token": "first-token (sink)",
    "duplicate_token": "duplicate-token",
    "induction": "induction",
    "entropy": "entropy",
    "mean_distance": "mean distance",
    "special": "[CLS]/[SEP]",
    "punctuation": "punctuation",
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
    "punctuation": "Σ A[i, j] over the punctuation tokens j",
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
               choices=ENCODER_SCORES),
    "y": Param("choice", "Up (y)", "The score along the vertical axis.", default="induction",
               choices=ENCODER_SCORES),
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
    punctuation: Sequence[int] | None = None,
    drop_first: bool = False,
) -> Tallies:
    """Every score's sums and counts for one text: weights (L, h, T, T) of a causal (decoder) or bidirectional
    (encoder) model, the text's token ids (T,); special ([CLS]/[SEP]) and punctuation key positions for the encoder
    scores (punctuation None: not scored). With drop_first, the first token is left out and rows renormalised."""
    w = weights.double()
    t = w.shape[-1]
    if len(ids) != t:
        raise ValueError(f"{len(ids)} token ids for weights over {t} tokens")
    sums, counts = {}, {}
    sums["first_token"], counts["first_token"] = w[..., 1:, 0].sum(dim=-1), t - 1  # what a sink parks, always
    if drop_first:
        w, ids, t = renormalised_without_first(w), list(ids)[1:], t - 1
        special = [j - 1 for j in special if j > 0]
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


# the atlas ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Atlas:
    """Every head of a model scored over some input: scores {score: (L, h)} (NaN: no query had what it needs)."""

    model: str  # a key of MODELS
    source: str  # a key of INPUTS
    drop_first: bool
    scores: dict[str, torch.Tensor]
    counts: dict[str, int]  # queries each score averaged over
    texts: int
    tokens: int
    group: int  # query heads that read one K/V head (1: every head its own)

    @property
    def layers(self) -> int:
        return next(iter(self.scores.values())).shape[0]

    @property
    def heads(self) -> int:
        return next(iter(self.scores.values())).shape[1]

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.scores.values())

    def missing_words(self) -> str:
        """Why scores are missing, in a sentence ("" when none is)."""
        repeats = [NAMES[k] for k in self.missing() if k in NEED_REPEATS]
        out = []
        if repeats:
            out.append(f"The {' and '.join(repeats)} scores need a token that appears twice, and this input has "
                       "none: they are left out rather than shown as zeros.")  # fmt: skip
        if "punctuation" in self.missing():
            out.append("The punctuation score needs a punctuation mark, and this input has none: it is left out.")
        return " ".join(out)

    def missing(self) -> list[str]:
        """The scores no query of the input could be averaged over (no repeated token: duplicate, induction)."""
        return [k for k, n in self.counts.items() if n == 0]

    def rows(self) -> list[dict[str, Any]]:
        """One dict a head, layer by layer: layer, head, kv_group (grouped-query models), then each score (None
        where missing)."""
        out = []
        for layer in range(self.layers):
            for head in range(self.heads):
                row: dict[str, Any] = {"layer": layer, "head": head}
                if self.group > 1:
                    row["kv_group"] = head // self.group
                for k, s in self.scores.items():
                    v = float(s[layer, head])
                    row[k] = None if math.isnan(v) else round(v, 6)
                out.append(row)
        return out


def atlas(model: str, source: str, tallied: Tallies, group: int, drop_first: bool) -> Atlas:
    return Atlas(model, source, drop_first, tallied.scores(), dict(tallied.counts), tallied.texts, tallied.tokens,
                 group)  # fmt: skip


def head_name(layer: int, head: int) -> str:
    return f"L{layer}H{head}"


def ranked(scores: torch.Tensor, n: int | None = None) -> list[tuple[int, int, float]]:
    """Heads by a score, highest first (ties: lower layer, then lower head): [(layer, head, score)]."""
    heads = scores.shape[1]
    flat = scores.flatten()
    order = sorted(range(flat.numel()), key=lambda k: (-float(flat[k]), k))
    out = [(k // heads, k % heads, float(flat[k])) for k in order if not math.isnan(float(flat[k]))]
    return out[:n] if n is not None else out


# What counts as a head "doing" a behaviour, for the sentences below: a score past these lines (of 1)
STRONG = {"previous_token": 0.5, "first_token": 0.5, "duplicate_token": 0.3, "induction": 0.3, "special": 0.5,
          "punctuation": 0.3}  # fmt: skip
SINK_LAYER = 0.5  # a layer whose heads park, on average, more than half their attention on the first token


def top_sentences(a: Atlas, n: int = 3) -> list[str]:
    """Each score's strongest heads in a sentence: "L18H6 is the strongest induction head on repeated random
    tokens: 0.91; then L14H0 (0.62), L20H3 (0.55)." Scores with no query to average are said to be missing."""
    out = []
    for k, s in a.scores.items():
        if a.counts[k] == 0:
            continue
        top = ranked(s, n)
        what = "broadest" if k == "entropy" else "farthest-reading" if k == "mean_distance" else "strongest"
        noun = f"{NAMES[k]} head" if k not in ("entropy", "mean_distance") else "head"
        fmt = "{:.1f}" if k == "mean_distance" else "{:.2f}"
        rest = ", ".join(f"{head_name(lay, h)} ({fmt.format(v)})" for lay, h, v in top[1:])
        lay, h, v = top[0]
        unit = " tokens" if k == "mean_distance" else ""
        then = f"; then {rest}." if rest else "."
        if k in STRONG and v < STRONG[k]:  # a weak best is no "strongest X head": said as the highest score
            out.append(f"No head reaches {STRONG[k]} as {_a(NAMES[k])} head on {INPUTS[a.source]}; the highest "
                       f"score is {head_name(lay, h)}'s, {fmt.format(v)}{then}")  # fmt: skip
            continue
        out.append(f"{head_name(lay, h)} is the {what} {noun} on {INPUTS[a.source]}: {fmt.format(v)}{unit}{then}")
    return out


def _a(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def _layers_in_words(layers: list[int], total: int) -> str:
    """Where a set of layers sits in a model of `total` layers: "layers 0-3 (early)"."""
    lo, hi, mid = min(layers), max(layers), sorted(layers)[len(layers) // 2]
    part = "early" if mid < total / 3 else "in the middle" if mid < 2 * total / 3 else "late"
    if len(layers) == 1:
        return f"layer {lo}, {part} in the model's {total}"
    span = f"layer {lo}" if lo == hi else f"layers {lo}–{hi}"
    return f"{span}, most of them {part} (median layer {mid} of {total})"


def findings(a: Atlas) -> list[str]:
    """What the atlas says about the model, in sentences a learner can check against the scatter and table: where
    sinks start, where previous-token, duplicate and induction heads sit, which heads park on [CLS]/[SEP] or
    punctuation, how entropy changes with depth. Every number is computed from the scores."""
    out = []
    total, heads = a.layers, a.heads
    if a.counts.get("first_token"):
        per_layer = a.scores["first_token"].mean(dim=1)  # (L,)
        sunk = [lay for lay in range(total) if float(per_layer[lay]) > SINK_LAYER]
        if sunk:
            start = next(lay for lay in range(total) if all(float(per_layer[m]) > SINK_LAYER for m in range(lay, total))
                         ) if float(per_layer[-1]) > SINK_LAYER else None  # fmt: skip
            where = (f"from layer {start} on, every layer's heads" if start is not None else
                     f"in {len(sunk)} of {total} layers (from {sunk[0]} to {sunk[-1]}), the heads")  # fmt: skip
            then = ("The other scores here leave it out." if a.drop_first else
                    "Switch on “Leave the first token out” to see where the rest goes.")  # fmt: skip
            out.append(f"Sinks: {where} park more than half of their attention on the first token, on average "
                       f"(layer means up to {float(per_layer.max()):.2f}). {then}")  # fmt: skip
        else:
            out.append(f"No layer parks more than half of its attention on the first token on average (the largest "
                       f"layer mean is {float(per_layer.max()):.2f}, layer {int(per_layer.argmax())}).")  # fmt: skip
    for k in ("previous_token", "duplicate_token", "induction", "special", "punctuation"):
        if k not in a.scores or not a.counts[k]:
            continue
        strong = [(lay, h, v) for lay, h, v in ranked(a.scores[k]) if v >= STRONG[k]]
        if strong:
            out.append(f"{len(strong)} of {total * heads} heads score {STRONG[k]} or more as {NAMES[k]} heads: "
                       f"{_layers_in_words([lay for lay, _, _ in strong], total)}.")  # fmt: skip
        else:
            best = ranked(a.scores[k], 1)[0]
            out.append(f"No head scores {STRONG[k]} or more as {_a(NAMES[k])} head here (the best, "
                       f"{head_name(best[0], best[1])}, {best[2]:.2f}).")  # fmt: skip
    if a.counts.get("entropy"):
        per_layer = a.scores["entropy"].mean(dim=1)
        first, last = float(per_layer[0]), float(per_layer[-1])
        trend = "spreads wider" if last > first + 0.05 else "narrows" if last < first - 0.05 else "stays as wide"
        out.append(f"Entropy: attention {trend} with depth (layer 0's heads average {first:.2f} of the most a row "
                   f"could spread, layer {total - 1}'s {last:.2f}).")  # fmt: skip
    return out


# the models, run -------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def corpus() -> tuple[tuple[str, str], ...]:
    """The shipped corpus (atlas_corpus.json beside this module): (kind, text) pairs."""
    data = json.loads(resources.files(__package__).joinpath("atlas_corpus.json").read_text(encoding="utf-8"))
    return tuple((t["kind"], t["text"]) for t in data["texts"])


def repeated_tokens(vocab: int, first: int, length: int = REPEAT_LENGTH, seed: int = 0) -> list[int]:
    """`length` distinct random ids from first .. vocab - 1 (seeded), then the same again."""
    g = torch.Generator().manual_seed(seed)
    run = (torch.randperm(vocab - first, generator=g)[:length] + first).tolist()
    return run * 2


@dataclass(frozen=True)
class Text:
    """A text as one model reads it, cut at MAX_TOKENS: ids, token strings, and the encoder's special positions."""

    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    special: tuple[int, ...] = ()
    truncated: bool = False


class Runner:
    """How the atlas reads one model: its texts' tokens, its weights (L, h, T, T) on them, what it scores."""

    name: str
    causal: bool
    group: int

    def encode(self, text: str) -> Text: ...
    def repeated(self, seed: int) -> Text: ...
    def weights(self, text: Text) -> torch.Tensor: ...
    def weights_bytes(self, tokens: int) -> int: ...

    def text_tallies(self, weights: torch.Tensor, text: Text, drop_first: bool) -> Tallies:
        """`tallies` of the text's weights (L, h, T, T), with the encoder's special and punctuation keys."""
        punctuation = None if self.causal else [j for j, tok in enumerate(text.tokens) if is_punctuation(tok)]
        return tallies(weights, text.ids, causal=self.causal, special=text.special, punctuation=punctuation,
                       drop_first=drop_first)  # fmt: skip


class SmolLM2(Runner):
    name, causal = "smollm2", True

    def __init__(self) -> None:
        from ...models import smollm2

        self.S, self.model = smollm2, smollm2.load()
        self.group = self.model.group

    def encode(self, text: str) -> Text:
        p = self.S.prompt(self.model, text, MAX_TOKENS)
        return Text(p.ids, p.tokens, truncated=p.truncated)

    def repeated(self, seed: int) -> Text:
        ids = self.S.induction_ids(self.model, REPEAT_LENGTH, seed)  # the chat page's preset at seed 0
        return Text(ids, self.S.labels(self.model, ids))

    def weights(self, text: Text) -> torch.Tensor:
        return self.S.run_ids(self.model, text.ids).weights  # (L, h, T, T)

    def weights_bytes(self, tokens: int) -> int:
        return self.S.run_bytes(self.model, tokens)


class MiniLM(Runner):
    name, causal, group = "minilm", False, 1

    def __init__(self) -> None:
        from ...models import minilm

        self.M, self.model = minilm, minilm.load()
        self.cls, self.sep = (self.model.tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]"))

    def encode(self, text: str) -> Text:
        e = self.M.encode(self.model, text[: 64 * MAX_TOKENS])  # 64 characters a token is more than any has
        ids, tokens = e.ids, e.tokens
        cut = len(ids) > MAX_TOKENS
        if cut:  # the first MAX_TOKENS - 2 word pieces between [CLS] and [SEP]
            ids, tokens = (*ids[: MAX_TOKENS - 1], ids[-1]), (*tokens[: MAX_TOKENS - 1], tokens[-1])
        return Text(tuple(ids), tuple(tokens), (0, len(ids) - 1), cut or e.truncated)

    def repeated(self, seed: int) -> Text:
        # ids from 2000 on: past [PAD], [unused], [UNK], [CLS], [SEP], [MASK] and the single characters
        body = repeated_tokens(self.model.word_embeddings.shape[0], 2000, REPEAT_LENGTH, seed)
        ids = (self.cls, *body, self.sep)
        tokens = tuple(self.model.tokenizer.id_to_token(i) for i in ids)
        return Text(ids, tokens, (0, len(ids) - 1))

    @torch.no_grad()
    def weights(self, text: Text) -> torch.Tensor:
        x = self.M.embed(self.model, torch.tensor(text.ids))  # (T, d_model)
        out = []
        for layer in self.model.layers:
            run = self.M.encoder_layer(layer, x, self.model.heads, self.model.eps)
            out.append(run.weights)
            x = run.output
        return torch.stack(out)  # (L, h, T, T)

    def weights_bytes(self, tokens: int) -> int:
        return self.M.forward_bytes(tokens) + 4 * len(self.model.layers) * self.model.heads * tokens * tokens


RUNNERS: dict[str, Callable[[], Runner]] = {"smollm2": SmolLM2, "minilm": MiniLM}


@functools.lru_cache(maxsize=2)
def runner(model: str) -> Runner:
    """The model's runner, its model loaded once per process (ModelFileError when its package is missing)."""
    if model not in RUNNERS:
        raise ValueError(f"model must be one of {', '.join(RUNNERS)}, got {model!r}")
    return RUNNERS[model]()


def inputs(model: str, source: str, text: str | None = None) -> list[Text]:
    """The texts an atlas reads: the corpus, the repeated-token probes, or the one text (ValueError when empty)."""
    r = runner(model)
    if source == "corpus":
        return [r.encode(t) for _, t in corpus()]
    if source == "repeated":
        return [r.repeated(seed) for seed in REPEAT_SEEDS]
    if source == "text":
        return [r.encode(text or "")]
    raise ValueError(f"input must be one of {', '.join(INPUTS)}, got {source!r}")


def model_atlases(
    model: str,
    source: str,
    text: str | None = None,
    admit: Callable[[int, Callable[[], Any]], Any] | None = None,
) -> tuple[Atlas, Atlas]:
    """The atlas of `model` on `source` (corpus, repeated or text) as it is and with the first token left out, from
    one pass: each text run through the model in turn, its weights scored both ways and let go of.
    `admit(nbytes, make)` runs each pass (a server admits it against its memory budget first)."""
    r = runner(model)
    kept, dropped = None, None
    for t in inputs(model, source, text):

        def make(t: Text = t) -> tuple[Tallies, Tallies]:
            w = r.weights(t)  # (L, h, T, T)
            return r.text_tallies(w, t, False), r.text_tallies(w, t, True)

        a, b = make() if admit is None else admit(r.weights_bytes(len(t.ids)), make)
        kept, dropped = (a, b) if kept is None else (kept + a, dropped + b)
    return atlas(model, source, kept, r.group, False), atlas(model, source, dropped, r.group, True)


def model_atlas(model: str, source: str, text: str | None = None, drop_first: bool = False) -> Atlas:
    """One of `model_atlases`: with the first token left out or not."""
    return model_atlases(model, source, text)[int(drop_first)]
