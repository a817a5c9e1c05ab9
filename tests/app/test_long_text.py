"""A text longer than ui.MAX_CHARS is refused before anything splits it into words (a 23 MB paste would split
into 770 MB of tokens), on every page, and the text areas take at most ui.MAX_CHARS characters."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import attention
import ui
from attention.basics import config as config_module

ROOT = Path(__file__).resolve().parents[2]
LONG = "w " * 50_000  # 100,000 characters, 50,000 words
PAGES = ("self_attention", "masks", "multi_head", "cross_attention", "scaling", "pitfalls", "mask_editor",
         "soft_lookup", "compare")  # fmt: skip


@pytest.fixture
def split_lengths(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every text given to tokenize, wherever the pages and the package look it up."""
    lengths: list[int] = []
    real = config_module.tokenize

    def counting(text: str) -> tuple[str, ...]:
        lengths.append(len(text))
        return real(text)

    for module in (config_module, attention, ui.results):
        monkeypatch.setattr(module, "tokenize", counting)
    return lengths


def on_page(path: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=60)
    at.run()
    if path != "self_attention":
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
def test_a_text_area_takes_at_most_max_chars(path: str, name: str, split_lengths: list[int]) -> None:
    at = on_page(path)
    assert at.text_area(key=f"w:{name}").max_chars == ui.MAX_CHARS  # the browser stops a paste there
    at.text_area(key=f"w:{name}").set_value(LONG).run()  # and the server cuts what a client sends past it
    assert len(at.session_state[f"p:{name}"]) == ui.MAX_CHARS
    assert "10000 tokens; at most 512" in " ".join(e.value for e in at.error)
    assert max(split_lengths) <= ui.MAX_CHARS
