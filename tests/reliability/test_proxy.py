"""A room of learners: deploy/run.sh (two Streamlit processes behind HAProxy with sticky sessions) spreads new
sessions over both processes, keeps each session's websocket and its downloads on one process, opens a share
link with the same numbers on either process, shows every number right under a short load (websocket
clients, and Chromium), and stops everything on Ctrl-C. Loopback only; needs haproxy and Chromium (skips
without them, fails when CI is set). No timing is asserted.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import urllib.error
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import live_server
import psutil
import pytest

import ui

ROOT = Path(__file__).resolve().parents[2]


def load_test_module():
    return live_server.benchmark("load_test")


load_test = load_test_module()


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[live_server.Recipe]:
    live_server.require_haproxy()
    running = live_server.start_recipe(2, tmp_path_factory.mktemp("deploy"))
    yield running
    live_server.stop_recipe(running)


def connects(recipe: live_server.Recipe) -> dict[str, float]:
    """How many sessions each process has accepted so far, by its own count (s1, s2)."""
    metric = 'session_events_total{type="connect"}'
    return {f"s{i}": load_test.stcore_metric(base, metric) for i, base in enumerate(recipe.replicas, 1)}


def direct(url: str) -> bytes:
    with load_test.OPENER.open(url, timeout=30) as response:
        return response.read()


def test_new_sessions_are_spread_over_both_processes(recipe: live_server.Recipe) -> None:
    before = connects(recipe)
    clients = [load_test.WsClient(base=recipe.proxy, session=s) for s in load_test.make_sessions(4, seed=11)]
    try:
        for client in clients:
            _, shown = client.rerun()
            assert client.check(shown), client.session.failures
        after = connects(recipe)
    finally:
        for client in clients:
            client.ws.close()
    placed = collections.Counter(client.replica for client in clients)
    assert set(placed) == {"s1", "s2"}
    # Each process accepted exactly the sessions the proxy's cookie says it sent there.
    assert {name: after[name] - before[name] for name in after} == {name: placed[name] for name in after}


def test_a_sessions_downloads_stay_on_its_own_process(recipe: live_server.Recipe) -> None:
    session = load_test.make_sessions(1, seed=4242)[0]
    client = load_test.WsClient(base=recipe.proxy, session=session)
    try:
        _, shown = client.rerun()
        assert client.check(shown), session.failures
        mine = int(client.replica.removeprefix("s")) - 1
        own, other = recipe.replicas[mine], recipe.replicas[1 - mine]
        button = next(b for b in shown["downloads"] if b["deferred"] and not b["disabled"])
        url = client.request_file(button["deferred"])  # the file now lives in the memory of the session's process
        bodies = [client.fetch(url) for _ in range(6)]  # through the proxy, with the session's cookie
        assert bodies[0] and all(body == bodies[0] for body in bodies)
        assert direct(own + url) == bodies[0]
        with pytest.raises(urllib.error.HTTPError) as missing:  # why stickiness: the other process lacks it
            direct(other + url)
        assert missing.value.code == 404
        name, value = load_test.next_value(session)  # the websocket is still the same session
        session.values[name] = value
        _, shown = client.rerun({name: value})
        assert client.check(shown), session.failures
    finally:
        client.ws.close()


def test_a_share_link_opens_the_same_numbers_on_either_process(recipe: live_server.Recipe) -> None:
    session = load_test.make_sessions(1, seed=99)[0]
    first = load_test.WsClient(base=recipe.replicas[0], session=session)
    try:
        first.rerun()
        for _ in range(3):  # a learner moves sliders on process 1; the page keeps the view in its address
            name, value = load_test.next_value(session)
            session.values[name] = value
            _, made = first.rerun({name: value})
        assert first.check(made), session.failures
    finally:
        first.ws.close()
    link = first.query
    in_link = urllib.parse.parse_qs(link)
    for name, value in session.values.items():  # the link holds the view (a default is left out of it)
        assert in_link.get(name, [str(ui.PARAMS[name].default)]) == [str(value)], (name, link)
    before = connects(recipe)
    opened = {
        "process 2": load_test.WsClient(base=recipe.replicas[1], session=session, query=link),
        "proxy to s1": load_test.WsClient(base=recipe.proxy, session=session, query=link, cookies={"SRV": "s1"}),
        "proxy to s2": load_test.WsClient(base=recipe.proxy, session=session, query=link, cookies={"SRV": "s2"}),
    }
    try:
        for where, client in opened.items():
            _, shown = client.rerun()
            assert shown["charts"] == made["charts"], where
            assert shown["latex"] == made["latex"], where
            assert client.check(shown), (where, session.failures)
    finally:
        for client in opened.values():
            client.ws.close()
    # Process 2 took the direct link and the one sent to s2; process 1 the one sent to s1: the cookie decides.
    after = connects(recipe)
    assert {name: after[name] - before[name] for name in after} == {"s1": 1, "s2": 2}


def test_every_number_is_right_under_a_short_load_through_the_proxy(recipe: live_server.Recipe, tmp_path: Path) -> None:
    args = argparse.Namespace(sessions=8, duration=10, seed=5, think=0.3, chromium=None, url=recipe.proxy,
                              log=str(tmp_path / "unused.log"))  # fmt: skip
    result = load_test.measure(args, "ws")
    assert result["failures"] == []
    assert result["changes"] >= 8  # every session moved at least once ...
    assert result["changes_shown_correctly"] == result["changes"]  # ... and saw exactly its own numbers each time
    assert set(result["sessions_per_process"]) == {"s1", "s2"}
    assert sum(result["sessions_per_process"].values()) == 8


@pytest.mark.browser
def test_chromium_shows_every_number_through_the_proxy(recipe: live_server.Recipe, tmp_path: Path) -> None:
    # The real frontend: its page, scripts, the heatmap component's files and its websocket all pass the proxy.
    args = argparse.Namespace(sessions=2, duration=5, seed=6, think=0.5, chromium=live_server.require_chromium(),
                              url=recipe.proxy, log=str(tmp_path / "unused.log"))  # fmt: skip
    result = load_test.measure(args, "browser")
    assert result["failures"] == []
    assert result["changes"] >= 2
    assert result["changes_shown_correctly"] == result["changes"]
    assert result["sessions_per_process"] == {"s1": 1, "s2": 1}


def test_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    live_server.require_haproxy()
    running = live_server.start_recipe(1, tmp_path)
    children = psutil.Process(running.proc.pid).children(recursive=True)
    names = {Path(p.cmdline()[0]).name for p in children}
    assert "haproxy" in names and any("python" in name for name in names)
    os.killpg(running.proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends: the whole foreground group
    try:
        assert running.proc.wait(timeout=30) == 130
    except subprocess.TimeoutExpired:
        live_server.stop_recipe(running)
        raise
    _, alive = psutil.wait_procs(children, timeout=15)
    assert alive == []
    assert all(live_server.health(base) is None for base in (running.proxy, *running.replicas))
