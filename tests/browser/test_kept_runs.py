"""Watch it learn in Chromium with several visitors, each a browser context of its own (issue 38): three press Play at
once and keep their finished runs, a fourth is told beside a disabled Play that its run cannot be kept, and its Play
comes back on by itself once a visitor closes their tab. Its own server keeps three of these small runs
($ATTENTION_LAB_KEPT_MB), as the real one keeps three of the largest; benchmarks/kept_runs.py plays it bigger."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from attention.models import tiny
from harness import live_server
from server.training import GRACE_S, SWEEP_S
from ui.views.watch_it_learn import ROOM_CHECK_S

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
STEPS = {"train_steps": 50, "train_every": 25}
RUN_MB = tiny.Settings(steps=50, every=25).run_bytes / 2**20


@pytest.fixture(scope="module")
def kept_url() -> Iterator[str]:
    """A server of its own that keeps three of these runs' worth, training in its own thread (as the hosted copy)."""
    port = live_server.free_port()
    # these small runs stand in for the largest: none of them may use the small runs' reserve (issue 50)
    env = {"ATTENTION_LAB_KEPT_MB": f"{3.5 * RUN_MB:.3f}", "ATTENTION_LAB_TRAIN_IN": "thread",
           "ATTENTION_LAB_SMALL_RUN_MB": "0"}  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        try:
            proc = live_server.start(port, ARTIFACTS / "kept-runs-server.log")
        except RuntimeError as exc:
            pytest.fail(str(exc), pytrace=False)
    try:
        yield f"http://{live_server.LOOPBACK}:{port}/watch_it_learn?" + "&".join(f"{k}={v}" for k, v in STEPS.items())
    finally:
        live_server.stop(proc)


def test_three_visitors_keep_their_runs_and_a_fourth_plays_once_one_leaves(browser, kept_url: str, shoot) -> None:  # noqa: ANN001
    contexts, pages = [], {}
    for name, seed in (("A", 1), ("B", 2), ("C", 3), ("D", 4)):
        context = browser.new_context(viewport={"width": 1024, "height": 768})
        context.set_default_timeout(180_000)
        contexts.append(context)
        page = context.new_page()
        page.goto(f"{kept_url}&train_seed={seed}")
        page.get_by_role("button", name="Play").wait_for()
        pages[name] = page
    try:
        for name in "ABC":
            pages[name].get_by_role("button", name="Play").click()
        for name in "ABC":
            pages[name].get_by_text(re.compile("^Trained: 50 steps")).wait_for()
        d = pages["D"]
        d.reload()  # D looks now that the three are trained (a new session for D; A, B and C stay)
        d.get_by_text(re.compile("^This run would keep")).wait_for()
        assert d.get_by_role("button", name="Play").is_disabled()
        shoot(d, "kept_runs_fourth_refused")
        for name in "ABC":  # each visitor's run is still theirs: Reset shows it from its start
            pages[name].get_by_role("button", name="Reset").click()
            pages[name].get_by_text(re.compile(r"^Step 0:")).wait_for()
            assert pages[name].get_by_text(re.compile("^Trained: 50 steps")).count() == 1
        contexts[0].close()  # A leaves
        start = time.monotonic()
        play = d.get_by_role("button", name="Play")
        while play.is_disabled():  # D touches nothing: the page looks again by itself
            assert time.monotonic() - start < GRACE_S + 2 * SWEEP_S + ROOM_CHECK_S + 60, "Play stayed off"
            time.sleep(0.5)
        assert d.get_by_text(re.compile("^This run would keep")).count() == 0
        play.click()
        d.get_by_text(re.compile("^Trained: 50 steps")).wait_for()
        for name in "BC":
            pages[name].get_by_role("button", name="Reset").click()
            pages[name].get_by_text(re.compile(r"^Step 0:")).wait_for()
            assert pages[name].get_by_text(re.compile("^Trained: 50 steps")).count() == 1
    finally:
        for context in contexts[1:]:
            context.close()


def test_the_server_log_has_no_traceback() -> None:
    log = Path(ARTIFACTS / "kept-runs-server.log")
    assert log.exists() and "Traceback" not in log.read_text()
