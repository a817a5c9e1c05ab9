"""Every Vega chart shows its data at a readable size: on every page, at a projector's 1024 x 768 and at 1400 x 900,
in the light and the dark theme, the plot (the data rectangle inside the axes, titles and legend) is at least
MIN_PLOT_H px tall and MIN_PLOT_W px wide.

The plot is measured as Vega draws it: the background rectangle of the view's root group, which is the view's
width() x height() (the app draws no concatenated or faceted chart); the SVG around it also holds the title, axes
and legend, so an SVG of 160 px can hold a plot 3 px tall (issue 32: Watch it learn's curves were flat strips).
"""

from __future__ import annotations

import re

import pytest

from browser.test_pages import PAGES, URL, open_page, poll, settle, wait_for_charts

pytestmark = pytest.mark.browser

MIN_PLOT_H, MIN_PLOT_W = 100, 200
WIDTHS = {"projector": {"width": 1024, "height": 768}, "wide": {"width": 1400, "height": 900}}
ALL_PAGES = [*PAGES, "watch_it_learn", "chat_model"]

# Each visible Vega chart: its key (Streamlit's st-key-... class) or title, and the size of every plot it draws.
PLOTS_JS = """() => [...document.querySelectorAll('[data-testid=stMain] .vega-embed')]
  .filter(e => e.getClientRects().length > 0 && e.closest('details:not([open])') === null)
  .map(e => {
    const key = [...(e.closest('[class*="st-key-"]')?.classList || [])].find(c => c.startsWith('st-key-'));
    const title = e.querySelector('.role-title-text')?.textContent;
    const svg = e.querySelector('svg.marks');
    // the view's own background: the root group's first rectangle, width() x height() of the plot
    const rects = svg ? [...svg.querySelectorAll('.role-frame.root > g > path.background')] : [];
    return {chart: title || key || '(untitled)', svg: svg ? Math.round(svg.getBoundingClientRect().height) : null,
            plots: rects.map(r => { const b = r.getBoundingClientRect();
                                    return [Math.round(b.width), Math.round(b.height)]; })};
  })"""


def shown_step(page) -> int | None:
    said = page.locator('[data-testid="stMarkdown"]').filter(has_text=re.compile(r"^Step \d+:")).all_inner_texts()
    return int(re.match(r"Step (\d+)", said[0]).group(1)) if said else None


def open_with_charts(page, base: str, path: str) -> None:
    """The page at its defaults, every chart drawn; Watch it learn after Play has replayed a short run (its curves
    then hold points; at its end the run-length bars are shown too)."""
    if path != "watch_it_learn":
        open_page(page, base, path)
        wait_for_charts(page, timeout=120_000)
        return
    open_page(page, base, path, "train_steps=100&train_every=20")
    play = page.get_by_role("button", name=re.compile("Play"))
    play.click()
    # to its end where the machine allows (the run-length bars are drawn then); on a loaded one, some snapshots
    poll(lambda: (shown_step(page), play.is_enabled()), lambda v: v == (100, True), timeout_s=300)
    settle(page)
    assert (shown_step(page) or 0) >= 20, "no training snapshot arrived after Play"


def small_plots(page) -> tuple[list[dict], list[str]]:
    """Every visible Vega chart's measures, and those whose plot is under the minimum (or that drew no plot)."""
    page.wait_for_timeout(800)  # let every chart fit its column at this width
    charts = page.evaluate(PLOTS_JS)
    small = [
        f"{c['chart']}: plot {w}x{h} px (svg {c['svg']} px tall)"
        for c in charts
        for w, h in (c["plots"] or [(0, 0)])
        if w < MIN_PLOT_W or h < MIN_PLOT_H
    ]
    return charts, small


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("path", ALL_PAGES)
def test_every_vega_chart_shows_its_plot_at_a_readable_size(browser, app_url, shoot, path, scheme):
    """At 1024 x 768 first, then the same page widened to 1400 x 900 (the charts refit their columns)."""
    context = browser.new_context(viewport=WIDTHS["projector"], color_scheme=scheme)
    found = {}
    try:
        page = context.new_page()
        page.set_default_timeout(60_000)
        open_with_charts(page, app_url, path)
        for size, viewport in WIDTHS.items():
            page.set_viewport_size(viewport)
            found[size] = small_plots(page)
            shoot(page, f"chart_sizes_{URL.get(path, path) or 'self_attention'}_{size}_{scheme}")
    finally:
        context.close()
    if path == "watch_it_learn":  # the loss and both score curves, at least
        assert all(len(charts) >= 3 for charts, _ in found.values()), found
    small = {WIDTHS[size]["width"]: small for size, (_, small) in found.items() if small}
    assert small == {}, f"/{path} ({scheme}), plots under {MIN_PLOT_W}x{MIN_PLOT_H} px by width: {small}; all: {found}"
