"""The sidebar and page controls: one widget per parameter, labelled and explained by its declaration.

What belongs here: widgets that read and write a parameter of `ui.state` (sliders, selects, toggles, text
areas), the sidebar's `controls`, presenter mode, the custom-mask editor and the buttons that set several
parameters at once. A widget takes its label, help and range from the parameter's declaration
(attention/basics/config.py for the Config's settings, `ui.settings.VIEW` and ui/views/ for the dashboard's own).

Every widget is keyed "w:NAME" and copies its value into the parameter in its on_change callback, so the value
survives pages that do not show the widget. Callbacks live here, not in pages: a function defined in a page
holds the page's globals (its Results) for as long as the session keeps the widget.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from assets import LINK_CHECK
from attention import masks
from attention.basics.config import SETTINGS
from server.warmup import lazy

from .keys import PRESENTER_HELP, out_of_flow
from .markup import labels, plain
from .settings import B_SIDE, SPLIT_DERIVED
from .state import (
    MAX_CHARS,
    PARAMS,
    dropped_link,
    ensure_frame,
    get,
    link_warning,
    page_defaults,
    put,
    read_own_names,
)

pd = lazy("pandas")  # imported at first use: the mask editor's table (server/warmup.py)


def _copy(name: str) -> None:
    put(name, st.session_state["w:" + name])
    _moved_on()


def _moved_on() -> None:
    """The user has moved on from the link's values: its warnings go."""
    st.session_state.pop("_url_warnings", None)
    st.session_state.pop("_url_ignored", None)


def _heard() -> None:
    """A browser's report is read where its component is drawn (`show_url_warnings`), not in a callback."""


def _label(labels: dict[Any, str], option: Any) -> str:
    return labels.get(option, str(option))


# How each factory `_widget` draws takes the value it starts from when it has no state of its own
DEFAULT_ARG = {"selectbox": "index", "radio": "index", "segmented_control": "default"}


def _widget(factory: Callable, name: str, *args: Any, container: Any = None, label: str = "", **kw: Any) -> Any:
    key = "w:" + name
    value = get(name)
    # The parameter's value goes to the widget only where it differs from what the widget holds (a link, a lesson,
    # "copy A to B", a refused text change it): a value written goes to the browser as the value to show, and a run
    # drawn while the learner moved the widget put it back (quick arrow presses were lost; a press on d_k during the
    # run a press on heads asked for was undone while the page computed the press). Elsewhere the value is the
    # widget's own start, used only where Streamlit holds no state for it: a widget drawn anew (elsewhere, with other
    # bounds, or on another page) starts from the parameter, not from the widget's default.
    if key not in st.session_state or st.session_state[key] != value:
        st.session_state[key] = value
    elif DEFAULT_ARG.get(factory) == "index":
        kw["index"] = list(args[0]).index(value) if value in args[0] else None
    else:
        kw[DEFAULT_ARG.get(factory, "value")] = value
    if "format_func" in kw:
        # Streamlit keeps a widget's format_func for the session; one a page defines holds the page's globals,
        # its Result among them. Only the labels it gives for these options are kept.
        shown = {option: str(kw["format_func"](option)) for option in args[0]}
        kw["format_func"] = functools.partial(_label, shown)
    kw.setdefault("help", PARAMS[name].help)
    target = container or st.sidebar
    label = label or PARAMS[name].label or name
    on_change = kw.pop("on_change", _copy)
    return getattr(target, factory)(label, *args, key=key, on_change=on_change, args=(name,), **kw)


def is_seed(name: str) -> bool:
    """A seed names a draw: 7 is no nearer 8 than 9000, and a slider over 0-9999 cannot be set to 7."""
    return name == "seed" or name.endswith("_seed")


def slider(name: str, container: Any = None, *, top: int | None = None, **kw: Any) -> int | float:
    """A slider over the parameter's range; top narrows an int range (e.g. padding up to T) and clamps the value.
    A seed (`is_seed`) gets a number box over its range instead, typed or stepped one at a time."""
    p = PARAMS[name]
    lo, hi = (int(p.lo), int(p.hi)) if p.kind == "int" else (p.lo, p.hi)
    if is_seed(name):
        return _widget("number_input", name, min_value=lo, max_value=hi, step=1, container=container, **kw)
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


def segmented(name: str, container: Any = None, **kw: Any) -> str:
    """A segmented control over a choice parameter's choices, in the page; clicking the chosen segment again
    (which empties a segmented control) keeps the choice."""
    value = _widget("segmented_control", name, PARAMS[name].choices, container=container or st,
                    on_change=_copy_choice, **kw)  # fmt: skip
    return value if value is not None else get(name)


def _copy_choice(name: str) -> None:
    if st.session_state["w:" + name] is not None:
        _copy(name)


def toggle(name: str, container: Any = None, **kw: Any) -> bool:
    return _widget("toggle", name, container=container, **kw)


# {box's widget key: characters of the text it just refused}, said once under that box (`_say_refused`)
REFUSED = "_refused_text"


def _take_text(name: str, key: str | None = None) -> None:
    """A text box's change (key: the box, w:NAME by default): kept when it has at most MAX_CHARS characters, else
    refused and said under the box, which goes back to the parameter's text on this run (`_widget`).

    The boxes have no max_chars: with one, Streamlit's browser side drops a longer paste whole, before the server
    hears of it, so a 31,547-character paste left the box as it was and nobody said why (issue 32)."""
    key = key or "w:" + name
    value = st.session_state[key]
    if len(value) > MAX_CHARS:
        st.session_state.setdefault(REFUSED, {})[key] = len(value)
        return
    put(name, value)
    _moved_on()


def _say_refused(key: str, container: Any) -> None:
    """Under a text box, once: the text it just refused, and why."""
    chars = st.session_state.get(REFUSED, {}).pop(key, None)
    if chars is not None:
        container.error(
            f"That text is {chars:,} characters long and was not taken: a box takes at most {MAX_CHARS:,}. "
            "The box keeps its last text.",
            icon=":material/block:",
        )


def text(name: str, container: Any = None, **kw: Any) -> str:
    """A text area that takes at most MAX_CHARS characters: a longer text is refused, and the box says so
    (`_take_text`); the server checks again what reaches a parameter another way (a link, `check_length`)."""
    kw.setdefault("help", None)  # the label says what to type; a help button would share the box's label
    value = _widget("text_area", name, container=container, height=80, on_change=_take_text, **kw)
    _say_refused("w:" + name, container or st.sidebar)
    (container or st.sidebar).caption(f"At most {MAX_CHARS:,} characters: a longer text is refused.")
    _presenter_text(name, kw.get("label") or PARAMS[name].label or name)
    return value


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


def in_use(name: str) -> bool:
    """Whether a setting matters now: one declared `when=(other, value)` only while other has that value
    (the temperature with scale "temperature", the window with mask "window"); B's settings follow B's."""
    side, base = ("b_", name[2:]) if name.startswith("b_") else ("", name)
    when = SETTINGS[base].when if base in SETTINGS else None
    return when is None or get(side + when[0]) == when[1]


# Which weights a page draws, in words (issue 23): the dashboard opens on "normal" with stable draws; the Raschka
# tutorial's torch.rand weights in its order are one click away, and back.
TUTORIAL_WEIGHTS = {"init": "rand-transposed", "draws": "tutorial"}
SCALED_WEIGHTS = {"init": "normal", "draws": "stable"}
_INIT_WORDS = {
    "normal": "scaled normal (zero-mean; q·k/√d_k of unit variance on these embeddings)",
    "rand-transposed": "torch.rand, as Self-Attention from Scratch draws them (never negative)",
    "rand": "torch.rand (never negative)",
    "linear": "nn.Linear's default, U(±1/√d_model)",
    "identity": "identity (no projection)",
}


def _set_many(values: dict[str, Any]) -> None:
    for name, value in values.items():
        put(name, value)


def weights_note(container: Any = None) -> None:
    """A line on the page's first screen: that its inputs and weights are random and untrained, which weights it
    draws, and a button to the tutorial's (or back)."""
    init, draws = get("init"), get("draws")
    tutorial = init == TUTORIAL_WEIGHTS["init"] and draws == "tutorial"
    order = (
        "in the tutorial's order: its printed numbers, and nearly one-hot rows (Pitfalls says why)"
        if draws == "tutorial" and init != "normal"
        else "adding heads keeps head 1"
    )
    words, row = (container or st).columns([3, 1], vertical_alignment="center", gap="small")
    words.caption(
        f"**Random, untrained:** the embeddings and W_q, W_k, W_v are drawn from the seed, not learned, so a high "
        f"weight says nothing about what the words mean. **Weights:** {_INIT_WORDS.get(init, init)}; {order}."
    )
    target, label = (SCALED_WEIGHTS, "Scaled normal weights") if tutorial else (TUTORIAL_WEIGHTS, "Tutorial's weights")
    row.button(
        label, key="w:weights_note", on_click=_set_many, args=(target,), icon=":material/swap_horiz:",
        type="tertiary", width="content",
        help="Self-Attention from Scratch's torch.rand weights in its order (its printed numbers)" if not tutorial
        else "Zero-mean weights scaled so that the scaled scores have unit variance, a column at a time",
    )  # fmt: skip


def controls(names: Sequence[str]) -> None:
    """The sidebar controls for the named parameters, with explanations next to them; where the page draws
    random weights (a seed among them), a line on the page saying which (`weights_note`)."""
    st.sidebar.markdown("**Controls**")
    if "seed" in names:
        weights_note()
    for name in names:
        p = PARAMS[name]
        if not in_use(name):
            continue
        if name in SPLIT_DERIVED and get("head_layout") == "split":
            derived = [n for n in SPLIT_DERIVED if n in names]
            if name == derived[0]:  # one caption for d_k and d_v
                where = "" if "head_layout" in names else " (chosen on the Multi-head page)"
                st.sidebar.caption(f"{' and '.join(derived)}: set by the split layout{where} to d_model / heads.")
            continue
        if p.kind == "text":
            text(name)
        elif p.kind == "choice":
            select(name)
        elif p.kind == "bool":
            toggle(name)
        else:
            slider(name)
        if name == "heads" and get("head_layout") == "split" and get("d_model") % get("heads"):
            st.sidebar.error(
                f"The split layout cuts d_model = {get('d_model')} into equal heads: "
                f"{get('heads')} does not divide it. Pick a divisor of {get('d_model')}."
            )
        if name == "mask" and get("mask") == "custom":
            st.sidebar.caption("Custom mask: edit it cell by cell on the Masks page or in the Mask editor.")


# Presenter mode: the sidebar (and so the controls) hidden, all type a quarter larger (Streamlit sizes its text in
# rem, and the heatmaps scale their labels with the root font size), for a projector at the back of a room. The
# page keeps a compact navigation (dashboard.py puts it in the top bar) and a box for the class's own sentence; the
# margins shrink so a step-mode stage fits a 1024 x 768 projector.
PRESENTER_CSS = """<style>
html { font-size: 20px; }
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"] {
  display: none !important;
}
[data-testid="stMainBlockContainer"] { padding: 3.75rem 1.5rem 6rem 1.5rem !important; }
[data-testid="stMainBlockContainer"] h1 { font-size: 2rem; padding: 0.25rem 0 0.5rem 0; }
</style>"""


# This run's presenter "Sentence" box: {"box": its container, "names": the parameters it offers}. Every text control a
# page draws (`text`: the sentence, the cross-attention page's key/value sentence, a prompt) adds its own box there,
# drawn after the switch but shown in the same popover; None while presenter mode is off. Set at the top of every
# run by `presenter_toggle`, which every page calls first (`show_url_warnings`).
PRESENTER_BOX = "_presenter_box"


def _presenter_text(name: str, label: str) -> None:
    """In presenter mode, a box in the top bar's "Sentence" popover for the text parameter `name` (its sidebar or
    page box may be hidden), with the same limit; once a run and parameter."""
    presenter = st.session_state.get(PRESENTER_BOX)
    if presenter is None or name in presenter["names"]:
        return
    presenter["names"].add(name)
    key = "w:present:" + name  # the control's own box keeps w:NAME
    st.session_state[key] = get(name)
    presenter["box"].text_area(label, key=key, height=120 if name == "sentence" else 100, on_change=_take_text,
                               args=(name, key))  # fmt: skip
    _say_refused(key, presenter["box"])


def presenter_toggle() -> bool:
    """The presenter-mode switch: in the sidebar normally; at the top of the page while on, since the sidebar is
    hidden then, beside a "Sentence" button where the class's own sentence is typed (and every other text the page
    takes: the cross-attention page's key/value sentence). Returns whether it is on.

    The link keeps present=true out (registered unlinked: ui/settings.py): a student who opens the presenter's link
    gets the ordinary page, navigation and controls; `?present=true` still opens presenter mode.
    """
    on = bool(get("present"))
    st.session_state[PRESENTER_BOX] = None
    if on:
        st.html(PRESENTER_CSS)
        row = st.container(horizontal=True, vertical_alignment="center", key="al-presenter")
        toggle("present", container=row, help=PRESENTER_HELP)
        with row.popover("Sentence", icon=":material/edit:"):
            boxes = st.container()  # the page's text controls add theirs here, above the caption
            st.caption(f"At most {MAX_CHARS:,} characters a box. Ctrl+Enter or a click outside the box applies it.")
        st.session_state[PRESENTER_BOX] = {"box": boxes, "names": set()}
        _presenter_text("sentence", PARAMS["sentence"].label or "sentence")
    else:
        toggle("present", container=st.sidebar, help=PRESENTER_HELP)
    return on


def show_url_warnings(prefix: str = "", **defaults: Any) -> None:
    """Call first on every page: runs it inside the frame, applies the page's own defaults (see `page_defaults`),
    offers presenter mode, then warns about unusable link values, each with the range this page gives it.

    prefix: the URL prefix of the page's own settings (chat_ for chat_temperature): a link's bare `temperature` is
    then this page's temperature (`ui.state.read_own_names`)."""
    ensure_frame()
    if prefix:
        read_own_names(prefix)
    page_defaults(**defaults)
    presenter_toggle()
    bad = st.session_state.get("_url_warnings") or []
    # unknown keys are the link's own text: shown shortened and inert, never as Markdown or HTML
    names = "; ".join(plain(w) for w in (link_warning(n, prefix) for n in sorted(set(bad))) if w)
    if names:
        st.warning(f"Some link parameters were missing a valid value and were reset to defaults: {names}.")
    if not st.session_state.get("_link"):  # no parameter read: the browser says whether Streamlit dropped a link
        out_of_flow("al-link-check")
        check = LINK_CHECK(key="al-link-check", data=None, on_dropped_change=_heard, height=0)
        dropped_link(check.get("dropped") if check is not None else None)
    ignored = st.session_state.get("_url_ignored")
    if ignored:
        st.warning(f"This link was not read ({ignored}): the page opened with its defaults, and the link's "
                   "parameters were taken out of the address.")  # fmt: skip


def custom_mask(t_q: int, t_k: int) -> tuple[tuple[bool, ...], ...]:
    """The stored custom mask, or causal when none fits this shape."""
    rows = [r for r in get("custom_mask").split(".") if r]
    if len(rows) == t_q and all(len(r) == t_k for r in rows):
        return tuple(tuple(c == "1" for c in r) for r in rows)
    return tuple(tuple(j <= i for j in range(t_k)) for i in range(t_q))


def store_custom_mask(mask: Sequence[Sequence[bool]]) -> None:
    put("custom_mask", ".".join("".join("1" if c else "0" for c in row) for row in mask))


def _set_custom_mask(key: str, mask: Sequence[Sequence[bool]]) -> None:
    store_custom_mask(mask)
    # a new editor key drops the grid's pending cell edits, which would otherwise be replayed on the new mask
    st.session_state[f"{key}:version"] = st.session_state.get(f"{key}:version", 0) + 1


def custom_mask_editor(tokens: Sequence[str], key_tokens: Sequence[str], key: str = "cmask") -> None:
    """Edit the custom mask cell by cell (rows: queries, columns: keys, ticked: may attend); stored in `custom_mask`.

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


def copy_a_to_b(a: dict | None = None, b: dict | None = None) -> None:
    """Compare A/B's buttons: set A's given values, then B to A with B's given changes.

    Here and not in the page: a function defined in a page holds the page's globals (its Results) for as long as
    the session keeps the buttons that call it.
    """
    for name, value in (a or {}).items():
        put(name, value)
    for name in B_SIDE:
        put("b_" + name, (b or {}).get(name, get(name)))


def set_custom_mask(key: str, mask: Sequence[Sequence[bool]]) -> None:
    """Replace the custom mask from a button (a template); the grid of `custom_mask_editor(key=key)` follows."""
    _set_custom_mask(key, mask)
