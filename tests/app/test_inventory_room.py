"""The attention inventory in a class poll room (AppTest, two replicas onto the same rooms): the projector asks the
test before the course and after it, phones send whole sheets, the projector pairs them by anonymous token only and
shows the room's gain, nothing for fewer than five pairs; a phone sees its own score and gain."""

from __future__ import annotations

import json
import uuid

import pytest
from streamlit.testing.v1 import AppTest

import server.poll
from attention.lessons import inventory
from harness.charts import ok, open_ok
from harness.redis_server import redis_server
from server.poll import MemoryStore, Poll, RedisStore
from ui.views.inventory import decode, encode, room_question, room_seed


def texts(at: AppTest) -> str:
    return "\n".join(e.value for kind in ("markdown", "success", "warning", "info", "caption") for e in at.get(kind))


@pytest.fixture(params=["memory", "redis"])
def replicas(request, monkeypatch):
    """Two servers' Polls onto the same rooms; `use(i)` makes the next runs go through replica i."""
    with redis_server() if request.param == "redis" else _nothing() as redis:
        if redis is None:
            store = MemoryStore()
            polls = [Poll(store), Poll(store)]
        else:
            prefix = f"inv:{uuid.uuid4().hex[:8]}:"
            polls = [Poll(RedisStore(redis.url, prefix=prefix)) for _ in range(2)]
        yield lambda i: monkeypatch.setattr(server.poll, "shared", lambda: polls[i])


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *_):
        return False


def ask(projector: AppTest, qid: str) -> None:
    projector.selectbox(key="poll:pick").set_value(qid)
    projector.button(key="poll:ask").click().run()
    ok(projector)


def send(at: AppTest, forms: tuple[inventory.Form, ...], phase: str, right: int) -> None:
    """A phone's sheet: right on the first `right` items, a misconception's answer on the rest."""
    for k, form in enumerate(forms):
        a = form.answer_key if k < right else min(form.answer_misconceptions)
        at.radio(key=f"inv:room-{phase}:{form.item}:a").set_value(form.answers[a])
        at.radio(key=f"inv:room-{phase}:{form.item}:r").set_value(form.reasons[form.reason_key])
    at.button(key=f"FormSubmitter:inv-room-{phase}-Send my answers").click().run()
    ok(at)


def room_asking_the_pre_test() -> tuple[AppTest, str, int]:
    """A projector that opened a room and asked the test before the course: it, the room's code and seed."""
    projector = open_ok("poll_room")
    projector.button(key="poll:open").click().run()
    code = projector.session_state["p:room"]
    ask(projector, "inventory.pre")
    return projector, code, room_seed(code)


def test_a_room_takes_both_tests_and_the_projector_shows_its_gain(replicas) -> None:
    replicas(0)
    projector, code, seed = room_asking_the_pre_test()
    pre_forms, post_forms = inventory.test(seed, "pre"), inventory.test(seed, "post")

    replicas(1)
    phones = [open_ok("poll", room=code) for _ in range(7)]
    before = [1, 2, 3, 2, 1, 4, 0]
    for at, right in zip(phones, before, strict=True):
        send(at, pre_forms, "pre", right)
        assert "Sent." in texts(at)
    replicas(0)
    projector.run()
    assert "7" in [m.value for m in projector.metric]  # sheets sent
    projector.button(key="poll:reveal").click().run()  # closes the first test
    ok(projector)
    ask(projector, "inventory.post")

    replicas(1)
    after = [6, 8, 9, 7, 5, 10]  # the seventh phone left before the second test: not paired
    for at, right in zip(phones, after, strict=False):
        at.run()
        send(at, post_forms, "post", right)
    replicas(0)
    projector.run()
    ok(projector)
    n = len(inventory.ITEMS)
    pre_mean, post_mean = sum(before[:6]) / (6 * n), sum(after) / (6 * n)
    gain = (post_mean - pre_mean) / (1 - pre_mean)
    metrics = {m.label: m.value for m in projector.metric}
    assert metrics["Class gain ⟨g⟩"] == f"{gain:.2f}" and metrics["Pairs"] == "6"
    assert metrics["Right before"] == f"{pre_mean:.0%}" and metrics["Right after"] == f"{post_mean:.0%}"
    pre, post = sheets(code, projector)
    text = inventory.export(inventory.report(pre_forms, post_forms, pre, post))
    exported = json.loads(text)
    assert exported["pairs"] == 6 and exported["pre_only"] == 1
    assert exported["gain"] == pytest.approx(gain)
    assert len(pre) == 7 and not any(token in text for token in pre)  # the tokens pair the tests, never leave

    projector.button(key="poll:reveal").click().run()
    replicas(1)
    phones[1].run()
    ok(phones[1])
    shown = texts(phones[1])
    assert f"You had 8 of {n} right" in shown and f"g = {(8 - 2) / (n - 2):.2f}" in shown


def sheets(code: str, projector: AppTest):
    key = projector.session_state["poll:keys"][code]
    poll = server.poll.shared()
    seed = room_seed(code)
    out = []
    for phase in ("pre", "post"):
        forms = inventory.test(seed, phase)
        out.append({t: decode(v, forms) for t, v in poll.sheets(code, key, f"inventory.{phase}").items()})
    return out


def test_fewer_than_five_pairs_show_no_gain(replicas) -> None:
    replicas(0)
    projector, code, seed = room_asking_the_pre_test()
    phones = [open_ok("poll", room=code) for _ in range(4)]
    for at in phones:
        send(at, inventory.test(seed, "pre"), "pre", 3)
    projector.run()
    projector.button(key="poll:reveal").click().run()
    ask(projector, "inventory.post")
    for at in phones:
        at.run()
        send(at, inventory.test(seed, "post"), "post", 9)
    projector.run()
    ok(projector)
    assert "4 devices took both tests" in texts(projector)
    assert "Class gain ⟨g⟩" not in [m.label for m in projector.metric]


def test_only_the_instructor_reads_the_sheets_and_a_forged_sheet_is_refused() -> None:
    poll = Poll(MemoryStore())
    code, key = poll.open()
    poll.ask(code, key, room_question(code, "pre"))
    browser = poll.join(code)
    with pytest.raises(server.poll.PollError):
        poll.answer(code, browser, "inventory.pre", "9" * (2 * len(inventory.ITEMS)))
    with pytest.raises(server.poll.PollError):
        poll.sheets(code, "not-the-key", "inventory.pre")
    sheet = "00" * len(inventory.ITEMS)
    poll.answer(code, browser, "inventory.pre", sheet)
    assert poll.sheets(code, key, "inventory.pre") == {browser: sheet}


def test_a_replica_killed_between_the_tests_loses_no_pair_and_redis_holds_no_personal_data() -> None:
    """Over Redis: the projector's replica dies after the first test (a fresh Poll takes its place, as supervisord
    starts one); every pair is still made. Then every key and value in Redis is read: tokens, counts and answers
    only, no client address."""
    with redis_server() as redis:
        prefix = f"inv:{uuid.uuid4().hex[:8]}:"
        first = Poll(RedisStore(redis.url, prefix=prefix))
        code, key = first.open(address="198.51.100.7")
        first.ask(code, key, room_question(code, "pre"))
        seed = room_seed(code)
        pre_forms, post_forms = inventory.test(seed, "pre"), inventory.test(seed, "post")
        learners = Poll(RedisStore(redis.url, prefix=prefix))  # the learners' replica
        tokens = [learners.join(code, address=f"203.0.113.{k}") for k in range(6)]
        for k, token in enumerate(tokens):
            learners.answer(code, token, "inventory.pre", sheet_text(pre_forms, k), address=f"203.0.113.{k}")
        first.reveal(code, key)
        del first  # the projector's replica is killed; another serves the instructor's next click
        second = Poll(RedisStore(redis.url, prefix=prefix))
        second.ask(code, key, room_question(code, "post"))
        for k, token in enumerate(tokens):
            learners.answer(code, token, "inventory.post", sheet_text(post_forms, k + 4), address=f"203.0.113.{k}")
        pre = {t: decode(v, pre_forms) for t, v in second.sheets(code, key, "inventory.pre").items()}
        post = {t: decode(v, post_forms) for t, v in second.sheets(code, key, "inventory.post").items()}
        report = inventory.report(pre_forms, post_forms, pre, post)
        n = len(inventory.ITEMS)
        assert report.pairs == 6 and report.gain == pytest.approx(4 / (n - sum(range(6)) / 6))
        client = RedisStore(redis.url, prefix=prefix)
        stored = []
        for name in client._call("KEYS", f"{prefix}*"):
            kind = client._call("TYPE", name)
            stored.append(name)
            if kind == "hash":
                stored += client._call("HGETALL", name)
            elif kind == "string":
                stored.append(client._call("GET", name))
        text = " ".join(map(str, stored))
        assert "203.0.113" not in text and "198.51.100" not in text  # no client address, in any key or value
        assert all(t in text for t in tokens)  # the anonymous tokens pair the tests: they are there, and only they


def sheet_text(forms: tuple[inventory.Form, ...], right: int) -> str:
    """A sheet right on the first `right` items, a misconception's answer on the rest, as a phone sends it."""
    return encode({f.item: (f.answer_key if k < right else min(f.answer_misconceptions), f.reason_key)
                        for k, f in enumerate(forms)})  # fmt: skip
