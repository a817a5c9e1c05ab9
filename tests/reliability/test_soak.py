"""The server's memory under fresh sessions on the heaviest link, each asking for exports, then leaving: a short
run of benchmarks/soak.py (which reports the README's figures). Asserted: the peak stays under Community
Cloud's 690 MB for the whole app, and a second round after the first has expired adds less than 50 MB.
No timing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import weakref
from pathlib import Path

import live_server

import ui
from attention import Config

ROOT = Path(__file__).resolve().parents[2]


def soak_module():
    return live_server.benchmark("soak")


def test_six_and_six_heavy_sessions_stay_inside_community_clouds_memory(tmp_path: Path) -> None:
    soak = soak_module()
    args = argparse.Namespace(
        sessions=6, rounds=2, ttl=20, page="", query="", matrices=("omega",), log=str(tmp_path / "server.log"),
        limit_mb=soak.LIMIT_MB, growth_mb=soak.GROWTH_MB,
    )  # fmt: skip
    result = soak.soak(args)
    assert result["failures"] == []
    asked = result["exports"]
    assert asked["omega.csv"]["statuses"] == {"ok": 12}  # the largest CSV offered at these sizes, made each time
    assert asked["omega.csv"]["max_bytes"] > 2_000_000
    assert any("result.json" in note and "too big to download here" in note for note in result["notes"])
    assert result["peak_mb"] < soak.LIMIT_MB, result["memory_mb"]
    assert result["second_round_growth_mb"] < soak.GROWTH_MB, result["memory_mb"]


def test_the_cache_lets_go_of_a_large_result_before_computing_the_next() -> None:
    words = " ".join(f"w{i}" for i in range(300))
    first = ui.compute(Config(sentence=words, heads=4, seed=1))
    assert ui.result_bytes(first.config) > ui.results.SMALL_RESULT_BYTES  # a large one
    gone = weakref.ref(first)
    del first
    second = ui.compute(Config(sentence=words, heads=4, seed=2))
    gc.collect()
    assert gone() is None  # only the cache held it, and it let go
    assert ui.compute(Config(sentence=words, heads=4, seed=2)) is second  # the new one is cached
