"""A page's keyboard and the elements that take no room, apart from the figures (no torch, no numpy): the course's
map draws with these before torch has been imported on a fresh server (dashboard.py).

    clicks        this run's press of a presenter's clicker (PageDown/PageUp, the arrow keys)
    key_class     the CSS class Streamlit gives an element with a key
    out_of_flow   an element with a key taken out of the column's flow
    ignore_event  a component's callback whose event is read from its trigger value in the same run
    PRESENTER_LABEL, PRESENTER_HELP  the presenter-mode switch's words (ui/widgets.py's `presenter_toggle`)
"""

from __future__ import annotations

import re

import streamlit as st

from assets import STEP_KEYS

PRESENTER_LABEL = "Presenter mode"
PRESENTER_HELP = (
    "For a projector: hides the controls and enlarges the type. Open a link with ?present=true to start in it."
)


def ignore_event() -> None:
    """The component's click callback: the click is read from its trigger value in the same run."""


def clicks(
    key: str,
    value: float,
    *,
    stage: str | None = None,
    slider: str | None = None,
    on_open: bool = True,
    hold: bool = False,
) -> int:
    """This run's press of a presenter's clicker: +1 (PageDown or →), -1 (PageUp or ←), 0 (none). value: what the
    page shows now; stage: a CSS selector of what to scroll to the window's top whenever the value changes, and when
    it first shows unless on_open is False (step mode's stage scrolls at once; a page that opens on its title and
    controls scrolls only once a press changes what it shows), or None; slider: the widget key of a slider that shows
    the value, whose PageDown/PageUp then move it as the clicker does (one on, one back) instead of a page the other
    way; hold: a press while the page's script still runs is dropped (a slow step is seen before the next press
    counts). One call a page, before the widgets that show the value."""
    data = {"step": value, "stage": stage, "slider": None if slider is None else "." + key_class(slider),
            "on_open": on_open, "hold": hold}  # fmt: skip
    out_of_flow(f"keys:{key}")
    keys = STEP_KEYS(key=f"keys:{key}", data=data, on_move_change=ignore_event, height=0)
    move = keys.get("move") if keys is not None else None
    return 1 if move == "next" else -1 if move == "previous" else 0


def key_class(key: str) -> str:
    """The CSS class Streamlit gives the element of a widget or container with this key."""
    return "st-key-" + re.sub(r"[^a-zA-Z0-9_-]", "-", key.strip())


def out_of_flow(key: str) -> None:
    """Take the element with this key out of the column's flow: a component that draws nothing (height 0) still
    has a place, and the column's gap beside it would push what follows down by 16 px. A style alone takes no room."""
    st.html(f"<style>.{key_class(key)} {{ display: none; }}</style>")
