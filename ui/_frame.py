"""Imported first by `ui` (before torch and the rest): a page file run on its own goes back through dashboard.py.

A deep link opened first on a fresh server runs the page file on its own (see `ui.state.ensure_frame`), and until
dashboard.py's `st.navigation` runs, the sidebar lists the pages/ folder's raw file names. The page's `import ui`
took a few seconds on a fresh server (torch) before `ensure_frame` asked for the rerun; here the rerun comes first,
so the app's own navigation replaces the file names at once.
"""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx


def frame_first() -> None:
    if (
        get_script_run_ctx(suppress_warning=True) is None
        or not PagesManager.uses_pages_directory
        or st.session_state.get("_state_ready")
    ):
        return
    PagesManager.uses_pages_directory = False  # what st.navigation sets; ensure_frame does the same
    st.rerun()  # leaves this import unfinished: Python forgets the half-imported `ui`, and the rerun imports it


frame_first()
