"""A page drawing a large Result counts under the server's memory ceiling until its script run ends, on a real
server (server/budget.py, `drawing`): six heavy pages drawn at once took the process 100 MB past its ceiling and the
kernel killed it (issue 50), because what a page allocates while it draws was in no ticket. In a real server every
page runs inside dashboard.py's navigation, which says when the page is drawn; AppTest runs a page's file alone,
so this is tested here, through the websocket, with the server's own log of every drawing counted and let go."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from harness import live_server

WORDS = " ".join(f"w{i}" for i in range(1, 161))


@pytest.fixture
def debug_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ATTENTION_LAB_LOG_LEVEL", "DEBUG")  # every admission and drawing logged
    port = live_server.free_port()
    log = tmp_path / "server.log"
    proc = live_server.start(port, log)
    yield port, log
    live_server.stop(proc)


def test_every_drawing_counted_is_let_go_when_its_page_has_run(debug_server) -> None:
    from benchmarks import load_test  # at its first use: it imports the dashboard's ui

    port, log = debug_server
    query = f"sentence={WORDS.replace(' ', '+')}&heads=4&d_model=64&d_k=64&d_v=64&seed=3"
    for page in ("self_attention", "masks"):
        client = load_test.WsClient(port, query=query, page=page)
        try:
            _, shown = client.rerun()
            if not shown["text"] and not shown["charts"]:  # the frame's own rerun first
                client.rerun()
        finally:
            client.ws.close()
    deadline = time.monotonic() + 10
    while True:
        text = log.read_text()
        counted = [float(m) for m in re.findall(r"drawing: ([\d.]+) MB counted", text)]
        let_go = [float(m) for m in re.findall(r"drawn: ([\d.]+) MB no longer counted", text)]
        if (counted and len(let_go) == len(counted)) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert counted, live_server.log_tail(log)  # the pages drew large Results: their drawing was counted
    assert sorted(let_go) == sorted(counted), live_server.log_tail(log)  # and every one let go, at once
