"""The Head atlas in Chromium: the scatter draws every head, a click on a point gives a link, and the link opens
that head on its model's page."""

from __future__ import annotations

import pytest

from browser.test_pages import open_page, settle, wait_for_charts

pytestmark = pytest.mark.browser


def test_a_click_on_the_rightmost_head_links_to_it_on_the_real_model_page(page, app_url, shoot) -> None:
    from attention.lessons import atlas

    page.set_viewport_size({"width": 1400, "height": 1600})
    open_page(page, app_url, "head_atlas", "atlas_model=minilm&atlas_input=repeated")
    page.get_by_text("The strongest heads").wait_for(timeout=120_000)
    wait_for_charts(page, timeout=120_000)
    points = page.locator('[data-testid="stVegaLiteChart"] .mark-symbol path')
    assert points.count() == 6 * 12  # each head once (the frame was once sent twice: 144 points)
    # the x axis is the previous-token score: the rightmost point is the strongest previous-token head
    layer, head, _ = atlas.ranked(atlas.model_atlas("minilm", "repeated").scores["previous_token"], 1)[0]
    rightmost = max(range(points.count()), key=lambda i: points.nth(i).bounding_box()["x"])
    points.nth(rightmost).click(force=True)
    link = page.get_by_role("link", name=f"Open {atlas.head_name(layer, head)} on the Real model page")
    link.wait_for(timeout=60_000)
    shoot(page, "head_atlas_clicked")
    link.click()
    page.get_by_text("Inside a real model").wait_for(timeout=120_000)
    settle(page)
    assert f"layer={layer}" in page.url and f"head={head}" in page.url
    wait_for_charts(page, timeout=120_000)
    marked = page.evaluate("() => [...document.querySelectorAll('.al-heatmap')].map(e => e.dataset.title)")
    assert f"h{head} ◆" in marked and sum("◆" in str(t) for t in marked) == 1  # the model view marks the head
