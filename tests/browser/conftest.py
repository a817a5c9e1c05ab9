"""Real-browser fixtures: `streamlit run dashboard.py` on a free port, driven by Playwright in Debian's Chromium.

Playwright cannot download its own browsers here, so the tests use the system Chromium: $CHROMIUM_PATH,
else /usr/bin/chromium, else `chromium` on PATH. Without one they skip, with the reason, outside CI and fail
in CI (env CI set), so a CI run can never pass by skipping them. Every test leaves a full-page screenshot in
artifacts/screenshots/<test name>.png, and the server's log is in artifacts/streamlit-server.log.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
DOWNLOADS = ARTIFACTS / "downloads"
SERVER_LOG = ARTIFACTS / "streamlit-server.log"

# Headless, and nothing that reaches for Google's hosts: this machine's network is closed, and Chromium's
# background connections would otherwise be refused many at a time.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
HEALTH_TIMEOUT_S = 60
VIEWPORT = {"width": 1400, "height": 1000}


def find_chromium() -> tuple[str | None, str]:
    """The Chromium to drive, and where it was looked for (for the skip or failure message)."""
    env = os.environ.get("CHROMIUM_PATH")
    if env:
        found = env if os.access(env, os.X_OK) else None
        return found, f"CHROMIUM_PATH={env}"
    for candidate in ("/usr/bin/chromium", shutil.which("chromium")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate, candidate
    return None, "$CHROMIUM_PATH, /usr/bin/chromium and `chromium` on PATH"


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path, looked = find_chromium()
    if path is None:
        reason = (
            f"no Chromium found (looked at {looked}); install Debian's with "
            "`apt-get install -y chromium` or set CHROMIUM_PATH"
        )
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and the browser tests cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    return path


# Module scope, not session: Playwright's sync API allows one running instance per thread, and tests
# elsewhere (tests/reliability) start their own after these; the server goes with it, so no idle
# Streamlit process lingers beside later tests' measurements.
@pytest.fixture(scope="module")
def browser(chromium_path: str):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _health(url: str) -> str | None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy
    try:
        with opener.open(url, timeout=2) as response:
            return response.read().decode(errors="replace").strip()
    except (urllib.error.URLError, OSError):
        return None


def _log_tail(lines: int = 40) -> str:
    try:
        return "\n".join(SERVER_LOG.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@pytest.fixture(scope="module")
def app_url() -> Iterator[str]:
    """Base URL of the dashboard, served by `streamlit run dashboard.py` for the module's tests."""
    ARTIFACTS.mkdir(exist_ok=True)
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "dashboard.py",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.headless",
        "true",
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
    ]
    with SERVER_LOG.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        while _health(f"{base}/_stcore/health") != "ok":
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with {proc.returncode} before answering:\n{_log_tail()}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit did not answer /_stcore/health in {HEALTH_TIMEOUT_S} s:\n{_log_tail()}")
            time.sleep(0.25)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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
