"""The course's settings (where a learner is in it), registered with `ui.state` when imported (ui/views/__init__.py's
`declare`)."""

from attention.basics.params import Param
from attention.lessons.course import QUESTIONS

from ... import state

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
