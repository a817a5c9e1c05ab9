"""Real-browser fixtures: `streamlit run dashboard.py` on a free port, driven by Playwright in Debian's Chromium.

Playwright cannot download its own browsers here, so the tests use the system Chromium: $CHROMIUM_PATH,
else /usr/bin/chromium, else `chromium` on PATH. Without one they skip, with the reason, outside CI and fail
in CI (env CI set), so a CI run can never pass by skipping them. Every test leaves a full-page screenshot in
artifacts/screenshots/<test name>.png, and the server's log is in artifacts/streamlit-server.log.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness import live_server

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
DOWNLOADS = ARTIFACTS / "downloads"
SERVER_LOG = ARTIFACTS / "streamlit-server.log"

VIEWPORT = {"width": 1400, "height": 1000}


@pytest.fixture(scope="session")
def chromium_path() -> str:
    return live_server.require_chromium()


# Module scope, not session: Playwright's sync API allows one running instance per thread, and tests
# elsewhere (tests/system) start their own after these; the server goes with it, so no idle
# Streamlit process lingers beside later tests' measurements.
@pytest.fixture(scope="module")
def browser(chromium_path: str):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=live_server.CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def app_url() -> Iterator[str]:
    """Base URL of the dashboard, served by `streamlit run dashboard.py` for the module's tests."""
    with server_or_fail(SERVER_LOG) as base:
        yield base


@contextlib.contextmanager
def server_or_fail(log: Path) -> Iterator[str]:
    """`live_server.serving(log)`: a fresh server for the block, failing the test (with the server log's tail) when
    it does not start."""
    with contextlib.ExitStack() as stack:
        try:
            base = stack.enter_context(live_server.serving(log))
        except RuntimeError as exc:
            pytest.fail(str(exc), pytrace=False)
        yield base


@pytest.fixture
def fresh_server() -> Callable[[Path], contextlib.AbstractContextManager[str]]:
    """`server_or_fail`, for a test that needs a fresh server of its own (a first visit), or several in turn."""
    return server_or_fail


# Streamlit scrolls its main area and sidebar inside the window, so a "full page" screenshot would stop at
# the window's height: the window is made as tall as the tallest of them for the picture (capped).
_CONTENT_HEIGHT = """() => Math.max(document.documentElement.scrollHeight,
    ...['stMain', 'stSidebarContent'].map(id => document.querySelector(`[data-testid="${id}"]`)?.scrollHeight || 0))"""
MAX_SCREENSHOT_HEIGHT = 8000


def screenshot(page, name: str) -> Path:
    """A PNG of the whole page as it is now (all of the main area), under artifacts/screenshots/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / (re.sub(r"[^\w.-]+", "_", name).strip("_") + ".png")
    size = page.viewport_size or VIEWPORT
    height = min(int(page.evaluate(_CONTENT_HEIGHT)), MAX_SCREENSHOT_HEIGHT)
    if height > size["height"]:
        page.set_viewport_size({"width": size["width"], "height": height})
        page.wait_for_timeout(500)  # let the charts lay out in the taller window
    try:
        page.screenshot(path=str(path), full_page=True)
    finally:
        page.set_viewport_size(size)
    return path


@pytest.fixture
def shoot():
    """screenshot(page, name), for a test that wants a picture of a second page or a middle state."""
    return screenshot


@pytest.fixture
def downloads_dir() -> Path:
    DOWNLOADS.mkdir(parents=True, exist_ok=True)
    return DOWNLOADS


@pytest.fixture
def context(browser):
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    yield context
    context.close()


@pytest.fixture
def page_errors() -> list[str]:
    """JavaScript errors the test's pages raised (a Vega spec that fails to render lands here)."""
    return []


@pytest.fixture
def page(context, request, page_errors: list[str]):
    """A fresh page; after the test, its full-page screenshot (kept on failure too, for the artifacts)."""
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    yield page
    try:
        screenshot(page, request.node.name)
    except Exception as exc:  # a screenshot is evidence, not the test: never turn a pass into an error
        print(f"screenshot of {request.node.name} failed: {exc}", file=sys.stderr)
