"""Fuzzing the two ways text enters from outside: the dashboard's link (URL parameters) and the command line.

Bounded (a few dozen examples each, no deadline) so it runs in CI in well under a minute.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

import ui
from attention.io.cli.main import main as cli

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
        status = cli(argv)
    out, err = out_buf.getvalue(), err_buf.getvalue()
    assert status in (0, 2), (argv, status)
    if status == 2:
        assert err.count("\n") == 1 and err.startswith("attention: error:") and not out, (argv, err)
    else:
        assert out and not err, argv
