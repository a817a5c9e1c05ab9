"""The course on a projector's 1024 x 768, run from a clicker: PageDown alone takes three lessons in a row from the
question to the reveal and on, with the figure that answers each question on screen after the press; and each
lesson's entry on the map opens that lesson."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest

import ui
from browser.test_pages import CHARTS, assert_clean, open_page, settle, wait_for_charts
from ui.pages import course

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1024, "height": 768}
MAIN_CHARTS = ", ".join(f'[data-testid="stMain"] {c}' for c in CHARTS.split(", "))
# every chart drawn and at least partly inside the window: what the room sees after the press
# the clicker's listener is in place (the keys component has mounted): a press before it would go nowhere
KEYS_JS = "() => window.alStepKeys !== undefined && document.querySelector('.al-step-keys') !== null"
IN_VIEW_JS = """(sel) => {
    const charts = [...document.querySelectorAll(sel)];
    const drawn = charts.filter(c => c.classList.contains('al-heatmap')
        ? c.dataset.drawn !== undefined : c.querySelector('svg, canvas'));
    const seen = drawn.filter(c => { const r = c.getBoundingClientRect();
        return r.width >= 240 && r.top < window.innerHeight && r.bottom > 0; });
    return charts.length > 0 && drawn.length === charts.length && seen.length > 0;
}"""


def lesson_heading(page) -> str:
    return page.locator('[data-testid="stMain"] h3').first.inner_text()


def figures(page) -> int:
    """The figures in the main column; a cell question's blank grid, to be clicked, is not one."""
    return (
        page.locator(MAIN_CHARTS).count() - page.locator('[data-testid="stMain"] .al-heatmap[data-pick="cell"]').count()
    )


def test_pagedown_alone_runs_three_lessons_from_question_to_reveal(page, app_url, page_errors, shoot):
    page.set_viewport_size(PROJECTOR)
    open_page(page, app_url, "", "present=true")  # the map; no click on the page before the keys
    page.get_by_role("heading", name=re.compile("predict, then see", re.I)).first.wait_for()
    settle(page)
    page.wait_for_function(KEYS_JS)
    page.keyboard.press("PageDown")  # the map's PageDown opens the first lesson
    first = 0
    for k in range(first, first + 3):
        lesson = course.LESSONS[k]
        page.get_by_role("heading", name=re.compile(re.escape(lesson.title))).first.wait_for()
        settle(page)
        assert figures(page) == 0, f"{lesson.id}: a figure before the question was answered"
        shoot(page, f"test_course_{k + 1}_{lesson.id}_question")
        page.wait_for_function(KEYS_JS)
        page.keyboard.press("PageDown")  # the room has thought: reveal
        page.wait_for_function(IN_VIEW_JS, arg=MAIN_CHARTS, timeout=60_000)
        settle(page)
        assert page.get_by_text("The lab computed").count() >= 1
        shoot(page, f"test_course_{k + 1}_{lesson.id}_reveal")
        page.wait_for_function(KEYS_JS)
        page.keyboard.press("PageDown")  # on to the next lesson's question
        settle(page)
    assert parse_qs(urlparse(page.url).query)["lesson"] == [course.LESSONS[first + 3].id]
    progress = parse_qs(urlparse(page.url).query)["progress"][0]
    assert progress == ",".join(f"{lesson.id}:seen" for lesson in course.LESSONS[first : first + 3])
    assert_clean(page, page_errors)


def test_each_map_entry_opens_its_lesson_and_the_page_link_goes_to_the_right_page(page, app_url, page_errors):
    page.set_viewport_size(PROJECTOR)
    for lesson in course.LESSONS:
        open_page(page, app_url, "")
        page.get_by_role("button", name=re.compile(re.escape(lesson.title))).first.click()
        page.get_by_role("heading", name=re.compile(re.escape(lesson.title))).first.wait_for()
        settle(page)
        assert parse_qs(urlparse(page.url).query)["lesson"] == [lesson.id]
        assert figures(page) == 0
    link = page.get_by_role("link", name=re.compile("Open the page"))
    link.click()
    wait_for_charts(page)
    assert urlparse(page.url).path == "/" + course.LESSONS[-1].page.removeprefix("pages/").removesuffix(".py")
    assert_clean(page, page_errors)


def test_pagedown_on_lesson_12_trains_then_shows_the_loss_in_view(page, app_url, page_errors, shoot):
    """Lesson 12's reveal needs a training run nobody has made (a seed of the test's own): PageDown starts it, the
    page says how far it is with no figure, and the loss curve comes into the window once it is trained."""
    page.set_viewport_size(PROJECTOR)
    open_page(page, app_url, "", "present=true&lesson=watch_it_learn&train_seed=23")
    page.get_by_role("heading", name=re.compile("Watch one form")).first.wait_for()
    settle(page)
    page.wait_for_function(KEYS_JS)
    page.keyboard.press("PageDown")
    page.get_by_text(re.compile("The lab trains the model|The lab computed")).first.wait_for(timeout=60_000)
    if page.get_by_text("The lab trains the model").count():
        assert figures(page) == 0
        shoot(page, "test_course_12_training")
    page.wait_for_function(IN_VIEW_JS, arg=MAIN_CHARTS, timeout=300_000)
    settle(page)
    assert page.get_by_text("The lab computed").count() >= 1
    shoot(page, "test_course_12_reveal")
    assert "watch_it_learn:seen" in parse_qs(urlparse(page.url).query)["progress"][0]
    assert_clean(page, page_errors)


def test_a_click_on_the_questions_grid_is_the_prediction(page, app_url, page_errors, shoot):
    """A cell question (which key gets the most weight) is answered by a click on the query's blank row: the click
    picks the same answer as its pill, the cell is framed, and the commit grades it."""
    page.set_viewport_size(PROJECTOR)
    lesson = course.BY_ID["soft_lookup"]
    sentence = "the cat sat on the mat because it was warm"
    open_page(page, app_url, "", f"lesson={lesson.id}&sentence={sentence.replace(' ', '+')}&token=7")
    grid = page.locator('[data-testid="stMain"] .al-heatmap[data-pick="cell"]')
    grid.wait_for()
    page.wait_for_function("(g) => g.dataset.drawn !== undefined", arg=grid.element_handle())
    inputs = {"sentence": sentence, "token": 7}
    inputs = {n: inputs.get(n, ui.PARAMS[n].default) for n in lesson.question.reads}
    truth = lesson.question.answer(inputs)
    labels = lesson.question.choices(inputs)
    assert grid.get_attribute("data-cols") == str(len(labels))
    assert figures(page) == 0
    box = grid.locator("canvas").first.bounding_box()
    layout = grid.evaluate("(g) => g.alState.layout")
    x = box["x"] + layout["left"] + (truth.value + 0.5) * layout["cellW"]
    y = box["y"] + layout["top"] + 0.5 * layout["cellH"]
    page.mouse.click(x, y)
    pill = page.locator(f'.st-key-co-pick-{lesson.id} button[aria-checked="true"]')  # the pill picked
    pill.first.wait_for(timeout=20_000)
    assert pill.first.inner_text().strip() == labels[truth.value]
    settle(page)
    shoot(page, "test_course_cell_grid_picked")
    page.get_by_role("button", name="Commit and see").click()
    page.get_by_text("Right: you said").wait_for(timeout=30_000)
    assert figures(page) > 0
    assert_clean(page, page_errors)
