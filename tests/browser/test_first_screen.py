"""A fresh server's first screen in Chromium (issue 45): the address `streamlit run` opens, opened as soon as the
server answers, shows the course map drawn before torch's import has ended (dashboard.first_screen), and a learner
with a keyboard alone, or a presenter with a clicker, starts the course from it; axe finds nothing critical or
serious on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.bench_startup import COURSE_MAP_JS
from browser.test_accessibility import PROJECTOR, axe_source, serious_violations

LOG = Path(__file__).resolve().parents[2] / "artifacts" / "first-screen-server.log"
NAV_MENDED = "() => document.querySelector('ul[data-testid=\"stSidebarNavItems\"][role=none]') !== null"
FOCUSED = "() => document.activeElement.tagName + ':' + document.activeElement.innerText.trim()"


@pytest.mark.parametrize("keys", ["PageDown", "Tab, Enter"])
def test_a_fresh_servers_first_screen_is_the_course_map_and_works_with_the_keyboard(
    browser, page_errors, keys, fresh_server
):
    """A presenter's clicker (PageDown) or a keyboard alone (Tab to "Start the course", Enter) starts the course from
    the first screen: each on a fresh server of its own, the page opened as soon as the server answers."""
    with fresh_server(LOG) as base:
        page = browser.new_page(viewport=PROJECTOR)
        page.on("pageerror", lambda error: page_errors.append(str(error)))
        page.goto(f"{base}/", wait_until="commit")
        page.wait_for_function(COURSE_MAP_JS, timeout=120_000, polling=20)
        # drawn by the first screen: the heatmap's preload is still in its slot (the page's own run empties it)
        assert page.locator(".st-key-al-preload").count() == 1
        assert page.locator(".st-key-w-present").count() == 1  # the sidebar's presenter switch, as ever
        # the navigation's lists are mended by assets/a11y.js once its component has mounted (a moment after the map)
        page.wait_for_function(NAV_MENDED, timeout=30_000)
        assert not serious_violations(page, axe_source())
        if keys == "PageDown":  # the clicker's press reaches the page's next run, which opens the first lesson
            page.keyboard.press("PageDown")
        else:
            for _ in range(60):
                page.keyboard.press("Tab")
                if page.evaluate(FOCUSED) == "BUTTON:Start the course":
                    break
            assert page.evaluate(FOCUSED) == "BUTTON:Start the course"
            page.keyboard.press("Enter")  # its callback waits for `ui` (torch) if the warm-up has not finished
        page.get_by_role("button", name="Commit and see").wait_for(timeout=120_000)
        assert "lesson=soft_lookup" in page.url
        assert not page_errors, page_errors
        page.close()
