"""The class poll's pages in AppTest: the projector opens a room and asks, learners answer (through another
"replica": another store client onto the same Redis), the projector counts and reveals, everyone sees the result."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import server.poll
from harness.charts import ok, open_ok
from harness.redis_server import redis_server
from server.poll import MemoryStore, Poll, RedisStore

ROOT = Path(__file__).resolve().parents[2]


def texts(at: AppTest) -> str:
    return "\n".join(e.value for kind in ("markdown", "success", "warning", "info", "caption") for e in at.get(kind))


def bars(at: AppTest) -> list[str]:
    return [p.proto.text for p in at.get("progress")]


@pytest.fixture(params=["memory", "redis"])
def replicas(request, monkeypatch):
    """Two servers' Polls onto the same rooms; `use(i)` makes the next runs go through replica i."""
    if request.param == "memory":
        store = MemoryStore()
        polls = [Poll(store), Poll(store)]
        yield lambda i: monkeypatch.setattr(server.poll, "shared", lambda: polls[i])
        return
    with redis_server() as redis:
        prefix = f"app:{uuid.uuid4().hex[:8]}:"
        polls = [Poll(RedisStore(redis.url, prefix=prefix)), Poll(RedisStore(redis.url, prefix=prefix))]
        yield lambda i: monkeypatch.setattr(server.poll, "shared", lambda: polls[i])


def test_a_room_asks_counts_without_marking_and_reveals_to_everyone(replicas) -> None:
    replicas(0)
    projector = open_ok("poll_room")
    projector.button(key="poll:open").click().run()
    ok(projector)
    code = projector.session_state["p:room"]
    key = projector.session_state["poll:keys"][code]
    assert server.poll.shared().is_host(code, key)
    assert projector.query_params["room"] == code and "host" not in projector.query_params  # issue 50: no key
    assert f"poll?room={code}" in texts(projector)
    projector.selectbox(key="poll:pick").set_value("demo.rows")
    projector.button(key="poll:ask").click().run()
    ok(projector)
    assert "After the softmax" in texts(projector)

    replicas(1)
    learners = [open_ok("poll", room=code.lower()) for _ in range(3)]  # a code as typed: lower case is fine
    choices = [b.label for b in learners[0].button if b.key and b.key.startswith("poll:demo.rows:")]
    assert choices == ["0", "1", "the number of keys", "it depends on the sentence"]
    for at, pick in zip(learners, (1, 1, 3), strict=True):
        at.button(key=f"poll:demo.rows:{pick}").click().run()
        ok(at)
        assert "Your answer" in texts(at)
        assert at.query_params["voter"] and at.query_params["room"]  # the token survives a reload, in the address
    learners[2].button(key="poll:demo.rows:2").click().run()  # changed before the reveal
    assert "Your answer: **the number of keys**" in texts(learners[2])

    replicas(0)
    projector.run()
    ok(projector)
    assert next(m.value for m in projector.metric) == "3"
    assert sorted(bars(projector)) == sorted(
        [
            "0: 0 (0 %)",
            "1: 2 (67 %)",
            "the number of keys: 1 (33 %)",
            "it depends on the sentence: 0 (0 %)",
        ]
    )  # fmt: skip (no mark before the reveal; two a row on the projector, so read column by column)
    projector.button(key="poll:reveal").click().run()
    ok(projector)
    assert "The answer: **1**" in texts(projector) and "✓ 1: 2 (67 %)" in bars(projector)
    assert "poll:reveal" not in [b.key for b in projector.button]

    replicas(1)
    for at, verdict in zip(learners, ("right.", "right.", "not this time."), strict=True):
        at.run()
        ok(at)
        assert "The answer: **1**" in texts(at) and verdict in texts(at)
        assert not any(b.key and b.key.startswith("poll:demo.rows:") for b in at.button)  # closed


def test_a_wrong_code_says_so_and_offers_the_box(replicas) -> None:
    replicas(0)
    at = open_ok("poll", room="ZZZZZ")
    assert "There is no room ZZZZZ" in texts(at)
    assert at.text_input(key="poll:code").value == ""
    code, _ = server.poll.shared().open()
    at.text_input(key="poll:code").set_value(f" {code.lower()} ")
    at.button(key="FormSubmitter:poll:join-Join").click().run()
    ok(at)
    assert at.session_state["p:room"] == code.lower().strip().upper()
    assert "Waiting for the instructor's first question" in texts(at)
    at = open_ok("poll", room="<b>no</b>")
    assert "is not a room code" in texts(at) and "<b>" not in texts(at)  # the link's text shown inert


def test_a_learner_without_a_room_sees_the_box_and_no_error() -> None:
    at = open_ok("poll")
    assert [t.label for t in at.text_input] == ["Room code"] and not at.warning
    assert "voter" not in at.query_params  # no token before a room


def test_the_poll_says_it_is_paused_when_its_redis_does_not_answer(monkeypatch) -> None:
    with redis_server() as redis:
        url = redis.url
    gone = Poll(RedisStore(url, timeout_s=0.3))  # the server above has stopped: nothing listens there
    monkeypatch.setattr(server.poll, "shared", lambda: gone)
    for page in ("poll", "poll_room"):
        at = open_ok(page, room="ABCDE", host="k" * 24)
        if page == "poll_room":
            at.button(key="poll:open").click().run()
            ok(at)
        assert "The poll is paused" in texts(at), texts(at)


def test_the_course_pushes_its_question_into_the_room_its_session_hosts(monkeypatch) -> None:
    """ui.views.poll.push, the course's way in: a question object with the course's field names becomes the current
    question of the room this session hosts; a session that hosts none asks nothing."""
    poll = Poll(MemoryStore())
    monkeypatch.setattr(server.poll, "shared", lambda: poll)

    def script() -> None:
        from types import SimpleNamespace

        import streamlit as st

        import server.poll
        import ui.views.poll

        question = SimpleNamespace(id="course.1", prompt="Which key wins?", kind="choice", choices=["a", "b"],
                                   answer="b")  # fmt: skip
        st.write(f"without a room: {ui.views.poll.push(question)}")
        code, key = server.poll.shared().open()
        st.session_state["p:room"], st.session_state["p:host"] = code, key
        st.write(f"hosting: {ui.views.poll.push(question)}")
        st.session_state["p:host"] = key[:-1] + ("x" if key[-1] != "x" else "y")
        st.write(f"wrong key: {ui.views.poll.push(question)}")

    at = AppTest.from_function(script, default_timeout=60).run()
    ok(at)
    assert [m.value for m in at.markdown] == ["without a room: False", "hosting: True", "wrong key: False"]
    (code,) = [c for c in poll.store._rooms]  # the one room the script opened
    room = poll.room(code)
    assert room.question.id == "course.1" and room.question.choices == ("a", "b") and room.question.answer == "1"


def test_the_projector_asks_the_courses_questions_with_the_answer_computed(monkeypatch) -> None:
    """The projector's picker lists every lesson's question first; asked, its answer is the course's own, computed
    at the lesson's inputs (a number keeps the course's tolerance)."""
    from attention.lessons import course

    poll = Poll(MemoryStore())
    monkeypatch.setattr(server.poll, "shared", lambda: poll)
    projector = open_ok("poll_room")
    projector.button(key="poll:open").click().run()
    code = projector.session_state["p:room"]
    options = projector.selectbox(key="poll:pick").options
    ids = [f"course.{q}" for q in course.QUESTIONS]
    assert [o for o in options if o.startswith("Lesson: ")][: len(ids)] == [
        f"Lesson: {q.prompt(course.inputs_for(q, {}))}" for q in course.QUESTIONS.values()
    ]
    number = next(q for q in course.QUESTIONS.values() if q.kind == "number")
    projector.selectbox(key="poll:pick").set_value(f"course.{number.id}")
    projector.button(key="poll:ask").click().run()
    ok(projector)
    asked = poll.room(code).question
    inputs = course.inputs_for(number, {})
    truth = number.answer(inputs)
    assert asked.id == f"course.{number.id}" and asked.kind == "number"
    assert float(asked.answer) == pytest.approx(float(truth.value), rel=1e-5)
    assert asked.tolerance == pytest.approx(number.margin(truth))
    inside = float(truth.value) + 0.9 * number.margin(truth)
    assert asked.is_right(f"{inside:.6g}") == (number.margin(truth) > 0 or inside == float(truth.value))
    assert not asked.is_right(f"{float(truth.value) + number.margin(truth) + 1:.6g}")


def test_the_course_in_presenter_mode_asks_the_room_each_lessons_question_on_its_own_numbers(monkeypatch) -> None:
    """A tab that hosts a room and steps through the course asks the room each lesson's question, computed on the
    numbers that tab shows (here: a sentence of the test's own), and moves it on with the lesson."""
    from attention.lessons import course

    poll = Poll(MemoryStore())
    monkeypatch.setattr(server.poll, "shared", lambda: poll)
    code, key = poll.open()
    first, second = list(course.QUESTIONS.values())[:2]
    sentence = "every cat chased one small red ball"
    at = open_ok("course", room=code, host=key, lesson=first.id, sentence=sentence)
    asked = poll.room(code).question
    inputs = {**course.inputs_for(first, {}), **({"sentence": sentence} if "sentence" in first.reads else {})}
    assert asked.id == f"course.{first.id}" and asked.text == first.prompt(inputs)
    assert asked.answer == str(int(first.answer(inputs).value)) or first.kind == "number"
    at.query_params["lesson"] = second.id
    at = open_ok("course", room=code, host=key, lesson=second.id, sentence=sentence)
    assert poll.room(code).question.id == f"course.{second.id}"
    nobody = open_ok("course", room=code, host="not-the-key", lesson=first.id)  # a learner's tab asks nothing
    ok(nobody)
    assert poll.room(code).question.id == f"course.{second.id}"


@pytest.mark.thorough  # a training run: --all, not the fast tier
def test_a_hosting_tab_asks_lesson_12_once_its_run_is_trained(monkeypatch) -> None:
    """Lesson 12's answer needs a training run: a hosting tab starts it and says the room is asked once it is
    trained (the page is not held while it trains); once trained, the room gets the question with its answer."""
    import time

    from attention.lessons import course

    poll = Poll(MemoryStore())
    monkeypatch.setattr(server.poll, "shared", lambda: poll)
    code, key = poll.open()
    at = open_ok("course", room=code, host=key, lesson="watch_it_learn", train_seed="31")  # a seed nobody trains
    assert "The room is asked once the lab has trained" in texts(at)
    assert poll.room(code).question is None or poll.room(code).question.id != "course.watch_it_learn"
    end = time.monotonic() + 240
    while poll.room(code).question is None or poll.room(code).question.id != "course.watch_it_learn":
        assert time.monotonic() < end, "the lesson's run did not finish training"
        time.sleep(0.5)
        at.run()
        ok(at)
    q = course.QUESTIONS["watch_it_learn"]
    inputs = course.inputs_for(q, {"train_seed": 31})
    assert float(poll.room(code).question.answer) == float(q.answer(inputs).value)


def test_a_number_answer_survives_the_pages_refresh_changes_and_is_marked(monkeypatch) -> None:
    """Issue 48: a course's number question (whole bounds, a float answer) answered on a phone, then the page runs
    again (its refresh), changed, and revealed: no error at any step."""
    from attention.lessons import course

    poll = Poll(MemoryStore())
    monkeypatch.setattr(server.poll, "shared", lambda: poll)
    code, key = poll.open()
    from ui.views.poll import from_course

    number = course.QUESTIONS["masks"]
    asked = from_course(number, course.inputs_for(number, {}))
    assert isinstance(asked.lo, int | float) and asked.kind == "number"
    poll.ask(code, key, asked)
    phone = open_ok("poll", room=code)
    phone.number_input(key=f"poll:{asked.id}:number").set_value(float(asked.answer) + 1)
    phone.button(key=f"FormSubmitter:poll:{asked.id}:form-Send").click().run()
    ok(phone)
    for _ in range(3):  # the refresh: the page runs again with the answer as the box's value
        phone.run()
        ok(phone)
    assert f"Your answer: **{float(asked.answer) + 1:g}**" in texts(phone)
    phone.number_input(key=f"poll:{asked.id}:number").set_value(float(asked.answer))
    phone.button(key=f"FormSubmitter:poll:{asked.id}:form-Send").click().run()
    ok(phone)
    assert f"Your answer: **{float(asked.answer):g}**" in texts(phone)
    poll.reveal(code, key)
    phone.run()
    ok(phone)
    assert "right." in texts(phone)


def test_the_courses_reveal_is_the_rooms_and_no_lesson_link_carries_the_key(monkeypatch) -> None:
    """Issues 48 and 50: a tab that hosts a room shows each lesson's count and split (unmarked) before the reveal;
    its reveal reveals the room (every phone is told right or not), and the export has each question revealed with
    its counts. The key, read from the link once, is in no address the course writes; a link with only the room's
    code gives no host's rights."""
    poll = Poll(MemoryStore())
    monkeypatch.setattr(server.poll, "shared", lambda: poll)
    code, key = poll.open()
    from attention.lessons import course

    lesson = next(i for i, q in course.QUESTIONS.items() if q.kind == "choice")
    at = open_ok("course", room=code, host=key, present="true", lesson=lesson)
    assert "host" not in at.query_params and at.query_params["room"] == code
    asked = poll.room(code).question
    assert asked is not None and asked.id.startswith("course.")
    phones = [open_ok("poll", room=code) for _ in range(3)]
    for phone, pick in zip(phones, (0, 1, 1), strict=True):
        phone.button(key=f"poll:{asked.id}:{pick}").click().run()
        ok(phone)
    at.run()
    assert f"The room ({code}): 3 answered" in texts(at)
    assert not any(b.startswith("✓") for b in bars(at))  # no mark before the reveal
    assert not poll.room(code).revealed
    at.button(key="co:reveal").click().run()
    ok(at)
    assert poll.room(code).revealed
    assert any(b.startswith("✓") for b in bars(at)) and "right (" in texts(at)
    for phone, pick in zip(phones, (0, 1, 1), strict=True):
        phone.run()
        ok(phone)
        verdict = "right." if asked.is_right(str(pick)) else "not this time."
        assert verdict in texts(phone)
    assert "host" not in at.query_params
    exported = json.loads(poll.export(code, key))
    (item,) = exported["questions"]
    assert item["id"] == asked.id and item["revealed"] and item["answered"] == 3

    leaked = open_ok("course", room=code, lesson=asked.id.removeprefix("course."))  # the link, on another device
    ok(leaked)
    assert "The room (" not in texts(leaked)
    learner_room = open_ok("poll_room", room=code)
    ok(learner_room)
    assert "poll:reveal" not in [b.key for b in learner_room.button] and not learner_room.get("download_button")


def test_a_learners_token_survives_a_paused_rerun_and_a_reload(monkeypatch) -> None:
    """Issue 50: the paused page wrote its address without the token, so a reload got a new one and counted twice.
    The token stays in the address while paused, and a reload with it is the same browser: one answer, one device."""
    import os
    import signal

    with redis_server() as redis:
        poll = Poll(RedisStore(redis.url, timeout_s=0.3))
        monkeypatch.setattr(server.poll, "shared", lambda: poll)
        code, key = poll.open()
        from ui.views.poll import demo_questions

        poll.ask(code, key, demo_questions()[0])
        phone = open_ok("poll", room=code)
        token = phone.query_params["voter"]
        phone.button(key="poll:demo.rows:1").click().run()
        ok(phone)
        os.kill(redis.process.pid, signal.SIGSTOP)  # Redis answers nothing
        try:
            phone.run()
            assert "The poll is paused" in texts(phone)
            assert phone.query_params["voter"] == token and phone.query_params["room"] == code
        finally:
            os.kill(redis.process.pid, signal.SIGCONT)
        again = open_ok("poll", **dict(phone.query_params))  # the reload: the address as the paused page left it
        ok(again)
        assert again.query_params["voter"] == token and "Your answer: **1**" in texts(again)
        again.button(key="poll:demo.rows:1").click().run()
        assert poll.tally(code, demo_questions()[0]).answered == 1 and poll.room(code).joined == 1


def test_a_token_the_client_made_up_is_replaced_by_the_servers_and_the_projector_counts_devices(monkeypatch) -> None:
    """Issue 50: a learner's token is the server's, signed for the room; one the link brings that the server did not
    issue (made up, or another room's) is replaced, and the projector shows answers against devices joined."""
    poll = Poll(MemoryStore())
    monkeypatch.setattr(server.poll, "shared", lambda: poll)
    projector = open_ok("poll_room")
    projector.button(key="poll:open").click().run()
    code = projector.session_state["p:room"]
    projector.selectbox(key="poll:pick").set_value("demo.rows")
    projector.button(key="poll:ask").click().run()
    forged = "A" * 27
    phones = [open_ok("poll", room=code, voter=forged) for _ in range(2)]
    for phone in phones:
        ok(phone)
        assert phone.query_params["voter"] != forged and poll.holds(code, phone.query_params["voter"])
        phone.button(key="poll:demo.rows:1").click().run()
    assert phones[0].query_params["voter"] != phones[1].query_params["voter"]
    projector.run()
    assert [(m.label, m.value) for m in projector.metric] == [("Answered", "2"), ("Devices joined", "2")]


def test_wrong_room_codes_are_throttled_per_session(monkeypatch) -> None:
    """Issue 50: room codes could be tried 5.7 a second from one session; now a few wrong ones a minute."""
    poll = Poll(MemoryStore())
    monkeypatch.setattr(server.poll, "shared", lambda: poll)
    code, _ = poll.open()
    at = open_ok("poll")
    wrong = [c for c in ("ABCDE", "FGHJK", "MNPQR", "STUVW", "XYZ23", "45678") if c != code]
    for guess in wrong[: server.poll.CODE_TRIES["session"][0]]:
        at.text_input(key="poll:code").set_value(guess)
        at.button(key="FormSubmitter:poll:join-Join").click().run()
        assert f"There is no room {guess}" in texts(at)
    at.text_input(key="poll:code").set_value(code)
    at.button(key="FormSubmitter:poll:join-Join").click().run()
    ok(at)
    assert "Too many wrong room codes" in texts(at) and "voter" not in at.query_params


def test_a_number_forged_as_nan_or_infinity_is_refused_politely(monkeypatch) -> None:
    """Issue 50: a number box's value forged as NaN or ±inf (a widget's value is the client's) errored the sender's
    own page (a whole-number range made the box an int one: int(nan)). The box is a float one whatever the bounds, so
    Streamlit drops a value that is not finite; nothing is counted and the page goes on."""
    poll = Poll(MemoryStore())
    monkeypatch.setattr(server.poll, "shared", lambda: poll)
    code, key = poll.open()
    question = server.poll.PollQuestion("n", "How many?", "number", lo=0, hi=100, answer="3")
    poll.ask(code, key, question)
    for forged in (float("nan"), float("inf"), float("-inf")):
        phone = open_ok("poll", room=code)
        phone.number_input(key="poll:n:number").set_value(forged)
        phone.button(key="FormSubmitter:poll:n:form-Send").click().run()
        ok(phone)
        phone.run()  # the page's refresh, with the forged value still the box's
        ok(phone)
        assert phone.number_input(key="poll:n:number").value is None and "Your answer" not in texts(phone)
    assert poll.tally(code, question).answered == 0
