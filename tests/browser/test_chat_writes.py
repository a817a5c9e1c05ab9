"""Inside a chat model's "What each head writes", as a person uses it: a click on a cell of the 30 x 9 map of every
head's contribution to the next token opens that head: the cell is framed, the link names it, and the head's
attention from the last token and the tokens its OV circuit writes are drawn for it, the package's own numbers."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlparse

import pytest

from browser.test_pages import assert_clean, open_page, settle, wait_for_charts

pytestmark = pytest.mark.browser

WRITES = '.al-heatmap[data-title^="Each head\'s direct contribution"]'
LOADED = 300_000  # SmolLM2's first read on a loaded machine: minutes
# after a click: every chart drawn, the head's own attention row among them, nothing stale, the script run over
OPENED_JS = """(head) => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.dataset.testScriptState !== 'notRunning') return false;
    if (document.querySelectorAll('[data-stale="true"]').length) return false;
    const charts = [...document.querySelectorAll('.vega-embed, .al-heatmap')];
    const looks = document.querySelector(`.al-heatmap[data-title="Where ${head} looks from the last token"]`);
    return looks !== null && looks.dataset.drawn !== undefined && charts.every(c => c.classList.contains('al-heatmap')
        ? c.dataset.drawn !== undefined : c.querySelector('svg, canvas'));
}"""


def cell_centre(page, selector: str, i: int, j: int) -> dict:
    """Where cell (i, j) of a heatmap is, in its overlay's own coordinates."""
    layout = page.eval_on_selector(selector, "e => e.alState.layout")
    return {"x": layout["left"] + (j + 0.5) * layout["cellW"], "y": layout["top"] + (i + 0.5) * layout["cellH"]}


def click_head(page, layer: int, head: int) -> None:
    """Click the map's cell of (layer, head) and wait until that head's charts are drawn."""
    page.locator(f"{WRITES} .al-heatmap-overlay").click(position=cell_centre(page, WRITES, layer, head))
    page.wait_for_function(OPENED_JS, arg=f"L{layer}H{head}", timeout=LOADED, polling=50)


def ov_rows_showing(page, weight: float, timeout: float = 10.0) -> list[list[str]]:
    """The table's rows once its first row's weight is `weight` (or as they are after `timeout` seconds): the data
    grid draws its new cells a moment after the script run is over, and a loaded machine showed the previous head's
    rows there (CI)."""
    deadline = time.monotonic() + timeout
    rows = ov_rows(page)
    while time.monotonic() < deadline and not (rows and rows[0][1:] and abs(float(rows[0][1]) - weight) <= 5e-4):
        page.wait_for_timeout(100)
        rows = ov_rows(page)
    return rows


def ov_rows(page) -> list[list[str]]:
    """The "What LxHy writes" table as the page draws it: one row a token read (reads, weight, writes, own rank)."""
    frame = page.locator('[data-testid="stMain"] [data-testid="stDataFrame"]').filter(has_text="it writes most")
    return frame.first.evaluate(
        """(f) => { const cells = [...f.querySelectorAll('[role="row"]')].slice(1)
            .map(r => [...r.querySelectorAll('[role="gridcell"]')].map(c => c.innerText.trim()));
            return cells.filter(r => r.length); }"""
    )


def test_a_click_on_the_writes_map_opens_that_heads_attention_and_ov_tokens(page, app_url, page_errors, shoot):
    from attention.models import smollm2
    from attention.models.circuits import chat

    open_page(page, app_url, "chat_model")
    page.locator(WRITES).wait_for(timeout=LOADED)
    settle(page, timeout=LOADED)
    wait_for_charts(page, timeout=LOADED)
    assert (
        page.locator(WRITES).get_attribute("data-rows") == "30"
        and page.locator(WRITES).get_attribute("data-cols") == "9"
    )
    model = smollm2.load()
    prompt = smollm2.prompt(model, smollm2.DEFAULT_PROMPT, smollm2.PAGE_TOKENS)
    run = smollm2.run_ids(model, prompt.ids)
    for layer, head in ((17, 3), (2, 8)):
        click_head(page, layer, head)
        query = parse_qs(urlparse(page.url).query)
        assert query["chat_layer"] == [str(layer)] and query["chat_head"] == [str(head)], page.url
        assert page.eval_on_selector(WRITES, "e => e.alState.picked") == {"i": layer, "j": head}  # framed
        assert page.eval_on_selector(WRITES, "e => e.alState.focus") == {"i": layer, "j": head}  # one frame, not two
        main = page.locator('[data-testid="stMain"]').inner_text()
        assert f"What L{layer}H{head} writes" in main
        # the head's attention from the last token, and the tokens it reads most with what its OV circuit writes
        row = run.weights[layer, head, -1]
        read = sorted(range(len(row)), key=lambda j: -float(row[j]))[:3]
        ov = chat.head_ov_tokens(model, layer, head, [prompt.ids[j] for j in read], k=5)
        rows = ov_rows_showing(page, float(row[read[0]]))
        assert len(rows) == 3, rows
        for shown, j, top in zip(rows, read, ov.top_ids.tolist(), strict=True):
            assert float(shown[1]) == pytest.approx(float(row[j]), abs=5e-4), (shown, float(row[j]))
            assert shown[2] == ", ".join(repr(t) for t in smollm2.labels(model, top)), shown
        # the step-by-step section below follows the same head
        assert f"Normalized input entering layer {layer}" in page.locator(".al-heatmap").evaluate_all(
            "els => els.map(e => e.dataset.title).join('|')"
        )
        shoot(page, f"test_chat_writes_L{layer}H{head}")
    assert_clean(page, page_errors)
