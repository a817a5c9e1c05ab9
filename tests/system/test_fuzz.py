"""Fuzzing the two ways text enters from outside: the dashboard's link (URL parameters) and the command line.

Bounded (a few dozen examples each, no deadline) so it runs in CI in well under a minute; the accepted links of the
chat model and Watch it learn pages (a few examples each: every one runs the page and presses every button) take a
few minutes.
"""

from __future__ import annotations

import contextlib
import io
import threading
import unittest.mock
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

import ui
from attention.io.cli.main import main

ROOT = Path(__file__).resolve().parents[2]

# values near the edges of every kind of parameter, plus arbitrary text
EDGES = ("", " ", "-1", "0", "1", "2", "7", "0.5", "0.99", "1e999", "nan", "-0", "9" * 30, "true", "false", "none",
         "causal", "custom", "split", "sqrt", "0101.1010", "1.", "<img src=x onerror=alert(1)>", "**x**", "$x$",
         "=HYPERLINK(1)", "😀", "\u200b", "שלום", "a" * 300)  # fmt: skip
value = st.one_of(st.sampled_from(EDGES), st.text(max_size=40), st.integers().map(str))
key = st.one_of(st.sampled_from(tuple(ui.PARAMS)), st.text(min_size=1, max_size=20))
values = st.one_of(value, st.lists(value, min_size=2, max_size=3))  # a repeated parameter


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(key, values, max_size=6))
def test_any_link_opens_a_page_without_an_exception(params: dict) -> None:
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=60)
    for name, v in params.items():
        at.query_params[name] = v
    at.run()
    assert not at.exception, (params, [e.value for e in at.exception])
    shown = " ".join(w.value for w in at.warning)
    for name, v in params.items():
        last = v[-1] if isinstance(v, list) else v
        if name not in ui.PARAMS or not ui.state._linkable(name, last):  # refused: named in the warning, default kept
            assert "reset to defaults" in shown
        else:  # accepted: the page holds exactly the parsed value
            assert at.session_state["p:" + name] == ui.state._parse(name, last) or name in ("token", "head")
    # whatever the page writes back into the URL, a link would open again without a warning
    assert all(ui.state._linkable(k, v) for k, v in at.query_params.items()), at.query_params
    assert not any(b for b in (at.error, at.warning) for e in b if "<img" in e.value)


FLAGS = ("--sentence", "--d-model", "--d-k", "--d-v", "--heads", "--head-layout", "--init", "--mask", "--padding",
         "--window", "--dropout", "--seed", "--scale", "--temperature", "--embedding-init", "--cross-sentence",
         "--d-out", "--format", "--preset", "--embeddings", "--bias", "--no-bias", "--out-proj", "--bogus")  # fmt: skip
# small numbers only: the fuzz looks for crashes, not for the largest tensors this machine can hold
ARGS = st.one_of(st.sampled_from(EDGES[:-1]), st.integers(-3, 40).map(str), st.text(max_size=12))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(FLAGS), ARGS), max_size=5))
def test_the_command_line_exits_0_or_2_with_one_line(pairs: list) -> None:
    argv = [a for pair in pairs for a in pair]
    out_buf, err_buf = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out_buf), contextlib.redirect_stderr(err_buf):
        status = main(argv)
    out, err = out_buf.getvalue(), err_buf.getvalue()
    assert status in (0, 2), (argv, status)
    if status == 2:
        assert err.count("\n") == 1 and err.startswith("attention: error:") and not out, (argv, err)
    else:
        assert out and not err, argv


# ---------------------------------------------------------------------------------------------- accepted links
# Every value a link accepts must be one the page can run (issue 38: a chat temperature of 1e-38 passed the link
# check and crashed on Generate). Links made only of accepted values, on the two pages with the most machinery behind
# their values; every button pressed; never Streamlit's generic error, never a value of the link refused.


def accepted(name: str) -> st.SearchStrategy[str]:
    """Values the link check accepts for `name`, edges first (as a person or a fuzzer would write them)."""
    p = ui.PARAMS[name]
    if p.kind == "int":
        lo, hi = int(p.lo), int(p.hi)
        number = st.one_of(st.sampled_from((lo, hi, min(lo + 1, hi), max(hi - 1, lo))), st.integers(lo, hi))
        raw = number.flatmap(lambda v: st.sampled_from((str(v), f"+{v}", f" {v} ", f"0{v}")))
    elif p.kind == "float":
        edges = [p.lo, p.hi, *(x for x in (5e-324, 2.2e-308, 1e-38, 1e-9, 0.05) if p.lo < x < p.hi)]
        number = st.one_of(st.sampled_from(edges), st.floats(p.lo, p.hi, allow_nan=False, allow_subnormal=p.lo <= 0))
        raw = number.flatmap(lambda v: st.sampled_from((repr(v), f"{v:e}", f"{v:g}")))
    elif p.kind == "choice":
        raw = st.sampled_from(p.choices)
    elif p.kind == "bool":
        raw = st.sampled_from(("true", "false", "1", "0", "TRUE", "False"))
    else:  # text: short, so the chat model's run stays quick (the page reads the first 64 tokens anyway)
        raw = st.one_of(st.sampled_from(("a", " ", "😀" * 5, "<b>x</b>", "the the the the")), st.text(max_size=30))
    return raw.filter(lambda v: ui.state._linkable(name, v))


def accepted_link(names: list[str]) -> st.SearchStrategy[dict[str, str]]:
    return st.lists(st.sampled_from(names), unique=True, max_size=len(names)).flatmap(
        lambda chosen: st.fixed_dictionaries({n: accepted(n) for n in chosen})
    )


def generic_errors(at: AppTest) -> list[str]:
    return [e.value for e in at.exception]


def press_every_button(at: AppTest, link: dict) -> list[str]:
    """Each enabled button once, in the page's order (a click reruns the page, which may change the buttons)."""
    pressed = []
    for i in range(len(at.button)):
        if i >= len(at.button) or at.button[i].disabled:
            continue
        pressed.append(at.button[i].label)
        at.button[i].click().run()
        assert not generic_errors(at), (link, pressed, generic_errors(at))
    return pressed


def open_with(page: str, link: dict) -> AppTest:
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=300)  # the chat model's first run reads it
    for name, v in link.items():
        at.query_params[name] = v
    at.run()
    at.switch_page(f"pages/{page}.py").run()
    assert not generic_errors(at), (link, generic_errors(at))
    refused = [w.value for w in at.warning if "reset to defaults" in w.value]
    assert not refused, (link, refused)  # every value was one the link check accepts
    return at


CHAT = [n for n in ui.PARAMS if n.startswith(ui.views.chat_settings.PREFIX)] + ["token", "present"]
TRAIN = [n for n in ui.PARAMS if n.startswith(ui.views.watch_it_learn_settings.PREFIX)] + ["present"]


# Tokens generated: the one value kept small (each token is a step of the real model, seconds on a loaded machine);
# generating up to the page's limit is tests/app/test_chat_model.py's.
SMALL_GENERATE = st.sampled_from(("0", "1", "2"))


@pytest.mark.timeout(1200)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(accepted_link(CHAT), SMALL_GENERATE)
def test_every_accepted_link_of_the_chat_page_runs_with_every_button(link: dict, generate: str) -> None:
    link["chat_generate"] = generate
    at = open_with("chat_model", link)
    press_every_button(at, link)


@pytest.mark.timeout(900)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(accepted_link(TRAIN))
def test_every_accepted_link_of_watch_it_learn_runs_with_every_button(link: dict) -> None:
    from server import training
    from ui.views import watch_it_learn

    service = training.Service(processes=False)  # trains in this process: no worker processes to start per example
    stop = threading.Event()
    real_advance = training.tiny.advance

    def advance(*args, **kwargs):  # the example's run trains until the example ends, then stops at its next chunk
        if stop.is_set():
            raise RuntimeError("the fuzz example is over")
        return real_advance(*args, **kwargs)

    with unittest.mock.patch.object(watch_it_learn, "service", lambda: service):
        with unittest.mock.patch.object(training.tiny, "advance", advance):
            try:
                at = open_with("watch_it_learn", link)
                pressed = press_every_button(at, link)
                at.run()  # a tick of the live view, the run's first snapshots drawn
                assert not generic_errors(at), (link, pressed, generic_errors(at))
            finally:
                stop.set()
                for job in service.kept():
                    job.wait(10**6, 120)  # its driver has ended: nothing trains behind the next example
                service.shutdown()
