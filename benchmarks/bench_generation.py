"""The chat model's generation step and 64-token forward against llama.cpp on the same GGUF, one thread each.

    python -m benchmarks.bench_generation [--runs 7] [--llama-bench PATH]

Measures, in this process on one torch thread (as the server runs): loading the model; packing its layers for
the step (once a process); one generation step reading a 63-token cache, packed (4-bit matrices through torch's
int4 kernel, `smollm2/packed.py`) and dequantized (every layer expanded to float32, the step before issue 45),
interleaved; the forward over 64 tokens keeping every intermediate; where the step's time goes (the four packed
matrix products of every layer, the unembedding, sampling, the rest: attention, norms, RoPE, Python); and the
process's memory before and after packing. Builds nothing at run time and reads nothing from the network.

The reference: llama.cpp's `llama-bench -m <the GGUF> -t 1 -p 64 -n 32` (prefill of 64 tokens, 32 generated
tokens), run in the same process's session when a binary is found (--llama-bench, $LLAMA_CPP_BIN, or
`llama-bench` on PATH); otherwise the issue's published figures (926 ms for 64 tokens, 19.6 ms a token, measured
on the build machine's kind, one thread) are printed as the reference, marked as not measured in this run.
Medians of --runs; the machine is shared, so compare only ratios taken in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import torch

import server
from attention.models import smollm2
from attention.models.smollm2 import packed
from server.memory import trim_heaps

ROOT = Path(__file__).resolve().parents[1]

TEXT = (
    "In 1887, the Transylvanian cartographers' guild re-surveyed every mountain pass twice, because its first "
    "measurements, taken during an unusually foggy autumn, disagreed with the Habsburg military maps by nearly three "
    "kilometres, and the emperor's engineers refused to build a single road until the two surveys agreed."
)
PUBLISHED = {"prefill_64_ms": 926.0, "token_ms": 19.6}  # issue 45: llama.cpp, one thread, the same GGUF


def medians(calls: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Median milliseconds of each call, interleaved so that the machine's drift hits them alike (one warm-up)."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for f in calls.values():
        f()
    for _ in range(runs):
        for name, f in calls.items():
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) * 1e3 for name, ts in times.items()}


def memory_mib() -> dict[str, float]:
    """This process's resident and anonymous memory (Linux), MiB."""
    status = Path("/proc/self/status")
    if not status.exists():
        return {}
    fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "RssAnon", "RssFile") if k in fields}


def llama_bench(binary: str | None, model: Path) -> dict[str, float] | None:
    """llama.cpp's prefill of 64 and per-token generation time, one thread, or None without a binary."""
    binary = binary or os.environ.get("LLAMA_CPP_BIN") or shutil.which("llama-bench")
    if not binary:
        return None
    cmd = [binary, "-m", str(model), "-t", "1", "-p", "64", "-n", "32", "-r", "5", "-o", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600).stdout
    rows = json.loads(out)
    prefill = next(r for r in rows if r.get("n_prompt") == 64 and r.get("n_gen") == 0)
    gen = next(r for r in rows if r.get("n_gen") == 32 and r.get("n_prompt") == 0)
    return {
        "prefill_64_ms": prefill["avg_ns"] / 1e6,
        "token_ms": gen["avg_ns"] / 1e6 / 32,
        "build": f"{rows[0].get('build_commit', '?')} ({rows[0].get('cpu_info', '?')})",
    }


def breakdown(model: smollm2.Model, prefix: smollm2.Run, token: int, runs: int) -> dict[str, float]:
    """Where a packed step's time goes: each kind of packed product over the 30 layers, the unembedding (one row of
    the dequantized tied table), drawing the next token, and the rest (attention, norms, RoPE, Python)."""
    four_bit = packed.packed(model)
    d, d_ff = model.d_model, model.layers[0].w_gate.shape[0]
    x, h = torch.randn(1, d), torch.randn(1, d_ff)
    layers = four_bit.layers
    logits = prefix.logits[-1]
    calls = {
        "step": lambda: smollm2.step(model, prefix, token, keep=True),
        "qkv": lambda: [packed.matvec(x, layer.qkv) for layer in layers],
        "out": lambda: [packed.matvec(x, layer.out) for layer in layers],
        "gate_up": lambda: [packed.matvec(x, layer.gate_up) for layer in layers],
        "down": lambda: [packed.matvec(h, layer.down) for layer in layers],
        "unembedding": lambda: smollm2.unembed(model, x),
        "sampling": lambda: (
            smollm2.choose(logits, 1.0, 10, seed=0),
            smollm2.next_token_probabilities(logits, 1.0, 10).topk(10),
        ),
    }
    got = medians(calls, runs)
    got["rest"] = got["step"] - sum(got[k] for k in ("qkv", "out", "gate_up", "down", "unembedding"))
    return got


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=7, help="timed runs of each figure (medians)")
    p.add_argument("--llama-bench", default=None, help="llama.cpp's llama-bench binary (else $LLAMA_CPP_BIN, PATH)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    server._return_freed_memory()  # the server's allocator setting: blocks of 1 MiB or more handed back when freed
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}), 1 thread, {os.cpu_count()} CPUs, "
          f"{platform.machine()}, Python {platform.python_version()}, load average {load[0]:.1f}")  # fmt: skip

    t0 = time.perf_counter()
    model = smollm2.load()
    load_s = time.perf_counter() - t0
    ids = smollm2.encode(model, TEXT, 64)[0]
    prefix = smollm2.run_ids(model, ids[:63], keep=False)
    before = memory_mib()
    t0 = time.perf_counter()
    four_bit = packed.packed(model)
    pack_s = time.perf_counter() - t0
    if four_bit is None:
        raise SystemExit("this machine's int4 kernel does not give float32's numbers: a step dequantizes, as before")
    after = memory_mib()
    trim_heaps()  # what the server's trimming thread does every 5 s
    trimmed = memory_mib()

    got = medians(
        {
            "step packed": lambda: smollm2.step(model, prefix, ids[63]),
            "step dequantized": lambda: smollm2.step(model, prefix, ids[63], int4=False),
            "forward 64": lambda: smollm2.run_ids(model, ids),
        },
        args.runs,
    )
    parts = breakdown(model, prefix, ids[63], args.runs)
    reference = llama_bench(args.llama_bench, model.path)
    measured = reference is not None
    reference = reference or PUBLISHED

    print(f"\nmodel {smollm2.NAME}, {model.path.name}; load {load_s:.2f} s; packing the layers once {pack_s:.2f} s, "
          f"{four_bit.nbytes / 2**20:.0f} MiB held")  # fmt: skip
    print(f"memory before / after packing / after malloc_trim: {json.dumps(before)} / {json.dumps(after)} / "
          f"{json.dumps(trimmed)} (MiB)")  # fmt: skip
    source = "llama-bench, this run" if measured else "the issue's published figures, NOT measured in this run"
    print(f"reference: llama.cpp ({source}){': ' + reference['build'] if measured else ''}\n")
    print("| what (one thread) | lab, median ms | llama.cpp ms | ratio |")
    print("| --- | ---: | ---: | ---: |")
    token, prefill = reference["token_ms"], reference["prefill_64_ms"]
    for name, ref in (("step packed", token), ("step dequantized", token), ("forward 64", prefill)):
        print(f"| {name} | {got[name]:.1f} | {ref:.1f} | {got[name] / ref:.2f}x |")
    print(f"\nstep packed / step dequantized: {got['step packed'] / got['step dequantized']:.3f} (same run)\n")
    print("| where a packed step's time goes (30 layers) | median ms | share of the step |")
    print("| --- | ---: | ---: |")
    for name in ("qkv", "out", "gate_up", "down", "unembedding", "rest", "sampling"):
        print(f"| {name} | {parts[name]:.1f} | {parts[name] / parts['step']:.0%} |")
    print(f"| the step itself (keep=True), in this interleaving | {parts['step']:.1f} | |")


if __name__ == "__main__":
    main()
