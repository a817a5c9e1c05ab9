"""SmolLM2's tokens: a prompt's ids (cut at a length) and each token as the text it stands for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .reader import Model


def display(token: str) -> str:
    """A byte-level token as text: "Ġthe" -> " the", "Ċ" -> "\\n"; a token holding part of a character shows its
    bytes as U+FFFD."""
    from tokenizers import decoders

    return decoders.ByteLevel().decode([token])


def encode(model: Model, text: str, max_tokens: int | None = None) -> tuple[tuple[int, ...], bool]:
    """Token ids of a text (no BOS: the file says add_bos_token false), the first `max_tokens` of them, and
    whether it was cut. ValueError when the text is empty or white space."""
    if not text.strip():  # white space alone is tokens, but nothing to continue
        raise ValueError("the prompt is empty: type at least one word")
    ids = model.tokenizer.encode(text).ids
    cut = max_tokens is not None and len(ids) > max_tokens
    return tuple(ids[:max_tokens] if cut else ids), cut


@dataclass(frozen=True, eq=False)
class Prompt:
    """A prompt as the model sees it: byte-level BPE tokens, the first `max_tokens` of them."""

    text: str
    ids: tuple[int, ...]
    tokens: tuple[str, ...]  # each token as text (" John", ","), for labels
    truncated: bool  # the text had more tokens than allowed; the rest was dropped


def prompt(model: Model, text: str, max_tokens: int | None = None) -> Prompt:
    """Tokenize a prompt (ValueError when it holds no token), cut at max_tokens."""
    ids, cut = encode(model, text, max_tokens)
    return Prompt(text, ids, labels(model, ids), cut)


def labels(model: Model, ids: Sequence[int]) -> tuple[str, ...]:
    """Each token as the text it stands for (" John"); special tokens as spelled (<|im_start|>)."""
    return tuple(display(model.vocabulary[i]) for i in ids)
