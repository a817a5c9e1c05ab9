"""Time `compute` against a bare torch reference doing the same work, at T = 6, 64 and 512 tokens.

    python -m benchmarks.bench_compute [--runs 300]

The setting of issue 3: d_model 512, 8 heads, split layout, output projection (with its bias), nn.Linear init,
random inputs, no mask, no dropout. Two references, in the same process:
- "prebuilt": inputs and weights made once; each call does only the math: the three projections,
  softmax(Q K^T / sqrt(d_k)) V per head, the output projection;
- "draws": the same math, but each call also draws its inputs and its four weight matrices with torch.rand
  from a seeded generator, as `compute` must (it returns every weight, drawn from the config's seed).
Each figure is the median over many calls, the three interleaved; torch keeps its default thread count.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch

from attention import Config, compute
from attention.basics.weights import generator, projections

D_MODEL, HEADS = 512, 8
SIZES = (6, 64, 512)


def config(t: int) -> Config:
    words = " ".join(f"t{i}" for i in range(t))
    return Config(
        sentence=words,
        embedding_init="rand",
        d_model=D_MODEL,
        heads=HEADS,
        head_layout="split",
        init="linear",
        out_proj=True,
    )


@torch.no_grad()
def reference(
    x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor, wo: torch.Tensor, bo: torch.Tensor
):
    """Bare multi-head attention, weights used as x @ W: (T, d_model) -> (T, d_model)."""
    t, d = x.shape
    q = (x @ wq).view(t, HEADS, d // HEADS).transpose(0, 1)  # (h, T, d_k)
    k = (x @ wk).view(t, HEADS, d // HEADS).transpose(0, 1)  # (h, T, d_k)
    v = (x @ wv).view(t, HEADS, d // HEADS).transpose(0, 1)  # (h, T, d_v)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // HEADS), dim=-1)  # (h, T, T)
    context = (weights @ v).transpose(0, 1).reshape(t, d)  # (T, h*d_v)
    return context @ wo + bo  # (T, d_model)


def draw(t: int, g: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Inputs and weights for one call, from g: x (T, d), four (d, d) matrices, the output bias (d,)."""
    x = torch.rand(t, D_MODEL, generator=g)
    ws = [torch.rand(D_MODEL, D_MODEL, generator=g) for _ in range(4)]
    return (x, *ws, torch.rand(D_MODEL, generator=g))


def medians(calls: dict[str, Callable[[], object]], runs: int, warmup: int = 5) -> dict[str, float]:
    """Median milliseconds of each call, run interleaved so that drift in the machine hits them alike."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(warmup):
        for f in calls.values():
            f()
    for _ in range(runs):
        for name, f in calls.items():
            start = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) * 1e3 for name, ts in times.items()}


def measure(t: int, runs: int) -> dict[str, float]:
    c = config(t)
    g = torch.Generator().manual_seed(0)
    prebuilt = draw(t, g)
    return medians(
        {
            "compute": lambda: compute(c),
            "weights": lambda: projections(c, generator(c.seed)),  # the draw of W_q, W_k, W_v, W_out alone
            "prebuilt": lambda: reference(*prebuilt),
            "draws": lambda: reference(*draw(t, g)),
        },
        runs,
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=300, help="calls per figure at T=6 (fewer at larger T)")
    args = p.parse_args(argv)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}"
    )
    print(f"d_model {D_MODEL}, {HEADS} heads, split layout, out_proj, linear init; median ms per call\n")
    print(
        "| T | compute | of which drawing W | reference, prebuilt weights | ratio | reference, draws weights | ratio |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    results = {}
    for t in SIZES:
        runs = {6: args.runs, 64: args.runs // 2}.get(t, max(30, args.runs // 6))
        m = results[t] = measure(t, runs)
        print(
            f"| {t} | {m['compute']:.2f} | {m['weights']:.2f} | {m['prebuilt']:.2f} | "
            f"{m['compute'] / m['prebuilt']:.2f}x | {m['draws']:.2f} | {m['compute'] / m['draws']:.2f}x |"
        )
    big, small = results[SIZES[-1]], results[SIZES[0]]
    ratio, ms = big["compute"] / big["prebuilt"], small["compute"]
    print(f"\nT=512: compute / prebuilt reference = {ratio:.2f}x (goal: at most 1.5x): {_verdict(ratio <= 1.5)}")
    print(f"T=6: compute takes {ms:.2f} ms (goal: under 5 ms): {_verdict(ms < 5)}")


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


if __name__ == "__main__":
    main()
