"""A sentence as all-MiniLM-L6-v2 sees it: WordPiece tokens, [CLS] first and [SEP] last, cut at MAX_TOKENS
without tokenizing the whole of a long text."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from .reader import MAX_TOKENS, Model


@dataclass(frozen=True)
class Encoding:
    """A sentence as the model sees it: T subword tokens, [CLS] first and [SEP] last, no padding."""

    tokens: tuple[str, ...]  # "[CLS]", "the", "##piece", ..., "[SEP]"
    ids: tuple[int, ...]  # vocabulary ids
    words: tuple[int | None, ...]  # index of the white-space-separated word each token comes from; None: special
    special: tuple[int, ...]  # positions of [CLS] and [SEP]
    truncated: bool  # the sentence had more than MAX_TOKENS - 2 subword tokens; the rest was dropped


LONG_WORD = 4096
_WORD_END = re.compile(r"[\s!-/:-@\[-`{-~]")  # white space or ASCII punctuation: where a pre-token ends


def _cut(model: Model, sentence: str) -> tuple[str, bool]:
    """The start of the sentence that holds its first MAX_TOKENS - 2 subword tokens, so that a long text (a 16 MiB
    file) is never tokenized whole: tokenizing holds about 300 bytes a character.

    A token depends only on its own pre-token (the tokenizer splits at white space and punctuation, and its
    normaliser works a character at a time), so cutting a text changes only its last pre-token: a prefix is
    enough once its wanted tokens all end before that pre-token starts. Prefixes double from 4 KiB until one is.
    Returns the text to tokenize and whether tokens were dropped with what was cut off. A word of more than
    LONG_WORD characters is one [UNK] token (WordPiece gives up after 100), so its characters beyond that are
    dropped too: a 16 MiB text without a space is not tokenized whole either.
    """
    n = 4096
    while n < len(sentence):
        prefix = sentence[:n]
        pieces = model.tokenizer.pre_tokenizer.pre_tokenize_str(prefix)
        if pieces and pieces[-1][1][1] == n and pieces[-1][1][1] - pieces[-1][1][0] >= LONG_WORD:
            gap = _WORD_END.search(sentence, n)
            sentence = prefix + (sentence[gap.start() :] if gap else "")
            n *= 2
            continue
        if pieces:
            e = model.tokenizer.encode(prefix)
            ends = [end for (_, end), special in zip(e.offsets, e.special_tokens_mask, strict=True) if not special]
            # more tokens than fit (so the sentence is cut), all of those kept ending before the last pre-token
            if e.overflowing and len(ends) == MAX_TOKENS - 2 and ends[-1] <= pieces[-1][1][0]:
                return sentence[: pieces[-1][1][0]], True
        n *= 2
    return sentence, False


def encode(model: Model, sentence: str) -> Encoding:
    """WordPiece tokens of a sentence, cut at MAX_TOKENS; ValueError when it holds no token. Only the start of
    a long sentence that the tokens come from is tokenized (`_cut`)."""
    sentence, cut = _cut(model, sentence)
    e = model.tokenizer.encode(sentence)
    special = tuple(i for i, s in enumerate(e.special_tokens_mask) if s)
    if len(e.ids) <= len(special):
        raise ValueError("the sentence is empty: type at least one word")
    starts = [m.start() for m in re.finditer(r"\S+", sentence)]
    # a token's word: the last white-space word that starts at or before the token's first character
    words = tuple(None if i in special else bisect.bisect_right(starts, start) - 1
                  for i, (start, _) in enumerate(e.offsets))  # fmt: skip
    return Encoding(tuple(e.tokens), tuple(e.ids), words, special, truncated=cut or bool(e.overflowing))
