"""The dashboard's parameters: the registry the pages fill, their values in the session, and the URL that shares them.

What belongs here: the registry (`register`, `PARAMS`), reading a link once per session, `get`/`put`, a page's
own defaults, and writing the URL back. Nothing here draws on the page, and nothing here knows a page or a model:
each page declares its own settings beside its helper and registers them when imported (the toy attention pages'
in ui/settings.py, the others' in ui/views/: chat_settings.py, course/__init__.py, poll.py, ...). `import ui`
imports every declaration (ui/views/__init__.py), so the registry is whole before a session reads its link.

A setting is declared once, as an `attention.basics.params.Param` (a Config's field carries its own), and registered
under its URL key. Each parameter has one canonical value in `st.session_state["p:NAME"]`, seeded from the URL once
per session and written back to the URL after every run, so values survive page switches (widget state does not)
and a copied link opens the same view. A key a page renamed (`register(renamed=...)`) is still read from an old
link, and the next run writes the new name.

Streamlit 1.67's `bind="query-params"` syncs one widget with the URL; it is not used because the dashboard
needs what it does not do: a parameter is shared by every page, including pages that show no widget for it;
a page has defaults of its own (Masks opens causal) that a link must not repeat; a bad value in a link is named
in a warning rather than dropped in silence; and a link too long for a server (a pasted page of text) leaves
the longest texts out and says so.
"""

from __future__ import annotations

import dataclasses
import math
import re
import urllib.parse
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attention.basics.params import Param

MAX_CHARS = 20_000  # a paste longer than this is refused before tokenizing


@dataclass(frozen=True)
class Control:
    """A parameter as the dashboard holds it: its URL kind, starting value, range or choices, label and help."""

    kind: str  # int | float | choice | text | bool | bits
    default: Any
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    label: str = ""
    help: str | None = None
    long: str = ""  # a text a link may leave out when too long, in words ("the prompt"); see `sync_url`
    linked: bool = True  # written to a link (False: presenter mode, the instructor's key)


def control(p: Param) -> Control:
    """The dashboard's view of a declaration: the narrower range or choices it offers (`Param.dashboard`), its
    starting value."""
    offered = None if p.dashboard is None or p.dashboard is True else p.dashboard
    if p.kind == "mask":  # a custom mask travels as rows of 0/1 joined by '.'
        return Control("bits", "", label=p.label, help=p.help)
    if p.kind == "choice":
        return Control("choice", p.start, choices=p.choices if offered is None else tuple(offered), label=p.label,
                       help=p.help)  # fmt: skip
    lo, hi = (p.lo, p.hi) if offered is None else (offered if p.kind in ("int", "float") else (None, None))
    return Control(p.kind, p.start, lo, hi, label=p.label, help=p.help)


# The registry: every page's parameters under their URL keys, in the order they were registered (a link writes its
# keys in this order), which page declared each, and the old URL keys still read.
PARAMS: dict[str, Control] = {}
OWNERS: dict[str, str] = {}
RENAMED: dict[str, str] = {}


def register(
    page: str,
    settings: Mapping[str, Param | Control],
    *,
    prefix: str = "",
    renamed: Mapping[str, str] | None = None,
    long: Mapping[str, str] | None = None,
    unlinked: Collection[str] = (),
) -> dict[str, Control]:
    """Add a page's settings to the registry under prefix + name (the chat page's under chat_), once per key: a key
    another page declared is a ValueError (two pages would read one link's value). renamed: old URL keys still read
    for new ones; long: words for texts a link may leave out when too long; unlinked: never written to a link.
    Registering the same page again (a module reloaded) replaces its settings."""
    added = {}
    for name, declared in settings.items():
        key = prefix + name
        if OWNERS.get(key, page) != page:
            raise ValueError(f"URL key {key!r} of {page} is {OWNERS[key]}'s already")
        c = declared if isinstance(declared, Control) else control(declared)
        words = (long or {}).get(name, c.long)
        added[key] = dataclasses.replace(c, long=words, linked=c.linked and name not in unlinked)
    PARAMS.update(added)
    OWNERS.update(dict.fromkeys(added, page))
    RENAMED.update(renamed or {})
    return added


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
    was unusable; and on each run, mark the URL as not yet written (see `ui.charts.chart`)."""
    ss = st.session_state
    ss["_url_synced"] = False
    ss["_read"] = set()  # the parameters this run reads (see `sync_url`)
    if ss.get("_state_ready"):
        return
    bad = []
    touched = set()
    old = {new: old for old, new in RENAMED.items()}
    for name, p in PARAMS.items():
        ss["p:" + name] = p.default
        values = st.query_params.get_all(name) or (st.query_params.get_all(old[name]) if name in old else [])
        if not values:
            continue
        try:
            ss["p:" + name] = _parse(name, values[-1])
            touched.add(name)
        except (ValueError, OverflowError):
            bad.append(name)
    ss["_touched"] = touched  # set by the link or by the user: a page's own defaults leave these alone
    unknown = [k for k in st.query_params.keys() if k not in PARAMS and k not in RENAMED]
    ss["_url_warnings"] = bad + unknown
    ss["_url_ignored"] = _ignored_link()
    # The session's first `sync_url` writes the address even when it holds what the page would write: a link that
    # Streamlit dropped whole looks, to the page, like one without parameters, and its keys would stay in the
    # address bar (the server never shows the page the dropped text: the browser reports it, `dropped_link`)
    ss["_url_rewrite"] = True
    ss["_link"] = {k: st.query_params.get_all(k)[-1] for k in st.query_params.keys()}  # for `read_own_names`
    ss["_state_ready"] = True


# What Streamlit reads of a link (streamlit.runtime.state.query_params): a query string with more parameters or
# characters than this is dropped whole, silently, and the script sees no parameter at all.
LINK_MAX_FIELDS = 1000
LINK_MAX_CHARS = 512 * 1024


def _ignored_link() -> str | None:
    """Why Streamlit dropped this session's whole link, in words (None when it read it or cannot tell): the script
    then saw no parameter, and the link's keys stayed in the address bar with no warning (issue 38). Where the run's
    context keeps the text Streamlit dropped (AppTest) the page tells at once; a server passes the script an empty
    query string, and the browser tells instead (`dropped_link`)."""
    ctx = get_script_run_ctx()
    raw = ctx.query_string if ctx is not None else ""
    if not raw or st.query_params.keys() or not urllib.parse.parse_qs(raw, keep_blank_values=True):
        return None
    return dropped_link_words(raw.count("&") + 1, len(raw))


def dropped_link_words(fields: int, chars: int) -> str:
    """Why a link of `fields` parameters and `chars` characters was not read, as the page's warning says it."""
    if fields > LINK_MAX_FIELDS:
        return f"it has {fields:,} parameters, and a page reads a link of at most {LINK_MAX_FIELDS:,}"
    return f"it is {chars:,} characters long, and a page reads a link of at most {LINK_MAX_CHARS:,}"


def dropped_link(report: object) -> None:
    """The browser's report (assets/link_check.js) of a link Streamlit dropped whole: {"fields": n, "chars": n}.
    Kept as the session's `_url_ignored`, which the page's warning reads, unless the page read a link after all."""
    ss = st.session_state
    if not isinstance(report, dict) or ss.get("_link"):
        return
    try:
        fields, chars = int(report["fields"]), int(report["chars"])
    except (KeyError, TypeError, ValueError):
        return
    if fields > LINK_MAX_FIELDS or chars > LINK_MAX_CHARS:
        ss["_url_ignored"] = dropped_link_words(fields, chars)


def read_own_names(prefix: str) -> None:
    """On a page whose settings travel under a prefix (chat_temperature), a link that names one of them bare
    (temperature=0.5, as the page's label says) sets the page's own, once per session: the bare name is another
    page's setting (the attention Config's temperature, 0.05 to 50) or none at all (top_k), and the link meant
    this page's. A link that names the prefixed one too keeps it. Its warnings: `link_warning`."""
    ss = st.session_state
    done = ss.setdefault("_own_names_read", set())
    if prefix in done:
        return
    done.add(prefix)
    link = ss.get("_link", {})
    for name, raw in link.items():
        own = prefix + name
        if own in PARAMS and own not in link and _linkable(own, raw):
            put(own, _parse(own, raw))


def link_warning(name: str, prefix: str = "") -> str | None:
    """The warning for a link's unusable `name` on a page whose own settings travel under `prefix`: the range of
    the setting this page reads under that name ('temperature (a number from 0 to 2)' on the chat page), None when
    this page read the value as its own (`read_own_names`)."""
    own = prefix + name if prefix else ""
    link = st.session_state.get("_link", {})
    if own in PARAMS and own not in link:
        return None if _linkable(own, link.get(name, "")) else f"{name} ({allowed(own)})"
    if name in PARAMS:
        return f"{name} ({allowed(name)})"
    return (name if len(name) <= 40 else name[:39] + "…") + " (unknown)"


def get(name: str) -> Any:
    st.session_state.get("_read", set()).add(name)  # what this page reads is what its link carries
    return st.session_state.get("p:" + name, PARAMS[name].default)


def put(name: str, value: Any, *, touched: bool = True) -> None:
    """Set a parameter; touched (the default: a person or a link chose it) keeps pages' defaults off it."""
    st.session_state["p:" + name] = value
    st.session_state["_url_synced"] = False  # the next figure writes the URL first
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


def _page_reads(final: bool) -> set[str]:
    """The parameters this page reads: this run's so far, and (before the run's end) its last full run's."""
    ss = st.session_state
    ctx = get_script_run_ctx()  # inside a page's run, its own script's hash
    page = ctx.pages_manager.current_page_script_hash if ctx is not None else ""
    reads = ss.setdefault("_page_reads", {})
    now = set(ss.get("_read", set()))
    if final:
        reads[page] = now
        return now
    return now | reads.get(page, set())


def sync_url(*, final: bool = True) -> None:
    """Write every non-default parameter this page reads to the URL (a copied link reopens this view, and carries
    no other page's settings: Compare's side B, the KV cache's step stay on their pages).

    Values a link could not carry (a 100,000-character paste, an empty sentence) are left out, and so are
    the longest texts when the link would pass URL_MAX: their names go to session_state["_url_left_out"].
    final: the run is over, so what it read is all the page reads (before, its last full run's reads count too).
    """
    page = _page_reads(final)
    value = {n: st.session_state.get("p:" + n, PARAMS[n].default) for n in page if n in PARAMS}  # not get(): unread
    wanted = {n: _format(v) for n, v in value.items() if PARAMS[n].linked and v != default(n)}
    wanted = dict(sorted(wanted.items(), key=lambda item: list(PARAMS).index(item[0])))  # in the declarations' order
    wanted = {n: v for n, v in wanted.items() if _linkable(n, v)}
    left_out = []
    longest_first = sorted((n for n in wanted if PARAMS[n].long), key=lambda n: -len(urllib.parse.quote(wanted[n])))
    for name in longest_first:
        if len(urllib.parse.urlencode(wanted)) <= URL_MAX:  # encoded as st.query_params writes it
            break
        left_out.append(name)
        del wanted[name]
    st.session_state["_url_left_out"] = left_out
    rewrite = st.session_state.pop("_url_rewrite", False)  # the session's first: see `init_state`
    if rewrite or dict(st.query_params.to_dict()) != wanted:
        if wanted:
            st.query_params.from_dict(wanted)
        else:
            st.query_params.clear()  # from_dict({}) sends nothing when the page already holds no parameter


def url_before_figure() -> None:
    """Write the URL before the run's first figure (and again after a parameter changed mid-run): see `chart`."""
    if not st.session_state.get("_url_synced"):
        sync_url(final=False)
        st.session_state["_url_synced"] = True


def ensure_frame() -> None:
    """Make sure this run went through dashboard.py; if not, rerun so that it does.

    With a folder called pages/ beside the entry script, Streamlit starts in its older
    folder-based navigation and, until some session opens `/`, runs a deep-linked page file
    on its own: no page config, no navigation and no URL state. The flag below is what
    `st.navigation` itself sets; clearing it and rerunning runs dashboard.py, which opens the
    same page (its URL path is its file name) with the link's parameters.

    Every page calls it first, so it also starts the page's set of parameters read (see `sync_url`): a page file run
    without dashboard.py (AppTest's switch_page does that) starts it too.
    """
    st.session_state["_read"] = set()
    if st.session_state.get("_state_ready"):
        return
    from streamlit.runtime.pages_manager import PagesManager

    PagesManager.uses_pages_directory = False
    st.rerun()


def finish() -> None:
    """Call last on every page: writes the state back into the URL, and says what a link could not hold."""
    sync_url()
    left = st.session_state.get("_url_left_out", [])
    left_out = [c.long for name, c in PARAMS.items() if name in left]  # in the declarations' order
    if left_out:
        what = " and ".join(left_out) + (" are" if len(left_out) > 1 else " is")
        st.caption(f":material/link_off: This view is too big to share as a link: {what} not in the address.")
