"""Share links never hold more than the server opens again: the longest texts are left out of a view too big
for a link, and the page says which (see ui.URL_MAX for the measured limit; tests/browser/test_share_links.py
opens such a link on the real server).
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import ui

ROOT = Path(__file__).resolve().parents[2]
# 10,000 characters each, 100 words: 2 and 3 bytes a character in UTF-8, 6 and 9 once percent-encoded
QUERY_TEXT = " ".join(["é" * 99] * 100) + " "
KEY_TEXT = " ".join(["日本" * 49 + "語"] * 100) + " "
NOTICE = "too big to share as a link"


def cross_attention(**params: str) -> AppTest:
    """The cross-attention page opened from a link with these parameters."""
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=120)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    at.switch_page("pages/cross_attention.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def written(at: AppTest) -> dict[str, str]:
    """The query parameters the page wrote into its address."""
    return {name: at.query_params[name] for name in at.query_params}


def encoded(params: dict[str, str]) -> str:
    return urllib.parse.urlencode(params, doseq=True)  # as st.query_params writes it, and the browser sends it


def notices(at: AppTest) -> list[str]:
    return [c.value for c in at.caption if NOTICE in c.value]


def test_two_long_sentences_are_left_out_of_the_link_and_the_page_says_so() -> None:
    at = cross_attention(sentence=QUERY_TEXT, cross_sentence=KEY_TEXT, seed="7", heads="2")
    assert len(QUERY_TEXT) == len(KEY_TEXT) == 10_000
    assert at.text_area(key="w:sentence").value == QUERY_TEXT  # the page still shows and computes them
    link = written(at)
    assert len(encoded(link)) <= ui.URL_MAX
    assert link == {"seed": "7", "heads": "2"}  # what fits stays
    assert at.session_state["_url_left_out"] == ["cross_sentence", "sentence"]  # the longer one first
    assert notices(at) == [
        ":material/link_off: This view is too big to share as a link: "
        "the sentence and the key/value sentence are not in the address."
    ]


def test_only_what_does_not_fit_is_left_out() -> None:
    at = cross_attention(sentence="short and sweet", cross_sentence=KEY_TEXT)
    link = written(at)
    assert link == {"sentence": "short and sweet"} and len(encoded(link)) <= ui.URL_MAX
    assert notices(at) == [
        ":material/link_off: This view is too big to share as a link: the key/value sentence is not in the address."
    ]
    # typing a shorter key sentence puts it back into the link, and the notice goes
    at.text_area(key="w:cross_sentence").set_value("and a short answer").run()
    assert written(at) == {"sentence": "short and sweet", "cross_sentence": "and a short answer"}
    assert notices(at) == []


@pytest.mark.parametrize("over", [0, 1])
def test_the_bound_is_on_the_encoded_link(over: int) -> None:
    length = ui.URL_MAX - len("sentence=&cross_sentence=a+b") + over
    sentence = (("a" * 39 + " ") * 250)[:length]  # 200 words; letters and spaces encode as one character each
    at = cross_attention(sentence=sentence, cross_sentence="a b")
    assert len(encoded({"sentence": sentence, "cross_sentence": "a b"})) == ui.URL_MAX + over
    assert written(at) == ({"sentence": sentence, "cross_sentence": "a b"} if not over else {"cross_sentence": "a b"})
    assert len(notices(at)) == over


def test_links_with_the_old_names_open_the_same_view_and_are_rewritten() -> None:
    """Before the URL used the Config's field names, links said layout, cross and cmask: they still open the
    view they were copied from, with no warning, and the page writes the new names in their place."""
    old = {
        "layout": "split",
        "heads": "2",
        "cross": "and a short answer",
        "mask": "custom",
        "cmask": "110." * 5 + "110",
    }
    at = cross_attention(sentence="one two three four five six", **old)
    assert not at.warning, [w.value for w in at.warning]
    state = {name: at.session_state["p:" + name] for name in ("head_layout", "heads", "cross_sentence", "custom_mask")}
    assert state == {"head_layout": "split", "heads": 2, "cross_sentence": "and a short answer",
                     "custom_mask": "110." * 5 + "110"}  # fmt: skip
    url = written(at)
    assert {"layout", "cross", "cmask"}.isdisjoint(url)
    assert url["head_layout"] == "split" and url["cross_sentence"] == "and a short answer"
    assert url["custom_mask"] == old["cmask"]
    assert set(ui.state.RENAMED.values()) <= set(ui.PARAMS)  # every old name points at a parameter


# --------------------------------------------------------------------------- every control of every page

# Widgets that choose what a button does, not what the page shows: what a button downloads, how many tokens "Generate"
# makes (the tokens made are in the link, as chat_generate), an answer being written in a form (the inventory's: the
# sheet sent is in the link, as check_pre and check_post). Not part of the view, so not in its link.
DOWNLOAD_PICKERS = re.compile(r"^(\w+:dl:which|chat:many|inv:.*)$")
WIDGETS = ("slider", "selectbox", "toggle", "text_area", "radio", "button_group", "checkbox", "number_input")
SENTENCE = "one two three four five six seven"


def dashboard_pages() -> list[str]:
    import dashboard

    return [path for pages in dashboard.PAGES.values() for path, _, _ in pages]


def controls(at: AppTest) -> dict[str, object]:
    """Every input widget on the page (sidebar included) by key, with its value."""
    return {w.key: w.value for kind in WIDGETS for w in at.get(kind)}


def open_page(path: str, params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=120)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    at.run()
    at.switch_page(path)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def change(widget) -> None:
    """Set a widget to a value other than its own (the next option, one step up or down, the other state)."""
    kind = type(widget).__name__
    if kind in ("Slider", "NumberInput"):  # a seed is a number box (ui.widgets.is_seed)
        step = widget.step or 1
        widget.set_value(widget.value + step if widget.value + step <= widget.max else widget.value - step)
    elif kind == "Selectbox":
        widget.select_index((widget.index + 1) % len(widget.options))
    elif kind in ("Radio", "ButtonGroup"):  # their options are shown formatted: step through the parameter's choices
        choices = list(ui.PARAMS[widget.key.removeprefix("w:")].choices)
        widget.set_value(choices[(choices.index(widget.value) + 1) % len(choices)])
    elif kind == "Toggle":
        widget.set_value(not widget.value)
    elif kind == "TextArea":
        widget.set_value(SENTENCE)
    else:
        raise AssertionError(f"no way to change a {kind} ({widget.key})")


@pytest.mark.thorough  # the oracle or exhaustive group: --all, not the fast tier
@pytest.mark.parametrize("path", dashboard_pages())
def test_every_control_of_every_page_is_in_its_link(path: str) -> None:
    """The README's promise: a copied link reopens the view. Every control a page shows is a parameter (keyed
    w:NAME), changing it writes NAME into the link, and the link opened afresh shows every control as it was."""
    at = open_page(path)
    before = controls(at)
    keys = [k for k in before if not DOWNLOAD_PICKERS.match(k)]
    assert all(k.startswith("w:") and k[2:] in ui.PARAMS for k in keys), [k for k in keys if not k.startswith("w:")]
    changed = [k for k in keys if k != "w:present" and k not in ("w:sentence", "w:cross_sentence")]
    for key in changed:
        widget = next((w for kind in WIDGETS for w in at.get(kind) if w.key == key), None)
        if widget is None:  # gone with another control's change (a head picker after heads went to 1)
            continue
        change(widget)
        at.run()
    after = {k: v for k, v in controls(at).items() if not DOWNLOAD_PICKERS.match(k)}
    moved = {k for k in changed if k in after and after[k] != before[k]}
    assert len(moved) >= len(changed) // 2, (changed, after)  # most controls really moved
    link = written(at)
    assert "present" not in link
    own = at.session_state["_page_defaults"]  # the page's own defaults stay out of its link
    for key in moved:
        name = key[2:]
        if own.get(name, ui.PARAMS[name].default) != at.session_state["p:" + name]:
            assert name in link, (name, link)
    reopened = open_page(path, link)
    again = {k: v for k, v in controls(reopened).items() if not DOWNLOAD_PICKERS.match(k)}
    assert again == after, {
        k: (after.get(k), again.get(k)) for k in set(after) | set(again) if after.get(k) != again.get(k)
    }


def shuffled(at: AppTest) -> str:
    return next(m.value for m in at.markdown if "**Shuffled:**" in m.value)


def test_the_position_pages_shuffle_is_in_its_link() -> None:
    at = open_page("pages/position.py")
    first = shuffled(at)
    at.button(key="pos:shuffle").click().run()
    assert written(at).get("shuffle") == "1"
    assert shuffled(at) != first
    assert shuffled(open_page("pages/position.py", written(at))) == shuffled(at)


def test_a_link_carries_its_own_pages_settings_and_never_presenter_mode() -> None:
    """Compare's side B and the KV cache's step stay on their pages; present=true opens presenter mode but no page
    writes it, so a student who opens the presenter's link gets the ordinary page."""
    at = open_page("pages/compare.py", {"present": "true", "decode_step": "2"})
    at.slider(key="w:b_heads").set_value(4).run()
    assert written(at).get("b_heads") == "4" and "present" not in written(at)
    assert at.session_state["p:present"] is True  # still presenting
    at.switch_page("pages/masks.py")
    at.run()
    link = written(at)
    assert "b_heads" not in link and "decode_step" not in link and "present" not in link, link
    at.switch_page("pages/kv_cache.py")
    at.run()
    assert written(at).get("decode_step") == "2"  # back on its own page, in its link again


def opened(params: dict[str, str]) -> AppTest:
    """A link opened (its first run lands on the course's map, the default page), then Self-attention."""
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=120)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    warned = [w.value for w in at.warning]
    at.switch_page("pages/self_attention.py").run()
    assert not at.exception, [e.value for e in at.exception]
    at.opening_warnings = warned  # what the link's first run said, on the page it landed on
    return at


@pytest.mark.parametrize("unknown", [3, 5000])
def test_unknown_link_keys_are_dropped_from_the_address_with_a_warning(unknown: int) -> None:
    # Issue 38: Streamlit ignores a query string of more than 1,000 parameters whole, so the page saw none, warned of
    # nothing and left the thousands of keys in the address bar. Few or many, unknown keys leave the address and the
    # page says so; a link of at most 1,000 parameters keeps its known values.
    params = {f"junk{i}": "x" for i in range(unknown)} | {"heads": "2"}
    at = opened(params)
    assert written(at) == ({"heads": "2"} if unknown < 1000 else {}), list(written(at))[:5]
    warned = " ".join([*at.opening_warnings, *(w.value for w in at.warning)])
    if unknown < 1000:
        assert r"junk0 \(unknown\)" in warned  # escaped: shown as plain text
        assert at.session_state["p:heads"] == 2
    else:
        assert f"it has {unknown + 1:,} parameters" in warned and "taken out of the address" in warned
        assert at.session_state["p:heads"] == ui.PARAMS["heads"].default
    at.number_input(key="w:seed").set_value(7).run()  # the learner moves on: the warning goes, the link holds the view
    assert not [w for w in at.warning if "link" in w.value] and written(at).get("seed") == "7"


@pytest.mark.parametrize(
    ("report", "words"),
    [
        ({"fields": 1501, "chars": 12_000}, "it has 1,501 parameters, and a page reads a link of at most 1,000"),
        ({"fields": 3, "chars": 600_000}, "it is 600,000 characters long, and a page reads a link of at most 524,288"),
        ({"fields": 3, "chars": 20}, None),  # read: nothing to say
        ({"fields": "many"}, None),  # what a browser sends is checked, never trusted
        ("1501", None),
        (None, None),
    ],
)
def test_the_browsers_report_of_a_dropped_link_is_said_once_checked(report, words) -> None:
    """assets/link_check.js reports a link Streamlit dropped whole (only the browser still has it); ui.state turns
    the report into the page's warning, and ignores one it cannot read or one for a link that was read."""

    def page(report) -> None:
        import streamlit as st

        from ui.state import dropped_link, init_state  # AppTest runs the script in this process: ui is on its path

        init_state()
        dropped_link(report)
        st.write(repr(st.session_state.get("_url_ignored")))

    at = AppTest.from_function(page, kwargs={"report": report}).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.markdown[0].value == repr(words)
