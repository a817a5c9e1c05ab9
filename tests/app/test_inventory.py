"""Check what you know (the attention inventory) in AppTest: a learner's first try, the second after the course, their
gain per idea; everything in the page's link, a mangled link starting over instead of raising."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from attention.lessons import inventory
from harness.charts import open_page
from ui.views.inventory import decode, encode


def texts(at: AppTest) -> str:
    parts = [e.value for e in (*at.info, *at.warning, *at.error, *at.success, *at.caption, *at.markdown)]
    return "\n".join(str(p) for p in parts)


def answer(at: AppTest, forms: tuple[inventory.Form, ...], phase: str, right: set[str]) -> AppTest:
    """Fill the test: right on the items named, the first misconception's answer on the rest."""
    for form in forms:
        a = form.answer_key if form.item in right else min(form.answer_misconceptions)
        at.radio(key=f"inv:{phase}:{form.item}:a").set_value(form.answers[a])
        at.radio(key=f"inv:{phase}:{form.item}:r").set_value(form.reasons[form.reason_key])
    at.button(key=f"FormSubmitter:inv-{phase}-Send my answers").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_learner_takes_both_tries_and_sees_their_gain_per_idea():
    at = open_page("inventory", check_seed="42")
    assert at.radio(key="inv:pre:shift:a") is not None
    pre_forms, post_forms = inventory.test(42, "pre"), inventory.test(42, "post")
    ids = [i.id for i in inventory.ITEMS]
    answer(at, pre_forms, "pre", set(ids[:2]))
    assert at.query_params["check_pre"] == encode(
        {
            f.item: (f.answer_key if f.item in ids[:2] else min(f.answer_misconceptions), f.reason_key)
            for f in pre_forms
        }  # fmt: skip
    )
    assert f"2 of {len(ids)} right" in texts(at)
    at.toggle(key="inv:post-now").set_value(True).run()
    answer(at, post_forms, "post", set(ids[:7]))
    n = len(ids)
    shown = texts(at) + "\n".join(h.value for h in at.subheader)
    assert f"Before: 2 of {n}. After: 7 of {n}." in shown
    assert f"g = {(7 - 2) / (n - 2):.2f}" in shown
    table = at.table[0].value
    assert list(table["Before"]).count("✓ right") == 2 and list(table["After"]).count("✓ right") == 7


def test_the_second_try_asks_other_numbers_than_the_first():
    at = open_page("inventory", check_seed="7")
    first = [m.value for m in at.markdown if m.value.startswith("**1.")]
    pre_forms = inventory.test(7, "pre")
    answer(at, pre_forms, "pre", set())
    at.toggle(key="inv:post-now").set_value(True).run()
    second = [m.value for m in at.markdown if m.value.startswith("**1.")]
    assert first and second and first != second


def test_a_test_sent_with_open_items_says_which():
    at = open_page("inventory", check_seed="3")
    at.button(key="FormSubmitter:inv-pre-Send my answers").click().run()
    assert "still open" in texts(at)
    assert "check_pre" not in at.query_params


def test_a_mangled_link_starts_over_without_an_error():
    at = open_page("inventory", check_seed="5", check_pre="9x-")
    assert not at.error
    assert at.radio(key="inv:pre:shift:a") is not None


def test_encode_and_decode_round_trip():
    forms = inventory.test(9, "pre")
    sheet = {f.item: (f.answer_key, None if k % 2 else f.reason_key) for k, f in enumerate(forms)}
    assert decode(encode(sheet), forms) == sheet
    assert decode("0" * (2 * len(forms) - 1), forms) == {}
    assert decode("9" * (2 * len(forms)), forms) == {}  # no form has ten choices
