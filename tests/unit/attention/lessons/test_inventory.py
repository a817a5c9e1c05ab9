"""The attention inventory: every twin's key against a solver written here from the prompt's own words (plain
arithmetic on the numbers the prompt prints, not the package's code), every listed misconception marked wrong, pre
and post never the same twin; the gain, the pairing and the item statistics on simulated rooms with known answers."""

from __future__ import annotations

import json
import math
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention.lessons import inventory

SEEDS = st.integers(min_value=0, max_value=2**31 - 1)
NUM = r"-?\d[\d,]*(?:\.\d+)?"


def numbers(text: str) -> list[float]:
    return [float(x.replace(",", "")) for x in re.findall(NUM, text)]


def vectors(text: str) -> list[list[float]]:
    return [numbers(v) for v in re.findall(r"\(([^()]*\d[^()]*)\)", text) if "/" not in v and "token" not in v]


def nearest(form: inventory.Form, target: float | list[float]) -> int:
    """The answer whose numbers lie nearest the solver's value."""

    def distance(k: int) -> float:
        got = numbers(form.answers[k])
        want = target if isinstance(target, list) else [target]
        return sum(abs(a - b) for a, b in zip(got, want, strict=False)) if len(got) >= len(want) else math.inf

    return min(range(len(form.answers)), key=distance)


def solve(form: inventory.Form) -> int:
    """The index of the right answer, from the prompt's own words."""
    p = form.prompt
    if form.item == "shift":
        scores = vectors(p)[0]
        c = numbers(p.split("Add ")[1])[0]
        exps = [math.exp(s + c) for s in scores]
        after = [e / sum(exps) for e in exps]  # the same as before: e^c cancels
        return next(k for k, a in enumerate(form.answers) if a.startswith("They stay") and
                    all(abs(x - y) < 0.006 for x, y in zip(numbers(a), after, strict=True)))  # fmt: skip
    if form.item == "spread":
        d_k = numbers(p.split("d_k = ")[1])[0]
        return nearest(form, math.sqrt(d_k))  # Var(q·k) = d_k · Var(q_i k_i) = d_k
    if form.item == "scaling":
        return next(k for k, a in enumerate(form.answers) if a.startswith("It stays") and numbers(a) == [1.0])
    if form.item == "causal":
        i = int(numbers(p.split("token ")[1])[0])
        return form.answers.index(str(i))  # itself and the i - 1 before it
    if form.item == "order":
        return form.answers.index("The same numbers, now in its new row")
    if form.item == "heads":
        d_model, heads = numbers(p.split("d_model = ")[1])[:2]
        return form.answers.index(str(int(d_model // heads)))
    if form.item == "sink":
        rows = re.findall(r"“([^”]+)” weight (" + NUM + r"), value length (" + NUM + ")", p)
        best = max(rows, key=lambda r: float(r[1]) * float(r[2]))[0]
        return form.answers.index(f"“{best}”")
    if form.item == "writes":
        rows = re.findall(r"weight (" + NUM + r"), value \((" + NUM + r"), (" + NUM + r")\)", p)
        mix = [sum(float(r[0]) * float(r[1 + d]) for r in rows) for d in range(2)]
        return nearest(form, mix)
    if form.item == "cache":
        layers, heads, kv, d = numbers(p)[:4]
        return form.answers.index(f"{int(2 * layers * kv * d):,}")
    if form.item == "induction":
        words = re.search(r"reads “([^”]+)”", p).group(1).split()
        last = len(words) - 1
        earlier = max(j for j in range(last) if words[j] == words[last])
        return next(k for k, a in enumerate(form.answers) if a.endswith(f"(token {earlier + 2})"))
    if form.item == "flash":
        t = numbers(p.split("over ")[1])[0]
        b = numbers(p.split("tiles of ")[1])[0]
        held = int(b * b + 2 * t)
        return form.answers.index(f"{held:,}, exactly the same output (to rounding)")
    raise AssertionError(f"no solver for {form.item}")


def test_eleven_items_each_with_its_misconceptions():
    assert 10 <= len(inventory.ITEMS) <= 12
    assert len({i.id for i in inventory.ITEMS}) == len(inventory.ITEMS)
    assert all(len(i.misconceptions) >= 2 for i in inventory.ITEMS)


@settings(max_examples=15, deadline=None)
@given(seed=SEEDS)
def test_every_key_holds_against_the_solver(seed):
    for phase in inventory.PHASES:
        for form in inventory.test(seed, phase):
            assert solve(form) == form.answer_key, (form.item, form.prompt, form.answers)
            assert form.grade(form.answer_key, form.reason_key).right


@settings(max_examples=15, deadline=None)
@given(seed=SEEDS)
def test_every_misconception_is_marked_wrong(seed):
    for form, item in zip(inventory.test(seed, "post"), inventory.ITEMS, strict=True):
        wrong = [k for k in range(len(form.answers)) if k != form.answer_key]
        assert set(form.answer_misconceptions) == set(wrong), form.item  # every wrong answer stands for one
        for k, name in form.answer_misconceptions.items():
            assert name in item.misconceptions
            graded = form.grade(k, form.reason_key)
            assert not graded.right and name in graded.misconceptions
        for k, name in form.reason_misconceptions.items():
            graded = form.grade(form.answer_key, k)
            assert not graded.right and not graded.reason_right and name in graded.misconceptions
        assert not form.grade(None, None).right


@settings(max_examples=15, deadline=None)
@given(seed=SEEDS)
def test_pre_and_post_never_show_the_same_twin(seed):
    pre, post = inventory.test(seed, "pre"), inventory.test(seed, "post")
    assert [f.item for f in pre] == [f.item for f in post] == [i.id for i in inventory.ITEMS]
    assert all(a.prompt != b.prompt for a, b in zip(pre, post, strict=True))
    assert inventory.test(seed, "pre") == pre  # a seed gives its twins back


def test_twins_vary_their_numbers_and_the_place_of_the_key():
    for item in inventory.ITEMS:
        forms = [inventory.twin(item, s) for s in range(40)]
        assert len({f.prompt for f in forms}) >= 10, item.id
        assert len({f.answer_key for f in forms}) > 1, item.id  # the right answer is not always in one place


def test_an_unknown_phase_is_refused():
    with pytest.raises(ValueError, match="phase"):
        inventory.test(1, "mid")


# ------------------------------------------------------------------ the gain on simulated rooms with known answers


def sheet(forms, right: set[str]) -> dict[str, tuple[int, int]]:
    """Right on the items named, a misconception on the rest."""
    out = {}
    for f in forms:
        if f.item in right:
            out[f.item] = (f.answer_key, f.reason_key)
        else:
            name = min(f.answer_misconceptions.values())  # the same misconception in every twin of the item
            out[f.item] = (next(k for k, m in f.answer_misconceptions.items() if m == name), f.reason_key)
    return out


def room(n: int, pre_right: int, post_right: int, seed: int = 7):
    pre_f, post_f = inventory.test(seed, "pre"), inventory.test(seed, "post")
    ids = [i.id for i in inventory.ITEMS]
    pre = {f"t{k}": sheet(pre_f, set(ids[:pre_right])) for k in range(n)}
    post = {f"t{k}": sheet(post_f, set(ids[:post_right])) for k in range(n)}
    return pre_f, post_f, pre, post


def test_gain_of_a_room_with_known_answers():
    pre_f, post_f, pre, post = room(60, pre_right=3, post_right=8)
    n = len(inventory.ITEMS)
    r = inventory.report(pre_f, post_f, pre, post)
    assert r.shown and r.pairs == 60
    assert r.pre_mean == pytest.approx(3 / n) and r.post_mean == pytest.approx(8 / n)
    assert r.gain == pytest.approx((8 - 3) / (n - 3))
    fell = {m.item: m for m in r.misconceptions if m.pre}
    assert set(fell) == {i.id for i in inventory.ITEMS[3:]}  # the misconception chosen on every item not right before
    assert all(m.pre == 60 for m in fell.values())
    assert [fell[i.id].post for i in inventory.ITEMS[3:]] == [0] * 5 + [60] * (len(inventory.ITEMS) - 8)  # five fell


def test_learners_with_one_test_only_are_not_paired():
    pre_f, post_f, pre, post = room(8, 2, 6)
    pre["only-pre"] = sheet(pre_f, set())
    post["only-post"] = sheet(post_f, {i.id for i in inventory.ITEMS})
    r = inventory.report(pre_f, post_f, pre, post)
    assert (r.pairs, r.pre_only, r.post_only) == (8, 1, 1)
    assert r.gain == pytest.approx((6 - 2) / (len(inventory.ITEMS) - 2))


def test_nothing_is_shown_below_five_pairs():
    pre_f, post_f, pre, post = room(4, 2, 6)
    r = inventory.report(pre_f, post_f, pre, post)
    assert not r.shown and r.gain is None and r.items == () and r.pre_statistics == ()
    assert json.loads(inventory.export(r))["gain"] is None


def test_a_room_of_300_mixed_learners_matches_a_direct_count():
    rng = random.Random(3)
    pre_f, post_f = inventory.test(11, "pre"), inventory.test(11, "post")
    ids = [i.id for i in inventory.ITEMS]
    pre, post, right_pre, right_post = {}, {}, 0, 0
    for k in range(300):
        a = {i for i in ids if rng.random() < 0.35}
        b = a | {i for i in ids if rng.random() < 0.4}
        pre[f"t{k}"], post[f"t{k}"] = sheet(pre_f, a), sheet(post_f, b)
        right_pre, right_post = right_pre + len(a), right_post + len(b)
    r = inventory.report(pre_f, post_f, pre, post)
    total = 300 * len(ids)
    assert r.pre_mean == pytest.approx(right_pre / total) and r.post_mean == pytest.approx(right_post / total)
    assert r.gain == pytest.approx((right_post - right_pre) / (total - right_pre))
    assert 0 < r.gain < 1


def test_point_biserial_against_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(5)
    item = [rng.randint(0, 1) for _ in range(50)]
    rest = [rng.randint(0, 10) + 3 * x for x in item]
    assert inventory.point_biserial(item, rest) == pytest.approx(stats.pointbiserialr(item, rest).statistic)
    assert inventory.point_biserial([1] * 5, [1, 2, 3, 4, 5]) is None


def test_item_statistics_difficulty_and_discrimination():
    forms = inventory.test(2, "pre")
    ids = [i.id for i in inventory.ITEMS]
    # the strong half is right on everything, the weak half on the first item only: the first item does not
    # discriminate (everyone right: None), every other item does (+1)
    sheets = [sheet(forms, set(ids)) for _ in range(10)] + [sheet(forms, {ids[0]}) for _ in range(10)]
    by = {s.item: s for s in inventory.statistics(forms, sheets)}
    assert by[ids[0]].difficulty == 1.0 and by[ids[0]].discrimination is None
    assert by[ids[1]].difficulty == 0.5 and by[ids[1]].discrimination == pytest.approx(1.0)


def test_learner_gain():
    assert inventory.normalised_gain(0.4, 0.7) == pytest.approx(0.5)
    assert inventory.normalised_gain(1.0, 1.0) is None
    assert inventory.normalised_gain(0.5, 0.25) == pytest.approx(-0.5)


def test_exports_hold_counts_only():
    pre_f, post_f, pre, post = room(6, 1, 5)
    r = inventory.report(pre_f, post_f, pre, post)
    for text in (inventory.export(r, "json"), inventory.export(r, "csv")):
        assert "t0" not in text and "t5" not in text  # no token
        assert "shift" in text
    rows = inventory.export(r, "csv").splitlines()
    assert rows[0].startswith("item,idea,pre_right,post_right,gain")
    assert len(rows) == len(inventory.ITEMS) + 2
    with pytest.raises(ValueError):
        inventory.export(r, "xml")
