"""The Head atlas page's helpers: every head's scores made once per server, the scatter, the table, the links.

What belongs here: running `attention.lessons.atlas.model_atlases` for a model and an input, shared by every
session (the corpus's and the probe's read from the package's shipped atlases, a learner's text computed and kept
while it is asked for) in `server.atlas`'s caches, each model pass admitted against the server's memory
budget; the atlas as a table; the scatter of every head (a click opens that head on its model's page). The numbers
come from `attention.lessons.atlas`.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from attention.lessons import atlas
from attention.models.package import ModelFileError
from server import budget
from server.atlas import ATLASES, CIRCUITS
from server.warmup import lazy

from ..charts import chart
from ..results import check_length, stop
from ..state import get, put
from .atlas_settings import PREFIX  # the page's parameters in the URL: atlas_model, ...

pd = lazy("pandas")
alt = lazy("altair")
# Where a head opens: the page, its URL keys for the layer and the head
PAGES = {
    "smollm2": ("pages/chat_model.py", "Inside a chat model", "chat_layer", "chat_head"),
    "minilm": ("pages/real_model.py", "Real model", "layer", "head"),
}
TABLE_OPEN = "atlas:table"  # session: the table's expander is open (its grid is sent only then)
LAYER_COLOURS = "viridis"
GROUP_COLOURS = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a"]


def p(name: str) -> Any:
    """The page's parameter `name` (declared in atlas.SETTINGS), as the session holds it."""
    return get(PREFIX + name)


def _admitted(nbytes: int, make):
    """One model pass, admitted against the server's budget for its peak, all of it given back once the pass
    returns: what it returns (two tallies of a few KB) is not worth holding."""
    return budget.admitted(nbytes, make, held=lambda _: 0)


def atlases(model: str, source: str, text: str | None = None) -> tuple[atlas.Atlas, atlas.Atlas]:
    """The atlas of `model` on `source` without and with the first token left out: made once across the server
    while sessions ask for it at the same time, then kept (errors as `atlas.model_atlases`'s, and
    `budget.Refused` when the server's memory stays taken)."""
    key = (model, source, text if source == "text" else None)
    waiting = f"Another visitor's atlas of {atlas.MODELS[model]} on {atlas.INPUTS[source]} is being made: sharing it"
    return ATLASES.get(key, lambda: atlas.model_atlases(model, source, text, admit=_admitted), waiting)


def atlases_or_stop(model: str, source: str, text: str | None = None) -> tuple[atlas.Atlas, atlas.Atlas]:
    """`atlases`, with a missing model, an empty or too long text and a busy server said in plain words and the
    page stopped; a text cut at the atlas's tokens is said."""
    try:
        if source == "text":
            check_length(text or "", "the text")  # before tokenizing
        what = {"corpus": f"Scoring every head over the {len(atlas.corpus())} texts of the corpus (once per server)…",
                "repeated": "Scoring every head on repeated random tokens (once per server)…",
                "text": "Scoring every head on your text…"}[source]  # fmt: skip
        with st.spinner(what, show_time=True):
            pair = atlases(model, source, text)
            if source == "text" and atlas.runner(model).encode(text or "").truncated:
                st.warning(
                    f"The atlas reads at most {atlas.MAX_TOKENS} tokens: it scores the first {atlas.MAX_TOKENS}."
                )
        return pair
    except budget.Refused as exc:
        stop(f"The atlas cannot be made now: {exc}.", "warning")
    except ModelFileError as exc:  # it says what to install
        stop(f"{atlas.MODELS[model]} cannot be used: {exc}. Every other page works without it.")
    except ValueError as exc:
        stop(f"The model cannot read this text: {exc}.")


def circuit_names(model: str) -> list[str]:
    """The circuit scores a model's atlas offers as axes: SmolLM2's `atlas.CIRCUIT_SCORES`, none for MiniLM."""
    return list(atlas.CIRCUIT_SCORES) if model == "smollm2" else []


def circuit_scores(model: str, source: str, text: str | None = None) -> dict[str, Any]:
    """The circuit scores of `atlas.CIRCUIT_SCORES` for SmolLM2 on an input (shared by every session), {} for MiniLM
    (an encoder without an unembedding to attribute to); a busy server or a missing model: {} and a word. Made only
    when a circuit score is on an axis: the corpus's and the probe's are shipped; a learner's text is one more
    forward."""
    if model != "smollm2":
        return {}
    try:
        with st.spinner("What every head writes: its copying score and its direct logit attribution…"):
            key = (source, text if source == "text" else None)
            make = lambda: atlas.circuit_scores(source, text, admit=_admitted)  # noqa: E731  (shipped: corpus, probe)
            return CIRCUITS.get(key, make, "Another visitor's scores: sharing them")
    except (budget.Refused, ModelFileError, ValueError) as exc:
        st.warning(f"The circuit scores cannot be made now: {exc}.")
        return {}


def frame(a: atlas.Atlas, extra: dict[str, Any] | None = None) -> pd.DataFrame:
    """One row a head: head (L18H6), layer, head number, K/V group, then each score (NaN where missing), then the
    `extra` scores ({name: (L, h)}, the circuit scores)."""
    rows = a.rows()
    out = pd.DataFrame(rows)
    out.insert(0, "name", [atlas.head_name(r["layer"], r["head"]) for r in rows])
    for name, values in (extra or {}).items():
        out[name] = [float(values[r["layer"], r["head"]]) for r in rows]
    return out


def _scale(score: str):
    """A share is drawn from 0 to 1, whatever its largest value (a best induction score of 0.03 looks as small as
    it is); a distance in tokens from 0."""
    if score == "copying":
        return alt.Scale(domain=[-1, 1])
    if score == "logit_attribution":  # a logit, either sign: around 0
        return alt.Scale(zero=True, nice=True)
    return alt.Scale(zero=True, nice=True) if score == "mean_distance" else alt.Scale(domain=[0, 1])


def scatter(table: pd.DataFrame, x: str, y: str, colour: str, key: str = "atlas:scatter") -> tuple[int, int] | None:
    """Every head a point at (x score, y score), coloured by its layer or its K/V group, its layer, head and every
    score on hover; returns the (layer, head) clicked, or None."""
    scores = [c for c in table.columns if c in atlas.ENCODER_SCORES or c in atlas.CIRCUIT_SCORES]
    pick = alt.selection_point(name="pick", fields=["layer", "head"], on="click")
    fmt = {s: ".1f" if s == "mean_distance" else ".3f" for s in scores}
    if colour == "kv_group" and "kv_group" in table.columns:
        color = alt.Color("kv_group:N", title="K/V group", scale=alt.Scale(range=GROUP_COLOURS))
    else:
        color = alt.Color("layer:Q", title="layer", scale=alt.Scale(scheme=LAYER_COLOURS))
    tooltip = [alt.Tooltip("name:N", title="head"), "layer:O", "head:O"]
    tooltip += ["kv_group:O"] if "kv_group" in table.columns else []
    tooltip += [alt.Tooltip(f"{s}:Q", title=atlas.NAMES[s], format=fmt[s]) for s in scores]
    spec = (
        alt.Chart(table)
        .mark_circle(size=70, opacity=0.85, stroke="#222", strokeWidth=0.4)
        .encode(
            x=alt.X(f"{x}:Q", title=f"{atlas.NAMES[x]} score", scale=_scale(x)),
            y=alt.Y(f"{y}:Q", title=f"{atlas.NAMES[y]} score", scale=_scale(y)),
            color=color,
            tooltip=tooltip,
        )
        .add_params(pick)
        .properties(title=f"Every head: {atlas.NAMES[x]} across, {atlas.NAMES[y]} up", width="container")
        .to_dict()
    )
    spec.pop("datasets", None)  # the frame is sent once, by `chart`: left in, every head was drawn twice
    spec.pop("data", None)
    # the table under the chart holds what it plots (the page's own table, below, every score)
    plotted = list(dict.fromkeys(["name", "layer", "head", *(["kv_group"] if colour == "kv_group" else []), x, y]))
    plotted = [c for c in plotted if c in table.columns]
    event = chart(table, spec, height=420, key=key, table=table[plotted], on_select="rerun", selection_mode="pick")
    chosen = (event or {}).get("selection", {}).get("pick") or []
    if not chosen:
        return None
    return int(chosen[0]["layer"]), int(chosen[0]["head"])


def open_head(model: str, layer: int, head: int) -> None:
    """A link that opens the head on its model's page (the page's layer and head set for this session too, and
    in the link for a new tab)."""
    path, title, layer_key, head_key = PAGES[model]
    put(layer_key, layer)
    put(head_key, head)
    st.page_link(path, label=f"Open {atlas.head_name(layer, head)} on the {title} page", icon=":material/open_in_new:",
                 query_params={layer_key: layer, head_key: head})  # fmt: skip
