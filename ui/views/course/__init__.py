"""The course: a path through the lab's pages, each lesson asking before it shows (predict, then see).

The page (pages/course.py), the other pages' links to their lessons and the tests use the names re-exported here;
the course's settings (where a learner is in it) are declared in settings.py. The names are imported at their first
use (PEP 562), with every page's declarations, so that the course's outline (outline.py: its lessons' titles and
minutes, and the map drawn from them) imports no torch: a fresh server draws the map while torch is imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_BY_MODULE = {  # fmt: skip
    ".flow": "STAGE Answer course_map current follow_link lesson_defaults lesson_link lesson_view progress",
    ".outline": "OUTLINE PAGE SHORT_ROUTE TITLE",
    ".lessons": "BY_ID BY_PAGE LESSONS PLANS Lesson",
    ".runs": "RUNS",
    ".settings": "SETTINGS",
}
_EXPORTS = {name: module for module, names in _BY_MODULE.items() for name in names.split()}

__all__ = ["BY_ID", "BY_PAGE", "LESSONS", "OUTLINE", "PAGE", "PLANS", "RUNS", "SETTINGS", "SHORT_ROUTE", "STAGE",
           "TITLE", "Answer", "Lesson", "course_map", "current", "follow_link", "lesson_defaults", "lesson_link",
           "lesson_view", "progress"]  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .. import declare

    declare()
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:  # what the names are, for readers and tools that follow imports (a test keeps _BY_MODULE to it)
    from .flow import (
        STAGE,
        Answer,
        course_map,
        current,
        follow_link,
        lesson_defaults,
        lesson_link,
        lesson_view,
        progress,
    )
    from .lessons import BY_ID, BY_PAGE, LESSONS, PLANS, Lesson
    from .outline import OUTLINE, PAGE, SHORT_ROUTE, TITLE
    from .runs import RUNS
    from .settings import SETTINGS
