"""Who is on the server: the visitor (Streamlit session) a page runs for, and whether a visitor is still there.

What belongs here: reading Streamlit's own session registry, nothing else. The training pool pins a visitor's runs
and scrub cache to their session and lets go once it has ended (server/training.py).

A session is active from its browser tab's websocket connecting until it closes (the tab closed, reloaded or gone
offline); Streamlit keeps a closed one a while for a reconnect, and a tab that reconnects gets the same session id,
so callers allow a short grace before they take a session for gone.
"""

from __future__ import annotations


def current() -> str | None:
    """The session id of the page run calling this (None outside a page's run: a test, the command line)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return None if ctx is None else ctx.session_id


def alive(session_id: str) -> bool:
    """Whether the session's tab is connected now. Without a running Streamlit server (AppTest, a script) nothing
    can tell, and every session counts as present."""
    from streamlit import runtime

    if not runtime.exists():
        return True
    return runtime.get_instance().is_active_session(session_id)
