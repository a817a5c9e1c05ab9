"""Issue 44: every page passes axe-core (WCAG 2.0, 2.1 and 2.2 A and AA rules) with nothing critical or serious, in
the light and the dark theme at a projector's 1024 x 768 and on a phone's 390 x 844 for the learner's poll page; and a
heatmap is read with the keyboard alone: Tab stops on it, the arrow keys move a focus cell whose row token, column
token and value are announced, Enter follows a row, and a presenter's PageDown is the heatmap's only while it has the
focus.

axe-core is the file vendored in harness/ (npm axe-core 4.14.1, MPL-2.0), checked against its SHA-256 before it
is injected: the browser tier runs offline."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

import dashboard
import ui
from attention import Config, compute
from browser.test_pages import settle
from ui.views import course

pytestmark = pytest.mark.browser

AXE = Path(__file__).resolve().parents[2] / "harness" / "axe.min.js"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"  # axe-core 4.14.1's axe.min.js
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
PROJECTOR = {"width": 1024, "height": 768}
PHONE = {"width": 390, "height": 844}
# every page of the navigation, by its URL path (the default page, the course, lives at /)
FIRST = dashboard.PAGES["Course"][0][0]
PATHS = ["" if path == FIRST else Path(path).stem for pages in dashboard.PAGES.values() for path, _, _ in pages]
WEIGHTS = ".al-heatmap[data-title='Softmax weights']"
# the head atlas with the encoder (as tests/browser/test_atlas.py opens it): the same page, minutes less to
# compute on a cold server than the chat model's atlas
QUERY = {"head_atlas": "?atlas_model=minilm&atlas_input=repeated"}


def axe_source() -> str:
    data = AXE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == AXE_SHA256, "harness/axe.min.js is not axe-core 4.14.1's"
    return data.decode("utf-8")


@pytest.fixture(scope="module")
def axe() -> str:
    return axe_source()


def themed_page(browser, theme: str, viewport: dict, page_errors: list[str]):
    context = browser.new_context(viewport=viewport, color_scheme=theme)
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    return context, page


def drawn(page) -> None:
    """Streamlit's run over, every heatmap drawn and the Vega charts given a moment to render."""
    settle(page, timeout=240_000)  # a real model's pages on a busy machine (pytest's own limit is 300 s)
    page.wait_for_function("() => !document.querySelector('.al-heatmap:not([data-drawn])')", timeout=60_000)
    page.wait_for_timeout(800)


def serious_violations(page, axe: str) -> list[str]:
    page.add_script_tag(content=axe)
    found = page.evaluate(
        """tags => axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})
            .then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.map(n => n.target.join(' ') + ' ' + (n.failureSummary || '').slice(0, 160))})))""",
        TAGS,
    )
    return [
        f"{v['id']} ({v['impact']}, {len(v['nodes'])}x): {v['help']}; e.g. {v['nodes'][:2]}"
        for v in found
        if v["impact"] in ("critical", "serious")
    ]


def test_the_vendored_axe_is_the_pinned_file():
    assert "axe v4.14.1" in axe_source()[:40]


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("path", PATHS)
def test_no_critical_or_serious_axe_violation_on_a_page(browser, app_url, axe, path, theme, page_errors):
    context, page = themed_page(browser, theme, PROJECTOR, page_errors)
    try:
        page.goto(f"{app_url}/{path}{QUERY.get(path, '')}")
        drawn(page)
        # the theme asked for is the one shown (assets/a11y.js reads it from the page's background)
        page.wait_for_function("t => document.documentElement.dataset.alTheme === t", arg=theme)
        problems = serious_violations(page, axe)
        assert not problems, f"/{path} ({theme}): " + "\n".join(problems)
        assert not page_errors
    finally:
        context.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_no_critical_or_serious_axe_violation_on_the_learners_poll_page_on_a_phone(
    browser, app_url, axe, theme, page_errors
):
    context, page = themed_page(browser, theme, PHONE, page_errors)
    try:
        page.goto(f"{app_url}/poll")
        drawn(page)
        problems = serious_violations(page, axe)
        assert not problems, f"/poll on a phone ({theme}): " + "\n".join(problems)
    finally:
        context.close()


def live(page, selector: str) -> str:
    return page.eval_on_selector(f"{selector} .al-heatmap-live", "e => e.textContent")


def tab_to(page, selector: str, presses: int = 80) -> int:
    """Press Tab until the focus is on the element `selector` names; returns the presses it took."""
    for k in range(1, presses + 1):
        page.keyboard.press("Tab")
        if page.evaluate("s => document.activeElement === document.querySelector(s)", selector):
            return k
    raise AssertionError(f"Tab never reached {selector}")


def test_a_heatmap_is_read_with_the_keyboard_alone_cell_by_cell_and_as_a_table(page, app_url, page_errors):
    page.set_viewport_size(PROJECTOR)
    page.goto(app_url + "/masks")
    drawn(page)
    weights = compute(Config(init="normal", draws="stable", mask="causal")).weights[0]  # the page's defaults
    overlay = f"{WEIGHTS} .al-heatmap-overlay"
    page.eval_on_selector(overlay, "e => e.blur()")
    tab_to(page, overlay)  # a Tab stop, with its instructions as its name
    name = page.eval_on_selector(overlay, "e => e.getAttribute('aria-label')")
    assert (
        name.startswith("Softmax weights: 6 × 6 heatmap. Arrow keys")
        and page.eval_on_selector(overlay, "e => e.getAttribute('role')") == "application"
    )
    assert live(page, WEIGHTS) == f"row 1 Life, column 1 Life: {float(weights[0, 0]):.4f}"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    assert live(page, WEIGHTS) == f"row 3 short, column 2 is: {float(weights[2, 1]):.4f}"
    page.keyboard.press("End")  # the row's last key: after the query, so the causal mask blocks it
    assert live(page, WEIGHTS) == "row 3 short, column 6 first: blocked, weight 0"
    page.keyboard.press("Control+End")
    assert live(page, WEIGHTS) == f"row 6 first, column 6 first: {float(weights[5, 5]):.4f}"
    page.keyboard.press("Home")
    page.keyboard.press("PageUp")  # a page of rows: 5 here, as far as the first row
    assert page.eval_on_selector(WEIGHTS, "e => e.dataset.focus") == "0,0"
    page.keyboard.press("ArrowRight")
    page.keyboard.press("PageDown")
    assert page.eval_on_selector(WEIGHTS, "e => e.dataset.focus") == "5,1"
    # the focus cell is framed in orange on the overlay, just outside the cell
    frame = page.eval_on_selector(
        WEIGHTS,
        """e => { const L = e.alState.layout, d = window.devicePixelRatio || 1;
            const x = Math.round((L.left + 1 * L.cellW - 3) * d), y = Math.round((L.top + 5.5 * L.cellH) * d);
            return [...e.alState.overlay.getContext('2d').getImageData(x, y, 1, 1).data]; }""",
    )
    assert frame[0] > 200 and frame[1] < 140 and frame[3] > 200, frame  # #e66100
    # the table: the same numbers, with the tokens as row and column headers
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.classList.contains('al-heatmap-table-button')")
    page.keyboard.press("Enter")
    table = page.locator(".al-heatmap-table:not([hidden])").filter(has_text="Softmax weights")
    headers = table.locator("thead th").all_inner_texts()
    assert headers == ["1 Life", "2 is", "3 short", "4 eat", "5 dessert", "6 first"]
    row = table.locator("tbody tr").nth(2)
    assert row.locator("th").inner_text() == "3 short"
    cells = row.locator("td").all_inner_texts()
    assert cells[:3] == [f"{float(weights[2, j]):.4f}" for j in range(3)] and cells[3:] == ["blocked, weight 0"] * 3
    assert not page_errors


def test_enter_on_a_focused_row_follows_its_token_as_a_click_does(page, app_url, page_errors):
    page.set_viewport_size(PROJECTOR)
    page.goto(app_url + "/self_attention")
    drawn(page)
    page.focus(f"{WEIGHTS} .al-heatmap-overlay")
    for _ in range(4):
        page.keyboard.press("ArrowDown")
    assert live(page, WEIGHTS).startswith("row 5 dessert, column 1 Life: ")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=stMain] strong')]"
        ".some(e => e.innerText.startsWith('Following token 5:'))"
    )
    settle(page)
    assert re.search(r"[?&]token=4\b", page.url), page.url
    assert page.eval_on_selector(WEIGHTS, "e => e.alState.picked") == 4
    assert not page_errors


def test_pagedown_moves_a_focused_heatmap_and_steps_the_lesson_once_the_heatmap_is_left(page, app_url, page_errors):
    page.set_viewport_size(PROJECTOR)
    page.goto(app_url + "/?present=true")
    settle(page)
    page.wait_for_function("() => window.alStepKeys !== undefined")
    page.keyboard.press("PageDown")  # the map: on to the first lesson's question
    settle(page)
    page.wait_for_function("() => window.alStepKeys !== undefined")
    page.keyboard.press("PageDown")  # the reveal, with its figures
    drawn(page)
    lesson = parse_qs(urlparse(page.url).query)["lesson"]
    heatmap = '[data-testid="stMain"] .al-heatmap[data-drawn]:not([data-pick="cell"])'
    page.wait_for_selector(heatmap)
    first = page.locator(heatmap).first
    first.locator(".al-heatmap-overlay").focus()
    page.keyboard.press("PageDown")  # the heatmap's: a page of rows down, the lesson stays
    page.wait_for_timeout(300)
    assert first.evaluate("e => e.dataset.focus").split(",")[0] != "0"
    assert parse_qs(urlparse(page.url).query)["lesson"] == lesson
    page.keyboard.press("Escape")  # the heatmap gives the keys back
    page.keyboard.press("PageDown")  # the clicker's: the next lesson
    page.wait_for_function("l => !location.search.includes('lesson=' + l)", arg=lesson[0], timeout=60_000)
    assert not page_errors


def test_a_cell_question_is_answered_and_revealed_with_the_keyboard_alone(page, app_url, page_errors):
    """The course's cell question (which key gets the most weight) by keyboard: Tab to the blank grid, the arrow keys
    to the answer's cell (announced without any value: the grid holds nothing of the answer), Enter picks it as a
    click does, and the commit button, reached with Tab, grades it."""
    page.set_viewport_size(PROJECTOR)
    lesson = course.BY_ID["soft_lookup"]
    sentence = "the cat sat on the mat because it was warm"
    page.goto(f"{app_url}/?lesson={lesson.id}&sentence={sentence.replace(' ', '+')}&token=7")
    drawn(page)
    grid = '[data-testid="stMain"] .al-heatmap[data-pick="cell"]'
    inputs = {"sentence": sentence, "token": 7}
    inputs = {n: inputs.get(n, ui.PARAMS[n].default) for n in lesson.question.reads}
    truth = lesson.question.answer(inputs)
    labels = lesson.question.choices(inputs)
    tab_to(page, f"{grid} .al-heatmap-overlay")
    for _ in range(truth.value):
        page.keyboard.press("ArrowRight")
    said = live(page, grid)
    assert said.endswith(": not picked") and f"column {labels[truth.value]}" in said, said
    page.keyboard.press("Enter")
    assert live(page, grid).endswith(": picked")
    pill = page.locator(f'.st-key-co-pick-{lesson.id} button[aria-checked="true"]')  # the pill picked
    pill.first.wait_for(timeout=20_000)
    assert pill.first.inner_text().strip() == labels[truth.value]
    settle(page)
    commit = page.get_by_role("button", name="Commit and see")
    for _ in range(40):  # on with Tab to the commit button, then Enter
        if commit.evaluate("b => b === document.activeElement"):
            break
        page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    page.get_by_text("Right: you said").wait_for(timeout=30_000)
    assert not page_errors
