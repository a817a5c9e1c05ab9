"""The attention inventory's page: a learner's pre- and post-test and their own gain per idea.

The responses travel in the page's link only (check_pre, check_post: two characters an item, the answer's and the
reason's index or '-'), with the seed that draws the twins (check_seed); the server keeps nothing. The items, their
keys and the gain are attention.lessons.inventory's.
"""

from __future__ import annotations

import secrets

import streamlit as st

from attention.lessons import inventory as inv

from ..markup import plain
from ..state import get, put

BLANK = "-"
ITEM_IDS = tuple(item.id for item in inv.ITEMS)


def encode(sheet: inv.Sheet) -> str:
    """Two characters an item, in the inventory's order: the answer's index and the reason's, '-' for none."""
    out = []
    for item in ITEM_IDS:
        answer, reason = sheet.get(item, (None, None))
        out.append(BLANK if answer is None else str(answer))
        out.append(BLANK if reason is None else str(reason))
    return "".join(out)


def decode(text: str, forms: tuple[inv.Form, ...]) -> dict[str, inv.Response]:
    """The sheet a link carries, each index checked against its form; {} for anything else (a mangled link)."""
    text = str(text or "")
    if len(text) != 2 * len(forms):
        return {}
    sheet: dict[str, inv.Response] = {}
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


def complete(sheet: inv.Sheet) -> bool:
    return len(sheet) == len(ITEM_IDS) and all(a is not None and r is not None for a, r in sheet.values())


def seed() -> int:
    """This learner's seed: the link's, else a new one written to it (1 to 9999; 0 means none chosen yet)."""
    value = int(get("check_seed"))
    if value == 0:
        value = 1 + secrets.randbelow(9999)
        put("check_seed", value)
    return value


def questions(forms: tuple[inv.Form, ...], phase: str) -> dict[str, inv.Response] | None:
    """The test as one form: every item's prompt, its answers, then its reasons. The sheet once it is sent whole."""
    with st.form(f"inv-{phase}", border=False):
        picked = {}
        for k, form in enumerate(forms):
            st.markdown(f"**{k + 1}. {plain(form.prompt)}**")
            a = st.radio("Your answer", form.answers, index=None, key=f"inv:{phase}:{form.item}:a")
            r = st.radio("Because", form.reasons, index=None, key=f"inv:{phase}:{form.item}:r")
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


def score(forms: tuple[inv.Form, ...], sheet: inv.Sheet) -> int:
    return sum(inv.marks(forms, sheet))


def gain_words(g: float | None) -> str:
    """What a normalised gain means, in a sentence (Hake 1998's bands)."""
    if g is None:
        return "You had every item right before: there was nothing left to gain."
    band = "high (0.7 or more)" if g >= 0.7 else "medium (0.3 to 0.7)" if g >= 0.3 else "low (under 0.3)"
    if g < 0:
        band = "negative: fewer right than before"
    return (f"Your normalised gain g = {g:.2f}: you closed {max(g, 0):.0%} of the gap between your first score and "
            f"full marks, a {band} gain.")  # fmt: skip


def results(pre_forms: tuple[inv.Form, ...], post_forms: tuple[inv.Form, ...], pre: inv.Sheet, post: inv.Sheet) -> None:
    """The learner's gain per idea, then each post-test item with the lab's answer and why."""
    n = len(ITEM_IDS)
    a, b = score(pre_forms, pre), score(post_forms, post)
    st.subheader(f"Before: {a} of {n}. After: {b} of {n}.")
    st.write(gain_words(inv.normalised_gain(a / n, b / n)))
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


def solo() -> None:
    """The page: the pre-test, then (after the course) the post-test, then the learner's gain per idea."""
    st.title("Check what you know")
    st.caption(
        f"{len(ITEM_IDS)} questions about attention, each with its reason: about five minutes. Take it before the "
        "course and again after the last lesson: the second time asks the same ideas with other numbers and words, "
        "and shows how far you came on each. Your answers stay in this page's link; the server keeps nothing."
    )
    s = seed()
    pre_forms, post_forms = inv.test(s, "pre"), inv.test(s, "post")
    pre, post = decode(get("check_pre"), pre_forms), decode(get("check_post"), post_forms)
    if not complete(pre):
        st.header("Before the course")
        sheet = questions(pre_forms, "pre")
        if sheet is not None:
            put("check_pre", encode(sheet))
            st.rerun()
        return
    if not complete(post):
        n = len(ITEM_IDS)
        st.success(f"Your first try is kept in this page's link: {score(pre_forms, pre)} of {n} right. Bookmark "
                   "it, take the course, then come back for the second try.", icon=":material/bookmark:")  # fmt: skip
        st.page_link("pages/course.py", label="The course", icon=":material/school:")
        if not st.toggle("I have done the course: take the second try now", key="inv:post-now"):
            return
        st.header("After the course")
        sheet = questions(post_forms, "post")
        if sheet is not None:
            put("check_post", encode(sheet))
            st.rerun()
        return
    results(pre_forms, post_forms, pre, post)
    if st.button("Start again with new questions", key="inv:again"):
        put("check_pre", "")
        put("check_post", "")
        put("check_seed", 1 + secrets.randbelow(9999))
        st.rerun()
