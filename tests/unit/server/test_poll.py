"""The class poll's rooms (server/poll), against both backends: this process's memory, and a real redis-server
that several "replicas" (store clients of their own) share."""

from __future__ import annotations

import csv
import io
import json
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from harness.redis_server import RedisServer, free_port, redis_server, require_redis
from server.poll import MemoryStore, Poll, PollError, PollQuestion, RedisStore, Unavailable, resp, rooms, tokens

CHOICE = PollQuestion("q1", "Which token does 'it' attend to most?", "choice", ("the", "cat", "it"), answer="1")
NUMBER = PollQuestion("q2", "How many weights in row 3 are not zero?", "number", lo=0, hi=100, answer="3")
CELL = PollQuestion("q3", "Which cell is largest?", "cell", rows=("a", "b"), cols=("a", "b", "c"), answer="1,2")


@pytest.fixture(scope="module")
def redis() -> RedisServer:
    with redis_server() as server:
        yield server


@pytest.fixture(params=["memory", "redis"])
def replicas(request) -> Callable[..., Poll]:
    """Each call: one more server process's Poll onto the same rooms (in Redis, a client of its own)."""
    if request.param == "memory":
        store = MemoryStore()
        return lambda **kw: Poll(store, **kw)
    server = request.getfixturevalue("redis")
    prefix = f"test:{uuid.uuid4().hex[:8]}:"  # every test its own keys in the one server
    return lambda **kw: Poll(RedisStore(server.url, prefix=prefix), **kw)


def test_an_answer_given_through_one_replica_counts_on_every_other(replicas) -> None:
    instructor, one, two = replicas(), replicas(), replicas()
    code, key = instructor.open()
    instructor.ask(code, key, CHOICE)
    one.answer(code, one.join(code), "q1", "1")  # a token issued by one replica counts through any other
    two.answer(code, one.join(code), "q1", "1")
    two.answer(code.lower(), two.join(code), "q1", "2")  # a code typed in lower case is the same room
    tally = instructor.tally(code, instructor.room(code).question)
    assert tally.answered == 3 and tally.counts == {"1": 2, "2": 1}
    assert [(label, n) for _, label, n in tally.rows()] == [("the", 0), ("cat", 2), ("it", 1)]
    assert one.room(code).question == CHOICE and not one.room(code).revealed


def test_one_answer_per_browser_changeable_until_the_reveal(replicas) -> None:
    poll, other = replicas(), replicas()
    code, key = poll.open()
    poll.ask(code, key, CHOICE)
    me, you = poll.join(code), other.join(code)
    assert poll.answer(code, me, "q1", "0") == "ok"
    assert other.answer(code, me, "q1", "0") == "same"  # the same browser through another replica: still one
    assert poll.tally(code, CHOICE).counts == {"0": 1}
    assert other.answer(code, me, "q1", "2") == "ok"  # changed: moved from 0 to 2, not added
    poll.answer(code, you, "q1", "2")
    assert poll.tally(code, CHOICE).counts == {"2": 2}
    assert poll.mine(code, me, CHOICE) == "2"
    poll.reveal(code, key)
    assert other.room(code).revealed
    with pytest.raises(PollError, match="revealed"):
        other.answer(code, me, "q1", "1")
    assert poll.tally(code, CHOICE).counts == {"2": 2}  # final after the reveal


def test_the_room_follows_the_instructors_question_and_keeps_each_ones_answers(replicas) -> None:
    poll = replicas()
    code, key = poll.open()
    assert poll.room(code).question is None
    me = poll.join(code)
    poll.ask(code, key, CHOICE)
    poll.answer(code, me, "q1", "1")
    poll.ask(code, key, NUMBER)
    with pytest.raises(PollError, match="moved to another question"):
        poll.answer(code, me, "q1", "0")  # a page still showing the last question
    poll.answer(code, me, "q2", " 3.0 ")
    poll.ask(code, key, CELL)
    poll.answer(code, me, "q3", "1,2")
    poll.ask(code, key, CHOICE)  # back to the first: its answers are still there
    room = poll.room(code)
    assert room.question == CHOICE and [q.id for q in room.asked] == ["q1", "q2", "q3"]
    assert poll.tally(code, CHOICE).counts == {"1": 1}
    assert poll.tally(code, NUMBER).counts == {"3": 1}  # the number as counted: 3.0 written canonically
    assert poll.tally(code, CELL).rows() == [("1,2", "b → c", 1)]


@pytest.mark.parametrize(
    ("question", "raw", "message"),
    [
        (CHOICE, "3", "not one of the choices"),
        (CHOICE, "<b>cat</b>", "not one of the choices"),  # a learner's text is never counted
        (NUMBER, "lots", "is a number"),
        (NUMBER, "1e9", "from 0 to 100"),
        (NUMBER, "nan", "from 0 to 100"),
        (NUMBER, "inf", "from 0 to 100"),  # a number forged past the box's own bounds (issue 50)
        (NUMBER, "-Infinity", "from 0 to 100"),
        (CELL, "2,0", "not a cell"),
    ],
)
def test_an_answer_the_question_does_not_allow_is_refused_and_not_counted(replicas, question, raw, message) -> None:
    poll = replicas()
    code, key = poll.open()
    poll.ask(code, key, question)
    with pytest.raises(PollError, match=message):
        poll.answer(code, poll.join(code), question.id, raw)
    assert poll.tally(code, question).answered == 0


def test_wrong_codes_tokens_and_keys_are_refused(replicas) -> None:
    poll = replicas()
    code, key = poll.open()
    poll.ask(code, key, CHOICE)
    with pytest.raises(PollError, match="is not a room code"):
        poll.room("ab")
    unused = next(c for c in ("ABCDE", "FGHJK", "MNPQR") if c != code)
    with pytest.raises(PollError, match=f"no room {unused}"):
        poll.room(unused)
    with pytest.raises(PollError, match="no poll token"):
        poll.answer(code, "not a token", "q1", "0")
    for act in (lambda: poll.reveal(code, "guess"), lambda: poll.ask(code, "", NUMBER),
                lambda: poll.export(code, key[:-1] + "x")):  # fmt: skip
        with pytest.raises(PollError, match="Only the instructor"):
            act()
    assert poll.is_host(code, key) and not poll.is_host(code, "guess")
    assert poll.room(code).question == CHOICE and not poll.room(code).revealed


def test_a_flood_from_one_browser_is_refused_past_its_rate(replicas) -> None:
    poll, other = replicas(rate=(3, 60.0)), replicas(rate=(3, 60.0))
    code, key = poll.open()
    poll.ask(code, key, CHOICE)
    flood = poll.join(code)
    for i in range(3):
        (poll if i % 2 else other).answer(code, flood, "q1", str(i % 3))  # the rate counts across replicas
    with pytest.raises(PollError, match="Too many answers"):
        poll.answer(code, flood, "q1", "1")
    assert poll.mine(code, flood, CHOICE) == "2"  # the refused change did not happen
    assert poll.answer(code, other.join(code), "q1", "1") == "ok"  # another browser is not held back


def test_a_room_expires_after_its_idle_time_and_every_change_renews_it() -> None:
    now = [0.0]
    poll = Poll(MemoryStore(clock=lambda: now[0]), idle_s=3600)
    code, key = poll.open()
    poll.ask(code, key, CHOICE)
    me = poll.join(code)  # joined: from now on the room lives an hour without a change
    now[0] += 3500
    poll.answer(code, me, "q1", "0")  # a change: another hour from here
    now[0] += 3500
    assert poll.tally(code, CHOICE).answered == 1
    now[0] += 101
    with pytest.raises(PollError, match="no room"):
        poll.room(code)


def test_a_redis_room_expires_with_all_its_answers(redis) -> None:
    store = RedisStore(redis.url, prefix=f"test:{uuid.uuid4().hex[:8]}:")
    poll = Poll(store, idle_s=600)
    code, key = poll.open()
    poll.ask(code, key, CHOICE)
    poll.answer(code, poll.join(code), "q1", "0")
    poll.ask(code, key, NUMBER)
    assert 0 < store.ttl_s(code) <= 600
    keys = store.client.call("KEYS", f"{store.prefix}{{{code}}}*")
    assert len(keys) == 3  # the room, q1's answers and counts (q2 has none yet)
    assert all(0 < store.client.call("PTTL", k) <= 600_000 for k in keys)  # each will expire with the room
    short = Poll(store, idle_s=0.2)
    short.ask(code, key, CHOICE)  # renews every key of the room to 0.2 s
    deadline = time.monotonic() + 10
    while store.client.call("KEYS", f"{store.prefix}{{{code}}}*") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.client.call("KEYS", f"{store.prefix}{{{code}}}*") == []
    with pytest.raises(PollError, match="no room"):
        poll.room(code)


def test_the_export_holds_anonymous_counts_and_the_answer_only_once_revealed(replicas) -> None:
    poll = replicas()
    code, key = poll.open()
    poll.ask(code, key, CHOICE)
    browsers = [poll.join(code) for _ in range(5)]
    for b, choice in zip(browsers, "11202", strict=True):
        poll.answer(code, b, "q1", choice)
    poll.reveal(code, key)
    poll.ask(code, key, NUMBER)
    poll.answer(code, browsers[0], "q2", "4")
    data = json.loads(poll.export(code, key, "json"))
    assert data["room"] == code and [q["id"] for q in data["questions"]] == ["q1", "q2"]
    first, second = data["questions"]
    assert first["answered"] == 5 and first["answer"] == "cat" and first["revealed"]
    assert [(c["label"], c["count"]) for c in first["counts"]] == [("the", 1), ("cat", 2), ("it", 2)]
    assert second["answer"] is None and second["counts"] == [{"value": "4", "label": "4", "count": 1}]
    text = poll.export(code, key, "csv")
    assert not any(b in text for b in browsers)  # anonymous: no browser's token
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["question_id"], r["label"], r["count"], r["is_answer"]) for r in rows] == [
        ("q1", "the", "1", "false"), ("q1", "cat", "2", "true"), ("q1", "it", "2", "false"), ("q2", "4", "1", "")
    ]  # fmt: skip


def test_a_room_of_300_learners_answering_at_once_through_three_replicas(replicas) -> None:
    """300 browsers answer, change their minds, and answer again, in threads over three replicas: the counts are
    exactly the split of their last answers (an answer's change is atomic)."""
    polls = [replicas(rate=(100, 60.0)) for _ in range(3)]
    code, key = polls[0].open()
    polls[0].ask(code, key, CHOICE)
    address = {polls[i % 3].join(code, f"10.0.{i // 100}.{i % 100}"): f"10.0.{i // 100}.{i % 100}" for i in range(300)}
    browsers = list(address)  # 300 phones, each on an address of its own
    final: dict[str, str] = {}
    errors: list[BaseException] = []

    def learner(group: list[str], seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(3):
                for b in group:
                    choice = str(rng.randrange(3))
                    rng.choice(polls).answer(code, b, "q1", choice, address[b])
                    final[b] = choice
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=learner, args=(browsers[i::6], i)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    tally = polls[2].tally(code, CHOICE)
    assert tally.answered == 300 == polls[1].room(code).joined
    assert tally.counts == dict(Counter(final.values()))


def test_a_number_questions_bounds_are_floats_so_a_number_box_drops_what_is_not_finite() -> None:
    assert isinstance(NUMBER.lo, float) and isinstance(NUMBER.hi, float)  # given as 0 and 100
    assert NUMBER.public()["lo"] == 0.0 and f"{NUMBER.lo:g}" == "0"


def test_a_question_from_the_course_plugs_in_by_its_field_names() -> None:
    course = SimpleNamespace(id="scaling.1", prompt="Without √d_k, the weights get...", kind="choice",
                             choices=["flatter", "peakier"], answer="peakier")  # fmt: skip
    q = PollQuestion.of(course)
    assert (q.id, q.text, q.choices, q.answer) == ("scaling.1", course.prompt, ("flatter", "peakier"), "1")
    assert "answer" not in q.public()
    asked = {"id": "c", "text": "?", "kind": "cell", "rows": ["a"], "cols": ["a", "b"], "answer": (0, 1)}
    cell = PollQuestion.of(asked)
    assert cell.answer == "0,1" and cell.label(cell.answer) == "a → b"
    with pytest.raises(ValueError, match="kind is one of"):
        PollQuestion("x", "?", "essay")


def test_the_poll_pauses_while_redis_is_away_and_resumes_when_it_is_back() -> None:
    server = RedisServer(require_redis(), free_port())
    server.start()
    try:
        poll = Poll(RedisStore(server.url, timeout_s=0.5))
        code, key = poll.open()
        poll.ask(code, key, CHOICE)
        me = poll.join(code)
        server.stop()
        with pytest.raises(Unavailable):
            poll.answer(code, me, "q1", "0")
        with pytest.raises(Unavailable):
            poll.room(code)
        server.start()  # an empty Redis on the same address (no persistence here): the room is gone, not broken
        with pytest.raises(PollError, match="no room"):
            poll.room(code)
        code, key = poll.open()  # the connections dropped while it was away were made afresh
        poll.ask(code, key, CHOICE)
        assert poll.answer(code, poll.join(code), "q1", "0") == "ok"
    finally:
        server.stop()


def test_the_redis_client_reads_every_reply_kind(redis) -> None:
    client = resp.Client(redis.url)
    key = f"test:{uuid.uuid4().hex}"
    assert client.call("PING") == "PONG"
    assert client.call("HGET", key, "x") is None
    assert client.call("HSET", key, "é", "a\r\nb") == 1  # bulk strings carry any bytes, by their length
    assert client.call("HGETALL", key) == ["é", "a\r\nb"]
    with pytest.raises(resp.RedisError, match="unknown command"):
        client.call("NOSUCHCOMMAND")
    assert client.call("DEL", key) == 1  # the connection is still usable after an error reply
    with pytest.raises(ValueError, match="redis://"):
        resp.Client("http://localhost:6379")


# -- a client alone cannot fill the poll, stuff a ballot, or try codes in bulk (issue 50)


def test_one_client_opens_a_bounded_number_of_rooms_and_every_other_still_opens(replicas) -> None:
    poll, other = replicas(), replicas()
    most, _ = rooms.ROOMS_PER_ADDRESS
    for i in range(most):
        (poll if i % 2 else other).open("203.0.113.9")  # counted across replicas
    with pytest.raises(PollError, match="Keep using a room you opened") as refused:
        other.open("203.0.113.9")
    assert "forgotten after 15 minutes" in str(refused.value)  # the refusal says what to do
    code, key = poll.open("198.51.100.7")  # another instructor is not held back
    assert poll.is_host(code, key)


def test_a_room_nobody_joins_is_forgotten_within_minutes_and_a_joined_one_lives_for_hours() -> None:
    now = [0.0]
    poll = Poll(MemoryStore(clock=lambda: now[0]))
    idle, joined = poll.open(), poll.open()
    for code, key in (idle, joined):
        poll.ask(code, key, CHOICE)
    poll.join(joined[0])
    now[0] += rooms.UNJOINED_S + 1
    with pytest.raises(PollError, match="no room"):
        poll.room(idle[0])
    now[0] += 3 * 3600
    assert poll.room(joined[0]).joined == 1


def test_a_redis_room_nobody_joined_expires_in_minutes(redis) -> None:
    store = RedisStore(redis.url, prefix=f"test:{uuid.uuid4().hex[:8]}:")
    poll = Poll(store)
    code, key = poll.open()
    poll.ask(code, key, CHOICE)
    assert 0 < store.ttl_s(code) <= rooms.UNJOINED_S
    poll.join(code)
    assert store.ttl_s(code) > rooms.UNJOINED_S


def test_a_full_server_makes_way_with_a_room_nobody_joined_and_says_what_to_do_when_none() -> None:
    poll = Poll(MemoryStore(max_rooms=3))
    first, *rest = [poll.open(f"192.0.2.{i}") for i in range(3)]
    fourth = poll.open("192.0.2.99")  # full: the room nobody joined that would expire first made way
    with pytest.raises(PollError, match="no room"):
        poll.room(first[0])
    for code, _ in [*rest, fourth]:
        poll.join(code)
    with pytest.raises(PollError, match=r"rooms in use already.*streamlit run dashboard.py"):
        poll.open("192.0.2.100")


def test_tokens_are_the_servers_own_and_one_rooms_token_counts_in_no_other(replicas) -> None:
    poll = replicas()
    code, key = poll.open()
    poll.ask(code, key, CHOICE)
    other_code, other_key = poll.open()
    poll.ask(other_code, other_key, CHOICE)
    mine = poll.join(code)
    assert poll.holds(code, mine) and not poll.holds(other_code, mine)
    forged = [
        "A" * len(mine),  # any characters of a token's length
        mine[:11] + poll.join(code)[11:],  # another token's signature
        tokens.issue("another deployment's secret", code),  # signed, but by another server
        poll.join(other_code),  # another room's
    ]
    for token in forged:
        with pytest.raises(PollError, match="not this room's"):
            poll.answer(code, token, "q1", "1")
    with pytest.raises(PollError, match="no poll token"):
        poll.answer(code, "abcdefghijklmnop", "q1", "1")  # the old tokens: 16 characters of the client's choice
    assert poll.tally(code, CHOICE).answered == 0
    assert poll.answer(code, mine, "q1", "1") == "ok"


def test_the_secret_comes_from_the_environment_when_it_is_set(monkeypatch) -> None:
    monkeypatch.setenv("ATTENTION_LAB_POLL_SECRET", "shared by every replica")
    one, two = Poll(MemoryStore()), Poll(MemoryStore())  # two stores: only the secret is shared
    assert one.secret() == two.secret() == "shared by every replica"
    code, _ = one.open()
    assert two.holds(code, one.join(code))


def test_a_ballot_stuffer_is_bounded_by_its_address_and_a_school_behind_one_address_fits(replicas) -> None:
    """The issue's stuffer counted 200 answers in 41 s from one client. Now a client address joins at most
    JOINS_PER_ADDRESS devices to a room and sends at most ADDRESS_RATE answers to it; a class of 60 behind one
    school address joins and answers twice, well within both; and every device joined is counted for the projector."""
    poll, other = replicas(), replicas()
    code, key = poll.open()
    poll.ask(code, key, CHOICE)
    school = "198.51.100.20"
    phones = [(poll if i % 2 else other).join(code, school) for i in range(60)]
    for phone in phones:
        for pick in ("0", "1"):  # answers, then changes its mind
            assert poll.answer(code, phone, "q1", pick, school) == "ok"
    assert poll.tally(code, CHOICE).counts == {"1": 60} and poll.room(code).joined == 60

    stuffer, (most_joins, _), (most_answers, _) = "203.0.113.66", rooms.JOINS_PER_ADDRESS, rooms.ADDRESS_RATE
    tokens = [poll.join(code, stuffer) for _ in range(most_joins)]
    with pytest.raises(PollError, match="devices have joined this room from your network"):
        other.join(code, stuffer)
    assert poll.room(code).joined == 60 + most_joins  # what the projector shows beside the answers
    sent = 0
    with pytest.raises(PollError, match="Too many answers to this room from your network"):
        for token in tokens * 3:
            poll.answer(code, token, "q1", "2", stuffer)
            sent += 1
    assert sent == most_answers
    assert poll.answer(code, poll.join(code, "192.0.2.1"), "q1", "0", "192.0.2.1") == "ok"  # others still count


def test_room_codes_cannot_be_tried_in_bulk_from_one_session_or_one_address(replicas) -> None:
    poll = replicas()
    code, _ = poll.open()
    wrong = [c for c in ("ABCDE", "FGHJK", "MNPQR", "STUVW", "XYZ23", "45678", "9ABCD") if c != code]
    most_session, _ = rooms.CODE_TRIES["session"]
    for guess in wrong[:most_session]:
        with pytest.raises(PollError, match="no room"):
            poll.enter(guess, "203.0.113.5", "session-1")
    with pytest.raises(PollError, match="Too many wrong room codes"):
        poll.enter(code, "203.0.113.5", "session-1")  # even the right code, until the window has passed
    assert poll.enter(code, "192.0.2.8", "session-2").code == code  # another visitor is not held back
    most_address, _ = rooms.CODE_TRIES["address"]
    for i in range(most_address - most_session):  # a fresh session a try, from one address
        with pytest.raises(PollError, match="no room"):
            poll.enter(wrong[0], "203.0.113.5", f"fresh-{i}")
    with pytest.raises(PollError, match="Too many wrong room codes"):
        poll.enter(code, "203.0.113.5", "fresh-last")
    assert poll.enter(code.lower(), "192.0.2.8", "session-2").code == code  # a right code typed is no wrong try
