"""A share link to an inner page, opened first on a freshly started server (this module's own server).

With a pages/ folder beside dashboard.py, Streamlit starts in its older folder-based navigation
and, until some session has run `st.navigation`, runs a deep-linked page file on its own.
dashboard.py's start-up hook sets Streamlit's flag before any session (`ui.ensure_frame` still
reruns a page file run on its own inside dashboard.py); these tests would fail without that
(file-name navigation, the page's title without the app's navigation, the link's settings
dropped, "Page not found" for some paths).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from browser.test_pages import APP, assert_clean, chart_texts, open_page, slider, wait_for_charts

pytestmark = pytest.mark.browser


# Every heading drawn in the main column while the app's navigation is not on the page: a page file run on its own
NO_NAVIGATION_JS = """() => { window.alWithoutNav = [];
    new MutationObserver(() => {
        const heading = document.querySelector('[data-testid="stMain"] h1');
        if (heading && !document.querySelector('[data-testid="stSidebarNav"]'))
            window.alWithoutNav.push(heading.textContent);
    }).observe(document, {subtree: true, childList: true});
}"""


def test_first_visit_of_a_fresh_server_is_a_deep_link_with_settings(page, app_url, page_errors, shoot):
    page.add_init_script(f"({NO_NAVIGATION_JS})()")
    open_page(page, app_url, "masks", "seed=7&mask=causal&d_k=8")
    wait_for_charts(page)
    shoot(page, "test_deep_link_masks_first")
    assert page.get_by_role("heading", name=re.compile("masks and dropout", re.I)).count() >= 1
    expect(slider(page, "seed")).to_have_value("7", timeout=30_000)  # the number box can read 0 for a moment
    assert slider(page, "d_k").input_value() == "8"
    assert page.get_by_role("combobox", name=re.compile("mask type", re.I)).input_value() == "causal"
    nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
    assert "Masks and dropout" in nav and "Soft lookup" in nav, f"not the app's navigation: {nav!r}"
    assert "dashboard" not in nav.lower()
    assert "seed=7" in page.evaluate("window.location.search")
    assert any("−∞" in t or "0" in t for t in chart_texts(page))
    # the first run is dashboard.py's: never the page's title alone, as the page file run on its own drew it while
    # torch was imported (seconds), before its rerun inside the frame
    assert page.evaluate("window.alWithoutNav") == []
    assert_clean(page, page_errors)


def test_each_inner_page_opens_by_its_link(page, app_url, page_errors):
    for path, heading in (("mask_editor", "mask editor"), ("multi_head", "multi-head"), ("soft_lookup", "soft lookup")):
        open_page(page, app_url, path, "seed=11")
        page.wait_for_selector(APP)
        # the heading, waited for: on a deep link's first run the frame's rerun (ui.ensure_frame) can leave the main
        # column empty for a moment after the script state reads notRunning
        page.get_by_role("heading", name=re.compile(heading, re.I)).first.wait_for(timeout=30_000)
        expect(slider(page, "seed")).to_have_value("11", timeout=30_000)  # the link's seed, once the box is drawn
        assert_clean(page, page_errors)
