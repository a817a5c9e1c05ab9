"""Attention Lab: the frame. Page config, navigation over pages/, and the server's start-up warm-up.

Each page's URL path is its file name (`/masks`, `/multi_head`): the path Streamlit's older
folder-based navigation gives a file in pages/, so a share link opened on a freshly started
server names the same page both ways (see `ui.ensure_frame`).
"""

import sys
import threading
from contextlib import asynccontextmanager

import streamlit as st

import assets

PAGES = {
    "Course": [
        ("pages/course.py", "Predict, then see", ":material/school:"),
        ("pages/inventory.py", "Check what you know", ":material/quiz:"),
    ],
    "Attention": [
        ("pages/self_attention.py", "Self-attention", ":material/visibility:"),
        ("pages/masks.py", "Masks and dropout", ":material/grid_on:"),
        ("pages/multi_head.py", "Multi-head", ":material/view_column:"),
        ("pages/cross_attention.py", "Cross-attention", ":material/compare_arrows:"),
        ("pages/position.py", "Position", ":material/format_list_numbered:"),
        ("pages/tutorials.py", "Tutorials", ":material/menu_book:"),
    ],
    "Experiments": [
        ("pages/compare.py", "Compare A/B", ":material/difference:"),
        ("pages/scaling.py", "Why divide by √d_k", ":material/show_chart:"),
        ("pages/pitfalls.py", "Pitfalls", ":material/report:"),
        ("pages/mask_editor.py", "Mask editor", ":material/edit_square:"),
        ("pages/soft_lookup.py", "Soft lookup", ":material/bar_chart:"),
        ("pages/watch_it_learn.py", "Watch it learn", ":material/model_training:"),
    ],
    "Real models and LLMs": [
        ("pages/real_model.py", "Real model", ":material/psychology:"),
        ("pages/chat_model.py", "Inside a chat model", ":material/forum:"),
        ("pages/head_atlas.py", "Head atlas", ":material/scatter_plot:"),
        ("pages/grouped_query.py", "Grouped-query heads", ":material/group_work:"),
        ("pages/kv_cache.py", "KV cache", ":material/memory:"),
        ("pages/flash_attention.py", "FlashAttention", ":material/bolt:"),
    ],
    "Class": [
        ("pages/poll.py", "Class poll", ":material/how_to_vote:"),
        ("pages/poll_room.py", "Poll: projector", ":material/groups:"),
    ],
}


def run() -> None:
    # An emoji favicon is drawn in the browser; a :material/...: one is fetched from fonts.gstatic.com,
    # and the app must start with no network at all.
    st.set_page_config(page_title="Attention Lab", page_icon="🔎", layout="wide")
    first = PAGES["Course"][0][0]  # the front door: the course's map, with "just explore" one click away
    nav = {
        section: [st.Page(path, title=title, icon=icon, default=path == first) for path, title, icon in pages]
        for section, pages in PAGES.items()
    }
    # presenter mode hides the sidebar: the pages go to the top bar, one menu a section, so a page is two clicks away
    # (read here before `ui` is imported: the session's value, else the link's, as ui.init_state reads it)
    link = st.query_params.get("present", "").lower() in ("true", "1")
    position = "top" if st.session_state.get("p:present", link) else "sidebar"
    # the navigation before `import ui` (torch: seconds on a fresh server), so the sidebar never shows the pages/
    # folder's file names while the app starts
    # .streamlit/config.toml hides the navigation Streamlit would make from the pages/ folder; this one is shown
    st.set_option("client.showSidebarNavigation", True)
    page = st.navigation(nav, position=position, expanded=True)  # every page listed: collapsed hid the newest ones
    # fixes to Streamlit's own markup (the navigation's lists, unnamed icons: assets/a11y.js), drawing nothing; in the
    # sidebar, under the navigation, so the page's own elements come first in the main column
    with st.sidebar:
        st.html("<style>.st-key-al-a11y { display: none; }</style>")
        assets.A11Y(key="al-a11y", data=None, height=0)
    # A session's first run shows a heatmap with no numbers (it draws nothing) while `import ui` may still wait for
    # torch: the browser fetches Streamlit's script for custom components and the heatmap's own meanwhile, not once
    # the first heatmap arrives (measured by benchmarks/bench_startup.py)
    slot = st.empty()
    if "al:preloaded" not in st.session_state:
        st.session_state["al:preloaded"] = True
        with slot:
            assets.HEATMAP(key="al-preload", data=None)
        st.html("<style>.st-key-al-preload { display: none; }</style>")  # its place stays empty on a first screen
    import ui  # its names load at their first use (torch): `import ui` itself is quick

    if not ui.loaded() and first_screen(page):
        return
    import server

    ui.load()
    server.start()  # once a process: the heaps' trimming and the warm-up of pandas and altair (server/__init__.py)
    slot.empty()
    ui.init_state()
    try:
        page.run()
    finally:  # however the run ends (drawn, stopped, a rerun asked): what it drew no longer waits to be allocated
        server.budget.drawn()


def first_screen(page: st.Page) -> bool:
    """A fresh server's front door, drawn before torch's import has ended (issue 45): a session's first run on the
    bare address (what `streamlit run` opens) runs the course's page, which draws the map from
    ui/views/course/outline.py alone (no torch) while the warm-up thread imports torch. Drawn by the page itself, its
    widgets are the page's (a clicker's press on it reaches the page's next run). Returns whether it drew; the
    session's next run is the page's own, and a click meanwhile waits for `ui` in its callback."""
    import ui.views.course.outline as outline  # not `from ui.views.course import`: that loads the course's lessons

    if page.url_path != "" or st.query_params or outline.FIRST in st.session_state:
        return False
    st.session_state[outline.FIRST] = "asked"
    page.run()
    return True


def warm_up() -> None:
    """What the first visitor's script run would otherwise wait for: `import ui` (torch, the package, the pages'
    helpers: seconds on a fresh server, benchmarks/bench_startup.py). A script run that asks for `ui` meanwhile
    waits on Python's import lock and gets the module once this has finished importing it."""
    # While this imports, the server's event loop still serves a browser that came early (Streamlit's scripts, the
    # websocket): a shorter switch interval hands it the GIL sooner (0.5 ms after it asks instead of Python's 5 ms)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(min(switch, 0.0005))
    try:
        import server
        import ui

        ui.load()
        server.start()  # the heaps' trimming, and pandas and altair warmed once the first page is drawn
    finally:
        sys.setswitchinterval(switch)


_warming: list[threading.Thread] = []


def start_warm_up() -> None:
    """warm_up() in a daemon thread, once a process: the server answers its health check and serves the browser its
    scripts while torch is imported."""
    if not _warming:
        _warming.append(threading.Thread(target=warm_up, name="warm-up", daemon=True))
        _warming[0].start()


@asynccontextmanager
async def lifespan(_app):
    from server import warmup  # no torch: the warm-up imports it

    warmup.app_navigation()  # before any session: a deep link's first run is this file's too
    start_warm_up()  # when the server starts: `streamlit run`, or `uvicorn dashboard:app`
    yield None


if __name__ == "__main__":  # a session's script run (Streamlit runs this file as __main__), or AppTest
    run()
else:  # `streamlit run dashboard.py` imports this file to find `app` (st.App: the server, with a start-up hook)
    # The warm-up starts when the server does (the lifespan hook), not as the file is imported: torch's import then
    # leaves the GIL to the server's own start and to the first screen, which needs no torch (0.36 s sooner to
    # the first page, and sooner to the lesson a click there opens: benchmarks/results/2026-11-28-first-screen.md).
    # A test that imports this file for PAGES starts nothing.
    app = st.App(__file__, lifespan=lifespan)
