"""The canvas heatmaps as a person uses them: hover a cell for its token pair and value, click a row to follow it,
and a 512-token sentence drawn whole with labels thinned to what fits, at a projector's 1024 px too."""

from __future__ import annotations

import re
import urllib.parse

import pytest

from attention import Config, compute
from attention.basics.config import MAX_TOKENS
from browser.test_pages import settle

pytestmark = pytest.mark.browser

WEIGHTS = ".al-heatmap[data-title='Softmax weights']"


def drawn(page, count: int = 4, timeout: float = 60_000) -> None:
    page.wait_for_function(
        "n => document.querySelectorAll('.al-heatmap[data-drawn]').length === n", arg=count, timeout=timeout
    )


def cell_centre(page, selector: str, i: int, j: int) -> dict:
    """Where cell (i, j) of a heatmap is, in the overlay's own coordinates."""
    layout = page.eval_on_selector(selector, "e => e.alState.layout")
    return {"x": layout["left"] + (j + 0.5) * layout["cellW"], "y": layout["top"] + (i + 0.5) * layout["cellH"]}


def test_hovering_a_cell_reads_out_its_token_pair_and_value(page, app_url, page_errors):
    page.goto(app_url + "/self_attention")
    settle(page)
    drawn(page)
    weights = compute(Config(init="normal", draws="stable")).weights[0]  # the page's default weights
    tip = page.locator(f"{WEIGHTS} .al-heatmap-tip")
    assert tip.is_hidden()
    overlay = page.locator(f"{WEIGHTS} .al-heatmap-overlay")
    overlay.hover(position=cell_centre(page, WEIGHTS, 1, 4))
    text = tip.inner_text()
    assert "row 2 is" in text and "column 5 dessert" in text, text
    assert f"value {float(weights[1, 4]):.4f}" in text, text
    page.mouse.move(1, 1)  # leaving the chart hides the readout
    assert tip.is_hidden()
    # a tiny weight reads in scientific notation, not as 0.0000: the tutorial's all-positive weights have some
    page.goto(app_url + "/self_attention?init=rand-transposed&draws=tutorial")
    settle(page)
    drawn(page)
    weights = compute(Config(init="rand-transposed", draws="tutorial")).weights[0]
    assert float(weights[2, 3]) < 1e-3
    overlay.hover(position=cell_centre(page, WEIGHTS, 2, 3))
    text = tip.inner_text()
    assert "row 3 short" in text and "column 4 eat" in text, text
    tiny = re.sub(r"e-0*(\d+)$", r"e−\1", f"{float(weights[2, 3]):.2e}")  # 4.87e-07 as JavaScript writes it
    assert f"value {tiny}" in text and "e−" in tiny, text
    assert not page_errors


def test_a_sessions_first_run_loads_the_heatmap_script_early_and_leaves_no_empty_heatmap(page, app_url, page_errors):
    """dashboard.py shows a heatmap with no numbers while `import ui` may wait for torch, so the browser fetches the
    component's scripts early (benchmarks/bench_startup.py measures what it saves); it mounts nothing, and the page
    is laid out as without it: the title where it was, and only the page's four heatmaps."""
    scripts = []
    page.on("request", lambda r: scripts.append(r.url) if "BidiComponent" in r.url else None)
    page.goto(app_url + "/self_attention")
    settle(page)
    drawn(page)
    assert len(scripts) == 1, scripts  # the components' script, fetched once
    assert page.eval_on_selector_all(".al-heatmap", "els => els.length") == 4
    assert page.locator(".st-key-al-preload").count() == 0  # emptied once `ui` was imported
    assert page.eval_on_selector("h1", "e => e.getBoundingClientRect().top") < 104  # 96 px: no gap above it
    assert not page_errors


def test_clicking_a_row_of_the_weights_follows_that_token(page, app_url, page_errors):
    page.goto(app_url + "/self_attention")
    settle(page)
    drawn(page)
    heading = page.locator("[data-testid=stMain] [data-testid=stMarkdownContainer] strong").filter(
        has_text="Following token"
    )
    assert heading.first.inner_text().startswith("Following token 2:")  # Raschka follows x_2
    page.locator(f"{WEIGHTS} .al-heatmap-overlay").click(position=cell_centre(page, WEIGHTS, 4, 1))
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=stMain] strong')]"
        ".some(e => e.innerText.startsWith('Following token 5:'))"
    )
    settle(page)
    assert re.search(r"[?&]token=4\b", page.url), page.url
    assert page.eval_on_selector(WEIGHTS, "e => e.alState.picked") == 4  # the row stays framed
    assert not page_errors


@pytest.mark.parametrize("width", [1400, 1024])
def test_a_512_token_sentence_draws_whole_with_readable_thinned_labels(page, app_url, page_errors, width):
    page.set_viewport_size({"width": width, "height": 900})
    words = [f"w{k}" for k in range(MAX_TOKENS)]
    page.goto(f"{app_url}/self_attention?{urllib.parse.urlencode({'sentence': ' '.join(words)})}")
    settle(page)
    drawn(page, timeout=120_000)
    shapes = page.eval_on_selector_all(".al-heatmap", "els => els.map(e => [e.dataset.rows, e.dataset.cols])")
    assert shapes == [["512", "16"], ["512", "512"], ["512", "512"], ["512", "28"]]
    sizes = page.eval_on_selector_all(".al-heatmap", "els => els.map(e => e.alHeatmap.values.length)")
    assert sizes == [512 * 16, 512 * 512, 512 * 512, 512 * 28]  # every cell reached the browser
    layouts = page.eval_on_selector_all(".al-heatmap", "els => els.map(e => e.alState.layout)")
    for layout in layouts:
        assert layout["labelPx"] >= 10  # thinned, never shrunk below 10 px
        assert layout["rowStep"] > 1  # 512 labels cannot all fit in 520 px
        assert layout["plotW"] > 100, layout  # the cells keep a usable width
    # the last row, beyond every shown label, is still reachable by hovering it
    page.locator(f"{WEIGHTS} .al-heatmap-overlay").hover(position=cell_centre(page, WEIGHTS, 511, 511))
    assert "row 512 w511" in page.locator(f"{WEIGHTS} .al-heatmap-tip").inner_text()
    assert not page_errors


@pytest.mark.parametrize("width", [1400, 1024])
def test_numbers_in_cells_are_readable_or_left_to_the_readout(page, app_url, page_errors, width):
    """Issue 32: at 1400 px the embeddings' numbers were 8 px. A number drawn in a cell is at least 11 px, with one
    decimal where two would not fit (omega at 1024 px: '−7.1'); where neither fits the cells show none and the
    hover readout has them. Omega and the weights keep their numbers at both widths; the SVG of omega draws every
    cell's number at the page's size."""
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(app_url + "/self_attention")
    settle(page)
    drawn(page)
    sizes = dict(page.eval_on_selector_all(".al-heatmap", "els => els.map(e => [e.dataset.title, e.dataset.numberPx])"))
    assert all(px == "" or float(px) >= 11 for px in sizes.values()), sizes
    assert sizes["Omega = Q Kᵀ"] and sizes["Softmax weights"], sizes
    omega = page.locator(".al-heatmap[data-title='Omega = Q Kᵀ']")
    omega.hover()
    with page.expect_download() as info:
        omega.get_by_role("button", name=re.compile("as SVG")).click()
    svg = info.value.path().read_text(encoding="utf-8")
    numbers = re.findall(r'style="font: ([\d.]+)px [^"]*">(−?\d+\.\d+)</text>', svg)
    in_cells = [n for px, n in numbers if float(px) == float(sizes["Omega = Q Kᵀ"])]
    assert len(in_cells) == 36, numbers  # 6 x 6, each at the size the page reports
    assert not page_errors
