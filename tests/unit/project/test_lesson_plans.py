"""The printable lesson plans in docs/course/ are the ones scripts/lesson_plans.py writes from ui/views/course/."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.thorough  # writes every plan: --all, not the fast tier
def test_the_lesson_plans_are_up_to_date():
    from scripts import lesson_plans

    files = lesson_plans.render()
    on_disk = {p.name: p.read_text() for p in (ROOT / "docs" / "course").glob("*.md")}
    assert set(files) <= set(on_disk)
    # every numbered plan on disk is one the script writes (a lesson renamed or removed leaves none behind); other
    # pages written by hand may sit beside the plans (inventory.md)
    assert {name for name in on_disk if name[:2].isdigit()} == {name for name in files if name[:2].isdigit()}
    stale = [name for name, text in files.items() if on_disk[name] != text]
    assert not stale, f"rerun python -m scripts.lesson_plans: {stale}"
    for name, text in files.items():
        if name not in ("README.md", "50-minutes.md"):
            for part in ("**The question**", "**Say at the reveal.**", "**A common wrong answer, and why.**"):
                assert part in text, (name, part)


def test_the_short_route_fits_fifty_minutes_and_the_plans_link_it():
    """The short route (ui/views/course/outline.py) is lessons of the course, in its order, within 50 minutes
    with time to open and close; the plans' README marks them and links the 50-minute plan."""
    from ui.views import course
    from ui.views.course.outline import SHORT_ROUTE

    ids = [lesson.id for lesson in course.LESSONS]
    route = [course.BY_ID[i] for i in SHORT_ROUTE]
    assert [ids.index(i) for i in SHORT_ROUTE] == sorted(ids.index(i) for i in SHORT_ROUTE)
    assert 40 <= sum(lesson.minutes for lesson in route) <= 46
    plan = (ROOT / "docs" / "course" / "50-minutes.md").read_text()
    for lesson in route:
        assert f"{ids.index(lesson.id) + 1:02d}-{lesson.id}.md" in plan
    assert "| 47–50 | Close" in plan or "–50 | Close" in plan
    readme = (ROOT / "docs" / "course" / "README.md").read_text()
    assert "(50-minutes.md)" in readme
    assert readme.count("| ✓ |") == len(route)
