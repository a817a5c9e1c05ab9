"""The models, run for the atlas: the shipped corpus, the repeated-token probe, a learner's text, each model's
reader (SmolLM2, MiniLM, imported when first used) and the atlas of a model over an input."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from .scores import INPUTS, MAX_TOKENS, REPEAT_LENGTH, REPEAT_SEEDS, Tallies, is_punctuation, tallies
from .shipped import SHIPPED, SOURCES, key, pack, save, shipped_atlases, shipped_circuits
from .summary import Atlas, atlas


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
    """A text as one model reads it, cut at MAX_TOKENS: ids, token strings, and the encoder's special positions
    ([CLS] and [SEP]; `sep`: [SEP]'s alone)."""

    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    special: tuple[int, ...] = ()
    truncated: bool = False
    sep: tuple[int, ...] = ()


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
        return tallies(weights, text.ids, causal=self.causal, special=text.special, sep=text.sep,
                       punctuation=punctuation, drop_first=drop_first)  # fmt: skip


class SmolLM2(Runner):
    name, causal = "smollm2", True

    def __init__(self) -> None:
        from ...models import smollm2

        self.smollm2, self.model = smollm2, smollm2.load()
        self.group = self.model.group

    def encode(self, text: str) -> Text:
        p = self.smollm2.prompt(self.model, text, MAX_TOKENS)
        return Text(p.ids, p.tokens, truncated=p.truncated)

    def repeated(self, seed: int) -> Text:
        ids = self.smollm2.induction_ids(self.model, REPEAT_LENGTH, seed)  # the chat page's preset at seed 0
        return Text(ids, self.smollm2.labels(self.model, ids))

    def weights(self, text: Text) -> torch.Tensor:
        return self.smollm2.run_ids(self.model, text.ids).weights  # (L, h, T, T)

    def weights_bytes(self, tokens: int) -> int:
        return self.smollm2.run_bytes(self.model, tokens)


class MiniLM(Runner):
    name, causal, group = "minilm", False, 1

    def __init__(self) -> None:
        from ...models import minilm

        self.minilm, self.model = minilm, minilm.load()
        self.cls, self.sep = (self.model.tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]"))

    def encode(self, text: str) -> Text:
        e = self.minilm.encode(self.model, text[: 64 * MAX_TOKENS])  # 64 characters a token is more than any has
        ids, tokens = e.ids, e.tokens
        cut = len(ids) > MAX_TOKENS
        if cut:  # the first MAX_TOKENS - 2 word pieces between [CLS] and [SEP]
            ids, tokens = (*ids[: MAX_TOKENS - 1], ids[-1]), (*tokens[: MAX_TOKENS - 1], tokens[-1])
        return Text(tuple(ids), tuple(tokens), (0, len(ids) - 1), cut or e.truncated, self.seps(ids))

    def repeated(self, seed: int) -> Text:
        # ids from 2000 on: past [PAD], [unused], [UNK], [CLS], [SEP], [MASK] and the single characters
        body = repeated_tokens(self.model.word_embeddings.shape[0], 2000, REPEAT_LENGTH, seed)
        ids = (self.cls, *body, self.sep)
        tokens = tuple(self.model.tokenizer.id_to_token(i) for i in ids)
        return Text(ids, tokens, (0, len(ids) - 1), sep=self.seps(ids))

    def seps(self, ids: Sequence[int]) -> tuple[int, ...]:
        """Where [SEP] stands: at the end, and wherever a text holds "[SEP]" itself (the tokenizer reads it as one)."""
        return tuple(j for j, i in enumerate(ids) if i == self.sep)

    @torch.no_grad()
    def weights(self, text: Text) -> torch.Tensor:
        x = self.minilm.embed(self.model, torch.tensor(text.ids))  # (T, d_model)
        out = []
        for layer in self.model.layers:
            run = self.minilm.encoder_layer(layer, x, self.model.heads, self.model.eps)
            out.append(run.weights)
            x = run.output
        return torch.stack(out)  # (L, h, T, T)

    def weights_bytes(self, tokens: int) -> int:
        return self.minilm.forward_bytes(tokens) + 4 * len(self.model.layers) * self.model.heads * tokens * tokens


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
    shipped: bool = True,
) -> tuple[Atlas, Atlas]:
    """The atlas of `model` on `source` (corpus, repeated or text) as it is and with the first token left out: the
    shipped pair for the corpus and the probe (`shipped.shipped_atlases`; `shipped=False` computes it anyway), else
    from one pass: each text run through the model in turn, its weights scored both ways and let go of.
    `admit(nbytes, make)` runs each pass (a server admits it against its memory budget first)."""
    if shipped and (pair := shipped_atlases(model, source, corpus())) is not None:
        return pair
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


def circuit_scores(
    source: str,
    text: str | None = None,
    admit: Callable[[int, Callable[[], Any]], Any] | None = None,
    shipped: bool = True,
) -> dict[str, torch.Tensor]:
    """SmolLM2's circuit scores (CIRCUIT_SCORES) on an input: each head's copying score (from the weights alone) and
    its direct logit attribution to the token that comes next, averaged over every position of every text:
    {name: (L, h)}, without logit_attribution when no text has two tokens. The corpus's and the probe's are shipped
    (`shipped=False` computes them anyway); `admit` as `model_atlases`'."""
    if shipped and (found := shipped_circuits(source, corpus())) is not None:
        return found
    from ...models import smollm2
    from ...models.circuits import chat

    model = smollm2.load()
    total, count = torch.zeros(model.n_layers, model.heads), 0
    for t in inputs("smollm2", source, text):
        if len(t.ids) < 2:
            continue
        make = lambda ids=t.ids: chat.next_token_attribution(model, ids)  # noqa: E731  (L, h, T-1)
        values = make() if admit is None else admit(smollm2.run_bytes(model, len(t.ids)), make)
        total, count = total + values.sum(-1), count + values.shape[-1]
    out = {"copying": chat.copying_scores(model)}
    if count:
        out["logit_attribution"] = total / count
    return out


def ship(path: Path = SHIPPED) -> list[tuple[str, str]]:
    """Compute what never changes (each model's atlases on the corpus and the probe, and SmolLM2's circuit scores on
    them) from the models and write it where `model_atlases` and `circuit_scores` find it; returns what was written."""
    entries = {}
    for m in RUNNERS:
        for s in SOURCES:
            extra = circuit_scores(s, shipped=False) if m == "smollm2" else None
            entries[m, s] = pack(model_atlases(m, s, shipped=False), key(m, s, corpus()), extra)
    save(entries, path)
    return list(entries)
