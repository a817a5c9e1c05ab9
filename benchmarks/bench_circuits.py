"""What a head writes, timed against the forward it reads: issue 49's speed bars, on one torch thread.

    python -m benchmarks.bench_circuits [--runs 5] [--tokens 64]

Measures, interleaved run by run in this process (the reference measured in the same run): SmolLM2's forward over a
64-token prompt keeping every intermediate (`smollm2.run_ids`, what the page's run is); the circuits' trace of the
same prompt and the direct logit attribution of all 270 heads, 30 MLPs and the embedding from it
(`circuits.chat.trace` + `attribution`); then, once each (fixed weights: once per process), the composition of all
270 heads computed from the weights (`compute_composition`) and read from the shipped file (what `head_composition`
does), and every head's copying score (`copying_scores`, E^T E included). Medians of --runs;
the machine is shared, so compare the ratios taken in one run. Reads nothing from the network.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import torch

from attention.models import smollm2
from attention.models.circuits import chat

ROOT = Path(__file__).resolve().parents[1]

TEXT = (
    "The lab shows where every head looks, on real weights. It does not yet show what a head writes, or why it "
    "looks where it looks. That is where the field went, and where a learner should go next, step by step."
)


def timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = smollm2.load()
    ids = smollm2.prompt(model, TEXT * 4, args.tokens).ids
    forward, attribution = [], []
    for _ in range(args.runs):
        forward.append(timed(lambda: smollm2.run_ids(model, ids)))
        attribution.append(timed(lambda: chat.attribution(model, chat.trace(model, ids), 42)))
    composition = timed(lambda: chat.compute_composition(model))
    shipped = timed(lambda: chat._shipped(model, chat.SHIPPED))
    copying = timed(lambda: chat.copying_scores(model))
    f, a = statistics.median(forward), statistics.median(attribution)
    print(f"# bench_circuits: {platform.machine()}, torch {torch.__version__}, 1 thread, {len(ids)} tokens, "
          f"{args.runs} runs")  # fmt: skip
    ms = lambda xs: [round(x * 1000) for x in xs]  # noqa: E731
    print(f"forward (keep)                     median {f * 1000:8.0f} ms   runs {ms(forward)}")
    print(f"trace + attribution of 301 parts   median {a * 1000:8.0f} ms   runs {ms(attribution)}")
    print(f"ratio attribution / forward        {a / f:.2f}  (issue's bar: 1.5)")
    print(f"composition of 270 heads computed  {composition:.1f} s  (issue's bar: 10 s once per server)")
    print(f"composition of 270 heads shipped   {shipped * 1000:.0f} ms (read back, as head_composition does)")
    print(f"copying scores of 270 heads (once) {copying:.1f} s")


if __name__ == "__main__":
    main()
