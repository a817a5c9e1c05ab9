"""The printable lesson plans in docs/course/ are the ones scripts/lesson_plans.py writes from ui/pages/course/."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.thorough  # writes every plan: --all, not the fast tier
def test_the_lesson_plans_are_up_to_date():
    spec = importlib.util.spec_from_file_location("lesson_plans", ROOT / "scripts" / "lesson_plans.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    files = module.render()
    on_disk = {p.name: p.read_text() for p in (ROOT / "docs" / "course").glob("*.md")}
    assert set(on_disk) == set(files)
    stale = [name for name, text in files.items() if on_disk[name] != text]
    assert not stale, f"rerun python scripts/lesson_plans.py: {stale}"
    for name, text in files.items():
        if name != "README.md":
            for part in ("**The question**", "**Say at the reveal.**", "**A common wrong answer, and why.**"):
                assert part in text, (name, part)
