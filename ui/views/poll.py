"""The class poll's two views: a learner's (the current question and its answer buttons, on a phone) and the
projector's (the room's code and link, how many answered and how the answers split, Reveal, the download).

What belongs here: drawing the poll and the session's part in it (its room and its browser token, parameters in
`ui.state`; its instructor's key, kept in the session and the instructor's own browser, never in an address).
The rooms themselves are `server.poll`'s, shared by every session (in Redis behind the room's proxy). Questions are
plain data (`server.poll.PollQuestion`); until the course pushes its own (`push`), the projector offers
`demo_questions()`, whose answers the package computes.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

import server.poll
from attention.basics.params import Param
from attention.lessons import course
from server.poll import PollError, PollQuestion, Unavailable

from .. import join, qr, state
from ..keys import out_of_flow
from ..markup import plain
from ..state import get, put
from . import inventory
from .poll_questions import asked, course_questions, demo_questions, from_course

# A learner's link is ?room=CODE, to which the page adds the browser's anonymous token (voter), so that a reload keeps
# its one answer; the instructor's key (host) is never written to an address (issue 50: a lesson's link is shared): it
# is read once from a link that has it, then kept in the session and the instructor's own browser (`_key`).
SETTINGS = {
    "room": Param("text", "Room code", "The code on the projector: five letters and digits.", default=""),
    "voter": Param("text", "Poll token", "This browser's anonymous token: one answer per browser.", default=""),
    "host": Param("text", "Instructor's key", "Asks, reveals and downloads; read from a link, never written to one.",
                  default=""),
}  # fmt: skip
state.register("poll", SETTINGS, unlinked=("host",))

PAUSED = "The poll is paused: its storage is not answering. It resumes by itself; answers given now are not counted."
# how often a learner's view looks for the instructor's next question or the reveal (LAB_POLL_REFRESH_S: tests run
# it faster, so that a minute holds many refreshes)
LEARNER_EVERY_S = max(0.5, float(os.environ.get("LAB_POLL_REFRESH_S", "") or 3))
# how often the projector redraws the count and the split: a room sees its answer counted within a second (issue
# 35, 48: p95 <= 1 s), up to this wait of it. At 0.5 s a quiet room of 300 over 3 replicas had p95 1.05 s
# (benchmarks/results/2026-11-28-poll-room-quiet.md); one read of the room a tick, for one tab a room
PROJECTOR_EVERY_S = 0.4
MOST_ROWS = 24  # values the split lists (a number question's answers can be many)
COURSE_ROWS = 6  # values the course's lesson screen lists beside its question (the most given, in order)
KEYS = "poll:keys"  # session: room code -> the instructor's key
COOKIE = "lab_host_"  # + the room's code: the key in the instructor's own browser, so that a reload keeps the room


def _guard(draw: Callable[[], Any]) -> Any:
    """Run `draw`; the poll's refusals and a storage that does not answer become the page's own sentences."""
    try:
        return draw()
    except Unavailable:
        st.info(PAUSED, icon=":material/pause_circle:")
    except PollError as e:
        st.warning(plain(str(e)))
    return None


def join_link(code: str) -> str:
    """The learners' link: the address phones can open (`ui.join`) with /poll?room=CODE."""
    return join.find(st.context.url).link(code)


# --------------------------------------------------------------------------- a learner


def learner() -> None:
    """The learner's page: a box for the room's code, or the room's current question with its answer controls."""
    poll = server.poll.shared()
    code = get("room")
    browser = get("voter")  # read first: a paused page's address keeps it, so a reload is the same browser
    said = _missed(code) if code else None
    if said:
        st.warning(plain(said))
        code = ""
    if code:
        try:
            code = server.poll.normal_code(code)
            poll.enter(code, address(), st.session_state.setdefault("poll:session", secrets.token_urlsafe(12)))
            if not poll.holds(code, browser):  # none yet, or another room's: the server issues one (signed)
                browser = poll.join(code, address())
                put("voter", browser)
        except PollError as e:
            if isinstance(e, server.poll.NoRoom):
                st.session_state["poll:missed"] = (code, str(e))
            st.warning(plain(str(e)))
            code = ""
        except Unavailable:
            st.info(PAUSED, icon=":material/pause_circle:")
            return
    if not code:
        _join_box()
        return
    st.caption(f"Room **{code}** · anonymous: no name is asked or kept, one answer per browser.")
    _learner_live(code, browser)


def _missed(code: str) -> str | None:
    """What was said when this code was tried and found no room: a wrong code counts once against the throttle of
    codes tried (server.poll.CODE_TRIES), not again at each rerun of the page that shows it."""
    try:
        code = server.poll.normal_code(code)
    except PollError:
        return None
    tried, said = st.session_state.get("poll:missed", ("", ""))
    return said if code == tried else None


def _join_box() -> None:
    with st.form("poll:join", border=False):
        typed = st.text_input("Room code", max_chars=12, placeholder="the code on the projector", key="poll:code")
        if st.form_submit_button("Join", type="primary") and typed.strip():
            st.session_state.pop("poll:missed", None)  # typed again: tried again (the room may have opened since)
            put("room", typed.strip().upper())
            st.rerun()


def address() -> str | None:
    """The client's address, for the poll's per-address bounds: the connection's, which behind the room's proxy is
    the client's own (uvicorn reads the proxy's X-Forwarded-For: docs/deploy.md); None on this machine."""
    ip = st.context.ip_address
    return ip if isinstance(ip, str) else None  # AppTest has no connection


def _send(code: str, browser: str, qid: str, value: Any) -> None:
    st.session_state["poll:said"] = None
    try:
        server.poll.shared().answer(code, browser, qid, value, address())
    except PollError as e:
        st.session_state["poll:said"] = str(e)
    except Unavailable:
        st.session_state["poll:said"] = PAUSED


@st.fragment(run_every=LEARNER_EVERY_S)
def _learner_live(code: str, browser: str) -> None:
    _guard(lambda: _learner_question(code, browser))


def _learner_question(code: str, browser: str) -> None:
    poll = server.poll.shared()
    room = poll.room(code)
    q = room.question
    if q is None:
        st.info("Waiting for the instructor's first question.", icon=":material/hourglass_top:")
        return
    mine = poll.mine(code, browser, q)
    st.markdown(f"##### {plain(q.text)}")  # a course's long prompt leaves the answer in a phone's first screen
    said = st.session_state.pop("poll:said", None)
    if said:
        st.warning(plain(said))
    if q.kind == "test":  # the attention inventory: a whole sheet at once (ui/views/inventory.py)
        inventory.room_learner(code, q, mine, room.revealed, lambda v: _send(code, browser, q.id, v),
                               lambda qid: poll.store.mine(server.poll.normal_code(code), qid, browser))  # fmt: skip
        return
    if room.revealed:
        _revealed(poll.tally(code, q, True), mine)
        return
    if q.kind == "choice":
        for i, choice in enumerate(q.choices):
            st.button(plain(choice), key=f"poll:{q.id}:{i}", type="primary" if mine == str(i) else "secondary",
                      width="stretch", on_click=_send, args=(code, browser, q.id, i))  # fmt: skip
    else:
        with st.form(f"poll:{q.id}:form", border=False):
            if q.kind == "number":
                # every number a float (a course's range may be whole numbers, the answer not: Streamlit refuses
                # an int bound beside a float value); whole bounds step by one, and %g shows what was typed
                whole = float(q.lo).is_integer() and float(q.hi).is_integer()
                value = st.number_input("Your answer", value=float(mine) if mine else None, min_value=float(q.lo),
                                        max_value=float(q.hi), step=1.0 if whole else None, format="%g",
                                        key=f"poll:{q.id}:number")  # fmt: skip
            else:
                row, col = (int(x) for x in mine.split(",")) if mine else (0, 0)
                r = st.selectbox("Row (query)", range(len(q.rows)), row, format_func=q.rows.__getitem__)
                c = st.selectbox("Column (key)", range(len(q.cols)), col, format_func=q.cols.__getitem__)
                value = f"{r},{c}"
            if st.form_submit_button("Send", type="primary", width="stretch") and value is not None:
                _send(code, browser, q.id, value)
                said = st.session_state.pop("poll:said", None)
                if said:
                    st.warning(plain(said))
                mine = poll.mine(code, browser, q)
    if mine is not None:
        st.success(f"Your answer: **{plain(q.label(mine))}**. You can change it until the instructor reveals.")


def _revealed(tally: server.poll.Tally, mine: str | None) -> None:
    q = tally.question
    right = q.answer
    if right is not None:
        st.success(f"The answer: **{plain(q.label(right))}**")
    if mine is not None and right is not None:
        st.markdown(f"You answered **{plain(q.label(mine))}**: " + ("right." if q.is_right(mine) else "not this time."))
    _split(tally)


def _split(tally: server.poll.Tally, most: int = MOST_ROWS, across: int = 1) -> None:
    """How the answers split: one bar a value (every choice, even unchosen), the right one marked once revealed;
    past `most` values, the most given (and the right one), in order; `across` bars a row."""
    total = max(tally.answered, 1)
    rows = tally.rows()
    shown = rows
    if len(rows) > most:
        keep = sorted(rows, key=lambda r: (not (tally.revealed and tally.question.is_right(r[0])), -r[2]))[:most]
        shown = [r for r in rows if r in keep]
    cells = st.columns(across) if across > 1 else [st]
    for k, (value, label, n) in enumerate(shown):
        mark = "✓ " if tally.revealed and tally.question.is_right(value) else ""
        cells[k % across].progress(n / total, text=f"{mark}{plain(label)}: {n} ({100 * n / total:.0f} %)")
    if len(rows) > most:
        st.caption(f"… and {len(rows) - most} more values (all of them in the download).")


# --------------------------------------------------------------------------- the projector


def _open() -> None:
    try:
        code, key = server.poll.shared().open(address())
    except PollError as e:
        st.session_state["poll:said"] = str(e)
        return
    except Unavailable:
        st.session_state["poll:said"] = PAUSED
        return
    put("room", code)
    put("host", "")  # a key an older link brought belongs to another room
    st.session_state.setdefault(KEYS, {})[code] = key


def _key(code: str) -> str:
    """The instructor's key for room `code` that this session holds: from a link that carried one (read, never
    written back: registered unlinked), from this session, or from the instructor's browser after a reload."""
    keys = st.session_state.setdefault(KEYS, {})
    linked = get("host")
    if linked:
        keys[code] = linked
    if code not in keys:
        kept = (st.context.cookies or {}).get(COOKIE + code)
        if kept:
            keys[code] = kept
    return keys.get(code, "")


def _remember(code: str, key: str) -> None:
    """Keep the key in the instructor's own browser (a cookie for this site, for as long as a room lives), once a
    session: the projector's reload, or the course in another tab, finds the room's controls without an address
    that carries the key. A learner's phone has no such cookie; a leaked link gives learner rights at most."""
    done = st.session_state.setdefault("poll:remembered", set())
    if code in done:
        return
    done.add(code)
    cookie = json.dumps(f"{COOKIE}{code}={key}; path=/; max-age={server.poll.IDLE_S}; SameSite=Strict")
    with st.container(key="poll-remember"):
        out_of_flow("poll-remember")
        st.html(f"<script>document.cookie = {cookie} + (location.protocol === 'https:' ? '; Secure' : '');</script>",
                unsafe_allow_javascript=True)  # fmt: skip


def hosting() -> tuple[str, str] | None:
    """This session's room and key when it is the room's instructor (the projector's view opened it, here or in
    this browser)."""
    code = get("room")
    if not code:
        return None
    try:
        code = server.poll.normal_code(code)
        key = _key(code)
        return (code, key) if key and server.poll.shared().is_host(code, key) else None
    except (PollError, Unavailable):
        return None


def push(question: Any) -> bool:
    """Make `question` (a PollQuestion, or the course's question object: `PollQuestion.of`) the current one of the
    room this session hosts, when it hosts one; for presenter mode's step. Returns whether it was asked."""
    held = hosting()
    if held is None:
        return False
    q = question if isinstance(question, PollQuestion) else PollQuestion.of(question)
    room = _guard(lambda: server.poll.shared().room(held[0]))
    if room is not None and room.question != q:
        _guard(lambda: server.poll.shared().ask(*held, q))
    return room is not None


def push_course(question: Any, inputs: dict[str, Any]) -> bool:
    """Ask the room this session hosts the course's `question` on these inputs (`push`), unless the inputs leave it
    no answer (its `problem`: a blank sentence, a mask with no cell): then the room is asked nothing."""
    problem = getattr(question, "problem", None)
    if problem is not None and problem(inputs) is not None:
        return False
    return push(from_course(question, inputs))


def projector(questions: Sequence[PollQuestion] | None = None) -> None:
    """The instructor's view: open a room; then its code and link, the question to ask, and the live split."""
    said = st.session_state.pop("poll:said", None)
    if said:
        st.warning(plain(said))
    held = hosting()
    if held is None:
        if get("room"):
            st.warning("This address holds no room you opened (it expired, or the key is wrong): open a new one.")
        st.button("Open a room", key="poll:open", type="primary", icon=":material/groups:", on_click=_open)
        st.caption(
            "A room is anonymous: learners give no name, each browser answers once (and may change its answer "
            "until you reveal). It is forgotten after 4 hours without an answer or a question, or after "
            f"{server.poll.UNJOINED_S // 60:.0f} minutes while nobody has joined it."
        )
        return
    code, key = held
    _remember(code, key)
    where = join.find(st.context.url)
    link = where.link(code)
    # a projector's first screen (1024 x 768, presenter mode too): the code and the QR code on the left, the question
    # and its live split on the right, side by side
    joining, asking = st.columns([2, 3], gap="medium")
    joining.markdown(f"Room code\n# {code}")  # the code big enough to read from the back of the room
    joining.image(qr.svg(link, module_px=6), caption="Scan to join", width=200)  # made here: no network needed
    joining.markdown(f"Join: `{link}`")
    joining.caption("Or open the Class poll page and type the code." + (f" {plain(where.advice)}" if where.how ==
                    "network" else ""))  # fmt: skip
    if where.how == "local":  # under the QR code, where it leaves the split in the window
        joining.warning(plain(where.advice), icon=":material/wifi_off:")
    with asking:
        _asking(code, key, questions)


def _asking(code: str, key: str, questions: Sequence[PollQuestion] | None) -> None:
    if questions is None:  # the demo's questions, then the course's at each lesson's own inputs
        texts = {q.id: q.text for q in demo_questions()}  # a quick first question, then the lessons'
        texts.update({i: f"Lesson: {q.prompt(course.inputs_for(q, {}))}" for i, q in course_questions().items()})
        texts.update({i: f"Check what you know, {inventory.PHASE_WORDS[p]}" for i, p in
                      inventory.ROOM_QUESTIONS.items()})  # fmt: skip

        def make(i: str) -> PollQuestion:
            phase = inventory.ROOM_QUESTIONS.get(i)
            return asked(i) if phase is None else inventory.room_question(code, phase)

    else:
        texts = {q.id: q.text for q in questions}
        make = {q.id: q for q in questions}.__getitem__
    row = st.container(horizontal=True, vertical_alignment="bottom")
    picked = row.selectbox("Question", list(texts), format_func=lambda i: texts[i], key="poll:pick")
    if row.button("Ask", key="poll:ask", icon=":material/campaign:"):
        _guard(lambda: server.poll.shared().ask(code, key, make(picked)))
    _projector_live(code, key)
    _downloads(code, key)
    st.caption(
        "Or step through the course in presenter mode from this tab (or another tab of this browser): each "
        "lesson's question is asked here as you reach it, and PageDown's reveal reaches every phone."
    )
    st.page_link("pages/course.py", label="The course, with this room", icon=":material/school:")


@st.fragment(run_every=PROJECTOR_EVERY_S)
def _projector_live(code: str, key: str) -> None:
    _guard(lambda: _projector_split(code, key))


def _reveal(code: str, key: str) -> None:
    try:
        server.poll.shared().reveal(code, key)
    except PollError as e:
        st.session_state["poll:said"] = str(e)
    except Unavailable:
        st.session_state["poll:said"] = PAUSED


def _projector_split(code: str, key: str) -> None:
    poll = server.poll.shared()
    room = poll.room(code)
    q = room.question
    if q is None:
        st.info(f"No question asked yet: choose one and press Ask. Devices joined: {room.joined}.")
        return
    tally = poll.tally(code, q, room.revealed)
    st.markdown(f"**{plain(q.text)}**")
    if q.kind == "test":  # the attention inventory: the sheets sent, then the room's gain (ui/views/inventory.py)
        if not room.revealed:
            st.button("Close the test", key="poll:reveal", type="primary", icon=":material/lock:", on_click=_reveal,
                      args=(code, key))  # fmt: skip
        inventory.room_projector(code, room, tally.answered, lambda qid: poll.sheets(code, key, qid))
        return
    # the count, the Reveal button and the split side by side and in rows: at 1024 x 768 (presenter mode too) the
    # whole of it is in the window beside the code and the QR code, before and after the reveal
    counts = st.container(horizontal=True, vertical_alignment="center")
    counts.metric("Answered", tally.answered)
    # against the devices the server gave a token for this room: more answers than the class, or more devices
    # than the class, is seen here (issue 50: ballot stuffing)
    counts.metric("Devices joined", room.joined, help="Browsers that opened this room's link or typed its code.")
    if not room.revealed:
        counts.button("Reveal", key="poll:reveal", type="primary", icon=":material/visibility:", on_click=_reveal,
                      args=(code, key))  # fmt: skip
    if room.revealed and q.answer is not None:
        st.success(f"The answer: **{plain(q.label(q.answer))}**")
    values = len(tally.rows())
    _split(tally, across=1 if values <= 2 else 2 if values <= 8 else 3)


def _downloads(code: str, key: str) -> None:
    """The room's counts, every question asked, made when clicked (not at each of the projector's ticks: two exports
    a tick read every question's tally). Drawn by the page's run, not by the projector's refreshing fragment: each
    of its ticks gave a button a new file id and dropped the old one, so a click just before a tick asked for a file
    that was gone, and no download came (CI, on d33b241)."""
    buttons = st.container(horizontal=True)
    for fmt, mime in (("csv", "text/csv"), ("json", "application/json")):
        buttons.download_button(f"Counts ({fmt.upper()})", functools.partial(_export, code, key, fmt),
                                f"poll-{code}.{fmt}", mime, key=f"poll:dl:{fmt}", on_click="ignore")  # fmt: skip


def _export(code: str, key: str, fmt: str) -> str:
    """The room's counts as the instructor clicks for them; a sentence in the file when the room cannot be read."""
    try:
        return server.poll.shared().export(code, key, fmt)
    except Unavailable:
        return PAUSED
    except PollError as e:
        return str(e)


# --------------------------------------------------------------------------- the course's lesson, in a hosted room


def course_room(held: tuple[str, str], qid: str, shown: bool) -> None:
    """On a lesson's screen in a tab that hosts a room: how many answered and, before the reveal, how the room split
    (no mark), redrawn live; once the lesson shows its answer (PageDown, a button), the room's question `qid` is
    revealed too, so every phone says whether its answer was right, and the split is marked."""
    code, key = held
    _remember(code, key)
    if shown:
        _guard(lambda: _reveal_asked(code, key, qid))
    _course_live(code, qid)


def _reveal_asked(code: str, key: str, qid: str) -> None:
    room = server.poll.shared().room(code)
    if room.question is not None and room.question.id == qid and not room.revealed:
        server.poll.shared().reveal(code, key)


@st.fragment(run_every=PROJECTOR_EVERY_S)
def _course_live(code: str, qid: str) -> None:
    _guard(lambda: _course_split(code, qid))


def _course_split(code: str, qid: str) -> None:
    poll = server.poll.shared()
    room = poll.room(code)
    q = room.question
    if q is None or q.id != qid:
        st.caption(f"Room {code}: its question comes with this lesson's.")
        return
    tally = poll.tally(code, q, room.revealed)
    words = f"**The room ({code}): {tally.answered} answered**"
    if room.revealed and q.answer is not None and tally.answered:
        right = sum(n for v, _, n in tally.rows() if q.is_right(v))
        words += f" · {right} right ({100 * right / tally.answered:.0f} %)"
    elif not room.revealed:
        words += f" · join at `{join_link(code)}`"
    st.markdown(words)
    _split(tally, most=COURSE_ROWS, across=3)
