"""The course: a path through the lab's pages, each lesson asking before it shows (predict, then see).

The page (pages/course.py), the other pages' links to their lessons and the tests use the names re-exported here,
and the course's settings (where a learner is in it) are declared here.
"""

from attention.basics.params import Param
from attention.lessons.course import QUESTIONS

from ... import state
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

SETTINGS = {
    "lesson": Param("choice", "Lesson", "The course's lesson shown (map: the course's map).", default="map",
                    choices=("map", *QUESTIONS)),
    "progress": Param("text", "Progress", "The course's lessons done and how each prediction went, as "
                      "lesson:right, lesson:wrong or lesson:seen joined by commas.", default=""),
    "route": Param("choice", "Route", "The course's lessons taken in order: all, or the short route for a "
                   "50-minute class.", default="all", choices=("all", "short")),
    "answer": Param("text", "Answer", "Where the course's lesson stands: empty at its question, '-' at a reveal "
                    "without a prediction, else the prediction committed (a reload or Back reopens that stage).",
                    default=""),
}  # fmt: skip
state.register("course", SETTINGS)

__all__ = ["BY_ID", "BY_PAGE", "LESSONS", "OUTLINE", "PAGE", "PLANS", "RUNS", "SETTINGS", "SHORT_ROUTE", "STAGE",
           "TITLE", "Answer", "Lesson", "course_map", "current", "follow_link", "lesson_defaults", "lesson_link",
           "lesson_view", "progress"]  # fmt: skip
