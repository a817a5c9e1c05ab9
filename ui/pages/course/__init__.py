"""The course: a path through the lab's pages, each lesson asking before it shows (predict, then see).

The page (pages/course.py), the other pages' links to their lessons and the tests use the names re-exported here.
"""

from .flow import (
    PAGE,
    STAGE,
    TITLE,
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
from .runs import RUNS

__all__ = ["BY_ID", "BY_PAGE", "LESSONS", "PAGE", "PLANS", "RUNS", "STAGE", "TITLE", "Answer", "Lesson", "course_map",
           "current", "follow_link", "lesson_defaults", "lesson_link", "lesson_view", "progress"]  # fmt: skip
