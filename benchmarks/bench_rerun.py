"""Median rerun time of the self-attention page after a slider change, measured with AppTest.

    python -m benchmarks.bench_rerun [--runs 15]

Reports the median (and p90) of AppTest reruns after moving the seed slider, at the
default sentence (6 tokens) and at 512 tokens. A benchmark, not a test: timings vary.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]


def measure(sentence: str | None, runs: int) -> list[float]:
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=120)
    if sentence is not None:
        at.query_params["sentence"] = sentence
    at.run()
    assert not at.exception, at.exception
    times = []
    for k in range(runs + 2):
        at.number_input(key="w:seed").set_value(100 + k % 50)
        t = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t)
        assert not at.exception, at.exception
    return times[2:]  # the first reruns warm the chart-spec cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    long = " ".join(f"w{i}" for i in range(512))
    print("| sentence | median rerun (ms) | p90 (ms) |")
    print("|---|---|---|")
    for name, sentence in (("default (6 tokens)", None), ("512 tokens", long)):
        t = sorted(measure(sentence, args.runs))
        p90 = t[min(len(t) - 1, int(0.9 * len(t)))]
        print(f"| {name} | {1000 * statistics.median(t):.1f} | {1000 * p90:.1f} |")


if __name__ == "__main__":
    main()
