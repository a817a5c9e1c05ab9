"""Many sessions at once against one `streamlit run` server, each moving its own sliders: every session is
always shown exactly `compute()` of its own config. A bounded run of benchmarks/load_test.py (which reports
the latency and memory figures in the README); here only correctness is asserted, never a timing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness import live_server

ROOT = Path(__file__).resolve().parents[2]


def load_test_module():
    from benchmarks import load_test  # at its first use: it imports the dashboard's ui

    return load_test


def run(client: str, sessions: int, duration: float, tmp_path: Path, chromium: str | None = None) -> dict:
    args = argparse.Namespace(
        sessions=sessions, duration=duration, seed=7, think=0.0, chromium=chromium, log=str(tmp_path / "server.log")
    )
    return load_test_module().measure(args, client)


def test_twelve_websocket_sessions_each_see_only_their_own_numbers(tmp_path: Path) -> None:
    result = run("ws", sessions=12, duration=15, tmp_path=tmp_path)
    assert result["failures"] == []
    assert result["changes"] >= 12  # every session moved at least once ...
    assert result["changes_shown_correctly"] == result["changes"]  # ... and saw exactly its own numbers each time
    assert set(result["rss_mib"]) >= {"1 sessions loaded", "10 sessions loaded", "12 sessions loaded"}


def test_four_browser_sessions_each_see_only_their_own_numbers(tmp_path: Path) -> None:
    result = run("browser", sessions=4, duration=15, tmp_path=tmp_path, chromium=live_server.require_chromium())
    assert result["failures"] == []
    assert result["changes"] >= 4
    assert result["changes_shown_correctly"] == result["changes"]
