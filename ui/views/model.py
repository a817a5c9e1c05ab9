"""The Real model page's helpers: the pretrained model's runs, cached and bounded, and the figures only it draws.

What belongs here: loading all-MiniLM-L6-v2 and running it on a sentence, shared by every session through small
bounded caches (server/shared.py; its errors turned into messages), the tokens as the model sees them, the model
view (every layer and head at once, a click selecting one), the head gallery's buttons, and the callbacks they need
(here and not in the page: a function defined in a page holds the page's globals for as long as the session keeps
the button). Only the Real model page imports this module, so the other pages never import safetensors or
tokenizers. The numbers come from `attention.models.minilm` and `attention.models.interpret`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import streamlit as st
import torch

from attention import Result
from attention.models import minilm
from server import budget
from server.model import HEADS, READINGS

from ..heatmaps import heatmap
from ..markup import labels
from ..results import stop
from ..state import get, put

# Each head's map is this wide, side by side as many as the main column holds: two beside the sidebar of a 1024 px
# window, three in presenter mode (four a row drew them 113 to 176 px wide there: labels and cells unreadable)
HEAD_MAP_W = 270
MODEL_VIEW_MAX = 64  # the model view draws 72 T x T maps; beyond this many tokens it is one blur

BEHAVIOURS = {
    "previous_token": "previous token",
    "next_token": "next token",
    "sink": "[CLS]/[SEP] sink",
    "same_word": "same word",
    "coreference": "coreference (a pronoun → its likely antecedent)",
}


# --------------------------------------------------------------------------- the model, run and cached


@budget.evictor
def _free_cached() -> None:
    """The budget is short: drop the kept Readings and head Results (their bytes return once no session draws them)."""
    READINGS.clear()
    HEADS.clear()


def _read(sentence: str) -> minilm.Reading:
    """Make a Reading, admitted against the server's budget for the pass's temporaries and the Reading; the
    Reading's own bytes stay taken while anything holds it."""
    model = minilm.load()
    tokens = len(minilm.encode(model, sentence).ids)
    kept = minilm.reading_bytes(tokens, weights_upto=MODEL_VIEW_MAX)
    return budget.admitted(
        minilm.forward_bytes(tokens) + kept,
        lambda: minilm.read(model, sentence, weights_upto=MODEL_VIEW_MAX),
        held=lambda _: kept,
    )


def run(sentence: str) -> tuple[minilm.Model, minilm.Reading]:
    """The model (read once per process) and its Reading of the sentence: made once across the server while
    sessions ask for it at the same time, then kept for the next; errors as in `minilm.read`, and
    `server.budget.Refused` when the server's memory is taken for longer than it waits."""
    model = minilm.load()
    waiting = "Another visitor's run of the model on this sentence is under way: sharing it"
    return model, READINGS.get(sentence, lambda: _read(sentence), waiting)


def run_or_stop(sentence: str) -> tuple[minilm.Model, minilm.Reading]:
    """`run`, with a missing or altered model and an empty sentence explained and the page stopped; a sentence
    cut at the model's 512 tokens is said."""
    try:
        model, result = run(sentence)
    except budget.Refused as exc:
        stop(f"The model cannot run now: {exc}.", "warning")
    except minilm.ModelFileError as exc:
        stop(f"The pretrained model cannot be used: {exc}. Install it with `{minilm.INSTALL}`; "
             "every other page works without it.")  # fmt: skip
    except ValueError as exc:
        stop(f"The model cannot read this sentence: {exc}.")
    if result.encoding.truncated:
        st.warning(
            f"The model reads at most {minilm.MAX_TOKENS} tokens, [CLS] and [SEP] included: this page shows "
            f"the first {minilm.MAX_TOKENS - 2} subword tokens of the sentence."
        )
    return model, result


def head_result(reading: minilm.Reading, layer: int, head: int, toy_seed: int | None = None) -> Result:
    """`minilm.head_result` of a head on the Reading (never running the model again), kept a while for the
    next rerun or session that asks for the same head."""
    key = (reading.sentence, layer, head, toy_seed)
    return HEADS.get(key, lambda: minilm.head_result(minilm.load(), reading, layer, head, toy_seed))


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


def model_view(run: minilm.Reading, layer: int, head: int, key: str = "rm:view") -> None:
    """Every head of every layer: one heatmap a head (HEAD_MAP_W px wide, as many side by side as the window
    holds), its 6 layers stacked top to bottom and parted by a grey row. A click on a row selects that layer and
    head, and follows that query token.

    One heatmap per head rather than 72 tiny ones (taller than the screen: each heatmap is at least 100 px high)
    or one tiled image of all (its click reports a row only, which names the layer but not the head).
    """
    t, layers, heads = run.weights.shape[2], run.weights.shape[0], run.weights.shape[1]
    tok = labels(run.tokens)
    keys = [str(j + 1) for j in range(t)]  # numbers: a token's name would not fit under a column a few px wide
    rows = [f"L{lay} {name}" if name else "" for lay in range(layers) for name in [*tok, ""]][:-1]
    blocked = torch.ones(layers * (t + 1) - 1, t, dtype=torch.bool)
    blocked[t :: t + 1] = False  # the separator rows
    grid = st.container(horizontal=True, wrap=True, key=f"{key}:grid")
    for h in range(heads):
        stacked = torch.zeros(layers * (t + 1) - 1, t)
        for lay in range(layers):
            stacked[lay * (t + 1) : lay * (t + 1) + t] = run.weights[lay, h]
        picked = heatmap(
            stacked, rows, keys, title=f"h{h}" + (" ◆" if h == head else ""), kind="weights", blocked=blocked,
            key=f"{key}:{h}", container=grid.container(width=HEAD_MAP_W), selectable=True, legend=False,
            annotate=False,
        )  # fmt: skip
        if picked is not None and picked % (t + 1) < t:
            new = (picked // (t + 1), h, picked % (t + 1))
            if new != (layer, head, get("token")):
                put("layer", new[0])
                put("head", new[1])
                put("token", new[2])
                st.rerun()
