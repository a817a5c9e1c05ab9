"""What only the Position page needs besides the shared figures: its "Shuffle again" button.

What belongs here: widgets and helpers of the Position page alone (the numbers come from `attention.lessons.permutation`
and `attention.lessons.rope_demo`; its line charts are `ui.lines`).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from attention.basics.params import Param

from .. import state
from ..state import get, put

SETTINGS = {
    "shuffle": Param("int", "Shuffle", "Which shuffle of the sentence (how many times \"Shuffle again\" was "
                     "pressed).", default=0, lo=0, hi=9999),
}  # fmt: skip
state.register("position", SETTINGS)


def _shuffle_again() -> None:
    put("shuffle", (int(get("shuffle")) + 1) % (int(SETTINGS["shuffle"].hi) + 1))


def shuffles() -> int:
    """How many times "Shuffle again" was pressed (0 at first; the link's `shuffle`): the shuffle's seed, known
    before the button is drawn (its click is counted before the run starts)."""
    return int(get("shuffle"))


def shuffle_button(container: Any = None, *, disabled: bool = False) -> int:
    """A "Shuffle again" button; returns how many times it was pressed this session (0 at first), for the seed."""
    (container or st).button(
        "Shuffle again", key="pos:shuffle", on_click=_shuffle_again, disabled=disabled, icon=":material/shuffle:"
    )
    return shuffles()
