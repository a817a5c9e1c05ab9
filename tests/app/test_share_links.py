"""Share links never hold more than the server opens again: the longest texts are left out of a view too big
for a link, and the page says which (see ui.URL_MAX for the measured limit; tests/browser/test_share_links.py
opens such a link on the real server).
"""

from __future__ import annotations

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
