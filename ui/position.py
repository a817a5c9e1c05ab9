"""What only the Position page needs besides the shared figures: its "Shuffle again" button.

What belongs here: widgets and helpers of the Position page alone (the numbers come from `attention.permutation`
and `attention.rope_demo`; its line charts are `ui.lines`).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

SHUFFLE_KEY = "pos:shuffles"  # how many times "Shuffle again" was pressed in this session (not in the link)


def _shuffle_again() -> None:
    st.session_state[SHUFFLE_KEY] = st.session_state.get(SHUFFLE_KEY, 0) + 1


def shuffle_button(container: Any = None, *, disabled: bool = False) -> int:
    """A "Shuffle again" button; returns how many times it was pressed this session (0 at first), for the seed."""
    (container or st).button(
        "Shuffle again", key="pos:shuffle", on_click=_shuffle_again, disabled=disabled, icon=":material/shuffle:"
    )
    return int(st.session_state.get(SHUFFLE_KEY, 0))
