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
ALL_PAGES = [*PAGES, "watch_it_learn", "chat_model", "head_atlas"]

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


# Watch it learn's smallest run: one layer of one 8-wide head, batches of 4, the fewest steps the page offers, three
# snapshots (0, 25, 50): the least training the page can do and a replay of three ticks, so a loaded machine reaches
# its end too, where every chart is there: the curves with points and the run-length bars (with 100 steps of the
# default model, a run at load ~11 stopped at step 40 of 100 in 180 s, and the bars went unmeasured). The charts'
# sizes do not depend on the model's.
SMALLEST_RUN = {"layers": 1, "heads": 1, "d_model": 8, "batch": 4, "steps": 50, "every": 25}
TRAINING_CHARTS = 4  # the loss, the previous-token and induction scores, the run-length bars


def open_with_charts(page, base: str, path: str) -> None:
    """The page at its defaults, every chart drawn; Watch it learn after Play has replayed its smallest run to the
    end (its curves then hold points, and the run-length bars are shown)."""
    if path == "head_atlas":  # MiniLM's atlas, made in seconds (SmolLM2's corpus takes minutes under load): the
        open_page(page, base, path, "atlas_model=minilm")  # scatter's size does not depend on the model
        wait_for_charts(page, timeout=120_000)
        return
    if path != "watch_it_learn":
        open_page(page, base, path)
        wait_for_charts(page, timeout=120_000)
        return
    open_page(page, base, path, "&".join(f"train_{name}={value}" for name, value in SMALLEST_RUN.items()))
    play = page.get_by_role("button", name=re.compile("Play"))
    play.click()
    end = (SMALLEST_RUN["steps"], True)  # the last snapshot shown, and Play offered again: the replay is over
    reached = poll(lambda: (shown_step(page), play.is_enabled()), lambda v: v == end, timeout_s=300)
    said = page.get_by_test_id("stAlert").all_inner_texts()  # the run's status: queued, training, trained
    assert reached == end, f"the replay stopped at {reached} (snapshot shown, Play enabled), not at its end: {said}"
    settle(page)
    page.locator("[data-testid=stMain] .vega-embed").nth(TRAINING_CHARTS - 1).wait_for()  # the run-length bars


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
    if path == "watch_it_learn":  # the loss, both score curves and the run-length bars
        assert all(len(charts) == TRAINING_CHARTS for charts, _ in found.values()), found
    small = {WIDTHS[size]["width"]: small for size, (_, small) in found.items() if small}
    assert small == {}, f"/{path} ({scheme}), plots under {MIN_PLOT_W}x{MIN_PLOT_H} px by width: {small}; all: {found}"


MIN_HEATMAP_W = 240  # px: below this a heatmap's labels and cells no longer read (issue 43: 113 to 176 px)
HEATMAPS_JS = """() => [...document.querySelectorAll('[data-testid=stMain] .al-heatmap')]
  .filter(e => e.getClientRects().length > 0)
  .map(e => [e.dataset.title, Math.round(e.getBoundingClientRect().width)])"""


@pytest.mark.parametrize("size", list(WIDTHS))
def test_the_real_model_pages_heatmaps_are_each_readably_wide(page, app_url, size):
    """Outside presenter mode, beside the sidebar: each of the Real model page's heatmaps (the model view's twelve
    heads among them) is at least MIN_HEATMAP_W px wide, at 1024 x 768 and at 1400 x 900."""
    page.set_viewport_size(WIDTHS[size])
    open_page(page, app_url, "real_model")
    wait_for_charts(page, timeout=120_000)
    page.wait_for_timeout(800)
    maps = page.evaluate(HEATMAPS_JS)
    assert len(maps) >= 20, maps  # 12 heads, the head's 4 panels, weight and norm, rollout, the gallery
    narrow = [(title, width) for title, width in maps if width < MIN_HEATMAP_W]
    assert narrow == [], f"heatmaps under {MIN_HEATMAP_W} px at {size}: {narrow}"
