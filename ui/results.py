"""From the parameters to a Result: the Config they describe, computed once and shared by every session.

What belongs here: building the Config from `ui.state` (`config_from_state`, read generically from the Config's
declarations), the bounded caches every session shares, and the `*_or_stop` helpers that explain a setting
that cannot be computed and stop the page. No drawing, no math: `attention.compute` does that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import streamlit as st

import attention
from attention import Config, Result
from attention.basics import sizes
from attention.basics.config import SETTINGS, tokenize
from attention.basics.sizes import result_bytes as result_bytes  # re-exported: ui.result_bytes
from attention.lessons import scaling
from server import budget

from .settings import SPLIT_DERIVED
from .state import MAX_CHARS, PARAMS, finish, get
from .widgets import custom_mask


def check_length(text: str, what: str = "the sentence") -> None:
    """ValueError for a text over MAX_CHARS: call before tokenizing it (a 23 MB paste splits into 770 MB)."""
    if len(text) > MAX_CHARS:
        raise ValueError(f"{what} is {len(text):,} characters long; paste at most {MAX_CHARS:,}")


T = TypeVar("T")
_CAST = {"int": int, "float": float, "bool": bool, "choice": str}
# Settings a page passes itself (`result_or_stop(kv_heads=...)`), read nowhere else: a key/value sentence would
# turn every page into cross-attention, and key/value heads set on the grouped-query page would not divide the
# heads of another page.
PAGE_ONLY = ("cross_sentence", "kv_heads")


def config_from_state(**overrides: Any) -> Config:
    """The Config the current parameters describe (ValueError when they cannot work).

    Every number, switch and choice the dashboard offers (a declaration with `dashboard=...`) comes from its
    parameter; the sentence too. `PAGE_ONLY` settings only when a page passes them, and the custom mask from its
    rows of 0/1 when the mask is custom.
    """
    sentence = str(overrides.pop("sentence", get("sentence")))
    cross = overrides.pop("cross_sentence", None)
    check_length(sentence)  # before anything splits it into words
    check_length(cross or "", "the key/value sentence")
    fields: dict[str, Any] = {"sentence": sentence, "cross_sentence": cross}
    for name, s in SETTINGS.items():
        if name in PARAMS and s.kind in _CAST and name not in PAGE_ONLY:
            fields[name] = _CAST[s.kind](get(name))
    if fields["head_layout"] == "split":
        fields.update(dict.fromkeys(SPLIT_DERIVED))
    fields.update(overrides)
    if fields["mask"] == "custom" and fields.get("custom_mask") is None:
        t_q = len(tokenize(fields["sentence"]))
        t_k = len(tokenize(fields["cross_sentence"])) if fields["cross_sentence"] else t_q
        fields["custom_mask"] = custom_mask(t_q, t_k) if t_q and t_k else None
    return Config(**fields)


# The caches are shared by every session of the server, so they are bounded in bytes, not only in entries. Community
# Cloud gives the whole app 690 MB, and the imports alone take more than half of it
# (benchmarks/results/2026-11-27-design-figures.md). So: 64 results of up to 512 KiB (the common sizes: up to ~150
# tokens at one head), 32 MiB at most, and one larger result (up to ~150 MB at 512 tokens, 16 heads, d = 256). Every
# larger result is admitted against the server's one memory budget (server/budget.py) before it is computed, and holds
# its bytes of it for as long as anything (the cache, a page's run) holds the Result: so what all the visitors' runs
# hold at once is bounded, not only what the cache keeps.
SMALL_RESULT_BYTES = 512 << 10


@st.cache_resource(max_entries=64, ttl=3600, show_spinner=False)
def _cached(_config: Config, key: str) -> Result:
    return attention.compute(_config)


@st.cache_resource(max_entries=1, ttl=600, show_spinner=False)
def _cached_large(_config: Config, key: str) -> Result:
    return attention.compute(_config)


budget.evictor(_cached_large.clear)  # the large result only the cache holds goes when a run needs the memory


def compute(config: Config) -> Result:
    """compute(), cached on the config: at most 64 small results for an hour and 1 large one for ten minutes; a
    large one is admitted against the server's budget first (`budget.Refused`, a ValueError, when it cannot be).
    """
    size = sizes.size(config)  # once: the budget admits its peak and holds what the Result keeps
    if size.held <= SMALL_RESULT_BYTES:
        return _cached(config, repr(config))
    return budget.compute(config, _cached_large, size)


def tokens_or_stop(name: str = "sentence") -> tuple[str, ...]:
    """The tokens of a stored sentence, checked for length before it is split; a longer one is explained and
    the page stopped, as `result_or_stop` does."""
    text = str(get(name))
    try:
        check_length(text)
    except ValueError as exc:
        stop(f"This setting cannot be computed: {exc}")
    return tokenize(text)


def result_or_stop(**overrides: Any) -> Result:
    """Build the config from the controls and compute it; on a bad config explain and stop the page."""
    try:
        return compute(config_from_state(**overrides))
    except ValueError as exc:
        stop(f"This setting cannot be computed: {exc}")


def config_or_stop(what: str = "This setting", **overrides: Any) -> Config:
    """The Config the controls describe (with overrides); on a bad one explain (naming `what`) and stop the page."""
    try:
        return config_from_state(**overrides)
    except ValueError as exc:
        stop(f"{what} cannot be computed: {exc}")


@st.cache_resource(max_entries=16, ttl=3600, show_spinner=False)
def scaling_sweep(
    tokens: int, first_seed: int, n_seeds: int, d_ks: tuple[int, ...] = scaling.DK_GRID
) -> scaling.ScalingSweep:
    """`scaling.scaling_sweep` (default d_k = 1..512) for n_seeds seeds from first_seed, cached; read only."""
    return scaling.scaling_sweep(d_ks, seeds=range(first_seed, first_seed + n_seeds), tokens=tokens)


def kept(config: Config, pick: Callable[[Result], T]) -> T:
    """pick(result) for the config's Result (`ui.compute`: cached, admitted), copied (`attention.basics.sizes.keep`),
    with the Result let go of before this returns: a page that needs several results holds one at a time and
    keeps only what it draws. Raises Refused (a ValueError) as `compute` does."""
    result = compute(config)
    picked = sizes.keep(pick(result))
    del result
    return picked


def kept_or_stop(what: str, config: Config, pick: Callable[[Result], T]) -> T:
    """`kept`, with a run the budget refuses explained (naming `what`) and the page stopped, as the `*_or_stop`
    helpers here do."""
    try:
        return kept(config, pick)
    except ValueError as exc:
        stop(f"{what} cannot be computed: {exc}")


def stop(why: str | None = None, kind: str = "error") -> NoReturn:
    """The one way a page stops early: say why (`kind`: "error" for a setting that cannot be computed, "warning" for
    a run the server cannot take now, "info" for a limit of the page; None when the page has drawn what it shows),
    write the state back into the URL (`ui.state.finish`) and end the run."""
    if why is not None:
        getattr(st, kind)(why)
    finish()
    st.stop()


@contextmanager
def or_stop(what: str) -> Iterator[None]:
    """Inside it, a run the budget refuses is explained (naming `what`) and the page stopped."""
    try:
        yield
    except budget.Refused as exc:
        stop(f"{what} cannot run now: {exc}")


def run_or_stop(what: str, nbytes: int, make: Callable[[], T], holder: Callable[[T], Any] = lambda v: v) -> T:
    """make(), admitted against the server's budget for nbytes (its peak, from `attention.basics.sizes`), for a page
    computation that is not one Result (the pitfalls). Once it returns, what it returns keeps its own bytes
    (`attention.basics.sizes.held_bytes`) of the budget until holder(value), an object the page keeps to the end of its
    run, is gone. A refusal is explained (naming `what`) and the page stopped."""
    try:
        ticket = budget.admit(nbytes)
    except ValueError as exc:
        stop(f"{what} cannot be computed: {exc}")
    return budget.admitted(nbytes, make, holder=holder, ticket=ticket)
