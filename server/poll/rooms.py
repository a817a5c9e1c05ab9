"""A room's logic over a Store: codes, the instructor's key, the current question, answers, reveal, export.

The instructor opens a room and gets its code (for the learners' link) and a key (kept by the projector's view:
only it may ask, reveal and download). A question is plain data pushed by the presenter (`PollQuestion`, or any object
with id, prompt, kind, choices and answer: `PollQuestion.of`). A learner's browser holds an anonymous token the server
issued for the room (signed: server/poll/tokens.py); its answer to the current question is a counted value the
question defines (a choice's index, a number, a cell), never the learner's text, and may change until the reveal.
Rooms are forgotten after `idle_s` without a change, or `unjoined_s` while no device has joined.

What one client may do is bounded by its address (the address as the server sees it: behind the room's proxy, the
client's own, forwarded; only a digest of it is kept), never by a cap another client could exhaust: rooms opened
(ROOMS_PER_ADDRESS), devices joined to a room (JOINS_PER_ADDRESS) and answers sent to it (ADDRESS_RATE), each
generous enough for a school whose whole class shares one address, and wrong room codes tried (CODE_TRIES, per
address and per session). The projector shows the answers against the devices joined, so a room that counts more
devices than the class is seen.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import math
import os
import re
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from . import tokens
from .store import Full, Store

CODE_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: a code is read off a projector
CODE_LENGTH = 5
IDLE_S = 4 * 3600  # a room unchanged for 4 hours is forgotten
UNJOINED_S = 15 * 60  # ... and one no device has joined, 15 minutes after the instructor's last step
RATE = (10, 10.0)  # answers a browser may send in a window of seconds
# Per client address (a class behind one school address is one address): (how many, in a window of seconds).
ROOMS_PER_ADDRESS = (20, 3600.0)  # rooms opened
# a lecture hall of 700 behind one campus address (Poll Everywhere's limit per activity; issue 48) joins in 10 minutes,
# and every device answers and changes its mind within a minute, with room to spare
JOINS_PER_ADDRESS = (1000, 600.0)  # devices joined to one room
ADDRESS_RATE = (2000, 60.0)  # answers to one room
CODE_TRIES = {"session": (5, 60.0), "address": (30, 60.0)}  # wrong room codes, before the next try is refused
SECRET_S = 60.0  # how long a replica keeps the store's token secret before reading it again
KINDS = ("choice", "number", "cell", "test")  # test: a whole sheet at once (the inventory: rows items, cols sizes)


class PollError(ValueError):
    """A refusal with the sentence the page shows (a wrong code, an answer not among the choices, too fast)."""


class NoRoom(PollError):
    """No room has this code (never opened, or expired)."""


@dataclass(frozen=True)
class PollQuestion:
    """One question, as the presenter pushes it. `answer` is the right answer as a counted value (a choice's index
    as text, a number, "row,col"); it stays on the server until the reveal."""

    id: str
    text: str
    kind: str = "choice"  # choice | number | cell
    choices: tuple[str, ...] = ()  # choice: the options, in order
    rows: tuple[str, ...] = ()  # cell: the matrix's row labels (queries) ...
    cols: tuple[str, ...] = ()  # ... and column labels (keys)
    lo: float = -1e12  # number: the accepted range
    hi: float = 1e12
    answer: str | None = None
    tolerance: float = 0.0  # number: how far from the answer a value still counts as right (the course's own)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a question's kind is one of {', '.join(KINDS)}, got {self.kind!r}")
        if not re.fullmatch(r"[\w.-]{1,64}", self.id):
            raise ValueError(f"a question's id is 1 to 64 letters, digits, '.', '_' or '-', got {self.id!r}")
        if self.kind == "choice" and not 2 <= len(self.choices) <= 12:
            raise ValueError("a choice question has 2 to 12 choices")
        if self.kind == "cell" and not (self.rows and self.cols and len(self.rows) * len(self.cols) <= 1024):
            raise ValueError("a cell question has rows and columns, at most 1,024 cells")
        if self.kind == "test" and not (
            0 < len(self.rows) == len(self.cols) <= 32 and all(re.fullmatch(r"[2-9]\.[2-9]", c) for c in self.cols)
        ):
            raise ValueError("a test has items (rows) and each item's sizes (cols: 'answers.reasons', 2 to 9 each)")
        # a number's bounds are floats whatever was given: a view's number box is then a float one, and drops a
        # value that is not finite (issue 50: an int box's int(nan), forged by a client, errored its page)
        object.__setattr__(self, "lo", float(self.lo))
        object.__setattr__(self, "hi", float(self.hi))
        if self.answer is not None:
            object.__setattr__(self, "answer", self.value_of(self.answer))

    @classmethod
    def of(cls, obj: Any) -> PollQuestion:
        """A PollQuestion from the course's own question objects (or a dict): id, prompt (or text), kind, choices,
        rows, cols, lo, hi and answer, read by name; a choice's answer may be its label or its index."""
        get = obj.get if isinstance(obj, dict) else lambda name, default=None: getattr(obj, name, default)
        kind = get("kind", "choice")
        choices = tuple(str(c) for c in get("choices", ()) or ())
        answer = get("answer")
        if kind == "choice" and answer is not None and str(answer) in choices:
            answer = str(choices.index(str(answer)))
        elif kind == "cell" and isinstance(answer, tuple | list):
            answer = f"{int(answer[0])},{int(answer[1])}"
        return cls(
            id=str(get("id")),
            text=str(get("prompt", None) or get("text", "")),
            kind=kind,
            choices=choices,
            rows=tuple(str(r) for r in get("rows", ()) or ()),
            cols=tuple(str(c) for c in get("cols", ()) or ()),
            lo=float(get("lo", -1e12) if get("lo") is not None else -1e12),
            hi=float(get("hi", 1e12) if get("hi") is not None else 1e12),
            answer=None if answer is None else str(answer),
        )

    def value_of(self, raw: Any) -> str:
        """A learner's answer as the value counted: a choice's index, a number written canonically, "row,col".
        Anything else is refused (PollError), so no text a learner types ever reaches the instructor's screen."""
        text = str(raw).strip()
        if self.kind == "choice":
            if not text.isdigit() or not 0 <= int(text) < len(self.choices):
                raise PollError("That is not one of the choices.")
            return str(int(text))
        if self.kind == "number":
            try:
                number = float(text)
            except ValueError:
                raise PollError("The answer is a number.") from None
            if not math.isfinite(number) or not self.lo <= number <= self.hi:
                raise PollError(f"The answer is a number from {self.lo:g} to {self.hi:g}.")
            return f"{number:.6g}"
        if self.kind == "test":  # two characters an item: the answer's index and the reason's, '-' left out
            sizes = [tuple(int(n) for n in c.split(".")) for c in self.cols]
            pairs = [text[2 * k : 2 * k + 2] for k in range(len(sizes))]
            if len(text) != 2 * len(sizes) or not all(
                all(ch == "-" or (ch.isdigit() and int(ch) < n) for ch, n in zip(pair, size, strict=True))
                for pair, size in zip(pairs, sizes, strict=True)
            ):
                raise PollError("That is not a sheet of this test.")
            return text
        row, _, col = text.partition(",")
        if not (row.isdigit() and col.isdigit() and int(row) < len(self.rows) and int(col) < len(self.cols)):
            raise PollError("That is not a cell of the matrix.")
        return f"{int(row)},{int(col)}"

    def is_right(self, value: str | None) -> bool:
        """Whether a counted value is the answer (a number: within the tolerance)."""
        if value is None or self.answer is None:
            return False
        if self.kind == "number":
            return abs(float(value) - float(self.answer)) <= self.tolerance + 1e-9
        return value == self.answer

    def label(self, value: str) -> str:
        """A counted value as the screen shows it."""
        if self.kind == "test":
            return f"{sum(ch != '-' for ch in value) // 2} of {len(self.rows)} items answered"
        if self.kind == "choice":
            return self.choices[int(value)]
        if self.kind == "cell":
            row, col = (int(x) for x in value.split(","))
            return f"{self.rows[row]} → {self.cols[col]}"
        return value

    def order(self, values: list[str]) -> list[str]:
        """Values in the order the split is drawn: the choices' own, numbers ascending, cells row by row."""
        if self.kind == "test":
            return sorted(values)
        if self.kind == "number":
            return sorted(values, key=float)
        if self.kind == "cell":
            return sorted(values, key=lambda v: tuple(int(x) for x in v.split(",")))
        return sorted(values, key=int)

    def public(self) -> dict[str, Any]:
        """What a learner's browser is sent: everything but the answer."""
        return {k: v for k, v in asdict(self).items() if k != "answer"}


@dataclass(frozen=True)
class Tally:
    """The split of one question: how many browsers answered, and how many gave each value (in drawing order)."""

    question: PollQuestion
    counts: dict[str, int]
    revealed: bool

    @property
    def answered(self) -> int:
        return sum(self.counts.values())

    def rows(self) -> list[tuple[str, str, int]]:
        """(value, label, count) for every value given, and every choice even if nobody chose it."""
        values = list(self.counts)
        if self.question.kind == "choice":
            values = [str(i) for i in range(len(self.question.choices))]
        return [(v, self.question.label(v), self.counts.get(v, 0)) for v in self.question.order(values)]


@dataclass(frozen=True)
class Room:
    code: str
    question: PollQuestion | None  # the current one
    revealed: bool  # the current question's answer is shown
    asked: list[PollQuestion] = field(default_factory=list)  # every question asked, in order
    joined: int = 0  # devices given a token for this room


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def normal_code(code: str) -> str:
    """A code as typed (lower case, spaces) in its canonical form; PollError when it cannot be one."""
    clean = re.sub(r"[\s-]", "", str(code)).upper()
    if not re.fullmatch(f"[{CODE_LETTERS}]{{{CODE_LENGTH}}}", clean):
        raise PollError(f"“{clean[:12]}” is not a room code: a code is {CODE_LENGTH} letters and digits.")
    return clean


def is_browser(token: str) -> bool:
    """Whether `token` has a poll token's shape (whether the server issued it: `Poll.holds`)."""
    return tokens.looks_like(token)


def who(address: str | None) -> str:
    """A client address as the poll's counters key it: a digest, so no address is kept (none: this machine)."""
    return _digest(address or "local")[:16]


def _wait(window_s: float) -> str:
    if window_s >= 3600 and window_s % 3600 == 0:
        return "hour" if window_s == 3600 else f"{window_s / 3600:g} hours"
    return f"{window_s / 60:g} minute{'s' * (window_s != 60)}" if window_s >= 60 else f"{window_s:g} seconds"


class Poll:
    """Rooms over one Store. Every method may raise store.Unavailable (the poll is paused) and PollError."""

    def __init__(
        self,
        store: Store,
        idle_s: float = IDLE_S,
        rate: tuple[int, float] = RATE,
        *,
        unjoined_s: float = UNJOINED_S,
        secret: str | None = None,
    ) -> None:
        self.store = store
        self.idle_s = idle_s
        self.unjoined_s = min(unjoined_s, idle_s)
        self.rate = rate
        self._fixed = secret or os.environ.get(tokens.SECRET_ENV, "").strip() or None
        self._kept: tuple[str, float] | None = None  # the store's secret, and until when this replica trusts it

    def secret(self) -> str:
        """The token secret: given, or the environment's, else the store's (read again every SECRET_S)."""
        if self._fixed:
            return self._fixed
        if self._kept is None or time.monotonic() >= self._kept[1]:
            self._kept = (self.store.secret(tokens.new_secret()), time.monotonic() + SECRET_S)
        return self._kept[0]

    def _limit(self, key: str, limit: tuple[int, float], refusal: str) -> None:
        if self.store.hit(key, limit[1]) > limit[0]:
            raise PollError(refusal)

    def _ttl(self, fields: dict[str, str]) -> float:
        return self.idle_s if int(fields.get("joined") or 0) else self.unjoined_s

    # -- the instructor

    def open(self, address: str | None = None) -> tuple[str, str]:
        """A new room: (its code, the instructor's key). `address`: the client's, for ROOMS_PER_ADDRESS."""
        most, window = ROOMS_PER_ADDRESS
        self._limit(f"open:{who(address)}", ROOMS_PER_ADDRESS,
                    f"Your network has opened {most} rooms in the last {_wait(window)}, as many as one network may. "
                    "Keep using a room you opened (its projector tab keeps it), or try again later: rooms nobody "
                    f"joins are forgotten after {_wait(self.unjoined_s)}.")  # fmt: skip
        key = secrets.token_urlsafe(18)
        fields = {"host": _digest(key), "created": f"{time.time():.0f}", "qid": ""}
        try:
            for _ in range(20):
                code = "".join(secrets.choice(CODE_LETTERS) for _ in range(CODE_LENGTH))
                if self.store.create(code, fields, self.unjoined_s):
                    return code, key
        except Full as e:
            raise PollError(f"This server cannot open another room now: {e}. Try again in a few minutes (rooms "
                            f"nobody joins are forgotten after {_wait(self.unjoined_s)}), or run the lab on your own "
                            "machine: `streamlit run dashboard.py`.") from None  # fmt: skip
        raise PollError("No free room code was found: try again.")

    def _fields(self, code: str) -> dict[str, str]:
        fields = self.store.fields(normal_code(code))
        if fields is None:
            raise NoRoom(f"There is no room {normal_code(code)}: the code is wrong, or the room has expired.")
        return fields

    def _host(self, code: str, key: str) -> dict[str, str]:
        fields = self._fields(code)
        if not hmac.compare_digest(fields.get("host", ""), _digest(key or "")):
            raise PollError("Only the instructor who opened this room can do that.")
        return fields

    def ask(self, code: str, key: str, question: PollQuestion) -> None:
        """Make `question` the room's current one (asked again, it keeps its answers and its reveal)."""
        fields = self._host(code, key)
        known = fields.get("q:" + question.id)
        seq = json.loads(known)["seq"] if known else sum(f.startswith("q:") for f in fields)
        data = json.dumps({**asdict(question), "seq": seq})
        if not self.store.update(normal_code(code), {"qid": question.id, "q:" + question.id: data}, self._ttl(fields)):
            raise PollError("This room has expired.")

    def reveal(self, code: str, key: str) -> None:
        """Show the current question's answer to everyone; its answers are final from now on."""
        fields = self._host(code, key)
        if not fields.get("qid"):
            raise PollError("No question has been asked yet.")
        self.store.update(normal_code(code), {"revealed:" + fields["qid"]: "1"}, self._ttl(fields))

    def is_host(self, code: str, key: str) -> bool:
        try:
            self._host(code, key)
        except PollError:
            return False
        return True

    # -- everyone

    def room(self, code: str) -> Room:
        fields = self._fields(code)
        asked = {f[2:]: json.loads(v) for f, v in fields.items() if f.startswith("q:")}
        questions = {qid: _question(d) for qid, d in asked.items()}
        ordered = [questions[qid] for qid in sorted(asked, key=lambda q: asked[q]["seq"])]
        qid = fields.get("qid", "")
        joined = int(fields.get("joined") or 0)
        return Room(normal_code(code), questions.get(qid), bool(fields.get("revealed:" + qid)), ordered, joined)

    def enter(self, code: str, address: str | None = None, session: str = "") -> Room:
        """The room a learner typed or followed a link to. A wrong code counts against the client's address and
        its session (CODE_TRIES): past either, every try is refused for a while, so codes cannot be tried in bulk."""
        code = normal_code(code)
        keys = [(f"try:a:{who(address)}", CODE_TRIES["address"])]
        if session:
            keys.append((f"try:s:{_digest(session)[:16]}", CODE_TRIES["session"]))
        for key, (most, window) in keys:
            if self.store.seen(key) >= most:
                raise PollError(f"Too many wrong room codes from here: wait {_wait(window)}, then type the code on "
                                "the projector again (or scan its QR code).")  # fmt: skip
        try:
            return self.room(code)
        except NoRoom:
            for key, (_, window) in keys:
                self.store.hit(key, window)
            raise

    def tally(self, code: str, question: PollQuestion, revealed: bool = False) -> Tally:
        return Tally(question, self.store.tally(normal_code(code), question.id), revealed)

    def mine(self, code: str, browser: str, question: PollQuestion) -> str | None:
        return self.store.mine(normal_code(code), question.id, browser)

    def sheets(self, code: str, key: str, qid: str) -> dict[str, str]:
        """Every browser's answer to question `qid` by its anonymous token, for the instructor only: the inventory
        pairs a pre- and a post-test by token (and shows nothing for fewer than five pairs)."""
        self._host(code, key)
        return self.store.answers(normal_code(code), qid)

    # -- a learner

    def join(self, code: str, address: str | None = None) -> str:
        """A new device in the room: its token (signed for this room), counted in the room's `joined`. A client
        address may join JOINS_PER_ADDRESS devices to one room."""
        code = normal_code(code)
        most, window = JOINS_PER_ADDRESS
        self._limit(f"join:{code}:{who(address)}", JOINS_PER_ADDRESS,
                    f"{most} devices have joined this room from your network in the last {_wait(window)}, as many "
                    "as one network may: wait a few minutes, or ask your instructor.")  # fmt: skip
        token = tokens.issue(self.secret(), code)
        if self.store.join(code, self.idle_s) is None:
            raise PollError(f"There is no room {code}: it has expired.")
        return token

    def holds(self, code: str, browser: str) -> bool:
        """Whether `browser` is a token this server issued for room `code` (a client cannot make one up)."""
        return tokens.is_valid(self.secret(), normal_code(code), browser)

    def answer(self, code: str, browser: str, qid: str, raw: Any, address: str | None = None) -> str:
        """Count a browser's answer to question `qid` (which must be the current one), replacing its earlier one.
        Returns "ok" or "same"; refusals are PollError with the sentence to show. A token's answers are bounded by
        RATE, a client address's to the room by ADDRESS_RATE."""
        code = normal_code(code)
        if not is_browser(browser):
            raise PollError("This browser has no poll token: reload the page.")
        if not self.holds(code, browser):
            raise PollError("This browser's poll token is not this room's: reload the page to join the room.")
        if self.store.hit(f"{code}:{browser}", self.rate[1]) > self.rate[0]:
            raise PollError(f"Too many answers from this browser: wait {self.rate[1]:g} seconds and try again.")
        most, window = ADDRESS_RATE
        self._limit(f"{code}@{who(address)}", ADDRESS_RATE,
                    f"Too many answers to this room from your network ({most} in {_wait(window)}): wait a moment "
                    "and try again.")  # fmt: skip
        room = self.room(code)
        if room.question is None or room.question.id != qid:
            raise PollError("The instructor has moved to another question.")
        status = self.store.answer(code, qid, browser, room.question.value_of(raw), self.idle_s)
        if status in ("ok", "same"):
            return status
        raise PollError(
            {
                "gone": f"There is no room {code}: it has expired.",
                "stale": "The instructor has moved to another question.",
                "closed": "The answer has been revealed: answers to this question are closed.",
                "full": "This question has as many answers as a room holds.",
            }[status]
        )

    # -- the download

    def export(self, code: str, key: str, fmt: str = "json") -> str:
        """The room's anonymous counts, every question asked: JSON, or CSV with one row a value."""
        self._host(code, key)
        room = self.room(code)
        fields = self.store.fields(room.code) or {}
        items = []
        for q in room.asked:
            tally = self.tally(room.code, q, bool(fields.get("revealed:" + q.id)))
            items.append(
                {
                    "id": q.id,
                    "question": q.text,
                    "kind": q.kind,
                    "answered": tally.answered,
                    "revealed": tally.revealed,
                    "answer": q.label(q.answer) if q.answer is not None and tally.revealed else None,
                    "counts": [{"value": v, "label": label, "count": n} for v, label, n in tally.rows()],
                }
            )
        if fmt == "json":
            return json.dumps({"room": room.code, "questions": items}, indent=1, ensure_ascii=False)
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["question_id", "question", "kind", "value", "label", "count", "is_answer"])
        for item in items:
            for row in item["counts"]:
                right = "" if item["answer"] is None else str(row["label"] == item["answer"]).lower()
                writer.writerow([item["id"], item["question"], item["kind"], row["value"], row["label"], row["count"],
                                 right])  # fmt: skip
        return out.getvalue()


def _question(data: dict[str, Any]) -> PollQuestion:
    data = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k != "seq"}
    return PollQuestion(**data)
