"""The attention inventory's page: a learner's pre- and post-test and their own gain per idea.

The responses travel in the page's link only (check_pre, check_post: two characters an item, the answer's and the
reason's index or '-'), with the seed that draws the twins (check_seed); the server keeps nothing. The items, their
keys and the gain are attention.lessons.inventory's.

In a class poll room (ui/views/poll.py) the same test is one question of kind "test", asked before the course and
after it: each phone sends its whole sheet, the room keeps it under the browser's anonymous token only, and the
projector pairs the two tests by token and shows the room's gain (nothing for fewer than five pairs).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable

import streamlit as st

from attention.basics.params import Param
from attention.lessons import inventory
from server.poll import PollQuestion, Room

from .. import state
from ..markup import plain
from ..state import get, put

# The seed that draws a learner's twins, and their two sheets
SETTINGS = {
    "check_seed": Param("int", "Inventory seed", "Which twins of the inventory's items this learner is asked (0: "
                        "none chosen yet).", default=0, lo=0, hi=9999),
    "check_pre": Param("text", "First try", "The inventory's first answers: two characters an item.", default=""),
    "check_post": Param("text", "Second try", "The inventory's second answers: two characters an item.",
                        default=""),
}  # fmt: skip
state.register("inventory", SETTINGS)

BLANK = "-"
ITEM_IDS = tuple(item.id for item in inventory.ITEMS)
PHASE_WORDS = {"pre": "before the course", "post": "after the course"}


def encode(sheet: inventory.Sheet) -> str:
    """Two characters an item, in the inventory's order: the answer's index and the reason's, '-' for none."""
    out = []
    for item in ITEM_IDS:
        answer, reason = sheet.get(item, (None, None))
        out.append(BLANK if answer is None else str(answer))
        out.append(BLANK if reason is None else str(reason))
    return "".join(out)


def decode(text: str, forms: tuple[inventory.Form, ...]) -> dict[str, inventory.Response]:
    """The sheet a link carries, each index checked against its form; {} for anything else (a mangled link)."""
    text = str(text or "")
    if len(text) != 2 * len(forms):
        return {}
    sheet: dict[str, inventory.Response] = {}
    for k, form in enumerate(forms):
        pair = []
        for char, labels in zip(text[2 * k : 2 * k + 2], (form.answers, form.reasons), strict=True):
            if char == BLANK:
                pair.append(None)
            elif char.isdigit() and int(char) < len(labels):
                pair.append(int(char))
            else:
                return {}
        sheet[form.item] = (pair[0], pair[1])
    return sheet


def complete(sheet: inventory.Sheet) -> bool:
    return len(sheet) == len(ITEM_IDS) and all(a is not None and r is not None for a, r in sheet.values())


def seed() -> int:
    """This learner's seed: the link's, else a new one written to it (1 to 9999; 0 means none chosen yet)."""
    value = int(get("check_seed"))
    if value == 0:
        value = 1 + secrets.randbelow(9999)
        put("check_seed", value)
    return value


def questions(
    forms: tuple[inventory.Form, ...], phase: str, given: inventory.Sheet | None = None
) -> inventory.Sheet | None:
    """The test as one form: every item's prompt, its answers, then its reasons (`given`: a sheet sent before, shown
    picked). The sheet once it is sent whole."""
    with st.form(f"inv-{phase}", border=False):
        picked = {}
        for k, form in enumerate(forms):
            st.markdown(f"**{k + 1}. {plain(form.prompt)}**")
            before = (given or {}).get(form.item, (None, None))
            a = st.radio("Your answer", form.answers, index=before[0], key=f"inv:{phase}:{form.item}:a")
            r = st.radio("Because", form.reasons, index=before[1], key=f"inv:{phase}:{form.item}:r")
            picked[form.item] = (None if a is None else form.answers.index(a), None if r is None else
                                 form.reasons.index(r))  # fmt: skip
        sent = st.form_submit_button("Send my answers", type="primary")
    if not sent:
        return None
    missing = [k + 1 for k, form in enumerate(forms) if None in picked[form.item]]
    if missing:
        st.warning(f"Answer every question and its reason first: {', '.join(map(str, missing))} still open.")
        return None
    return picked


def score(forms: tuple[inventory.Form, ...], sheet: inventory.Sheet) -> int:
    return sum(inventory.marks(forms, sheet))


def gain_words(g: float | None) -> str:
    """What a normalised gain means, in a sentence (Hake 1998's bands)."""
    if g is None:
        return "You had every item right before: there was nothing left to gain."
    band = "high (0.7 or more)" if g >= 0.7 else "medium (0.3 to 0.7)" if g >= 0.3 else "low (under 0.3)"
    if g < 0:
        band = "negative: fewer right than before"
    return (f"Your normalised gain g = {g:.2f}: you closed {max(g, 0):.0%} of the gap between your first score and "
            f"full marks, a {band} gain.")  # fmt: skip


def results(
    pre_forms: tuple[inventory.Form, ...],
    post_forms: tuple[inventory.Form, ...],
    pre: inventory.Sheet,
    post: inventory.Sheet,
) -> None:
    """The learner's gain per idea, then each post-test item with the lab's answer and why."""
    n = len(ITEM_IDS)
    a, b = score(pre_forms, pre), score(post_forms, post)
    st.subheader(f"Before: {a} of {n}. After: {b} of {n}.")
    st.write(gain_words(inventory.normalised_gain(a / n, b / n)))
    rows = []
    for f_pre, f_post in zip(pre_forms, post_forms, strict=True):
        before = f_pre.grade(*pre[f_pre.item])
        after = f_post.grade(*post[f_post.item])
        rows.append({"Idea": f_pre.idea, "Before": "✓ right" if before.right else "✗ not yet",
                     "After": "✓ right" if after.right else "✗ not yet"})  # fmt: skip
    st.table(rows)
    st.caption("An item counts as right only when the answer and its reason are both right.")
    with st.expander("The post-test's answers, and why"):
        for k, form in enumerate(post_forms):
            graded = form.grade(*post[form.item])
            mark = "✓" if graded.right else "✗"
            st.markdown(f"**{mark} {k + 1}. {plain(form.prompt)}**  \nThe lab computed: "
                        f"{plain(form.answers[form.answer_key])}, because {plain(form.reasons[form.reason_key])}. "
                        f"{plain(form.why)}")  # fmt: skip


def take(forms: tuple[inventory.Form, ...], phase: str) -> None:
    """One try: the test under its heading; once sent whole, the sheet goes into the link (check_pre/check_post)."""
    st.header(f"{PHASE_WORDS[phase][0].upper()}{PHASE_WORDS[phase][1:]}")
    sheet = questions(forms, phase)
    if sheet is not None:
        put(f"check_{phase}", encode(sheet))
        st.rerun()


def solo() -> None:
    """The page: the pre-test, then (after the course) the post-test, then the learner's gain per idea."""
    st.title("Check what you know")
    st.caption(
        f"{len(ITEM_IDS)} questions about attention, each with its reason: about five minutes. Take it before the "
        "course and again after the last lesson: the second time asks the same ideas with other numbers and words, "
        "and shows how far you came on each. Your answers stay in this page's link; the server keeps nothing."
    )
    s = seed()
    pre_forms, post_forms = inventory.test(s, "pre"), inventory.test(s, "post")
    pre, post = decode(get("check_pre"), pre_forms), decode(get("check_post"), post_forms)
    if not complete(pre):
        take(pre_forms, "pre")
        return
    if not complete(post):
        n = len(ITEM_IDS)
        st.success(f"Your first try is kept in this page's link: {score(pre_forms, pre)} of {n} right. Bookmark "
                   "it, take the course, then come back for the second try.", icon=":material/bookmark:")  # fmt: skip
        st.page_link("pages/course.py", label="The course", icon=":material/school:")
        if not st.toggle("I have done the course: take the second try now", key="inv:post-now"):
            return
        take(post_forms, "post")
        return
    results(pre_forms, post_forms, pre, post)
    if st.button("Start again with new questions", key="inv:again"):
        put("check_pre", "")
        put("check_post", "")
        put("check_seed", 1 + secrets.randbelow(9999))
        st.rerun()


# --------------------------------------------------------------------------- in a class poll room

ROOM_QUESTIONS = {"inventory.pre": "pre", "inventory.post": "post"}  # the room's question id -> the test's phase


def room_seed(code: str) -> int:
    """One seed a room, from its code: every phone in the room is asked the same twins, and the post-test's differ."""
    return 1 + int(hashlib.sha256(code.encode()).hexdigest(), 16) % 9999


def room_question(code: str, phase: str) -> PollQuestion:
    """The room's question for one test: its items (rows) and each item's numbers of answers and reasons (cols)."""
    forms = inventory.test(room_seed(code), phase)
    return PollQuestion(f"inventory.{phase}", f"Check what you know, {PHASE_WORDS[phase]}: {len(forms)} questions, "
                        "each with its reason", "test", rows=tuple(f.item for f in forms),
                        cols=tuple(f"{len(f.answers)}.{len(f.reasons)}" for f in forms))  # fmt: skip


def room_learner(code: str, q: PollQuestion, mine: str | None, revealed: bool, send: Callable[[str], None],
                 answer_to: Callable[[str], str | None]) -> None:  # fmt: skip
    """A phone's test: the form until the instructor closes it (Reveal), then its own score (and after the second
    test, its own gain). `answer_to(qid)` is this browser's answer to another of the room's questions."""
    phase = ROOM_QUESTIONS.get(q.id)
    if phase is None:
        st.warning("This test is not one this version of the lab knows.")
        return
    forms = inventory.test(room_seed(code), phase)
    sheet = decode(mine or "", forms)
    if revealed:
        if not complete(sheet):
            st.info("The instructor closed this test before your answers arrived.")
            return
        n = len(forms)
        st.success(f"Closed. You had {score(forms, sheet)} of {n} right (answer and reason both).")
        other = decode(answer_to("inventory.pre") or "", inventory.test(room_seed(code), "pre"))
        if phase == "post" and complete(other):
            a, b = score(inventory.test(room_seed(code), "pre"), other), score(forms, sheet)
            st.write(gain_words(inventory.normalised_gain(a / n, b / n)))
        return
    if complete(sheet):
        st.success("Sent. You can change your answers and send again until the instructor closes the test.")
    picked = questions(forms, f"room-{phase}", sheet)
    if picked is not None:
        send(encode(picked))
        st.rerun()


def room_projector(code: str, room: Room, answered: int, sheets: Callable[[str], dict[str, str]]) -> None:
    """The projector during a test: how many sent their sheet; after the second test, the room's gain, per item,
    and which misconceptions fell, with the counts to download. `sheets(qid)` is every token's sheet to a test."""
    st.metric("Sheets sent", answered, help=f"Of the {room.joined} devices joined.")
    asked = {q.id for q in room.asked}
    if "inventory.post" not in asked:
        st.caption("Close the test (Reveal) once the room has sent its sheets; ask the second test after the course.")
        return
    seed = room_seed(code)
    pre_forms, post_forms = inventory.test(seed, "pre"), inventory.test(seed, "post")
    pre = {t: decode(v, pre_forms) for t, v in sheets("inventory.pre").items()}
    post = {t: decode(v, post_forms) for t, v in sheets("inventory.post").items()}
    report = inventory.report(pre_forms, post_forms, {t: v for t, v in pre.items() if complete(v)},
                        {t: v for t, v in post.items() if complete(v)})  # fmt: skip
    room_report(report)
    buttons = st.container(horizontal=True)
    for fmt, mime in (("csv", "text/csv"), ("json", "application/json")):
        buttons.download_button(f"Gain ({fmt.upper()})", inventory.export(report, fmt), f"gain-{code}.{fmt}", mime,
                                key=f"inv:dl:{fmt}", on_click="ignore")  # fmt: skip


def room_report(report: inventory.Report) -> None:
    """The room's gain: ⟨g⟩, the share right before and after, each item's, and the misconceptions that fell."""
    if not report.shown:
        st.info(f"{report.pairs} devices took both tests: the gain is shown from {inventory.MIN_PAIRS} on, so that no "
                "one's answers can be told apart.")  # fmt: skip
        return
    top = st.container(horizontal=True)
    top.metric(
        "Class gain ⟨g⟩",
        "—" if report.gain is None else f"{report.gain:.2f}",
        help="Hake's normalised gain: (after − before) / (100 % − before), over the devices that took both.",
    )
    top.metric("Right before", f"{report.pre_mean:.0%}")
    top.metric("Right after", f"{report.post_mean:.0%}")
    top.metric("Pairs", report.pairs)
    rows = [{"Idea": i.idea, "Before": f"{i.pre:.0%}", "After": f"{i.post:.0%}",
             "Gain": "—" if i.gain is None else f"{i.gain:.2f}"} for i in report.items]  # fmt: skip
    st.dataframe(rows, hide_index=True)
    fell = [m for m in report.misconceptions if m.pre > m.post]
    if fell:
        names = {i.id: i.misconceptions for i in inventory.ITEMS}
        st.markdown("**Misconceptions that fell:** " + "; ".join(
            f"{names[m.item][m.misconception]} ({m.pre} → {m.post})" for m in sorted(fell, key=lambda m: m.post - m.pre)
        ))  # fmt: skip
