"""The course on a projector's 1024 x 768, run from a clicker: PageDown alone takes three lessons in a row from the
question to the reveal and on, with the figure that answers each question on screen after the press; and each
lesson's entry on the map opens that lesson."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, quote_plus, urlparse

import pytest

import ui
from browser.conftest import SCREENSHOTS
from browser.test_pages import CHARTS, assert_clean, open_page, settle, wait_for_charts
from ui.views import course

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


# the reveal's verdict (the stage's first alert) and its Say line, each wholly inside the window: what the room reads
WORDS_IN_VIEW_JS = """() => {
    const stage = document.querySelector('.st-key-course-stage');
    if (!stage) return {verdict: null, say: null};
    const inView = (el) => { if (!el) return null; const r = el.getBoundingClientRect();
        return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; };
    const say = [...stage.querySelectorAll('[data-testid="stMarkdownContainer"]')]
        .find(m => m.innerText.startsWith('Say:'));
    return {verdict: inView(stage.querySelector('[data-testid="stAlert"]')), say: inView(say)};
}"""
APP = '[data-testid="stApp"]'


def lesson_heading(page) -> str:
    return page.locator('[data-testid="stMain"] h3').first.inner_text()


def figures(page) -> int:
    """The figures in the main column; a cell question's blank grid, to be clicked, is not one."""
    # counted in one evaluation: a grid mounted between two counts once made it -1 (CI, lesson 11's question)
    return page.evaluate(
        "sel => [...document.querySelectorAll(sel)].filter(e => !e.matches('.al-heatmap[data-pick=\"cell\"]')).length",
        MAIN_CHARTS,
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


PHONE = {"width": 390, "height": 844}
# every link's label, whole and inside the window: its text not cut (an ellipsis, a clipped box) nor past the edge
CUT_LINKS_JS = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPageLink-NavLink"]')]
    .filter(a => { const label = a.querySelector('[data-testid="stMarkdownContainer"]').parentElement;
        return label.scrollWidth > label.clientWidth + 1 || a.getBoundingClientRect().right > window.innerWidth; })
    .map(a => a.innerText)"""


def test_the_maps_links_wrap_on_a_phone(page, app_url, page_errors, shoot):
    """At a phone's 390 px the map's links keep their whole label inside the window (WCAG 1.4.10): Streamlit's one
    line with an ellipsis lost the end of "Check what you know: before the course, and again after it"."""
    page.set_viewport_size(PHONE)
    open_page(page, app_url, "")
    page.get_by_role("button", name="Start the course").wait_for()
    links = page.locator('[data-testid="stMain"] [data-testid="stPageLink-NavLink"]')
    assert links.count() >= 2
    assert page.evaluate(CUT_LINKS_JS) == []
    shoot(page, "test_course_map_phone")
    assert_clean(page, page_errors)


def test_each_map_entry_opens_its_lesson_and_the_page_link_goes_to_the_right_page(page, app_url, page_errors):
    page.set_viewport_size(PROJECTOR)
    for lesson in course.LESSONS:
        open_page(page, app_url, "")
        page.get_by_role("button", name=re.compile(re.escape(lesson.title))).first.click()
        page.get_by_role("heading", name=re.compile(re.escape(lesson.title))).first.wait_for()
        settle(page, timeout=300_000)  # lesson 11's question reads SmolLM2: minutes on a loaded machine's first read
        assert parse_qs(urlparse(page.url).query)["lesson"] == [lesson.id]
        assert figures(page) == 0
    link = page.get_by_role("link", name=re.compile("Open the page"))
    link.click()
    wait_for_charts(page)
    assert urlparse(page.url).path == "/" + course.LESSONS[-1].page.removeprefix("pages/").removesuffix(".py")
    assert_clean(page, page_errors)


def test_pagedown_on_lesson_12_trains_then_shows_the_loss_in_view(page, app_url, page_errors, shoot):
    """Lesson 12's reveal needs a training run nobody has made (a seed of the test's own): PageDown starts it, the
    page says how far it is and draws the loss so far, and the loss curve with the step it falls fastest comes into
    the window once it is trained."""
    page.set_viewport_size(PROJECTOR)
    open_page(page, app_url, "", "present=true&lesson=watch_it_learn&train_seed=23")
    page.get_by_role("heading", name=re.compile("Watch one form")).first.wait_for()
    settle(page)
    page.wait_for_function(KEYS_JS)
    page.keyboard.press("PageDown")
    page.get_by_text(re.compile("The lab trains the model|The lab computed")).first.wait_for(timeout=60_000)
    if page.get_by_text("The lab trains the model").count():
        assert figures(page) <= 1  # the loss so far at most: the prediction is in, the answer's mark is not drawn
        assert page.locator(".st-key-co-loss").count() == 0
        shoot(page, "test_course_12_training")
    page.get_by_text("The lab computed").first.wait_for(timeout=600_000)  # trained (the loss so far is drawn before)
    page.wait_for_function(IN_VIEW_JS, arg=MAIN_CHARTS, timeout=60_000)
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
    settle(page)  # the verdict comes first, the figure after it in the same run
    assert figures(page) > 0
    assert_clean(page, page_errors)


# 25 words: lesson 4's question runs over three lines, lesson 1's bars and lesson 6's heatmaps grow tall
SENTENCE = (
    "When the morning train finally arrived at the small station the tired children ran across the platform to greet "
    "their grandmother who waited there so patiently"
)


def test_every_reveal_puts_its_verdict_and_say_line_in_the_window(page, app_url, page_errors):
    """Presenter mode at 1024 x 768, PageDown alone: in every lesson the press that reveals leaves the verdict and
    the "Say:" line wholly inside the window (a clicker cannot scroll), whatever the figure's height."""
    page.set_viewport_size(PROJECTOR)
    for k, lesson in enumerate(course.LESSONS):  # the window as the room sees it, one picture a lesson
        query = f"present=true&lesson={lesson.id}&sentence={quote_plus(SENTENCE)}"
        open_page(page, app_url, "", query)
        page.wait_for_function(KEYS_JS)
        page.keyboard.press("PageDown")
        page.get_by_text("The lab computed").first.wait_for(timeout=600_000)  # lesson 12 trains first
        settle(page, timeout=300_000)
        page.wait_for_timeout(500)  # the stage's scroll once the run is over
        shown = page.evaluate(WORDS_IN_VIEW_JS)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"test_course_in_view_{k + 1}_{lesson.id}.png"))
        assert shown == {"verdict": True, "say": True}, (lesson.id, shown)
    assert_clean(page, page_errors)


PRESS_IF_RUNNING_JS = """() => {
    const running = document.querySelector('[data-testid="stApp"]').dataset.testScriptState === 'running';
    if (running) document.dispatchEvent(new KeyboardEvent('keydown', {key: 'PageDown', bubbles: true}));
    return running;
}"""


def test_a_second_pagedown_while_the_reveal_computes_does_not_skip_it(page, app_url, page_errors):
    """Lesson 11's reveal runs the chat model on a new prompt (each seed its own): a PageDown pressed while that run
    is still going is held, so the reveal comes and stays; the next PageDown then moves on."""
    page.set_viewport_size(PROJECTOR)
    pressed = False
    for seed in (41, 42, 43):  # a seed whose reveal is still computing when the second press comes
        open_page(page, app_url, "", f"present=true&lesson=chat_model&seed={seed}")
        page.wait_for_function(KEYS_JS)
        page.keyboard.press("PageDown")
        page.wait_for_selector(f'{APP}[data-test-script-state="running"]')
        pressed = page.evaluate(PRESS_IF_RUNNING_JS)
        page.get_by_text("The lab computed").first.wait_for(timeout=300_000)
        settle(page, timeout=300_000)
        if pressed:
            break
    assert pressed, "every reveal was over before the second press: nothing was tested"
    page.wait_for_timeout(1000)
    query = parse_qs(urlparse(page.url).query)
    assert query["lesson"] == ["chat_model"] and query["answer"] == ["-"]
    assert page.get_by_text("The lab computed").count() >= 1
    page.keyboard.press("PageDown")
    page.get_by_role("heading", name=re.compile(re.escape(course.LESSONS[11].title))).first.wait_for()
    assert_clean(page, page_errors)


def test_back_and_reload_keep_the_stage(page, app_url, page_errors):
    """The browser's Back goes to the stage before (the reveal, then the question), Forward comes again, and a reload
    reopens the stage the link names."""
    page.set_viewport_size(PROJECTOR)
    open_page(page, app_url, "", "present=true&lesson=masks&sentence=one+two+three")
    page.wait_for_function(KEYS_JS)

    def stage() -> tuple[str, bool]:
        settle(page)
        page.wait_for_timeout(500)
        return parse_qs(urlparse(page.url).query)["lesson"][0], page.get_by_text("The lab computed").count() > 0

    page.keyboard.press("PageDown")
    assert stage() == ("masks", True)
    page.wait_for_function(KEYS_JS)
    page.keyboard.press("PageDown")
    assert stage() == ("multi_head", False)
    page.go_back()
    assert stage() == ("masks", True)
    page.go_back()
    assert stage() == ("masks", False)
    page.reload()
    assert stage() == ("masks", False)
    page.go_forward()
    assert stage() == ("masks", True)
    page.reload()
    assert stage() == ("masks", True)
    assert_clean(page, page_errors)


def test_the_presenters_sentence_applied_gives_the_clicker_back(page, app_url, page_errors):
    """Ctrl+Enter in the presenter's Sentence box applies the sentence, closes the box and hands the keys back to
    the page: the next PageDown reveals, without an Esc first."""
    page.set_viewport_size(PROJECTOR)
    open_page(page, app_url, "", "present=true&lesson=masks")
    page.wait_for_function(KEYS_JS)
    page.get_by_role("button", name="Sentence").click()
    box = page.locator('[data-testid="stPopoverBody"] textarea').first
    box.fill("a b c d e")
    box.press("Control+Enter")
    settle(page)
    page.wait_for_function("() => !document.activeElement || document.activeElement.tagName !== 'TEXTAREA'")
    assert parse_qs(urlparse(page.url).query)["sentence"] == ["a b c d e"]
    page.wait_for_function(KEYS_JS)
    page.keyboard.press("PageDown")
    page.get_by_text("The lab computed").first.wait_for(timeout=30_000)
    assert "5 × 5" in page.inner_text('[data-testid="stMain"]')  # the question asked on the sentence applied
    assert_clean(page, page_errors)


def test_lesson_13s_composition_comes_into_the_window_with_its_words(page, app_url, page_errors, shoot):
    """Lesson 13 on a projector, PageDown alone: once lesson 12's run is trained, the verdict, the Say line and the
    composition's cells (every first-layer head's Q, K and V) are inside the 1024 x 768 window together."""
    page.set_viewport_size(PROJECTOR)
    open_page(page, app_url, "", "present=true&lesson=two_layers")
    page.wait_for_function(KEYS_JS)
    page.keyboard.press("PageDown")
    page.get_by_text("The lab computed").first.wait_for(timeout=600_000)  # the run trains first on a fresh server
    settle(page, timeout=300_000)
    page.wait_for_timeout(500)  # the stage's scroll once the run is over
    assert page.evaluate(WORDS_IN_VIEW_JS) == {"verdict": True, "say": True}
    grid = page.locator('.al-heatmap[data-title$="reads layer 1\'s heads"]')
    page.wait_for_function("(g) => g.dataset.drawn !== undefined", arg=grid.element_handle())
    box, layout = grid.bounding_box(), grid.evaluate("(g) => g.alState.layout")
    assert box["y"] >= 0 and box["y"] + layout["top"] + layout["plotH"] <= PROJECTOR["height"], (box, layout)
    assert grid.get_attribute("data-rows") == "2" and grid.get_attribute("data-cols") == "3"
    shoot(page, "test_course_13_two_layers_reveal")
    assert_clean(page, page_errors)
