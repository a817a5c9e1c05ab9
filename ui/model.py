"""The Real model page's helpers: the pretrained model's runs, cached and bounded, and the figures only it draws.

What belongs here: loading all-MiniLM-L6-v2 and running it on a sentence, shared by every session through small
bounded caches (with its errors turned into messages), the tokens as the model sees them, the model view (every
layer and head at once, a click selecting one), the head gallery's buttons, and the callbacks they need (here
and not in the page: a function defined in a page holds the page's globals for as long as the session keeps the
button). Only the Real model page imports this module, so the other pages never import safetensors or tokenizers.
The numbers come from `attention.pretrained` and `attention.interpret`.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Sequence

import streamlit as st
import torch

from attention import Result, pretrained

from .heatmaps import heatmap
from .markup import labels
from .state import finish, get, put

# A run keeps every intermediate: about 0.5 MB at 16 tokens, 8 MB at 64, 120 MB at 512 (mostly the 6 x 12
# attention matrices). The server has 690 MB for everyone, so runs of up to SMALL_TOKENS tokens share a cache
# of a few entries and one longer run is kept, for ten minutes.
SMALL_TOKENS = 64
# The heatmap component draws at least 120 px wide (wider overlaps its neighbour): four a row fit the main
# column of a 1024 px window beside the sidebar (six do not)
HEADS_A_ROW = 4
MODEL_VIEW_MAX = 64  # the model view draws 72 T x T maps; beyond this many tokens it is one blur
_LARGE_LOCK = threading.Lock()

BEHAVIOURS = {
    "previous_token": "previous token",
    "next_token": "next token",
    "sink": "[CLS]/[SEP] sink",
    "same_word": "same word",
    "coreference": f"coreference “{pretrained.DEFAULT_PRONOUN}” → “{pretrained.DEFAULT_ANTECEDENT}”",
}


# --------------------------------------------------------------------------- the model, run and cached


@st.cache_resource(max_entries=4, ttl=3600, show_spinner=False)
def _run_small(sentence: str) -> pretrained.ModelRun:
    return pretrained.forward(pretrained.load(), sentence)


@st.cache_resource(max_entries=1, ttl=600, show_spinner=False)
def _run_large(sentence: str) -> pretrained.ModelRun:
    with _LARGE_LOCK:
        _run_large.clear()  # let go of the old long run before computing the new one, not after
        return pretrained.forward(pretrained.load(), sentence)


def run(sentence: str) -> tuple[pretrained.Model, pretrained.ModelRun]:
    """The model (read once per process) and its run on the sentence, cached by length; errors as in `forward`."""
    model = pretrained.load()
    length = len(model.tokenizer.encode(sentence).ids)
    return model, (_run_small if length <= SMALL_TOKENS else _run_large)(sentence)


def run_or_stop(sentence: str) -> tuple[pretrained.Model, pretrained.ModelRun]:
    """`run`, with a missing or altered model and an empty sentence explained and the page stopped; a sentence
    cut at the model's 512 tokens is said."""
    try:
        model, result = run(sentence)
    except pretrained.ModelFileError as exc:
        st.error(f"The pretrained model cannot be used: {exc}. Install it with `{pretrained.INSTALL}`; "
                 "every other page works without it.")  # fmt: skip
        finish()
        st.stop()
    except ValueError as exc:
        st.error(f"The model cannot read this sentence: {exc}.")
        finish()
        st.stop()
    if result.encoding.truncated:
        st.warning(
            f"The model reads at most {pretrained.MAX_TOKENS} tokens, [CLS] and [SEP] included: this page shows "
            f"the first {pretrained.MAX_TOKENS - 2} subword tokens of the sentence."
        )
    return model, result


@st.cache_resource(max_entries=8, ttl=3600, show_spinner=False)
def head_result(sentence: str, layer: int, head: int, toy_seed: int | None = None) -> Result:
    """`pretrained.head_result` of the sentence's run, cached by these small arguments: the head's Config holds its
    three 384 x 32 matrices and would make a slow cache key."""
    model, ran = run(sentence)
    return pretrained.head_result(model, ran, layer, head, toy_seed)


# --------------------------------------------------------------------------- figures


def token_chips(tokens: Sequence[str]) -> None:
    """The tokens as the model sees them, one chip each: [CLS]/[SEP] and ## word pieces set apart."""
    chips = []
    for t in tokens:
        kind = "special" if t in ("[CLS]", "[SEP]", "[UNK]") else "piece" if t.startswith("##") else "word"
        colour = {"special": "#fde2c4", "piece": "#dbe9f6", "word": "#eeeeee"}[kind]
        chips.append(
            f'<code style="background:{colour};border-radius:4px;padding:1px 5px;margin:0 3px 4px 0;'
            f'display:inline-block;color:#222">{html.escape(t)}</code>'
        )
    st.html(f'<div style="line-height:1.9">{"".join(chips)}</div>')


def go_to(layer: int, head: int) -> None:
    """Button callback: show this layer and head."""
    put("layer", int(layer))
    put("head", int(head))


def model_view(run: pretrained.ModelRun, layer: int, head: int, key: str = "rm:view") -> None:
    """Every head of every layer: one heatmap a head (four side by side, three rows of them), its 6 layers stacked
    top to bottom and parted by a grey row. A click on a row selects that layer and head, and follows that query token.

    One heatmap per head rather than 72 tiny ones (taller than the screen: each heatmap is at least 100 px high)
    or one tiled image of all (its click reports a row only, which names the layer but not the head).
    """
    t, layers, heads = run.weights.shape[2], run.weights.shape[0], run.weights.shape[1]
    tok = labels(run.tokens)
    keys = [str(j + 1) for j in range(t)]  # numbers: a token's name would not fit under a column a few px wide
    rows = [f"L{lay} {name}" if name else "" for lay in range(layers) for name in [*tok, ""]][:-1]
    blocked = torch.ones(layers * (t + 1) - 1, t, dtype=torch.bool)
    blocked[t :: t + 1] = False  # the separator rows
    for h in range(heads):
        if h % HEADS_A_ROW == 0:
            cols = st.columns([1.5] + [1] * (HEADS_A_ROW - 1))
        stacked = torch.zeros(layers * (t + 1) - 1, t)
        for lay in range(layers):
            stacked[lay * (t + 1) : lay * (t + 1) + t] = run.weights[lay, h]
        picked = heatmap(
            stacked, rows, keys, title=f"h{h}" + (" ◆" if h == head else ""), kind="weights", blocked=blocked,
            key=f"{key}:{h}", container=cols[h % HEADS_A_ROW], selectable=True, legend=False, annotate=False,
            row_labels=h % HEADS_A_ROW == 0,
        )  # fmt: skip
        if picked is not None and picked % (t + 1) < t:
            new = (picked // (t + 1), h, picked % (t + 1))
            if new != (layer, head, get("token")):
                put("layer", new[0])
                put("head", new[1])
                put("token", new[2])
                st.rerun()
