"""The course in AppTest: the map is the front door, each lesson hides its figure until the learner commits, bad
answers get a sentence, changed inputs re-ask, the progress travels in the link, and the whole course walks through."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

import ui
from attention.lessons.course import inputs_for, reading
from harness import charts
from ui.views import course
from ui.views.course import flow
from ui.views.course.outline import SHORT_ROUTE

ROOT = Path(__file__).resolve().parents[2]
VEGA = "vega_lite_chart"


def figures(at: AppTest) -> int:
    """The figures on the page: our heatmaps and the Vega-Lite charts (bars, bands); a question's blank grid, to be
    clicked (ui.heatmaps.pick_cell), is not one."""
    vega = sum(1 for n in charts._walk(at._tree) if getattr(n, "type", None) == VEGA)
    return len([h for h, _, _ in charts.drawn(at) if h["selectable"] != "cell"]) + vega


def question_grid(at: AppTest) -> tuple[dict, torch.Tensor] | None:
    """A cell question's grid: its header and cells (every one 0: blank)."""
    grids = [(h, v) for h, v, _ in charts.drawn(at) if h["selectable"] == "cell"]
    assert len(grids) <= 1
    return grids[0] if grids else None


def archive_offered(at: AppTest) -> bool:
    """Whether the page offers its "All figures" download (assets/figures.js)."""
    return any(
        getattr(n, "type", None) == "bidi_component" and n.proto.component_name == "attention_lab.figures"
        for n in charts._walk(at._tree)
    )


def opened(**params: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=300)  # lesson 10 reads the model
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    parts = [e.value for e in (*at.info, *at.warning, *at.error, *at.success, *at.caption, *at.markdown)]
    return "\n".join(str(p) for p in parts)


def cell_pick(at: AppTest, lesson: course.Lesson):
    """A cell question's keys: pills, or a list to search when there are more than flow.MAX_PILLS."""
    inputs = {n: at.session_state["p:" + n] for n in lesson.question.reads}
    many = len(lesson.question.choices(inputs_for(lesson.question, inputs))) > flow.MAX_PILLS
    return (at.selectbox if many else at.button_group)(key=f"co:pick:{lesson.id}")


def answer(at: AppTest, lesson: course.Lesson, raw) -> AppTest:
    """Type or pick an answer and press 'Commit and see'."""
    q = lesson.question
    if q.kind == "cell":
        cell_pick(at, lesson).set_value(raw)
    elif q.kind == "choice":
        at.radio(key=f"co:pick:{lesson.id}").set_value(raw)
    else:
        at.text_input(key=f"co:num:{lesson.id}").set_value(raw)
    at.button(key=f"FormSubmitter:co:form:{lesson.id}-Commit and see").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return trained(at)


def trained(at: AppTest, timeout: float = 240.0) -> AppTest:
    """Rerun while a lesson's reveal waits for its training run (the browser's timer does it on a page)."""
    end = time.monotonic() + timeout
    while any("The lab trains the model" in i.value for i in at.info):
        # the loss so far at most (the prediction is in): not the reveal's figure before the run is trained
        assert figures(at) <= 1, "a figure before the run that answers the question is trained"
        assert "falls fastest" not in str(at._tree), "the answer marked before the run is trained"
        assert time.monotonic() < end, "the lesson's run did not finish training"
        time.sleep(0.5)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def right_and_wrong(lesson: course.Lesson, inputs: dict) -> tuple[object, object]:
    """A right answer (the package's, as the page shows it) and a wrong one the question can read."""
    q = lesson.question
    truth = q.answer(inputs)
    if q.kind == "number":
        value = float(truth.value)
        lo, hi = q.range(inputs)
        wrong = next(x for x in (value * 2 + 5, value + 1, value - 1, value / 3)
                     if lo <= x <= hi and abs(x - value) > q.margin(truth) + 1e-9)  # fmt: skip
        return f"{value:g}", f"{wrong:g}"
    labels = q.choices(inputs)
    other = next(k for k in range(len(labels)) if k not in (truth.accepted or {truth.value}))
    return labels[truth.value], labels[other]


def test_a_new_visitor_lands_on_the_course_map_with_just_explore_one_click_away():
    at = opened()
    assert at.title[0].value == course.TITLE
    labels = [b.label for b in at.button]
    for k, lesson in enumerate(course.LESSONS):
        assert f"○ {k + 1}. {lesson.title}" in labels
    links = [e for e in charts._walk(at._tree) if getattr(e, "type", None) == "page_link"]
    assert any("Just explore" in link.proto.label and link.proto.page.endswith("self_attention") for link in links)
    assert figures(at) == 0


# a lesson that trains its model first (Watch it learn) is in the thorough group: --all, not the fast tier
@pytest.mark.parametrize(
    "lesson",
    [pytest.param(lesson, marks=pytest.mark.thorough) if lesson.ready else lesson for lesson in course.LESSONS],
    ids=lambda lesson: lesson.id,
)
def test_each_lesson_hides_its_figure_until_the_learner_commits(lesson):
    at = opened(lesson=lesson.id)  # the map's entry opens the lesson: the link it writes
    assert at.subheader[0].value.endswith(lesson.title)
    assert figures(at) == 0 and not archive_offered(at)  # no "All figures" download of no figure either
    inputs = {n: at.session_state["p:" + n] for n in lesson.question.reads}
    right, wrong = right_and_wrong(lesson, inputs)
    at = answer(at, lesson, wrong)
    assert figures(at) > 0 and archive_offered(at)
    assert at.warning and at.warning[0].value.startswith("Not quite"), texts(at)
    assert at.query_params["progress"] == f"{lesson.id}:wrong"
    assert any(b.label.startswith("Next:") or b.label.startswith("Back to the course map") for b in at.button)


@pytest.mark.parametrize("lesson", [lesson for lesson in course.LESSONS if lesson.question.kind == "cell"],
                         ids=lambda lesson: lesson.id)  # fmt: skip
def test_a_cell_question_offers_its_row_blank_to_click_and_frames_the_pill_picked(lesson):
    """The query's row as a grid with nothing of the answer in it: its columns are the question's keys, every cell
    the same; a pill picked frames its cell. The grid goes once the answer is in (browser: a click picks the pill)."""
    at = opened(lesson=lesson.id)
    inputs = {n: at.session_state["p:" + n] for n in lesson.question.reads}
    labels = list(lesson.question.choices(inputs))
    header, cells = question_grid(at)
    assert header["cols"] == labels and header["rows"] == ["query"] and header["picked"] is None
    assert bool((cells == 0).all()) and not header["annotate"]  # blank: no weight drawn, no number printed
    cell_pick(at, lesson).set_value(labels[-1]).run()
    assert question_grid(at)[0]["picked"] == len(labels) - 1
    at.button(key=f"FormSubmitter:co:form:{lesson.id}-Commit and see").click().run()
    at = trained(at)
    assert question_grid(at) is None and figures(at) > 0


def test_a_right_answer_on_a_sentence_of_the_learners_own():
    lesson = course.BY_ID["soft_lookup"]
    sentence = "the quick brown fox jumps over the lazy dog"
    at = opened(lesson=lesson.id, sentence=sentence, token="3")
    inputs = {n: at.session_state["p:" + n] for n in lesson.question.reads}
    assert inputs["sentence"] == sentence
    right, _ = right_and_wrong(lesson, inputs)
    at = answer(at, lesson, right)
    assert at.success and at.success[0].value.startswith("Right"), texts(at)
    assert figures(at) > 0
    assert at.query_params["progress"] == "soft_lookup:right"


@pytest.mark.parametrize(("raw", "words"), [("", "Type your prediction"), ("lots", "is not a number"),
                                            ("-1", "out of range")])  # fmt: skip
def test_a_bad_answer_gets_a_sentence_and_no_figure(raw, words):
    lesson = course.BY_ID["masks"]
    at = answer(opened(lesson=lesson.id), lesson, raw)
    assert any(words in w.value for w in at.warning), texts(at)
    assert figures(at) == 0
    assert "progress" not in at.query_params


def test_changing_the_sentence_after_answering_asks_again():
    lesson = course.BY_ID["masks"]
    at = opened(lesson=lesson.id)
    at = answer(at, lesson, "15")  # six tokens, causal: 15 zeros
    assert at.success and figures(at) > 0
    at.text_area(key="w:sentence").set_value("one two three").run()
    assert not at.exception
    assert figures(at) == 0, "the old answer must not be graded against the new numbers"
    assert "predict again" in texts(at)
    assert "3 × 3" in texts(at)
    at = answer(at, lesson, "3")
    assert at.success and at.success[0].value.startswith("Right")


def test_the_progress_in_a_link_marks_the_map_and_continue_goes_to_the_first_lesson_not_done():
    at = opened(progress="soft_lookup:right,softmax:wrong,nonsense:right,scaling:bogus")
    labels = [b.label for b in at.button]
    assert "✓ 1. The soft lookup" in labels
    assert "✗ 2. Scores and the softmax" in labels
    assert "○ 3. Why divide by √d_k" in labels
    at.button(key="co:start").click().run()
    assert at.query_params["lesson"] == "scaling"


@pytest.mark.parametrize(
    ("page", "lesson"),
    [
        ("masks", "masks"),
        ("real_model", "real_model"),
        ("chat_model", "chat_model"),
        ("watch_it_learn", "watch_it_learn"),
    ],
)
def test_a_page_links_to_its_lesson(page, lesson):
    at = charts.open_page(page)
    at.button(key="co:lesson-link").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.subheader[0].value.endswith(course.BY_ID[lesson].title)
    if lesson == "masks":
        assert at.session_state["p:mask"] == "causal"  # the lesson's own setting


@pytest.mark.thorough  # the whole course, trained: --all, not the fast tier
def test_the_whole_course_from_the_map_to_the_end():
    at = opened()
    at.button(key="co:start").click().run()
    for lesson in course.LESSONS:
        assert at.query_params["lesson"] == lesson.id
        assert figures(at) == 0
        inputs = inputs_for(lesson.question, {n: at.session_state["p:" + n] for n in lesson.question.reads})
        right, _ = right_and_wrong(lesson, inputs)
        at = answer(at, lesson, right)
        assert at.success and at.success[0].value.startswith("Right"), (lesson.id, texts(at))
        at.button(key="co:next" if lesson is not course.LESSONS[-1] else "co:end").click().run()
        assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == course.TITLE
    labels = [b.label for b in at.button]
    assert all(f"✓ {k + 1}. {lesson.title}" in labels for k, lesson in enumerate(course.LESSONS))
    assert at.query_params["progress"] == ",".join(f"{lesson.id}:right" for lesson in course.LESSONS)


@pytest.mark.thorough  # a training run: --all, not the fast tier
def test_watch_one_form_trains_through_the_pool_then_reuses_the_kept_run():
    """Lesson 12's answer comes from a real run of the training pool: the first reveal waits for it with its
    progress on the page and no figure; a second learner of the same setting gets the kept run at once."""
    lesson = course.BY_ID["watch_it_learn"]
    at = opened(lesson=lesson.id, train_seed="7")  # a seed no other test trains
    at.text_input(key=f"co:num:{lesson.id}").set_value("400")
    at.button(key=f"FormSubmitter:co:form:{lesson.id}-Commit and see").click().run()
    waiting = [i.value for i in at.info if "The lab trains the model" in i.value]
    assert waiting and any(w in waiting[0] for w in ("Queued", "Training")), texts(at)
    assert figures(at) <= 1  # the loss so far, once the run has its first snapshot
    assert "400" in texts(at)  # the prediction stays on the page while it trains
    at = trained(at)
    assert figures(at) > 0
    assert at.query_params["progress"].startswith(f"{lesson.id}:")
    again = opened(lesson=lesson.id, train_seed="7")
    again.button(key="co:reveal").click().run()
    assert not any("The lab trains the model" in i.value for i in again.info), texts(again)
    assert figures(again) > 0


def test_the_stage_travels_in_the_link_and_a_reloaded_link_reopens_the_reveal():
    """The prediction goes into the link (`answer`): a link copied at the reveal opens at that reveal, graded again
    on the link's inputs; a reveal without a prediction is `answer=-`; the next lesson opens at its question."""
    lesson = course.BY_ID["masks"]
    at = answer(opened(lesson=lesson.id, sentence="one two three four"), lesson, "6")
    assert at.query_params["answer"] == "6" and at.success
    again = opened(**{k: at.query_params[k] for k in at.query_params})  # the link, in a fresh session
    assert again.success and again.success[0].value.startswith("Right"), texts(again)
    assert figures(again) > 0
    again.button(key="co:next").click().run()
    assert "answer" not in again.query_params and figures(again) == 0
    again.button(key="co:reveal").click().run()
    assert again.query_params["answer"] == "-" and figures(again) > 0
    unread = opened(lesson=lesson.id, answer="lots")  # a link whose answer does not read: the question, asked
    assert figures(unread) == 0 and not unread.warning and "answer" not in unread.query_params


def test_a_long_sentence_offers_its_keys_as_a_list_and_still_grades():
    """250 words: lesson 1's keys as a list to search (not 250 pills), graded like any other; the bars drop their
    printed numbers and thin their labels rather than overlap."""
    lesson = course.BY_ID["soft_lookup"]
    sentence = " ".join(f"w{k}" for k in range(250))
    at = opened(lesson=lesson.id, sentence=sentence)
    assert not at.button_group and len(at.selectbox(key=f"co:pick:{lesson.id}").options) == 250
    inputs = {n: at.session_state["p:" + n] for n in lesson.question.reads}
    right, _ = right_and_wrong(lesson, inputs)
    at = answer(at, lesson, right)
    assert at.success and at.success[0].value.startswith("Right"), texts(at)
    bars = [n for n in charts._walk(at._tree) if getattr(n, "type", None) == VEGA]
    layers = json.loads(bars[0].proto.spec)["layer"]
    assert [layer["mark"]["type"] for layer in layers] == ["bar"]  # no printed numbers
    assert layers[0]["encoding"]["y"]["axis"]["labelOverlap"] == "greedy"


def test_numbers_on_screen_count_from_1_and_a_seed_is_a_number_box():
    at = opened(lesson="real_model", layer="0", head="0")
    assert [o for o in at.selectbox(key="w:layer").options][:2] == ["1", "2"]
    at.button(key="co:reveal").click().run()
    assert not at.exception
    titles = [h["title"] for h, _, _ in charts.drawn(at)]
    assert "Softmax weights, layer 1 head 1" in titles, titles
    seeded = opened(lesson="soft_lookup")
    seeded.number_input(key="w:seed").set_value(7).run()
    assert seeded.query_params["seed"] == "7"


def test_lesson_2s_now_try_repeats_the_query_word():
    """Lesson 2's change to try teaches what the reveal did not: a word twice has one key, so its two scores are
    equal, and doubling keeps them equal while every gap grows."""
    lesson = course.BY_ID["softmax"]
    at = opened(lesson=lesson.id, sentence="the cat sat on the mat", token="2")
    at.button(key="co:reveal").click().run()
    at.button(key="co:try").click().run()
    assert at.session_state["p:sentence"] == "the cat sat on the mat sat"
    inputs = {n: at.session_state["p:" + n] for n in lesson.question.reads}
    from ui.views.course.figures import toy

    base = toy(inputs, mask="none")
    doubled = toy(inputs, mask="none", scale="temperature", temperature=base.scale / 2)
    for w in (base.weights[0, 2], doubled.weights[0, 2]):
        assert torch.allclose(w[2], w[6])  # the two “sat”: equal, before and after


def test_the_short_route_is_marked_on_the_map_and_next_follows_it():
    """A 50-minute class: the map marks the short route's lessons, one button takes it, and from then on Start,
    Next and PageDown's order go from one of its lessons to the next (the route travels in the link)."""
    at = opened()
    starred = [c.value for c in at.caption if "★ short route" in c.value]
    assert len(starred) == len(SHORT_ROUTE)
    at.button(key="co:route").click().run()
    assert at.query_params["route"] == "short"
    at.button(key="co:start").click().run()
    route = [lesson for lesson in course.LESSONS if lesson.id in SHORT_ROUTE]
    for lesson, after in zip(route, route[1:], strict=False):
        assert at.query_params["lesson"] == lesson.id
        at.button(key="co:reveal").click().run()
        at = trained(at)
        assert at.button(key="co:next").label == f"Next: {after.title} ▶"
        at.button(key="co:next").click().run()
        assert not at.exception, [e.value for e in at.exception]
    assert at.query_params["lesson"] == route[-1].id and at.query_params["route"] == "short"


@pytest.mark.parametrize("lesson", [lesson for lesson in course.LESSONS if "sentence" in lesson.question.reads],
                         ids=lambda lesson: lesson.id)  # fmt: skip
def test_a_sentence_with_no_words_gets_a_sentence_not_an_exception(lesson):
    at = opened(lesson=lesson.id, sentence="?! ...")
    problem = lesson.question.problem(inputs_for(lesson.question, {"sentence": "?! ..."}))
    if problem is None:  # a question that does not count the words (the scaling law): asked as usual
        assert any(b.key == "co:reveal" for b in at.button)
        return
    assert ui.plain(problem) in texts(at)  # shown escaped for Markdown
    assert figures(at) == 0 and not any(b.key == "co:reveal" for b in at.button)


@pytest.mark.thorough  # a training run: --all, not the fast tier
def test_why_two_layers_reveals_the_composition_of_its_own_run():
    """Lesson 13 reads lesson 12's run (the same setting, kept by the pool): its reveal draws each first-layer head's
    Q-, K- and V-composition into the run's induction head, the package's numbers, counted from 1, and the verdict
    names the head its keys read."""
    lesson = course.BY_ID["two_layers"]
    at = opened(lesson=lesson.id, train_seed="3")
    inputs = inputs_for(lesson.question, {"train_seed": 3})
    assert at.radio(key=f"co:pick:{lesson.id}").options == ["Layer 1, head 1", "Layer 1, head 2"]
    at = answer(at, lesson, "Layer 1, head 1")
    composed = reading(inputs)
    drawn = {h["title"]: (h, v) for h, v, _ in charts.drawn(at)}
    title = f"How layer {composed.reader[0] + 1}, head {composed.reader[1] + 1} reads layer 1's heads"
    header, values = drawn[title]
    assert header["rows"] == ["head 1", "head 2"] and header["cols"] == ["Q (queries)", "K (keys)", "V (values)"]
    torch.testing.assert_close(values, torch.stack([composed.q, composed.k, composed.v], 1))
    best = int(composed.k.argmax())
    verdict = (at.success or at.warning)[0].value
    assert f"layer 1, head {best + 1} (K-composition {float(composed.k[best]):.2f})" in verdict, verdict
    assert at.query_params["progress"].startswith(f"{lesson.id}:")
