"""A fresh server's first screen (dashboard.first_screen, issue 45): the course map drawn before torch's import has
ended. It must import no torch, draw what the course's page draws on the bare address, and every click on it must
do what the page's own does."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

import ui
from ui.views import course
from ui.views.course import outline

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "numpy", "pandas", "altair", "transformers")


def test_the_first_screens_imports_take_no_torch() -> None:
    """What dashboard.py imports before it draws the first screen: streamlit, its components, `ui` and the course's
    outline. In a fresh interpreter none of them brings torch, numpy, pandas or altair in."""
    code = (
        "import sys, dashboard, ui, ui.views.course.outline\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
        "print(ui.loaded())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "False"], out.stdout


def test_the_outline_is_the_lessons() -> None:
    """The outline the map is drawn from is the course's lessons' own first fields, in order."""
    assert [(e.id, e.title, e.page, e.page_title, e.minutes) for e in outline.OUTLINE] == [
        (lesson.id, lesson.title, lesson.page, lesson.page_title, lesson.minutes) for lesson in course.LESSONS
    ]
    assert set(outline.SHORT_ROUTE) <= set(outline.ENTRY)


def _first(monkeypatch: pytest.MonkeyPatch, **params: str) -> AppTest:
    """The dashboard's first run as on a fresh server whose warm-up has not yet loaded `ui`."""
    monkeypatch.setattr(ui, "loaded", lambda: False)
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=60)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _drawn(node: Any) -> list[tuple]:
    """The elements in order: their kind, key, label, value and a widget's id (a block's key and what it holds): the
    ids must be the page's own, or a press on the first screen (the clicker's) would not reach the page's next run."""
    out: list[tuple] = []
    children = getattr(node, "children", None)
    if children is not None and type(node).__name__ in ("ElementTree", "Block", "SpecialBlock"):
        out.append((type(node).__name__, getattr(node, "key", None)))
        for k in sorted(children):
            out += _drawn(children[k])
        return out
    try:
        value = str(node.value)
    except Exception:  # an element whose value AppTest cannot read
        value = None
    element_id = getattr(node, "id", None) or getattr(getattr(node, "proto", None), "id", None) or None
    return [*out, (node.type, getattr(node, "key", None), getattr(node, "label", None), value, element_id)]


def test_the_first_screen_draws_the_course_map(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same elements, in the same places, with the same words and keys, as the course's page draws on the bare
    address: the map, its buttons, the presenter switch and the link check. Only the heatmap's preload, hidden, still
    fills the first slot (the page's own run empties it)."""
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=60).run()
    assert not at.exception
    page = _drawn(at._tree)
    first = _first(monkeypatch)
    screen = _drawn(first._tree)
    assert "al:first" in first.session_state
    assert [e[:4] for e in screen if e[1] == "al-preload"] == [("bidi_component", "al-preload", None, "{}")]
    assert ("empty", None, None, "None", None) in page
    assert any(e[1] == "keys:course" and e[4] for e in screen)  # the clicker's id is compared too
    assert [e for e in screen if e[:2] != ("bidi_component", "al-preload")] == [e for e in page if e[0] != "empty"]
    assert first.title[0].value == course.TITLE
    assert len([b for b in first.button if b.key.startswith("co:open:")]) == len(course.LESSONS)


def test_a_lesson_opened_from_the_first_screen_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    """A click on a lesson's row: `ui` is loaded and the link read before the callback acts, and the run that
    follows is the page's own: the lesson, at its question, in the link."""
    at = _first(monkeypatch)
    at.button(key="co:open:masks").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["p:lesson"] == "masks"
    assert at.query_params["lesson"] == "masks"
    assert at.subheader[0].value.endswith(course.BY_ID["masks"].title)


def test_start_the_route_and_presenter_mode_work_from_the_first_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    at = _first(monkeypatch)
    at.button(key="co:route").click().run()
    assert at.session_state["p:route"] == "short"
    assert at.button(key="co:route").label == "Take the whole course"
    at = _first(monkeypatch)
    at.button(key="co:start").click().run()
    assert at.session_state["p:lesson"] == outline.OUTLINE[0].id
    at = _first(monkeypatch)
    at.toggle(key="w:present").set_value(True).run()
    assert at.session_state["p:present"] is True
    assert not at.exception


def test_only_a_sessions_first_run_on_the_bare_address_is_a_first_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    """A link with parameters opens the page it names (the course's lesson), whatever the warm-up has done; the
    session's second run, whatever asked for it, is the page's own."""
    at = _first(monkeypatch, lesson="scaling")
    assert "al:first" not in at.session_state
    assert at.session_state["p:lesson"] == "scaling"
    at = _first(monkeypatch)
    at.run()
    assert at.session_state["_state_ready"] is True
    assert at.title[0].value == course.TITLE


@pytest.mark.parametrize("package", ["ui", "attention", "ui.views.course"])
def test_a_lazy_package_gives_the_names_its_imports_say(package: str) -> None:
    """`ui`, `attention` and the course's package import their names at first use (PEP 562); the imports they show
    to readers and tools (under TYPE_CHECKING) say what each name is. Both agree, name for name and object for
    object, and `__all__` lists them."""
    module = importlib.import_module(package)
    tree = ast.parse(Path(module.__file__).read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test))
    said: dict[str, Any] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom), ast.unparse(node)
        base = importlib.import_module("." * node.level + (node.module or ""), package) if node.module else None
        for alias in node.names:
            said[alias.name] = (
                getattr(base, alias.name) if base is not None else importlib.import_module(f"{package}.{alias.name}")
            )
    lazy = module._EXPORTS.keys() | set(getattr(module, "_MODULES", ()))
    assert set(said) == lazy
    assert {name: getattr(module, name) for name in said} == said
    assert lazy <= set(module.__all__)


def test_every_submodule_of_ui_is_reached_from_a_bare_import() -> None:
    """`import ui` once imported every submodule, and code reaches them as attributes (`ui.views.poll`,
    benchmarks/soak.py's `ui.views.watch_it_learn_settings`): with names loaded at first use, an attribute that is a
    submodule is imported then, and a name that is neither still raises AttributeError."""
    code = (
        "import ui\n"
        "print(ui.views.watch_it_learn_settings.PREFIX, ui.keys.clicks.__name__, ui.qr.__name__)\n"
        "print(hasattr(ui, 'no_such_name'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["train_", "clicks", "ui.qr", "False"], out.stdout
