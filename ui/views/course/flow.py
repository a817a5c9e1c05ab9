"""The course's flow: a lesson's question → reveal, the map, and the progress a learner carries in the session and in
the link (`progress`, `lesson`). The lessons themselves are lessons.py's; the questions and their computed answers
are the package's (`attention.lessons.course`): nothing here knows an answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from attention.lessons import course
from attention.lessons.course import Verdict
from attention.lessons.course.toy import COUNTED_MASKS

from ...heatmaps import pick_cell
from ...keys import clicks
from ...markup import plain
from ...state import get, put
from ...widgets import pick, select, slider, text
from .. import poll
from . import outline
from .lessons import BY_ID, BY_PAGE, LESSONS, PLANS, Lesson
from .outline import MARKS, PAGE, go
from .runs import RUNS

STAGE = "course-stage"  # the container a clicker's press scrolls to the window's top
FIGURE = "course-figure"  # the reveal's figure, apart from the words above it (its charts' toolbars)
ANSWERS = "course:answers"  # session: lesson id -> Answer
WAITING = "course:waiting"  # session: lesson id -> (fingerprint, the answer given) while its run trains
REVEAL = object()  # a reveal without a prediction, waiting for its run
SHOWN = "-"  # the link's `answer` at a reveal without a prediction
WRITTEN = "course:written"  # session: (lesson, answer) as the last run left them, so as the link has them
WAIT_TICK_S = 0.5  # a lesson waiting for its training run looks this often
MAX_PILLS = 24  # a cell question offers its keys as pills up to this many, beyond as a list to search


@dataclass(frozen=True)
class Answer:
    """What the learner committed on one lesson, and on which inputs (other inputs re-ask the question)."""

    fingerprint: str
    verdict: Verdict | None  # None: revealed without a prediction (the room predicted aloud)


# ------------------------------------------------------------------------------------------------ progress
def progress() -> dict[str, str]:
    """The learner's marks from the link's `progress` (lesson:right,lesson:wrong,lesson:seen): unknown parts ignored."""
    marks = {}
    for part in str(get("progress")).split(","):
        lesson, _, mark = part.partition(":")
        if lesson in BY_ID and mark in MARKS:
            marks[lesson] = mark
    return marks


def _mark(lesson: str, mark: str) -> None:
    marks = progress()
    marks[lesson] = mark
    put("progress", ",".join(f"{k}:{marks[k]}" for k in BY_ID if k in marks))


def inputs(lesson: Lesson) -> dict[str, Any]:
    """The question's inputs: the parameters as the learner set them (the lesson's own defaults where untouched),
    and the server's runners for its models."""
    return {**{name: get(name) for name in lesson.question.reads}, course.RUNS: RUNS}


def answer_of(lesson: Lesson, now: dict[str, Any]) -> Answer | None:
    """The learner's answer on these inputs; one given on other inputs is forgotten (the question is asked again)."""
    kept = st.session_state.setdefault(ANSWERS, {}).get(lesson.id)
    if kept is None:
        return None
    if kept.fingerprint != course.fingerprint(lesson.question, now):
        st.session_state[ANSWERS].pop(lesson.id)
        st.session_state["course:changed"] = lesson.id
        put("answer", "")
        return None
    return kept


def _waits(lesson: Lesson, now: dict[str, Any], raw: Any) -> bool:
    """Whether the lesson's answer still waits for its run (a training): the answer is then kept until it is ready."""
    if lesson.ready is None or lesson.ready(now) is None:
        return False
    st.session_state.setdefault(WAITING, {})[lesson.id] = (course.fingerprint(lesson.question, now), raw)
    return True


def waiting(lesson: Lesson, now: dict[str, Any]) -> bool:
    """Whether an answer waits for the lesson's run on these inputs; once the run is ready, the answer is graded."""
    kept = st.session_state.get(WAITING, {}).get(lesson.id)
    if kept is None:
        return False
    if kept[0] != course.fingerprint(lesson.question, now):
        st.session_state[WAITING].pop(lesson.id)
        return False
    if lesson.ready is not None and lesson.ready(now) is not None:
        return True
    st.session_state[WAITING].pop(lesson.id)
    reveal(lesson) if kept[1] is REVEAL else commit(lesson, kept[1])
    return False


def commit(lesson: Lesson, raw: Any) -> None:
    """Grade an answer on the inputs as they are now; keep it unless it could not be read."""
    now = inputs(lesson)
    _, problem = lesson.question.read(now, raw)
    st.session_state["course:problem"] = problem
    if problem is not None:
        return
    if _waits(lesson, now, raw):
        put("answer", str(raw))
        return
    verdict = lesson.question.check(now, raw)
    st.session_state["course:problem"] = verdict.message if verdict.ok is None else None
    if verdict.ok is None:
        return
    st.session_state.setdefault(ANSWERS, {})[lesson.id] = Answer(course.fingerprint(lesson.question, now), verdict)
    put("answer", str(raw))  # the stage in the link: a reload or the browser's Back reopens it (`follow_link`)
    _mark(lesson.id, "right" if verdict.ok else "wrong")


def reveal(lesson: Lesson) -> None:
    """Show the answer without a prediction (a room that predicted aloud, a presenter's clicker)."""
    now = inputs(lesson)
    put("answer", SHOWN)
    if _waits(lesson, now, REVEAL):
        return
    st.session_state.setdefault(ANSWERS, {})[lesson.id] = Answer(course.fingerprint(lesson.question, now), None)
    if lesson.id not in progress():
        _mark(lesson.id, "seen")


def _forget(lesson: Lesson) -> None:
    st.session_state.setdefault(ANSWERS, {}).pop(lesson.id, None)
    st.session_state.setdefault(WAITING, {}).pop(lesson.id, None)


def follow_link() -> None:
    """The browser's Back and Forward inside the course, each run before anything is drawn. Every stage writes the
    link (`lesson`, and `answer`: the prediction, SHOWN for a reveal without one, empty at the question), and the
    browser keeps each link in its history; Back reruns the page on the older link, whose parameters the session
    would otherwise overwrite with its own. A link that differs from the one the last run wrote, while the session
    has not moved since (no button, no key), was navigated to: the course goes there."""
    get("route")  # read on every run: the route travels in the link with the lesson
    now = (str(get("lesson")), str(get("answer")))
    last = st.session_state.get(WRITTEN)
    link = (st.query_params.get("lesson") or "map", st.query_params.get("answer") or "")
    if last is not None and now == last and link != last and link[0] in ("map", *BY_ID):
        put("lesson", link[0])
        put("answer", link[1] if link[0] != "map" else "")
        now = (link[0], str(get("answer")))
    st.session_state[WRITTEN] = now


def _restore(lesson: Lesson, now: dict[str, Any], kept: Answer | None, pending: bool) -> Answer | None:
    """The stage the link names (`answer`), where the session does not hold it: a reloaded link reopens the reveal
    it was copied at (graded again on the link's inputs), and Back to a question asks it again."""
    said = str(get("answer"))
    if not said and kept is not None:
        _forget(lesson)
        return None
    if not said or kept is not None or pending:
        return kept
    reveal(lesson) if said == SHOWN else commit(lesson, said)
    st.session_state["course:problem"] = None  # a link whose answer does not read: its question, asked again
    if lesson.id not in st.session_state.get(ANSWERS, {}) and lesson.id not in st.session_state.get(WAITING, {}):
        put("answer", "")
    return st.session_state.get(ANSWERS, {}).get(lesson.id)


def _try(values: dict[str, Any]) -> None:
    for name, value in values.items():
        put(name, value)


# ------------------------------------------------------------------------------------------------ drawing
def course_map() -> None:
    """The front door: the lessons in order with the learner's marks, and the way out to the pages."""
    outline.course_map(progress(), short=get("route") == "short")


def _route() -> tuple[Lesson, ...]:
    """The lessons a learner goes through in order: all, or the short route's (a 50-minute class)."""
    return tuple(BY_ID[entry.id] for entry in outline.route(get("route") == "short"))


def _after(k: int, step: int) -> str:
    """The lesson one on (step 1) or one back (-1) of lesson k on the route; the map past either end. A lesson off
    the route goes on to the route's next one after it."""
    ks = [LESSONS.index(lesson) for lesson in _route()]
    on = [j for j in ks if j > k] if step > 0 else [j for j in ks if j < k][::-1]
    return LESSONS[on[0]].id if on else "map"


def _step(k: int, shown: bool, pending: bool = False) -> float:
    """What the clicker's keys know of the page: a new value scrolls the stage into view (a reveal that waits for its
    run is a step of its own: the reveal, once trained, is scrolled to again)."""
    return 2 * k + (0.5 if pending else 1 if shown else 0)


def _clicker(k: int, lesson: Lesson, shown: bool, pending: bool = False) -> None:
    """A presenter's PageDown: question → reveal → the next lesson's question; PageUp goes back. While the reveal
    waits for its run, PageDown waits too (the room has not seen the answer yet); PageUp goes back to the question."""
    move = clicks("course", _step(k, shown, pending), stage=".st-key-" + STAGE, hold=True)
    if move == 0 or (move > 0 and pending):
        return
    if move > 0 and not shown:
        reveal(lesson)
    elif move > 0:
        go(_after(k, 1))
    elif shown:
        _forget(lesson)
        put("answer", "")
    elif _after(k, -1) != "map":
        go(_after(k, -1))
    st.rerun()


def lesson_view(lesson: Lesson) -> bool:
    """One lesson: why it matters, the question on the learner's inputs, the figure only once they commit (whether
    it is drawn is returned: the page offers its figures' download only then)."""
    k = LESSONS.index(lesson)
    q = lesson.question
    now = inputs(lesson)
    pending = waiting(lesson, now)  # an answer given while the lesson's run trains: graded once it is ready
    kept = _restore(lesson, now, answer_of(lesson, now), pending)
    done = len(progress())  # read on every run: the link carries the progress on every lesson
    pending = pending or lesson.id in st.session_state.get(WAITING, {})
    _clicker(k, lesson, kept is not None or pending, pending)
    nav = st.container(horizontal=True, vertical_alignment="center")
    nav.button("◀ Course map", key="co:map", on_click=go, args=("map",))
    nav.page_link(lesson.page, label=f"Open the page: {lesson.page_title}", icon=":material/open_in_new:")
    route = " · the short route ★" if get("route") == "short" else ""
    nav.caption(f"Lesson {k + 1} of {len(LESSONS)}{route} · {done} done · about {lesson.minutes} min · keys: "
                "PageDown next, PageUp back")  # fmt: skip
    st.subheader(f"{k + 1}. {lesson.title}")
    st.markdown(lesson.why)
    with st.expander("Your inputs", expanded=False):
        _controls(lesson)
    box = st.container(key=STAGE)
    box.markdown(f"**Predict:** {plain(q.prompt(now))}")
    held = poll.hosting()
    if held is not None:  # this tab (or this browser) opened a class poll: the room is asked this lesson's question
        if lesson.ready is None or lesson.ready(now) is None:
            if poll.push_course(q, now):  # inputs that leave the question no answer ask the room nothing
                with box:  # its count and split live; the lesson's reveal is the room's (each phone: right or not)
                    poll.course_room(held, f"course.{lesson.id}", kept is not None)
        elif not pending:  # its answer needs the run: the room is asked once it is trained
            _progress(box, lesson, now, "The room is asked once the lab has trained the model that answers it")
    if st.session_state.get("course:changed") == lesson.id and kept is None:
        box.info("Your inputs changed since you answered: predict again on these numbers.")
    if pending:
        _wait(box, lesson, now)
        return
    if kept is None:
        _ask(box, lesson, now)
        return False
    st.session_state.pop("course:changed", None)
    _reveal(box, lesson, now, kept)
    return True


def _controls(lesson: Lesson) -> None:
    for name in lesson.controls:
        if name in ("sentence", "cross_sentence"):
            text(name, container=st, label="Sentence" if name == "sentence" else "Key/value sentence")
        elif name == "mask":  # the masks whose zeros the question counts (a custom mask has no cells here)
            pick(name, list(COUNTED_MASKS), "Mask type", container=st)
        elif name in ("position", "kv_model"):
            select(name, container=st)
        elif name in ("layer", "head"):  # counted from 1 on screen, as every number in the course
            pick(name, list(range(6 if name == "layer" else 12)), name.capitalize(), container=st,
                 format_func=lambda x: str(x + 1))  # fmt: skip
        elif name == "token":  # the chat lesson's query, within its two copies
            n = course.INDUCTION_LENGTH
            pick(name, list(range(2 * n)), "Token followed", container=st,
                 format_func=lambda t, n=n: f"{t + 1} ({'first' if t < n else 'second'} copy)")  # fmt: skip
        else:
            slider(name, container=st)


def _ask(box: Any, lesson: Lesson, now: dict[str, Any]) -> None:
    q = lesson.question
    if q.problem(now) is not None:  # the prompt says why it cannot be asked: nothing to answer or to show
        box.caption("Change your inputs above, and the question is asked on them.")
        return
    if q.kind == "cell":  # the query's row, blank: a click on a cell is the prediction, and so is a pill below it
        _cell_grid(box, lesson, now)
        # outside the form: a pill picked frames its cell in the grid at once (a form would hold it until Commit);
        # a long sentence's keys in a list to search instead (250 pills would fill the screen)
        labels, what = q.choices(now), "Your prediction: the row's cells, one a key"
        if len(labels) <= MAX_PILLS:
            box.pills(what, labels, key=f"co:pick:{lesson.id}")
        else:
            box.selectbox(what, labels, index=None, key=f"co:pick:{lesson.id}",
                          placeholder=f"one of the {len(labels)} keys: type to search")  # fmt: skip
    with box.form(key=f"co:form:{lesson.id}", border=False):
        if q.kind == "cell":
            raw = st.session_state.get(f"co:pick:{lesson.id}")
        elif q.kind == "choice":
            raw = st.radio("Your prediction", q.choices(now), index=None, key=f"co:pick:{lesson.id}",
                           horizontal=True)  # fmt: skip
        else:
            label = f"Your prediction, a number (right means {q.tolerance_words()})"
            lo, hi = q.range(now)
            raw = st.text_input(label, key=f"co:num:{lesson.id}", placeholder=f"a number from {lo:g} to {hi:g}")
        committed = st.form_submit_button("Commit and see", type="primary")
    if committed:
        commit(lesson, raw)
        if st.session_state.get("course:problem") is None:
            st.rerun()
    problem = st.session_state.get("course:problem")
    if problem:
        box.warning(problem)
    box.button("Show me without predicting", key="co:reveal", on_click=reveal, args=(lesson,))
    box.caption("The figure that answers it appears once you commit.")


def _cell_grid(box: Any, lesson: Lesson, now: dict[str, Any]) -> None:
    """The query's row of keys with no weights in it: the learner clicks the cell they predict. A click sets the
    pills' value (what the form commits), and a pill picked frames its cell, so the two always agree."""
    labels = list(lesson.question.choices(now))
    pill = f"co:pick:{lesson.id}"
    chosen = st.session_state.get(pill)
    picked = labels.index(chosen) if chosen in labels else None
    with box:
        clicked = pick_cell(["query"], labels, title="Click the cell of the key you predict gets the most weight",
                            key=f"co:grid:{lesson.id}", picked=picked)  # fmt: skip
    if clicked is not None and labels[clicked] != chosen:
        st.session_state[pill] = labels[clicked]


def _wait(box: Any, lesson: Lesson, now: dict[str, Any]) -> None:
    """The answer is in; the run that answers it trains (as Play would): its progress, then the reveal by itself."""
    raw = st.session_state[WAITING][lesson.id][1]
    said = "—" if raw is REVEAL else plain(str(raw))
    box.markdown(f"**Your prediction:** {said}")
    _progress(box, lesson, now, "The lab trains the model to answer it, as Play does on the page", so_far=True)


def _progress(box: Any, lesson: Lesson, now: dict[str, Any], what: str, *, so_far: bool = False) -> None:
    """Where the lesson's run stands, redrawn every WAIT_TICK_S; the whole page runs again once it is ready.
    so_far: the prediction is in, so the run's progress may show what it answers (the lesson's `so_far`)."""

    @st.fragment(run_every=WAIT_TICK_S)
    def progress_line() -> None:
        words = lesson.ready(now) if lesson.ready is not None else None
        if words is None:
            st.rerun(scope="app")
        st.info(f"{what}: {words}")
        if so_far and lesson.so_far is not None:
            lesson.so_far(now)

    with box:
        progress_line()


def _reveal(box: Any, lesson: Lesson, now: dict[str, Any], kept: Answer) -> None:
    q = lesson.question
    truth = kept.verdict.truth if kept.verdict is not None else q.answer(now)
    # the prediction beside the result on one line, the verdict and what to say, then the figure: on a projector's
    # 768 px the words a room needs are in view right after the press, whatever the figure's height (the stage,
    # scrolled to the window's top, starts at the question)
    said = "—" if kept.verdict is None else q.choices(now)[kept.verdict.prediction] if q.kind != "number" else (
        f"{kept.verdict.prediction:g}")  # fmt: skip
    c = box.columns(2)
    c[0].markdown(f"**Your prediction:** {plain(said)}")
    c[1].markdown(f"**The lab computed:** {plain(truth.shown)}")
    if kept.verdict is None:
        box.info(truth.why)
    else:
        (box.success if kept.verdict.ok else box.warning)(kept.verdict.message)
    if get("present"):
        box.markdown(f"**Say:** {PLANS[lesson.id][0]}")
    # the figure in a box of its own, a little apart: a chart's hover toolbar sits above its top edge, over the
    # words before it otherwise
    box.html(f"<style>.st-key-{FIGURE} {{ padding-top: 1.75rem; }}</style>")
    with box.container(key=FIGURE):
        if q.problem(now) is None:  # inputs the question refuses (a blank sentence) have no figure either
            lesson.figure(now)
    words, values = lesson.now_try(now)
    row = box.container(horizontal=True, vertical_alignment="center")
    row.markdown("**Now try:**")
    row.button(words, key="co:try", on_click=_try, args=(values,))
    after = _after(LESSONS.index(lesson), 1)
    if after != "map":
        row.button(f"Next: {BY_ID[after].title} ▶", key="co:next", type="primary", on_click=go,
                   args=(after,))  # fmt: skip
    else:  # the last lesson of the route: the inventory's second try, for a learner who took the first
        row.button("Back to the course map ▶", key="co:end", type="primary", on_click=go, args=("map",))
        row.page_link("pages/inventory.py", label="Check what you know again", icon=":material/quiz:")


def current() -> Lesson | None:
    return BY_ID.get(str(get("lesson")))


def lesson_defaults() -> dict[str, Any]:
    """The current lesson's own defaults for `ui.show_url_warnings` (Masks opens causal, Multi-head on four heads)."""
    lesson = current()
    return dict(lesson.question.defaults) if lesson is not None else {}


def lesson_link(page: str) -> None:
    """On a page: a link to its lesson in the course (the lesson links back)."""
    lesson = BY_PAGE.get(page)
    if lesson is None:
        return
    if st.button(f"Lesson {LESSONS.index(lesson) + 1} of the course: {lesson.title}", key="co:lesson-link",
                 type="tertiary", icon=":material/school:"):  # fmt: skip
        go(lesson.id)
        st.switch_page(PAGE)
