"""What a positional encoding costs `compute`: the same config with each encoding against none, at 512 tokens.

    python -m benchmarks.bench_position [--runs 40]

The setting of bench_compute.py (d_model 512, 8 heads, split layout, output projection, nn.Linear init), random
inputs, causal mask. Each figure is the median over many calls, the encodings interleaved in one process.
The issue's bound: RoPE and ALiBi keep `compute` within 1.2x of the same config without them.
"""

from __future__ import annotations

import argparse

import torch

from attention import Config, compute
from attention.basics.config import POSITIONS
from benchmarks.bench_compute import medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--tokens", type=int, default=512)
    args = parser.parse_args()
    x = torch.rand(args.tokens, 512, generator=torch.Generator().manual_seed(0)).tolist()
    base = Config.from_embeddings(x, heads=8, head_layout="split", init="linear", out_proj=True, mask="causal")
    configs = {kind: base.replace(position=kind) for kind in POSITIONS}
    times = medians({kind: (lambda c=config: compute(c)) for kind, config in configs.items()}, args.runs, warmup=1)
    none = times["none"]
    print(f"| position ({args.tokens} tokens) | median compute (ms) | against none |")
    print("|---|---|---|")
    for kind in POSITIONS:
        print(f"| {kind} | {times[kind]:.1f} | {times[kind] / none:.2f}x |")


if __name__ == "__main__":
    main()
