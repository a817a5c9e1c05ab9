"""Time the "How LLMs run attention" package layer: one KV-cache decode step, and tiled vs ordinary attention.

    python -m benchmarks.bench_llm [--runs 200]

- decode step: `decode_step` appending token 512 to a cache of 511 and attending with its query
  (8 query heads, d_k = d_v = 64, float32), multi-head (8 K/V heads) and grouped-query (2 K/V heads);
  goal: under 5 ms.
- tiled: `tiled_attention` (64 x 64 tiles, every tile's state kept) against `ordinary_attention` (the whole
  T x T matrix) at T = 512, 8 heads, d = 64, causal mask; goal: tiled at most 3x slower.
Each figure is the median over many calls, interleaved; torch keeps its default thread count.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
from collections.abc import Callable

import torch

from attention import masks
from attention.llm.decoding import decode, decode_step
from attention.llm.flash import ordinary_attention, tiled_attention
from benchmarks.bench_compute import medians

HEADS, D_HEAD, TOKENS, BLOCK = 8, 64, 512, 64


def decode_calls(kv_heads: int, g: torch.Generator) -> Callable[[], object]:
    """One decode step at TOKENS cached tokens: the previous step holds TOKENS - 1."""
    q = torch.randn(HEADS, TOKENS, D_HEAD, generator=g)
    k = torch.randn(kv_heads, TOKENS, D_HEAD, generator=g)
    v = torch.randn(kv_heads, TOKENS, D_HEAD, generator=g)
    scale = math.sqrt(D_HEAD)
    previous = decode(q[:, :-1], k[:, :-1], v[:, :-1], scale=scale)[-1]  # step TOKENS - 2: TOKENS - 1 cached
    return lambda: decode_step(q[:, -1], k[:, -1], v[:, -1], previous, scale=scale)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=200, help="calls per decode figure (a fifth of them for tiled)")
    args = p.parse_args(argv)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}"
    )
    g = torch.Generator().manual_seed(0)

    step = medians({"MHA": decode_calls(HEADS, g), "GQA": decode_calls(2, g)}, args.runs)
    print(f"\none decode step at {TOKENS} cached tokens, {HEADS} heads, d_head {D_HEAD}; median ms per call\n")
    print("| K/V heads | decode_step |")
    print("|---:|---:|")
    print(f"| {HEADS} (MHA) | {step['MHA']:.3f} |")
    print(f"| 2 (GQA) | {step['GQA']:.3f} |")

    q, k, v = (torch.randn(HEADS, TOKENS, D_HEAD, generator=g) for _ in range(3))
    mask = masks.causal(TOKENS, TOKENS)
    scale = math.sqrt(D_HEAD)
    tiles = medians(
        {
            "tiled": lambda: tiled_attention(q, k, v, scale=scale, mask=mask, block_size=BLOCK),
            "ordinary": lambda: ordinary_attention(q, k, v, scale=scale, mask=mask),
        },
        max(10, args.runs // 5),
        warmup=2,
    )
    ratio = tiles["tiled"] / tiles["ordinary"]
    print(f"\nT={TOKENS}, {HEADS} heads, d {D_HEAD}, causal mask, {BLOCK}x{BLOCK} tiles; median ms per call\n")
    print("| tiled_attention | ordinary_attention | ratio |")
    print("|---:|---:|---:|")
    print(f"| {tiles['tiled']:.2f} | {tiles['ordinary']:.2f} | {ratio:.2f}x |")

    worst = max(step.values())
    print(f"\ndecode step at {TOKENS} tokens: {worst:.3f} ms (goal: under 5 ms): {_verdict(worst < 5)}")
    print(f"tiled / ordinary at T={TOKENS}: {ratio:.2f}x (goal: at most 3x): {_verdict(ratio <= 3)}")


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


if __name__ == "__main__":
    main()
