"""A text longer than ui.MAX_CHARS is refused before anything splits it into words (a 23 MB paste would split
into 770 MB of tokens), on every page, and the text areas take at most ui.MAX_CHARS characters."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import attention
import ui
from attention.basics import config

ROOT = Path(__file__).resolve().parents[2]
LONG = "w " * 50_000  # 100,000 characters, 50,000 words
PAGES = ("self_attention", "masks", "multi_head", "cross_attention", "scaling", "pitfalls", "mask_editor",
         "soft_lookup", "compare")  # fmt: skip


@pytest.fixture
def split_lengths(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every text given to tokenize, wherever the pages and the package look it up."""
    lengths: list[int] = []
    real = config.tokenize

    def counting(text: str) -> tuple[str, ...]:
        lengths.append(len(text))
        return real(text)

    for module in (config, attention, ui.results):
        monkeypatch.setattr(module, "tokenize", counting)
    return lengths


def on_page(path: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=60)
    at.run()  # the course's map, the default page
    at.switch_page(f"pages/{path}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("path", PAGES)
def test_a_long_sentence_is_refused_before_it_is_split(path: str, split_lengths: list[int]) -> None:
    at = on_page(path)
    at.session_state["p:sentence"] = LONG  # past the text area: as a client that ignores its limit would
    split_lengths.clear()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "100,000 characters long; paste at most 20,000" in " ".join(e.value for e in at.error)
    assert max(split_lengths, default=0) <= ui.MAX_CHARS


def test_a_long_key_value_sentence_is_refused_before_it_is_split(split_lengths: list[int]) -> None:
    at = on_page("cross_attention")
    at.session_state["p:cross_sentence"] = LONG
    split_lengths.clear()
    at.run()
    assert "the key/value sentence is 100,000 characters long" in " ".join(e.value for e in at.error)
    assert max(split_lengths, default=0) <= ui.MAX_CHARS


@pytest.mark.parametrize("path, name", [("self_attention", "sentence"), ("cross_attention", "cross_sentence")])
def test_a_longer_text_in_a_box_is_refused_and_the_box_says_why(path: str, name: str, split_lengths: list[int]) -> None:
    """Issue 32: with max_chars on the box, the browser dropped a 31,547-character paste whole and nobody said why.
    The box takes any text; the server refuses one past MAX_CHARS, says so under the box and keeps the last text."""
    at = on_page(path)
    box = at.text_area(key=f"w:{name}")
    before = box.value
    assert not box.max_chars  # no limit in the browser, which dropped a longer paste without a word
    split_lengths.clear()
    box.set_value("x" * 31_547).run()
    assert not at.exception, [e.value for e in at.exception]
    said = [e.value for e in at.error]
    assert said == ["That text is 31,547 characters long and was not taken: a box takes at most 20,000. The box "
                    "keeps its last text."]  # fmt: skip
    assert at.session_state[f"p:{name}"] == at.text_area(key=f"w:{name}").value == before
    assert max(split_lengths, default=0) <= ui.MAX_CHARS
    at.run()  # said once: the next run has moved on
    assert not at.error
    at.text_area(key=f"w:{name}").set_value("y " * (ui.MAX_CHARS // 2)).run()  # exactly MAX_CHARS is taken
    assert len(at.session_state[f"p:{name}"]) == ui.MAX_CHARS and "was not taken" not in str(at.error)


def test_a_longer_text_in_the_presenters_box_is_refused_there_with_why() -> None:
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=60)
    at.query_params["present"] = "true"
    at.run()
    at.switch_page("pages/self_attention.py").run()
    at.text_area(key="w:present:sentence").set_value("z" * 20_001).run()
    assert [e.value for e in at.error] == ["That text is 20,001 characters long and was not taken: a box takes at "
                                           "most 20,000. The box keeps its last text."]  # fmt: skip
    assert at.text_area(key="w:present:sentence").value == at.session_state["p:sentence"] != "z" * 20_001
