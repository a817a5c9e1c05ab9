"""Rendering helpers shared by every page: state in the URL, controls, heatmaps, walkthrough.

Pages stay thin: they read controls (`controls`), ask the `attention` package for a
Result (`compute`), and render it with the helpers here. No attention math here either:
everything shown is a field of the Result.

State: each parameter has one canonical value in `st.session_state["p:NAME"]`, seeded
from the URL once per session and written back to the URL after every run, so values
survive page switches (widget state does not) and a copied link opens the same view.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import gzip
import hashlib
import io
import json
import math
import re
import shlex
import struct
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st
import torch

from attention import Config, Result, experiments, export, masks, presets
from attention import compute as _compute_uncached
from attention.config import MASKS, MAX_TOKENS, RASCHKA_SENTENCE, tokenize
from attention.weights import projection_numbers

# Streamlit runs gc.collect(2) after every script run (runner.postScriptGC). With torch, pandas and Altair
# loaded that walks some 250,000 long-lived objects, ~150 ms holding the GIL, once per rerun of every session:
# most of the server's CPU under load. Freezing what the imports built takes it out of every collection;
# what the runs allocate is still collected.
gc.freeze()


def _return_freed_memory() -> None:
    """Have glibc serve every allocation of 1 MiB or more from its own mapping, handed back when freed.

    By default glibc raises that threshold to the size of the last large block freed (up to 32 MiB), after
    which blocks of 1 to 32 MiB (a 512-token result is tensors of 1 to 17 MiB) come from heaps that keep them
    once freed: the server grew by about a freed result per large computation, and its peak in
    benchmarks/soak.py went from 544 MB to 729 MB. Elsewhere (macOS, musl) this does nothing.
    """
    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD; setting it ends glibc's adjusting
    except (OSError, AttributeError):
        pass


_return_freed_memory()

MAX_CHARS = 20_000  # a paste longer than this is refused before tokenizing
ANNOTATE_MAX = 16  # matrices up to 16 x 16 print their values in the cells
STAGES = ("Embeddings", "Queries, keys, values", "Omega", "Scaling", "Mask", "Softmax", "Context")


# --------------------------------------------------------------------------- state


@dataclass(frozen=True)
class Param:
    """A URL/session parameter: its type, default and allowed range."""

    kind: str  # int | float | choice | text | bool | bits
    default: Any
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()


SENTENCE_B = "The chef prepared a delicious meal"
PARAMS: dict[str, Param] = {
    "sentence": Param("text", RASCHKA_SENTENCE),
    # longer than the default sentence, so cross-attention opens on a rectangular omega (6 queries x 9 keys)
    "cross": Param("text", "and it was served with a glass of wine"),
    "d_model": Param("int", 16, 2, 256),
    "d_k": Param("int", 24, 1, 256),
    "d_v": Param("int", 28, 1, 256),
    "heads": Param("int", 1, 1, 16),
    "layout": Param("choice", "independent", choices=("independent", "split")),
    "seed": Param("int", 123, 0, 9999),
    "mask": Param("choice", "none", choices=MASKS),
    "padding": Param("int", 1, 0, MAX_TOKENS),
    "window": Param("int", 3, 1, MAX_TOKENS),
    "dropout": Param("float", 0.0, 0.0, 0.99),
    "scale": Param("choice", "sqrt", choices=("sqrt", "none", "temperature")),
    "temperature": Param("float", 1.0, 0.05, 50.0),
    "init": Param("choice", "rand-transposed", choices=("rand-transposed", "rand", "linear", "identity")),
    "out_proj": Param("bool", False),
    "bias": Param("bool", False),
    "cmask": Param("bits", ""),  # custom mask rows of 0/1 joined by '.'
    "token": Param("int", 1, 0, MAX_TOKENS - 1),  # the followed token (Raschka follows x_2)
    "head": Param("int", 0, 0, 15),
    "step": Param("int", 0, 0, len(STAGES) - 1),
    "stepmode": Param("bool", False),
    "present": Param("bool", False),  # presenter mode: no sidebar, larger type, for a projector
    "preset": Param("choice", next(iter(presets.PRESETS)), choices=tuple(presets.PRESETS)),  # Tutorials page
    "headview": Param("choice", "weights", choices=("weights", "omega")),  # what the per-head heatmaps show
}

LABELS = {
    "sentence": "Sentence",
    "cross": "Key/value sentence (cross-attention)",
    "d_model": "d_model (embedding width)",
    "d_k": "d_k (query/key width per head)",
    "d_v": "d_v (value width per head)",
    "heads": "heads",
    "layout": "Head layout",
    "seed": "seed",
    "mask": "Mask type",
    "padding": "Padding: block the last n keys",
    "window": "Sliding window width w",
    "dropout": "Dropout on the weights",
    "scale": "Scaling of omega",
    "temperature": "Temperature",
    "init": "Weight init",
    "out_proj": "Output projection",
    "bias": "q/k/v bias",
    "stepmode": "Step-by-step mode",
    "present": "Presenter mode",
    "preset": "Tutorial preset",
    "headview": "Per-head heatmaps show",
}

HELP = {
    "d_k": "Width of each query and key vector. The scores are divided by sqrt(d_k).",
    "d_v": "Width of each value vector, and so of each head's context vector.",
    "heads": "Independent attention heads; their context vectors are concatenated.",
    "seed": "Seeds the embeddings and the projection matrices (same numbers as torch.manual_seed).",
    "mask": "Which keys each query may see: causal hides the future, padding the last n keys, "
    "window all but the last w keys up to the query, custom your own grid.",
    "layout": "independent: every head has its own d_k/d_v projections (Raschka's Self-Attention from Scratch, "
    "Self Attention Spelled Out). "
    "split: d_model is cut into heads as nn.MultiheadAttention does (d_k = d_v = d_model / heads).",
    "init": "How W_query, W_key, W_value are drawn: torch.rand (Raschka), nn.Linear's default, or identity.",
}


def _parse(name: str, raw: str) -> Any:
    """A URL value as its parameter's type; ValueError when malformed or out of range."""
    p = PARAMS[name]
    if p.kind == "text":
        if len(raw) > MAX_CHARS:
            raise ValueError("too long")
        if not raw.strip():
            raise ValueError("empty")  # a link should open a view that computes
        return raw
    if p.kind == "choice":
        if raw not in p.choices:
            raise ValueError("unknown choice")
        return raw
    if p.kind == "bool":
        if raw.lower() not in ("true", "false", "1", "0"):
            raise ValueError("not true/false")
        return raw.lower() in ("true", "1")
    if p.kind == "bits":
        if raw and not re.fullmatch(r"[01]{1,512}(\.[01]{1,512}){0,511}", raw):
            raise ValueError("not rows of 0/1")
        return raw
    value: float = int(raw) if p.kind == "int" else float(raw)
    if not math.isfinite(value) or not p.lo <= value <= p.hi:
        raise ValueError("out of range")
    return value


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def init_state() -> None:
    """Every run, from dashboard.py: once per session, seed every parameter from the URL, noting what
    was unusable; and on each run, mark the URL as not yet written (see `chart`)."""
    ss = st.session_state
    ss["_url_synced"] = False
    if ss.get("_state_ready"):
        return
    bad = []
    touched = set()
    for name, p in PARAMS.items():
        ss["p:" + name] = p.default
        values = st.query_params.get_all(name)
        if not values:
            continue
        try:
            ss["p:" + name] = _parse(name, values[-1])
            touched.add(name)
        except (ValueError, OverflowError):
            bad.append(name)
    ss["_touched"] = touched  # set by the link or by the user: a page's own defaults leave these alone
    unknown = [k for k in st.query_params.keys() if k not in PARAMS]
    ss["_url_warnings"] = bad + unknown
    ss["_state_ready"] = True


def get(name: str) -> Any:
    return st.session_state.get("p:" + name, PARAMS[name].default)


def put(name: str, value: Any, *, touched: bool = True) -> None:
    """Set a parameter; touched (the default: a person or a link chose it) keeps pages' defaults off it."""
    st.session_state["p:" + name] = value
    st.session_state["_url_synced"] = False  # the next chart writes the URL first
    if touched:
        st.session_state.setdefault("_touched", set()).add(name)


def default(name: str) -> Any:
    """The parameter's default on this page: the page's own (see `page_defaults`), else the declared one."""
    return st.session_state.get("_page_defaults", {}).get(name, PARAMS[name].default)


def page_defaults(**values: Any) -> None:
    """A page's own defaults, so that it opens on its lesson (Masks on a causal mask, Multi-head on four heads).

    Parameters nobody has set (not in the link, not moved by the user) take them on this page, and go back to the
    declared defaults on a page without them. A link writes every value that differs from its page's default, so
    it reopens exactly the view it was copied from.
    """
    ss = st.session_state
    before = ss.get("_page_defaults", {})
    ss["_page_defaults"] = values
    touched = ss.get("_touched", set())
    for name in set(before) | set(values):
        if name not in touched:
            put(name, values.get(name, PARAMS[name].default), touched=False)


def _linkable(name: str, raw: str) -> bool:
    """Whether the URL reader would accept this value (a link never carries one it would reset)."""
    try:
        _parse(name, raw)
    except (ValueError, OverflowError):
        return False
    return True


# The longest query string a link carries, percent-encoded as the browser sends it. Measured against
# `streamlit run dashboard.py` (uvicorn with h11): a request whose line and headers pass 16 KiB before they
# have all arrived is refused with 400, and over a real network they arrive in pieces (on loopback up to
# ~128 KB can come at once and pass, which hides the limit). 8,000 leaves half of the 16 KiB to the path,
# the browser's headers and cookies, and fits the 8 KiB request line of common proxies (nginx, Apache).
URL_MAX = 8_000
# Parameters that can be long, left out of a link (the longest first) until it fits, and their words.
_LONG_PARAMS = {"sentence": "the sentence", "cross": "the key/value sentence", "cmask": "the custom mask"}


def sync_url() -> None:
    """Write every non-default parameter to the URL (a copied link reopens this view).

    Values a link could not carry (a 100,000-character paste, an empty sentence) are left out, and so are
    the longest texts when the link would pass URL_MAX: their names go to session_state["_url_left_out"].
    """
    wanted = {n: _format(get(n)) for n in PARAMS if get(n) != default(n)}
    wanted = {n: v for n, v in wanted.items() if _linkable(n, v)}
    left_out = []
    longest_first = sorted((n for n in _LONG_PARAMS if n in wanted), key=lambda n: -len(urllib.parse.quote(wanted[n])))
    for name in longest_first:
        if len(urllib.parse.urlencode(wanted)) <= URL_MAX:  # encoded as st.query_params writes it
            break
        left_out.append(name)
        del wanted[name]
    st.session_state["_url_left_out"] = left_out
    if dict(st.query_params.to_dict()) != wanted:
        st.query_params.from_dict(wanted)


def ensure_frame() -> None:
    """Make sure this run went through dashboard.py; if not, rerun so that it does.

    With a folder called pages/ beside the entry script, Streamlit starts in its older
    folder-based navigation and, until some session opens `/`, runs a deep-linked page file
    on its own: no page config, no navigation and no URL state. The flag below is what
    `st.navigation` itself sets; clearing it and rerunning runs dashboard.py, which opens the
    same page (its URL path is its file name) with the link's parameters.
    """
    if st.session_state.get("_state_ready"):
        return
    from streamlit.runtime.pages_manager import PagesManager

    PagesManager.uses_pages_directory = False
    st.rerun()


# Presenter mode: the sidebar (and so the controls) hidden, all type a quarter larger (Streamlit sizes its text in
# rem, and the heatmaps scale their labels with the root font size), for a projector at the back of a room.
PRESENTER_CSS = """<style>
html { font-size: 20px; }
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"] {
  display: none !important;
}
</style>"""


def presenter_toggle() -> bool:
    """The presenter-mode switch, in the URL as present=true: in the sidebar normally; at the top of the page while
    on, since the sidebar is hidden then. Returns whether it is on."""
    on = bool(get("present"))
    help_text = "For a projector: hides the controls and enlarges the type. In the link as present=true."
    if on:
        st.html(PRESENTER_CSS)
        toggle("present", container=st, help=help_text)
    else:
        toggle("present", container=st.sidebar, help=help_text)
    return on


def show_url_warnings(**defaults: Any) -> None:
    """Call first on every page: runs it inside the frame, applies the page's own defaults (see `page_defaults`),
    offers presenter mode, then warns about unusable link values."""
    ensure_frame()
    page_defaults(**defaults)
    presenter_toggle()
    bad = st.session_state.get("_url_warnings") or []
    if bad:
        # unknown keys are the link's own text: shown shortened and inert, never as Markdown or HTML
        names = "; ".join(
            plain(f"{n} ({allowed(n)})" if n in PARAMS else (n if len(n) <= 40 else n[:39] + "…") + " (unknown)")
            for n in sorted(set(bad))
        )
        st.warning(f"Some link parameters were missing a valid value and were reset to defaults: {names}.")


def allowed(name: str) -> str:
    """What a parameter accepts, in words, for a warning: 'a whole number from 0 to 9999', 'one of none, causal'."""
    p = PARAMS[name]
    if p.kind == "int":
        return f"a whole number from {int(p.lo)} to {int(p.hi)}"
    if p.kind == "float":
        return f"a number from {p.lo:g} to {p.hi:g}"
    if p.kind == "choice":
        return "one of " + ", ".join(p.choices)
    if p.kind == "bool":
        return "true or false"
    if p.kind == "bits":
        return "rows of 0 and 1 joined by '.'"
    return f"text of 1 to {MAX_CHARS:,} characters"


def _copy(name: str) -> None:
    put(name, st.session_state["w:" + name])
    st.session_state.pop("_url_warnings", None)  # the user has moved on from the link's values


def _label(labels: dict[Any, str], option: Any) -> str:
    return labels.get(option, str(option))


def _widget(factory: Callable, name: str, *args: Any, container: Any = None, label: str = "", **kw: Any) -> Any:
    key = "w:" + name
    st.session_state[key] = get(name)
    if "format_func" in kw:
        # Streamlit keeps a widget's format_func for the session; one a page defines holds the page's globals,
        # its Result among them. Only the labels it gives for these options are kept.
        shown = {option: str(kw["format_func"](option)) for option in args[0]}
        kw["format_func"] = functools.partial(_label, shown)
    kw.setdefault("help", HELP.get(name))
    target = container or st.sidebar
    label = label or LABELS.get(name, name)
    return getattr(target, factory)(label, *args, key=key, on_change=_copy, args=(name,), **kw)


def slider(name: str, container: Any = None, *, top: int | None = None, **kw: Any) -> int | float:
    """A slider over the parameter's range; top narrows an int range (e.g. padding up to T) and clamps the value."""
    p = PARAMS[name]
    lo, hi = (int(p.lo), int(p.hi)) if p.kind == "int" else (p.lo, p.hi)
    if top is not None:
        hi = max(min(hi, int(top)), lo + 1)
        clamped = min(max(get(name), lo), hi)
        if clamped != get(name):
            put(name, clamped, touched=False)  # kept in range, not chosen
    if name == "dropout":
        kw.setdefault("step", 0.01)
    return _widget("slider", name, lo, hi, container=container, **kw)


def select(name: str, container: Any = None, **kw: Any) -> str:
    return _widget("selectbox", name, PARAMS[name].choices, container=container, **kw)


def radio(name: str, container: Any = None, **kw: Any) -> str:
    """A horizontal radio over a choice parameter's choices."""
    kw.setdefault("horizontal", True)
    return _widget("radio", name, PARAMS[name].choices, container=container, **kw)


def toggle(name: str, container: Any = None, **kw: Any) -> bool:
    return _widget("toggle", name, container=container, **kw)


def text(name: str, container: Any = None, **kw: Any) -> str:
    """A text area that takes at most MAX_CHARS characters (the browser stops a paste there, and so does the
    server with what a client sends past it)."""
    return _widget("text_area", name, container=container, height=80, max_chars=MAX_CHARS, **kw)


def pick(name: str, options: Sequence[Any], label: str, *, format_func: Callable = str, container: Any = None) -> Any:
    """A select box over options for a stored parameter (kept in range of the options)."""
    if get(name) not in options:
        put(name, options[min(max(int(get(name)), 0), len(options) - 1)] if PARAMS[name].kind == "int" else options[0])
    return _widget("selectbox", name, options, container=container or st, label=label, format_func=format_func)


def head_picker(heads: int) -> int:
    """Which head to show, when there is more than one."""
    if heads <= 1:
        return 0
    return int(pick("head", list(range(heads)), "Head shown", format_func=lambda h: f"head {h + 1}"))


def controls(names: Sequence[str]) -> None:
    """The sidebar controls for the named parameters, with explanations next to them."""
    st.sidebar.markdown("**Controls**")
    for name in names:
        p = PARAMS[name]
        if name in ("padding", "window") and get("mask") != name:
            continue
        if name == "temperature" and get("scale") != "temperature":
            continue
        if name in ("d_k", "d_v") and get("layout") == "split" and "layout" in names:
            st.sidebar.caption(f"{name}: set by the split layout to d_model / heads.")
            continue
        if p.kind == "text":
            text(name)
        elif p.kind == "choice":
            select(name)
        elif p.kind == "bool":
            toggle(name)
        else:
            slider(name)
        if name == "heads" and get("layout") == "split" and get("d_model") % get("heads"):
            st.sidebar.error(
                f"The split layout cuts d_model = {get('d_model')} into equal heads: "
                f"{get('heads')} does not divide it. Pick a divisor of {get('d_model')}."
            )
        if name == "mask" and get("mask") == "custom":
            st.sidebar.caption("Custom mask: edit it cell by cell on the Masks page or in the Mask editor.")


def custom_mask(t_q: int, t_k: int) -> tuple[tuple[bool, ...], ...]:
    """The stored custom mask, or causal when none fits this shape."""
    rows = [r for r in get("cmask").split(".") if r]
    if len(rows) == t_q and all(len(r) == t_k for r in rows):
        return tuple(tuple(c == "1" for c in r) for r in rows)
    return tuple(tuple(j <= i for j in range(t_k)) for i in range(t_q))


def store_custom_mask(mask: Sequence[Sequence[bool]]) -> None:
    put("cmask", ".".join("".join("1" if c else "0" for c in row) for row in mask))


def check_length(text: str, what: str = "the sentence") -> None:
    """ValueError for a text over MAX_CHARS: call before tokenizing it (a 23 MB paste splits into 770 MB)."""
    if len(text) > MAX_CHARS:
        raise ValueError(f"{what} is {len(text):,} characters long; paste at most {MAX_CHARS:,}")


def config_from_state(**overrides: Any) -> Config:
    """The Config the current parameters describe (ValueError when they cannot work)."""
    sentence = str(overrides.pop("sentence", get("sentence")))
    cross = overrides.pop("cross_sentence", None)
    check_length(sentence)  # before anything splits it into words
    check_length(cross or "", "the key/value sentence")
    fields: dict[str, Any] = dict(
        sentence=sentence,
        cross_sentence=cross,
        d_model=int(get("d_model")),
        d_k=int(get("d_k")),
        d_v=int(get("d_v")),
        heads=int(get("heads")),
        head_layout=get("layout"),
        seed=int(get("seed")),
        mask=get("mask"),
        padding=int(get("padding")),
        window=int(get("window")),
        dropout=float(get("dropout")),
        scale=get("scale"),
        temperature=float(get("temperature")),
        init=get("init"),
        out_proj=bool(get("out_proj")),
        bias=bool(get("bias")),
    )
    fields.update(overrides)
    if fields["mask"] == "custom" and fields.get("custom_mask") is None:
        t_q = len(tokenize(fields["sentence"]))
        t_k = len(tokenize(fields["cross_sentence"])) if fields["cross_sentence"] else t_q
        fields["custom_mask"] = custom_mask(t_q, t_k) if t_q and t_k else None
    return Config(**fields)


# The caches are shared by every session of the server, so they are bounded in bytes, not only in
# entries. Community Cloud gives the whole app 690 MB; the server holds ~385 MB once torch, pandas and
# Streamlit are imported. So: 64 results of up to 512 KiB (the common sizes: up to ~150 tokens at one head),
# 32 MiB at most, and one larger result (up to ~135 MiB at 512 tokens, 16 heads, d = 256), dropped before the
# next large one is computed, so that two are never held by the cache at once (benchmarks/soak.py).
SMALL_RESULT_BYTES = 512 << 10
# Large results are computed one at a time (~0.3 s each at the largest), so that two sessions asking for two
# different large results at once do not hold three of them.
_LARGE_LOCK = threading.Lock()


def result_bytes(config: Config) -> int:
    """About how many bytes a Result of this config holds (float32; the (h, T_q, T_k) matrices dominate)."""
    t_q, t_k = len(config.tokens), len(config.key_tokens)
    d_k, d_v = config.head_dims
    h, d = config.heads, config.width
    scores = 5 * h * t_q * t_k  # omega, scaled, masked, weights, dropped weights
    vectors = h * (t_q * d_k + t_k * (d_k + d_v) + 2 * t_q * d_v) + (t_q + t_k) * d  # q, k, v, context, concat, x
    params = projection_numbers(config) + t_q * d
    return 4 * (scores + vectors + params) + t_q * t_k


@st.cache_resource(max_entries=64, ttl=3600, show_spinner=False)
def _cached(_config: Config, key: str) -> Result:
    return _compute_uncached(_config)


@st.cache_resource(max_entries=1, ttl=600, show_spinner=False)
def _cached_large(_config: Config, key: str) -> Result:
    with _LARGE_LOCK:
        # Runs only on a miss: the cache would evict its one entry only after storing this one, so that for
        # a moment it would hold two of up to 135 MiB; it lets go of the old one first instead.
        _cached_large.clear()
        return _compute_uncached(_config)


def compute(config: Config) -> Result:
    """compute(), cached on the config: at most 64 small results for an hour and 1 large one for ten minutes."""
    cache = _cached if result_bytes(config) <= SMALL_RESULT_BYTES else _cached_large
    return cache(config, repr(config))


def tokens_or_stop(name: str = "sentence") -> tuple[str, ...]:
    """The tokens of a stored sentence, checked for length before it is split; a longer one is explained and
    the page stopped, as `result_or_stop` does."""
    text = str(get(name))
    try:
        check_length(text)
    except ValueError as exc:
        st.error(f"This setting cannot be computed: {exc}")
        finish()
        st.stop()
    return tokenize(text)


def result_or_stop(**overrides: Any) -> Result:
    """Build the config from the controls and compute it; on a bad config explain and stop the page."""
    try:
        return compute(config_from_state(**overrides))
    except ValueError as exc:
        st.error(f"This setting cannot be computed: {exc}")
        finish()
        st.stop()


def finish() -> None:
    """Call last on every page: writes the state back into the URL, and says what a link could not hold."""
    sync_url()
    left = st.session_state.get("_url_left_out", [])
    left_out = [words for name, words in _LONG_PARAMS.items() if name in left]
    if left_out:
        what = " and ".join(left_out) + (" are" if len(left_out) > 1 else " is")
        st.caption(f":material/link_off: This view is too big to share as a link: {what} not in the address.")


# --------------------------------------------------------------------------- text


# ">" is not escaped with a backslash: it becomes &gt; below (a backslash would show the entity).
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~$])")
# GFM turns "http://x", "www.x.y" and "a@x.y" into links after escapes are resolved, so no escape stops it;
# an invisible word joiner (U+2060) before "://" and "@" and after "www" does, and the text looks the same.
_AUTOLINK = re.compile(r"(?=://)|(?=@)|(?<=www)(?=\.)", re.IGNORECASE)


def plain(s: str) -> str:
    """User text made inert for st.markdown: no Markdown, HTML, LaTeX or autolink is interpreted."""
    s = _MD_SPECIAL.sub(r"\\\1", _AUTOLINK.sub("\u2060", s))
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def labels(tokens: Sequence[str]) -> list[str]:
    """Distinct axis labels, position then word ('2 is'), so repeated words stay apart."""
    return export.labels(tokens)


def explain(sentence: str) -> None:
    """One sentence of explanation under a panel."""
    st.caption(sentence)


# --------------------------------------------------------------------------- heatmaps

# Heatmaps are drawn by our own canvas component (assets/heatmap.js), not Vega-Lite: a Vega rect mark is one
# scene-graph item and one SVG path per cell, which at 512 tokens (262,144 cells a chart) took minutes and
# gigabytes in the browser. The component draws the cells as one image at any size and does the labels,
# legend, hover readout and row clicks itself. Each run sends a compact binary payload (`heatmap_payload`).
_ASSETS = Path(__file__).parent / "assets"
_HEATMAP = st.components.v2.component(
    "attention_lab.heatmap",
    js=(_ASSETS / "heatmap.js").read_text(encoding="utf-8"),
    css=(_ASSETS / "heatmap.css").read_text(encoding="utf-8"),
    isolate_styles=False,  # one style sheet, every rule under .al-heatmap; tests and benchmarks read its DOM
)
HEATMAP_KINDS = ("diverging", "weights", "mask")


def largest_abs(matrix: torch.Tensor, blocked: torch.Tensor | None = None) -> float:
    """The largest finite |value| shown (1 when there is none), for a symmetric colour scale."""
    m = matrix.detach().float()
    keep = torch.isfinite(m) if blocked is None else torch.isfinite(m) & blocked
    top = float(m[keep].abs().max()) if bool(keep.any()) else 0.0
    return top if top > 0 else 1.0


def plot_height(rows: int) -> int:
    """The height of a heatmap's cells in pixels: 24 a row, between 100 and 520 (titles and labels come on top)."""
    return int(min(max(24 * rows, 100), 520))


def heatmap_payload(
    matrix: torch.Tensor,
    rows: Sequence[str],
    cols: Sequence[str],
    *,
    title: str,
    kind: str = "diverging",
    blocked: torch.Tensor | None = None,
    annotate: bool = False,
    selectable: bool = False,
    legend: bool = True,
    max_abs: float | None = None,
    top: float = 1.0,
    row_labels: bool = True,
) -> bytes:
    """The bytes the heatmap component draws: a uint32 header length, a JSON header (title, labels, colour scale),
    the (rows, cols) values as little-endian float32 row by row, then one byte a cell (1 = blocked) if any is.

    blocked: True where a query may attend (the mask's convention); other cells and non-finite values (−∞ scores)
    are sent as 0 and flagged, and drawn grey. About 5 bytes a cell: 1.3 MB at 512 × 512.
    """
    if kind not in HEATMAP_KINDS:
        raise ValueError(f"kind must be one of {HEATMAP_KINDS}, not {kind!r}")
    m = matrix.detach().to(torch.float32).numpy()
    r, c = m.shape
    if len(rows) != r or len(cols) != c:
        raise ValueError(f"{len(rows)} row and {len(cols)} column labels for a {r} x {c} matrix")
    flagged = ~np.isfinite(m)
    if blocked is not None:
        flagged |= ~blocked.numpy()
    values = np.where(flagged, np.float32(0), m).astype("<f4")
    header = {
        "title": title,
        "kind": kind,
        "r": r,
        "c": c,
        "rows": list(rows),
        "cols": list(cols),
        "maxAbs": largest_abs(matrix, blocked) if max_abs is None else float(max_abs),
        "top": float(top),
        "rowLabels": row_labels,  # weights: the colour scale runs from 0 to this (1 unless small multiples share less)
        "annotate": annotate,
        "selectable": selectable,
        "legend": legend,
        "plotHeight": plot_height(r),
        "blocked": bool(flagged.any()),
    }
    body = values.tobytes() + (flagged.astype(np.uint8).tobytes() if header["blocked"] else b"")
    header["id"] = hashlib.blake2b(json.dumps(header).encode() + body, digest_size=8).hexdigest()
    text = json.dumps(header, ensure_ascii=False).encode("utf-8")
    text += b" " * (-(4 + len(text)) % 4)  # the float32 numbers start 4-byte aligned
    return struct.pack("<I", len(text)) + text + body


def decode_heatmap(payload: bytes) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """A payload back as (header, values, blocked): what the browser draws (tests read charts with it)."""
    (n,) = struct.unpack_from("<I", payload)
    header = json.loads(payload[4 : 4 + n])
    r, c = header["r"], header["c"]
    values = torch.from_numpy(np.frombuffer(payload, dtype="<f4", count=r * c, offset=4 + n).copy()).reshape(r, c)
    flags = np.zeros(r * c, dtype=bool)
    if header["blocked"]:
        flags = np.frombuffer(payload, dtype=np.uint8, count=r * c, offset=4 + n + 4 * r * c).astype(bool)
    return header, values, torch.from_numpy(flags.copy()).reshape(r, c)


def _url_before_figure() -> None:
    """Write the URL before the run's first figure (and again after a parameter changed mid-run): see `chart`."""
    if not st.session_state.get("_url_synced"):
        sync_url()
        st.session_state["_url_synced"] = True


def chart(frame: pd.DataFrame, spec: dict, *, height: int, key: str, container: Any = None, **kw: Any) -> Any:
    """Every chart of the app goes through here: st.vega_lite_chart, with the URL brought up to date first.

    Vega's SVG renderer points each colour legend's gradient at `url(<page address>#gradient_n)`. If the
    address changes after a chart is drawn (the URL is rewritten at the end of a run), Chromium treats the
    reference as another document's and the legend's colour bar vanishes. So the URL is written before the
    run's first chart (and again after a parameter changes mid-run), and the address each chart is drawn
    under is the one it keeps.
    """
    _url_before_figure()
    return (container or st).vega_lite_chart(frame, spec, width="stretch", height=height, key=key, **kw)


def _ignore() -> None:
    """The component's click callback: the click is read from its trigger value in the same run."""


def heatmap(
    matrix: torch.Tensor,
    rows: Sequence[str],
    cols: Sequence[str],
    *,
    title: str,
    kind: str = "diverging",
    blocked: torch.Tensor | None = None,
    key: str | None = None,
    selectable: bool = False,
    container: Any = None,
    annotate: bool | None = None,
    legend: bool = True,
    max_abs: float | None = None,
    top: float = 1.0,
    row_labels: bool = True,
) -> int | None:
    """A labelled heatmap of a (rows, cols) matrix; returns the row just clicked when selectable (else None).

    kind: 'diverging' (centred on zero: scores, embeddings, context), 'weights' (0 to 1),
    or 'mask' (booleans). blocked: a (rows, cols) bool tensor, True where a query may
    attend; the other cells show grey with −∞. Matrices up to 16 x 16 print their values
    unless annotate is False (small multiples, narrow columns: the values stay in the hover readout).
    Small multiples share one colour scale: max_abs sets the diverging scale's ends (±max_abs), top the weights
    scale's (0 to top, so near-uniform weights are not one flat block), for all of them, and legend=False leaves
    the colour bar to one caption beside them; row_labels=False leaves the row labels to the first of a row of
    small multiples (the hover readout still names the rows).
    """
    r, c = matrix.shape
    annotate = r <= ANNOTATE_MAX and c <= ANNOTATE_MAX and annotate is not False
    payload = heatmap_payload(
        matrix.float() if kind == "mask" else matrix, rows, cols, title=title, kind=kind, blocked=blocked,
        annotate=annotate, selectable=selectable, legend=legend, max_abs=max_abs, top=top, row_labels=row_labels,
    )  # fmt: skip
    _url_before_figure()
    key = key or f"heatmap:{title}"
    if container is None:
        event = _HEATMAP(key=key, data=payload, on_pick_change=_ignore)
    else:
        with container:
            event = _HEATMAP(key=key, data=payload, on_pick_change=_ignore)
    if selectable and event is not None and event.get("pick") is not None:
        return int(event["pick"])
    return None


# --------------------------------------------------------------------------- walkthrough


def _num(x: float) -> str:
    """A number for an equation: up to four decimals; scientific notation (4.87 × 10⁻⁷) when tiny or huge."""
    if math.isinf(x):
        return r"-\infty" if x < 0 else r"\infty"
    if x != 0 and (abs(x) < 5e-5 or abs(x) >= 1e4):
        mantissa, exponent = f"{x:.3e}".split("e")
        return rf"{mantissa} \times 10^{{{int(exponent)}}}"
    return f"{x:.4f}".rstrip("0").rstrip(".")


def _terms(pairs: Sequence[tuple[float, float]], limit: int = 3) -> str:
    """The first products of a dot product, two to a line of an aligned block (an equation stays inside a
    projector's 1024 px instead of running off the page and hiding its result)."""
    shown = [f"({_num(a)})({_num(b)})" for a, b in pairs[:limit]]
    if len(pairs) > limit:
        shown.append(r"\cdots")
    lines = [" + ".join(shown[k : k + 2]) for k in range(0, len(shown), 2)]
    return r" \\ &\quad + ".join(lines)


def walkthrough(result: Result, head: int, i: int) -> None:
    """Query i of one head written out with its numbers: q.k, scaling, softmax, weighted sum."""
    q = result.queries[head, i]
    keys, values = result.keys[head], result.values[head]
    omega, scaled = result.omega[head, i], result.scaled[head, i]
    weights = result.dropped_weights[head, i]
    allowed = result.mask[i]
    n = i + 1
    cols = labels(result.key_tokens)
    st.markdown(f"**Following token {n}: {plain(result.tokens[i])}** (head {head + 1})")
    j = int(torch.argmax(torch.where(allowed, omega, torch.tensor(float("-inf"))))) if allowed.any() else 0
    st.latex(
        rf"\begin{{aligned}}\omega_{{{n},{j + 1}}} &= q^{{({n})}} \cdot k^{{({j + 1})}} \\ &= "
        + _terms(list(zip(q.tolist(), keys[j].tolist(), strict=True)))
        + rf" \\ &= {_num(float(omega[j]))}\end{{aligned}}"
    )
    factor = result.scale
    if factor != 1.0:
        st.latex(
            rf"\tilde\omega_{{{n},j}} = \frac{{\omega_{{{n},j}}}}{{{_num(factor)}}}"
            + (r"\quad(\sqrt{d_k} = \sqrt{" + str(result.d_k) + "})" if result.config.scale == "sqrt" else "")
        )
    if result.has_empty_rows and bool(result.empty_rows[i]):
        st.info("Every key is masked for this query: its weights and its context are zero.")
        return
    exps = [(jj, float(scaled[jj])) for jj in range(len(cols)) if allowed[jj]]
    shown = exps[:3]
    st.latex(
        r"\begin{aligned}"
        + rf"\alpha_{{{n},j}} &= \frac{{e^{{\tilde\omega_{{{n},j}}}}}}{{\sum_{{j'}} e^{{\tilde\omega_{{{n},j'}}}}}}"
        + r" \\ & "
        + ", ".join(rf"\alpha_{{{n},{jj + 1}}} = {_num(float(weights[jj]))}" for jj, _ in shown)
        + (r", \ldots" if len(exps) > 3 else "")
        + r"\end{aligned}"
    )
    z = result.context[head, i]
    first = [(float(weights[jj]), float(values[jj, 0])) for jj in range(len(cols))]
    st.latex(
        rf"\begin{{aligned}}z^{{({n})}}_1 &= \sum_j \alpha_{{{n},j}} v^{{(j)}}_1 \\ &= "
        + _terms(first)
        + rf" \\ &= {_num(float(z[0]))}\end{{aligned}}"
    )
    table = pd.DataFrame(
        {
            "key": cols,
            "q·k (omega)": omega.tolist(),
            "scaled": scaled.tolist(),
            "may attend": allowed.tolist(),
            "weight": weights.tolist(),
        }
    )
    # four decimals for scores; weights to four significant digits, so a tiny one reads 1.234e-18, not 0.000000…
    formats = {
        "q·k (omega)": st.column_config.NumberColumn(format="%.4f"),
        "scaled": st.column_config.NumberColumn(format="%.4f"),
        "weight": st.column_config.NumberColumn(format="%.4g"),
    }
    st.dataframe(table, hide_index=True, width="stretch", height=min(38 + 35 * len(cols), 400), column_config=formats)


# --------------------------------------------------------------------------- downloads and code

MATRICES = {
    "embeddings": ("embeddings", "tokens", "dims"),
    "queries": ("queries", "tokens", "dims"),
    "keys": ("keys", "key_tokens", "dims"),
    "values": ("values", "key_tokens", "dims"),
    "omega": ("omega", "tokens", "key_tokens"),
    "scaled": ("scaled", "tokens", "key_tokens"),
    "weights": ("weights", "tokens", "key_tokens"),
    "context": ("context", "tokens", "dims"),
    "output": ("output", "tokens", "dims"),
}


def matrix_of(result: Result, name: str, head: int) -> tuple[torch.Tensor, list[str], list[str]]:
    """A named 2-D matrix of the result, with its row and column labels."""
    field, rows, cols = MATRICES[name]
    m = getattr(result, field)
    if m.dim() == 3:
        m = m[head]
    row_labels = labels(getattr(result, rows))
    col_labels = labels(getattr(result, cols)) if cols != "dims" else [f"d{k + 1}" for k in range(m.shape[1])]
    return m, row_labels, col_labels


# Every export is made when its button is clicked, in the thread Streamlit serves the click from, and the
# buttons keep only a `_Recipe` of the config: the Result is recomputed through the bounded cache, and nothing
# of it stays with the session. Streamlit keeps the file it serves in its media store until two more script
# runs (of any session) have ended. The bounds below were measured on the 2-core machine of the README:
# - JSON: export.write_json writes 10-15 MB a second in pieces of 65,536 numbers (one json.dumps each, up to
#   ~75 ms holding the GIL, so other sessions' reruns go on between pieces). 20 MB of JSON is about 2 s of
#   that, about 8 MB gzipped, and ~40 MB of memory while it is made; it covers 128 tokens at 4 heads of width
#   64, or 256 tokens at 2. The largest settings would write 550 MB (25 s of CPU, 2 GB of memory): that is
#   the command line's job, which streams to a file.
# - CSV: one matrix of up to 512 x 512 cells (every per-head matrix at the largest settings): ~3 MB, ~2 s of
#   pure Python that shares the GIL. Only the output of many heads is wider (512 x 4096: 22 MB, 25 s).
JSON_MAX_BYTES = 20_000_000
JSON_PLAIN_BYTES = 2_000_000  # a bigger JSON comes gzipped (its digits compress to about 40 %)
CSV_MAX_CELLS = 512 * 512
HEAVY_EXPORT_BYTES = 1_000_000  # exports bigger than this are made one at a time per server
KEPT_CONFIG_NUMBERS = 4096  # a config with more numbers in given matrices is not kept for a download
INPUTS_FILE = "attention_inputs.json"
BUSY = "Another large export is being made on this server right now: try again in a moment."
# Held while a heavy export is made; a second click does not wait for it (acquire(blocking=False)).
_EXPORT_LOCK = threading.Lock()


@dataclass(frozen=True)
class _Recipe:
    """What a download button keeps to rebuild its config when clicked: the config's fields, with a custom
    mask (up to 512 x 512 booleans: 2 MB as tuples) as rows of 0/1 text (256 KB at most)."""

    fields: tuple[tuple[str, Any], ...]
    mask: str = ""

    @classmethod
    def of(cls, config: Config) -> _Recipe | None:
        """The recipe of a config, or None when it carries big given matrices (never from the controls)."""
        given = [getattr(config, n) for n in ("embeddings", "cross_embeddings", "w_query", "w_key", "w_value", "w_out")]
        if sum(len(m) * len(m[0]) for m in given if m) > KEPT_CONFIG_NUMBERS:
            return None
        kept = tuple((f.name, getattr(config, f.name)) for f in dataclass_fields(config) if f.name != "custom_mask")
        rows = config.custom_mask or ()
        return cls(kept, ".".join("".join("1" if c else "0" for c in row) for row in rows))

    def config(self) -> Config:
        mask = [[c == "1" for c in row] for row in self.mask.split(".")] if self.mask else None
        return Config(**dict(self.fields), custom_mask=mask)


def json_size(result: Result) -> int:
    """About how many bytes `export.to_json(result)` writes: ~20 a number, ~6 a true/false (measured)."""
    numbers = (result.embeddings, result.key_embeddings, result.w_query, result.w_key, result.w_value,
               result.b_query, result.b_key, result.b_value, result.queries, result.keys, result.values, result.omega,
               result.scaled, result.weights, result.dropped_weights, result.context, result.concat, result.w_out,
               result.b_out, result.output)  # fmt: skip
    flags = result.mask.numel() * result.heads + result.empty_rows.numel()  # the mask is written once a head
    return 20 * sum(t.numel() for t in numbers if t is not None) + 6 * flags


def _gzipped_json(result: Result) -> bytes:
    """`export.to_json(result)` gzipped, written piece by piece: the whole text is never held. Level 1: a
    tenth bigger than level 9 (digits compress to ~40 % either way), at a third of the time."""
    out = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1, mtime=0) as packed,
        io.TextIOWrapper(packed, "ascii") as text,
    ):
        export.write_json(result, text)
    return out.getvalue()


def _busy(what: str) -> str | bytes:
    """What a click gets while another heavy export is being made: the note, in the file's format."""
    if what == "json.gz":
        return gzip.compress(json.dumps({"busy": BUSY}).encode(), mtime=0)
    return json.dumps({"busy": BUSY}) if what in ("json", "inputs") else BUSY + "\n"


def export_file(what: str, recipe: _Recipe, head: int = 0, heavy: bool = False) -> str | bytes:
    """The file a download button asks for, made now: a matrix's CSV (what: its name in MATRICES), "json",
    "json.gz", or "inputs" (the command line's input file). A heavy one waits for no other: it is `_busy`."""
    if heavy and not _EXPORT_LOCK.acquire(blocking=False):
        return _busy(what)
    try:
        result = compute(recipe.config())
        if what == "json":
            return export.to_json(result)
        if what == "json.gz":
            return _gzipped_json(result)
        if what == "inputs":
            return experiments.mask_json(result.mask, result.tokens, result.key_tokens, config=result.config)
        m, rows, cols = matrix_of(result, what, head)
        return export.matrix_csv(m, rows, cols)
    finally:
        if heavy:
            _EXPORT_LOCK.release()


def command_line(config: Config) -> list[str] | None:
    """The command that writes this config's whole result as JSON: a preset by name, else flags plus the
    inputs file (`export_file("inputs", ...)`: the mask and the sentences, which never pass through a shell).
    None when the command line cannot take the config (given matrices)."""
    preset = next((name for name, p in presets.PRESETS.items() if p.config == config), None)
    try:
        args = ["--preset", preset] if preset else experiments.cli_args(config, INPUTS_FILE)
    except ValueError:
        return None
    return ["python", "-m", "attention", *args, "--format", "json"]


def downloads(result: Result, head: int = 0, key: str = "dl") -> None:
    """Download the shown head's matrices as CSV and the whole result as JSON, each made when clicked.

    The buttons keep a `_Recipe` of the config, the matrix's name and the head, never the Result. An export
    beyond the bounds above is not offered: a note gives the command line that writes it instead.
    """
    recipe = _Recipe.of(result.config)
    if recipe is None:
        st.caption("Downloads are not offered for given matrices this large: use the package in Python.")
        return
    c1, c2, c3 = st.columns([2, 1, 1])
    name = c1.selectbox("Matrix to download", list(MATRICES), key=f"{key}:which")
    csv_size = 11 * matrix_of(result, name, head)[0].numel()  # about 11 characters a cell; a view, no copy
    json_bytes = json_size(result)
    too_big, offered = [], []
    if csv_size <= 11 * CSV_MAX_CELLS:
        offered.append(csv_size)
        make = functools.partial(export_file, name, recipe, head, csv_size > HEAVY_EXPORT_BYTES)
        c2.download_button(
            f"{name}.csv", make, file_name=f"{name}.csv", mime="text/csv", key=f"{key}:csv", on_click="ignore"
        )
    else:
        c2.button(f"{name}.csv", disabled=True, key=f"{key}:csv", help="Too big to download here: see below.")
        too_big.append(f"{name}.csv (≈{csv_size / 1e6:.0f} MB)")
    if json_bytes <= JSON_MAX_BYTES:
        offered.append(json_bytes)
        what = "json.gz" if json_bytes > JSON_PLAIN_BYTES else "json"
        c3.download_button(
            f"result.{what}",
            functools.partial(export_file, what, recipe, head, json_bytes > HEAVY_EXPORT_BYTES),
            file_name=f"attention_result.{what}",
            mime="application/gzip" if what == "json.gz" else "application/json",
            key=f"{key}:json",
            on_click="ignore",
        )
    else:
        c3.button("result.json", disabled=True, key=f"{key}:json", help="Too big to download here: see below.")
        too_big.append(f"result.json (≈{json_bytes / 1e6:,.0f} MB)")
    if any(size > HEAVY_EXPORT_BYTES for size in offered):
        st.caption(
            "Large files are made one at a time on this shared server: while another is being made, the file "
            "you get says so. Try again a moment later."
        )
    if too_big:
        _command_line_note(result, recipe, too_big, key)


def _command_line_note(result: Result, recipe: _Recipe, too_big: list[str], key: str) -> None:
    """Say what is too big to download here, and give the command line that writes it."""
    what = " and ".join(too_big)
    command = command_line(result.config)
    if command is None:
        st.caption(f"{what}: too big to download here. The package writes it in Python: `export.write_json`.")
        return
    needs_inputs = INPUTS_FILE in command
    source = f", from the inputs saved in {INPUTS_FILE}:" if needs_inputs else ":"
    st.caption(f"{what}: too big to download here. Use the command line: it writes every matrix as JSON{source}")
    st.code(shlex.join(command) + " > attention_result.json", language="bash")
    if needs_inputs:
        heavy = 6 * result.mask.numel() > HEAVY_EXPORT_BYTES  # the mask's true/false dominate
        make = functools.partial(export_file, "inputs", recipe, 0, heavy)
        st.download_button(
            INPUTS_FILE, make, file_name=INPUTS_FILE, mime="application/json", key=f"{key}:inputs", on_click="ignore"
        )


def code(config: Config) -> None:
    """A standalone PyTorch script that reproduces this view."""
    with st.expander("Code: reproduce this view in plain PyTorch"):
        st.code(export.script(config), language="python")


# --------------------------------------------------------------------------- step by step


# What a presenter says at each stage, under its title: one sentence for the room.
SAY = (
    "Every word starts as a row of numbers; at this point no token knows anything about the others.",
    "Each token asks a question (its query), offers an answer (its key) and carries content (its value).",
    "Every query is compared with every key: a big dot product means a good match.",
    "We divide by √d_k so that wider vectors do not make the scores, and the softmax, explode.",
    "A mask decides what each token may look at: blocked scores become −∞ and will get no weight.",
    "Softmax turns each row of scores into weights: all positive, and each row sums to 1.",
    "Each token's new vector is the weighted mix of the values it attended to: its context.",
)
_STEP_KEYS = st.components.v2.component(
    "attention_lab.step_keys", js=(_ASSETS / "step_keys.js").read_text(encoding="utf-8"), isolate_styles=False
)


def _move_step(delta: int | None) -> None:
    """Button callback: one stage on or back (None: the first), kept within the stages."""
    step = 0 if delta is None else int(get("step")) + delta
    put("step", min(max(step, 0), len(STAGES) - 1))


def stepper(result: Result, head: int) -> None:
    """Workshop mode: one stage at a time, its title and a sentence to say; Previous/Next on the page and on the
    keyboard (PageDown/PageUp, as presenters' clickers send, and the arrow keys)."""
    keys = _STEP_KEYS(key="step:keys", data={"step": int(get("step"))}, on_move_change=_ignore, height=0)
    if keys is not None and keys.get("move") in ("next", "previous"):
        _move_step(1 if keys["move"] == "next" else -1)
    # the buttons move the step in callbacks, before this run, so Previous/Next are disabled at the right stage
    step = int(get("step"))
    nav = st.container(horizontal=True, vertical_alignment="center")  # buttons as wide as their labels
    nav.button("◀ Previous", disabled=step == 0, key="step:back", on_click=_move_step, args=(-1,))
    nav.button("Next ▶", disabled=step == len(STAGES) - 1, key="step:next", type="primary", on_click=_move_step,
               args=(1,))  # fmt: skip
    nav.button("Restart", key="step:reset", on_click=_move_step, args=(None,))
    nav.caption("Keys: PageDown / → next, PageUp / ← previous")
    st.progress((step + 1) / len(STAGES), text=f"Stage {step + 1} of {len(STAGES)}: {STAGES[step]}")
    st.subheader(f"{step + 1}. {STAGES[step]}")
    st.markdown(f"**Say:** {SAY[step]}")
    _stage(step, result, head, labels(result.tokens), labels(result.key_tokens))


def _dims(n: int) -> list[str]:
    return [f"d{k + 1}" for k in range(n)]


def _stage(s: int, r: Result, h: int, tok: list[str], keys: list[str]) -> None:
    if s == 0:
        explain("Each token becomes a vector of d_model numbers: the input x.")
        heatmap(r.embeddings, tok, _dims(r.embeddings.shape[1]), title="embeddings x", key="st:emb")
    elif s == 1:
        explain("Three learned matrices project every token into a query, a key and a value.")
        c = st.columns(3)
        heatmap(r.queries[h], tok, _dims(r.d_k), title="queries Q = x W_q", key="st:q", container=c[0])
        heatmap(r.keys[h], keys, _dims(r.d_k), title="keys K = x W_k", key="st:k", container=c[1])
        heatmap(r.values[h], keys, _dims(r.d_v), title="values V = x W_v", key="st:v", container=c[2])
    elif s == 2:
        explain("omega = Q Kᵀ: how well each query matches each key (a dot product).")
        heatmap(r.omega[h], tok, keys, title="omega = Q Kᵀ", key="st:omega")
    elif s == 3:
        explain(f"The scores are divided by {r.scale:.4g} so the softmax does not saturate as d_k grows.")
        heatmap(r.scaled[h], tok, keys, title=f"omega / {r.scale:.4g}", key="st:scaled")
    elif s == 4:
        explain("Blocked scores become −∞, so the softmax gives them exactly zero weight.")
        heatmap(r.masked[h], tok, keys, title="masked scores", blocked=r.mask, key="st:masked")
    elif s == 5:
        explain("Softmax turns each row into weights that are positive and sum to 1.")
        heatmap(
            r.dropped_weights[h], tok, keys, title="softmax weights", kind="weights", blocked=r.mask, key="st:weights"
        )
    else:
        explain("Each context vector is the weights' mix of the value vectors: Z = A V.")
        heatmap(r.context[h], tok, _dims(r.d_v), title="context Z = A V", key="st:context")


# --------------------------------------------------------------------------- shared by several pages


def dim_labels(n: int) -> list[str]:
    """Column labels of a feature axis: d1 .. dn."""
    return [f"d{k + 1}" for k in range(n)]


def _set_custom_mask(key: str, mask: Sequence[Sequence[bool]]) -> None:
    store_custom_mask(mask)
    # a new editor key drops the grid's pending cell edits, which would otherwise be replayed on the new mask
    st.session_state[f"{key}:version"] = st.session_state.get(f"{key}:version", 0) + 1


def custom_mask_editor(tokens: Sequence[str], key_tokens: Sequence[str], key: str = "cmask") -> None:
    """Edit the custom mask cell by cell (rows: queries, columns: keys, ticked: may attend); stored in `cmask`.

    Call it before computing the result, so the run that reports an edit already computes with it.
    """
    t_q, t_k = len(tokens), len(key_tokens)
    buttons = st.container(horizontal=True)  # as wide as their labels, wrapping when narrow
    buttons.button("Start from causal", key=f"{key}:causal", on_click=_set_custom_mask,
                   args=(key, masks.causal(t_q, t_k).tolist()))  # fmt: skip
    buttons.button("All allowed", key=f"{key}:all", on_click=_set_custom_mask, args=(key, [[True] * t_k] * t_q))
    current = custom_mask(t_q, t_k)
    cols = labels(key_tokens)
    frame = pd.DataFrame([list(row) for row in current], index=labels(tokens), columns=cols)
    edited = st.data_editor(
        frame,
        key=f"{key}:grid:{st.session_state.get(f'{key}:version', 0)}",
        num_rows="fixed",
        column_config={c: st.column_config.CheckboxColumn(c, width="small") for c in cols},
    )
    new = tuple(tuple(bool(x) for x in row) for row in edited.to_numpy().tolist())
    if new != current:
        store_custom_mask(new)


# --------------------------------------------------------------------------- experiments (Compare A/B, scaling, editor)

# Compare A/B: side A is the usual parameters, side B these ones with a b_ prefix (same ranges); B starts
# one seed apart from A, so the page opens on a difference. Sentence, d_model, layout and init are shared.
B_SIDE = ("d_k", "d_v", "heads", "seed", "mask", "padding", "window", "scale", "temperature")
PARAMS.update({"b_" + n: PARAMS[n] for n in B_SIDE})
PARAMS["b_seed"] = Param("int", 124, 0, 9999)
PARAMS.update(
    {
        "cview": Param("choice", "weights", choices=("weights", "omega", "context")),  # Compare: matrix shown
        "temp": Param("float", 1.0, 0.1, 20.0),  # Why divide by sqrt(d_k): the temperature slider
        "nseeds": Param("int", 32, 2, 64),  # Why divide by sqrt(d_k): seeds behind each band
    }
)
LABELS.update({"b_" + n: LABELS[n] for n in B_SIDE})
LABELS.update(cview="Matrix compared", temp="Temperature τ: weights = softmax(omega / τ)", nseeds="Seeds in the band")
HELP.update({"b_" + n: HELP[n] for n in B_SIDE if n in HELP})


def copy_a_to_b(a: dict | None = None, b: dict | None = None) -> None:
    """Compare A/B's buttons: set A's given values, then B to A with B's given changes.

    Here and not in the page: a function defined in a page holds the page's globals (its Results) for as long as
    the session keeps the buttons that call it.
    """
    for name, value in (a or {}).items():
        put(name, value)
    for name in B_SIDE:
        put("b_" + name, (b or {}).get(name, get(name)))


def config_or_stop(what: str = "This setting", **overrides: Any) -> Config:
    """The Config the controls describe (with overrides); on a bad one explain (naming `what`) and stop the page."""
    try:
        return config_from_state(**overrides)
    except ValueError as exc:
        st.error(f"{what} cannot be computed: {exc}")
        finish()
        st.stop()


def set_custom_mask(key: str, mask: Sequence[Sequence[bool]]) -> None:
    """Replace the custom mask from a button (a template); the grid of `custom_mask_editor(key=key)` follows."""
    _set_custom_mask(key, mask)


@st.cache_resource(max_entries=16, ttl=3600, show_spinner=False)
def scaling_sweep(
    tokens: int, first_seed: int, n_seeds: int, d_ks: tuple[int, ...] = experiments.DK_GRID
) -> experiments.ScalingSweep:
    """`experiments.scaling_sweep` (default d_k = 1..512) for n_seeds seeds from first_seed, cached; read only."""
    return experiments.scaling_sweep(d_ks, seeds=range(first_seed, first_seed + n_seeds), tokens=tokens)


SWEEP_SERIES = ("unscaled", "scaled ÷ √d_k")  # the legend's names of experiments.VARIANTS, in its order


def sweep_frame(sweep: experiments.ScalingSweep, metric: str) -> pd.DataFrame:
    """One metric of a sweep in long form for `band_chart`: d_k, series, mean, lo, hi (10th/90th percentile)."""
    parts = []
    for variant in experiments.VARIANTS:
        mean, lo, hi = sweep.band(metric, variant)
        name = SWEEP_SERIES[experiments.VARIANTS.index(variant)]
        parts.append(pd.DataFrame({"d_k": sweep.d_ks.numpy(), "series": name, "mean": mean.numpy(),
                                   "lo": lo.numpy(), "hi": hi.numpy()}))  # fmt: skip
    return pd.concat(parts, ignore_index=True)


@functools.lru_cache(maxsize=32)
def _band_spec(title: str, y_title: str, height: int) -> dict:
    """Vega-Lite spec of mean lines with a band each over a log x axis, and a rule at x = param `current`."""
    empty = pd.DataFrame({"d_k": [1], "series": ["a"], "mean": [0.0], "lo": [0.0], "hi": [0.0]})
    x = alt.X("d_k:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(title="d_k (log scale)", values=[
        1, 2, 4, 8, 16, 32, 64, 128, 256, 512]))  # fmt: skip
    colour = alt.Color(
        "series:N",
        # apart for every colour vision; the teal is mid-dark so that it reads on the light and the dark theme
        scale=alt.Scale(domain=list(SWEEP_SERIES), range=["#e66100", "#0a8494"]),
        # one entry a line: side by side, a third of a projector's 1024 px cut "scaled ÷ √d_k" to "s"
        legend=alt.Legend(title=None, orient="bottom", direction="vertical", labelLimit=0),
    )
    base = alt.Chart(empty).encode(x=x, color=colour)
    band = base.mark_area(opacity=0.25).encode(y=alt.Y("lo:Q", title=y_title), y2="hi:Q")
    tooltip = [
        alt.Tooltip("series:N"),
        alt.Tooltip("d_k:Q"),
        alt.Tooltip("mean:Q", format=".3f"),
        alt.Tooltip("lo:Q", format=".3f", title="10th percentile"),
        alt.Tooltip("hi:Q", format=".3f", title="90th percentile"),
    ]
    line = base.mark_line(point=True).encode(
        y="mean:Q", strokeDash=alt.StrokeDash("series:N", legend=None), tooltip=tooltip
    )
    spec = alt.layer(band, line).properties(title=title, height=height).to_dict()
    spec.pop("datasets", None)
    spec.pop("data", None)
    for layer in spec["layer"]:
        layer.pop("data", None)
    spec["layer"].append(
        {
            "data": {"values": [{}]},
            "mark": {"type": "rule", "color": "#666", "strokeDash": [2, 2]},
            "encoding": {"x": {"datum": {"expr": "current"}, "type": "quantitative"}},
        }
    )
    return spec


def band_chart(
    frame: pd.DataFrame, *, title: str, y_title: str, current: float, key: str, container: Any = None, height: int = 240
) -> None:
    """Lines of `mean` over a log d_k axis, one per `series`, each in a band from `lo` to `hi`; a dashed
    rule marks d_k = current (the slider's value). The spec is built once; each run sends the frame."""
    spec = dict(_band_spec(title, y_title, height))
    spec["params"] = [{"name": "current", "value": float(current)}]
    # the element's height holds the plot, the title, the axis and the legend below it
    chart(frame, spec, height=height + 130, key=key, container=container)


@functools.lru_cache(maxsize=32)
def _bars_spec(title: str, height: int) -> dict:
    """Vega-Lite spec of horizontal bars, one per row label (param rowLabels), blocked rows grey."""
    empty = pd.DataFrame({"i": [0], "value": [0.0], "blocked": [False]})
    base = alt.Chart(empty).transform_calculate(
        row="rowLabels[datum.i]", shown="datum.blocked ? '0 (masked)' : format(datum.value, '.3f')"
    ).encode(
        y=alt.Y("i:O", title=None, axis=alt.Axis(labelExpr="rowLabels[datum.value]", labelLimit=90)),
        x=alt.X("value:Q", title="weight", scale=alt.Scale(domainMin=0)),
        tooltip=[alt.Tooltip("row:N", title="key"), alt.Tooltip("shown:N", title="weight")],
    )  # fmt: skip
    bar = base.mark_bar().encode(
        color=alt.condition("datum.blocked", alt.value("#c8c8c8"), alt.value("#0a8494"))
    )  # fmt: skip
    text = base.mark_text(align="left", dx=3, fontSize=10).encode(text="shown:N")
    spec = alt.layer(bar, text).properties(title=title, height=height).to_dict()
    spec.pop("datasets", None)
    spec.pop("data", None)
    for layer in spec["layer"]:
        layer.pop("data", None)
    return spec


def bars(values: torch.Tensor, rows: Sequence[str], *, title: str, key: str, blocked: torch.Tensor | None = None,
         container: Any = None, height: int | None = None) -> None:  # fmt: skip
    """Horizontal bars of one number per row label, in order (e.g. one query's weights over the keys).

    blocked: a (rows,) bool tensor, True where the row may be attended; the others show grey and '0 (masked)'.
    The default height matches `heatmap` of the same number of rows.
    """
    n = values.shape[0]
    height = height or int(min(max(24 * n, 100), 520)) + 100
    frame = pd.DataFrame(
        {
            "i": np.arange(n, dtype=np.int32),
            "value": values.detach().to(torch.float32).numpy(),
            "blocked": np.zeros(n, dtype=bool) if blocked is None else ~blocked.numpy(),
        }
    )
    spec = dict(_bars_spec(title, height))
    spec["params"] = [{"name": "rowLabels", "value": list(rows)}]
    chart(frame, spec, height=height, key=key, container=container)


def sweep_table(sweep: experiments.ScalingSweep) -> pd.DataFrame:
    """A sweep's means over the seeds, one row per d_k, one column per metric and variant."""
    table = {"d_k": sweep.d_ks.numpy()}
    for metric, name in (("spread", "score std"), ("entropy", "entropy"), ("top", "largest weight")):
        for variant in experiments.VARIANTS:
            table[f"{name}, {variant}"] = sweep.band(metric, variant)[0].numpy()
    return pd.DataFrame(table)
