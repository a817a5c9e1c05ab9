"""A room's logic over a Store: codes, the instructor's key, the current question, answers, reveal, export.

The instructor opens a room and gets its code (for the learners' link) and a key (kept by the projector's view:
only it may ask, reveal and download). A question is plain data pushed by the presenter (`Question`, or any object
with id, prompt, kind, choices and answer: `Question.of`). A learner's browser holds an anonymous token; its
answer to the current question is a counted value the question defines (a choice's index, a number, a cell), never
the learner's text, and may change until the reveal. Rooms are forgotten after `idle_s` without a change.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import math
import re
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from .store import Store

CODE_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: a code is read off a projector
CODE_LENGTH = 5
IDLE_S = 4 * 3600  # a room unchanged for 4 hours is forgotten
RATE = (10, 10.0)  # answers a browser may send in a window of seconds
KINDS = ("choice", "number", "cell")
_TOKEN = re.compile(r"[A-Za-z0-9_-]{16}")


class PollError(ValueError):
    """A refusal with the sentence the page shows (a wrong code, an answer not among the choices, too fast)."""


@dataclass(frozen=True)
class Question:
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
        if self.answer is not None:
            object.__setattr__(self, "answer", self.value_of(self.answer))

    @classmethod
    def of(cls, obj: Any) -> Question:
        """A Question from the course's own question objects (or a dict): id, prompt (or text), kind, choices,
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
        if self.kind == "choice":
            return self.choices[int(value)]
        if self.kind == "cell":
            row, col = (int(x) for x in value.split(","))
            return f"{self.rows[row]} → {self.cols[col]}"
        return value

    def order(self, values: list[str]) -> list[str]:
        """Values in the order the split is drawn: the choices' own, numbers ascending, cells row by row."""
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

    question: Question
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
    question: Question | None  # the current one
    revealed: bool  # the current question's answer is shown
    asked: list[Question] = field(default_factory=list)  # every question asked, in order


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def normal_code(code: str) -> str:
    """A code as typed (lower case, spaces) in its canonical form; PollError when it cannot be one."""
    clean = re.sub(r"[\s-]", "", str(code)).upper()
    if not re.fullmatch(f"[{CODE_LETTERS}]{{{CODE_LENGTH}}}", clean):
        raise PollError(f"“{clean[:12]}” is not a room code: a code is {CODE_LENGTH} letters and digits.")
    return clean


def new_browser() -> str:
    """An anonymous token for one browser: 16 random URL-safe characters, nothing about the person."""
    return secrets.token_urlsafe(12)


def is_browser(token: str) -> bool:
    return bool(_TOKEN.fullmatch(token or ""))


class Poll:
    """Rooms over one Store. Every method may raise store.Unavailable (the poll is paused) and PollError."""

    def __init__(self, store: Store, idle_s: float = IDLE_S, rate: tuple[int, float] = RATE) -> None:
        self.store = store
        self.idle_s = idle_s
        self.rate = rate

    # -- the instructor

    def open(self) -> tuple[str, str]:
        """A new room: (its code, the instructor's key)."""
        key = secrets.token_urlsafe(18)
        for _ in range(20):
            code = "".join(secrets.choice(CODE_LETTERS) for _ in range(CODE_LENGTH))
            if self.store.create(code, {"host": _digest(key), "created": f"{time.time():.0f}", "qid": ""}, self.idle_s):
                return code, key
        raise PollError("No free room code was found: try again.")

    def _fields(self, code: str) -> dict[str, str]:
        fields = self.store.fields(normal_code(code))
        if fields is None:
            raise PollError(f"There is no room {normal_code(code)}: the code is wrong, or the room has expired.")
        return fields

    def _host(self, code: str, key: str) -> dict[str, str]:
        fields = self._fields(code)
        if not hmac.compare_digest(fields.get("host", ""), _digest(key or "")):
            raise PollError("Only the instructor who opened this room can do that.")
        return fields

    def ask(self, code: str, key: str, question: Question) -> None:
        """Make `question` the room's current one (asked again, it keeps its answers and its reveal)."""
        fields = self._host(code, key)
        known = fields.get("q:" + question.id)
        seq = json.loads(known)["seq"] if known else sum(f.startswith("q:") for f in fields)
        data = json.dumps({**asdict(question), "seq": seq})
        if not self.store.update(normal_code(code), {"qid": question.id, "q:" + question.id: data}, self.idle_s):
            raise PollError("This room has expired.")

    def reveal(self, code: str, key: str) -> None:
        """Show the current question's answer to everyone; its answers are final from now on."""
        fields = self._host(code, key)
        if not fields.get("qid"):
            raise PollError("No question has been asked yet.")
        self.store.update(normal_code(code), {"revealed:" + fields["qid"]: "1"}, self.idle_s)

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
        return Room(normal_code(code), questions.get(qid), bool(fields.get("revealed:" + qid)), ordered)

    def tally(self, code: str, question: Question, revealed: bool = False) -> Tally:
        return Tally(question, self.store.tally(normal_code(code), question.id), revealed)

    def mine(self, code: str, browser: str, question: Question) -> str | None:
        return self.store.mine(normal_code(code), question.id, browser)

    # -- a learner

    def answer(self, code: str, browser: str, qid: str, raw: Any) -> str:
        """Count a browser's answer to question `qid` (which must be the current one), replacing its earlier one.
        Returns "ok" or "same"; refusals are PollError with the sentence to show."""
        code = normal_code(code)
        if not is_browser(browser):
            raise PollError("This browser has no poll token: reload the page.")
        if self.store.hit(f"{code}:{browser}", self.rate[1]) > self.rate[0]:
            raise PollError(f"Too many answers from this browser: wait {self.rate[1]:g} seconds and try again.")
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


def _question(data: dict[str, Any]) -> Question:
    data = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k != "seq"}
    return Question(**data)
