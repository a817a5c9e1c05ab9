"""The course's outline and its map: the lessons in order (title, page, minutes), the short route, and the map that
lists them. No torch, no numpy: a fresh server draws the map (its front door) from this module while torch is still
being imported (dashboard.py), and the course's page draws it with the learner's marks (flow.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import streamlit as st

from assets import LINK_CHECK

from ...keys import PRESENTER_HELP, PRESENTER_LABEL, clicks, ignore_event, out_of_flow
from ...state import put

PAGE = "pages/course.py"
TITLE = "Predict, then see: a course through attention"
MARKS = {"right": "✓", "wrong": "✗", "seen": "◉"}  # not yet: ○ (plain glyphs: no emoji font needed)
NOT_YET = "○"
FIRST = "al:first"  # session: "asked" by dashboard.py for the run that draws the first screen, then "drawn"


class Entry(NamedTuple):
    """A lesson's place in the course: the first fields of its `Lesson` (lessons.py), in the same order."""

    id: str
    title: str
    page: str  # the page whose computation the lesson uses
    page_title: str
    minutes: int


OUTLINE: tuple[Entry, ...] = (
    Entry("soft_lookup", "The soft lookup", "pages/soft_lookup.py", "Soft lookup", 5),
    Entry("softmax", "Scores and the softmax", "pages/self_attention.py", "Self-attention", 5),
    Entry("scaling", "Why divide by √d_k", "pages/scaling.py", "Why divide by √d_k", 7),
    Entry("masks", "Masks", "pages/masks.py", "Masks and dropout", 5),
    Entry("multi_head", "Several heads", "pages/multi_head.py", "Multi-head", 6),
    Entry("position", "Where words are", "pages/position.py", "Position", 7),
    Entry("cross_attention", "Cross-attention", "pages/cross_attention.py", "Cross-attention", 5),
    Entry("kv_cache", "Grouped-query heads and the KV cache", "pages/kv_cache.py", "KV cache", 6),
    Entry("flash_attention", "FlashAttention's tiles", "pages/flash_attention.py", "FlashAttention", 7),
    Entry("real_model", "A real encoder's heads", "pages/real_model.py", "Real model", 8),
    Entry("chat_model", "A chat model's sinks and induction heads", "pages/chat_model.py", "Inside a chat model", 8),
    Entry("watch_it_learn", "Watch one form", "pages/watch_it_learn.py", "Watch it learn", 8),
    Entry("two_layers", "Why two layers?", "pages/watch_it_learn.py", "Watch it learn", 7),
)
ENTRY = {entry.id: entry for entry in OUTLINE}
# The short route for a 50-minute class (docs/course/50-minutes.md): seven lessons, 44 of the course's 84 minutes,
# leaving six to open and close. It keeps the mechanism (lookup, scaling, masks, heads, positions) and the two that
# make it real (the cache a chat model keeps, an induction head in a trained model); it leaves out the softmax's
# doubling (the scaling lesson shows the same sharpening), cross-attention, FlashAttention, the encoder's sinks
# (lesson 11 shows a sink too) and the training run and its circuit (they wait for a run of their own).
SHORT_ROUTE = ("soft_lookup", "scaling", "masks", "multi_head", "position", "kv_cache", "chat_model")


def route(short: bool) -> tuple[Entry, ...]:
    """The lessons a learner goes through in order: all, or the short route's (a 50-minute class)."""
    return tuple(entry for entry in OUTLINE if entry.id in SHORT_ROUTE) if short else OUTLINE


def go(lesson_id: str) -> None:
    """Open a lesson (or the map) at its question."""
    st.session_state["course:problem"] = None
    put("lesson", lesson_id)
    put("answer", "")  # a lesson opens at its question


def take(which: str) -> None:
    """Take the whole course ("all") or the short route ("short")."""
    put("route", which)


def _as_is(callback: Callable[..., Any]) -> Callable[..., Any]:
    return callback


def course_map(
    marks: Mapping[str, str], *, short: bool, wrap: Callable[[Callable[..., Any]], Callable[..., Any]] = _as_is
) -> None:
    """The front door: the lessons in order with the learner's marks (lesson id -> right, wrong or seen), the route
    (short: the 50-minute class's), and the way out to the pages. wrap(callback) is what runs a button's callback
    (the first screen's, `_loading`: `ui` loaded and the session's link read first)."""
    st.title(TITLE)
    st.caption(
        f"A course of {len(OUTLINE)} short lessons through the lab. Each asks one question about your own sentence "
        "before it shows the answer: commit to a guess, then see the lab compute it."
    )
    on_route = route(short)
    top = st.container(horizontal=True, vertical_alignment="center")
    first = next((entry.id for entry in on_route if entry.id not in marks), on_route[0].id)
    if clicks("course", -1) > 0:  # a presenter's PageDown on the map: the first lesson not done yet
        wrap(go)(first)
        st.rerun()
    top.button("Start the course" if not marks else "Continue", type="primary", key="co:start", on_click=wrap(go),
               args=(first,))  # fmt: skip
    top.page_link("pages/self_attention.py", label="Just explore: open Self-attention", icon=":material/explore:")
    top.page_link("pages/inventory.py", label="Check what you know: before the course, and again after it",
                  icon=":material/quiz:")  # fmt: skip
    starred = route(True)
    minutes = sum(entry.minutes for entry in starred)
    ways = st.container(horizontal=True, vertical_alignment="center")
    if short:
        ways.markdown(f"**The short route ★**: {len(starred)} lessons, {minutes} min, for a 50-minute class. Next and "
                      "PageDown go from one ★ lesson to the next.")  # fmt: skip
        ways.button("Take the whole course", key="co:route", on_click=wrap(take), args=("all",))
    else:
        ways.caption(f"A 50-minute class? The short route takes the {len(starred)} lessons marked ★ ({minutes} min).")
        ways.button("Take the short route ★", key="co:route", on_click=wrap(take), args=("short",))
    for k, entry in enumerate(OUTLINE):
        row = st.container(horizontal=True, vertical_alignment="center", key=f"co-map-{entry.id}")
        mark = MARKS.get(marks.get(entry.id, ""), NOT_YET)
        row.button(f"{mark} {k + 1}. {entry.title}", key=f"co:open:{entry.id}", on_click=wrap(go), args=(entry.id,))
        star = " · ★ short route" if entry.id in SHORT_ROUTE else ""
        row.caption(f"{entry.minutes} min · the page: {entry.page_title}{star}")
    st.caption("Your progress travels in this page's link (bookmark it to resume); the server keeps nothing about you.")


def first_screen() -> bool:
    """A fresh server's first screen, when dashboard.py asks for it (`FIRST`): what the course's page draws on a
    session's first run on the bare address, from this module alone, while torch is still imported. The same elements
    as the page's own run: the presenter switch in the sidebar and the browser's link check (`ui.show_url_warnings`
    on a link without parameters), then the map with no marks on the whole course. Every callback loads `ui` and
    reads the session's link first (`_loading`). Returns whether it drew (the page then draws nothing else)."""
    if st.session_state.get(FIRST) != "asked":
        return False
    st.session_state[FIRST] = "drawn"
    st.session_state["w:present"] = False
    st.sidebar.toggle(PRESENTER_LABEL, key="w:present", on_change=_loading(_present), help=PRESENTER_HELP)
    out_of_flow("al-link-check")
    LINK_CHECK(key="al-link-check", data=None, on_dropped_change=ignore_event, height=0)
    course_map({}, short=False, wrap=_loading)
    return True


def _loading(callback: Callable[..., Any]) -> Callable[..., Any]:
    """A first screen's callback: the parameters' registry whole (waiting for torch's import if it has not ended) and
    the session's link read, as every run of a page has them, before it acts."""

    @functools.wraps(callback)
    def run(*args: Any) -> Any:
        # every parameter registered, in the order `ui.load()` registers them (the toy pages' first), then the link
        # read: the page's next run loads the rest of `ui`
        from ... import settings, state  # noqa: F401
        from .. import declare

        declare()
        state.init_state()
        return callback(*args)

    return run


def _present() -> None:
    put("present", bool(st.session_state["w:present"]))
