"""The course: its map (the front door), then one lesson at a time, each asking before it shows."""

import ui
from ui.views.course import outline  # no torch: a fresh server's first screen draws from it alone

# On a session's first run while torch is still imported, dashboard.py asks for the first screen: the map, drawn from
# the outline alone, and nothing else this run. Every other run is the page's own.
if not outline.first_screen():
    from ui.views import course

    course.follow_link()  # first: the browser's Back and Forward move through the course's stages
    ui.show_url_warnings(**course.lesson_defaults())  # a lesson opens on its own setting (Masks: causal)
    lesson = course.current()
    if lesson is None:
        course.course_map()
    shown = lesson is not None and course.lesson_view(lesson)
    ui.finish(figures=shown)  # no "All figures" button before the figure it would download
