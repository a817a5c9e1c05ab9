"""The command line's size checks: each case that used to cost gigabytes or hours, timed in a fresh interpreter
held to 1 GB (harness/bounded.py's `bounded`, which tests/unit/attention/io/cli/test_bounds.py runs too: a cgroup v1
memory limit where there is one).

    python -m benchmarks.cli_bounds

Prints, for each case, the exit status, the seconds (wall and CPU: on a busy machine the wall time stretches,
the CPU time much less; the interpreter importing torch is the first row), the peak memory (the cgroup's, page
cache included, else the largest resident set) and the first line of stderr. The inputs are made in a temporary folder.
"""

from __future__ import annotations

import resource
import tempfile
from pathlib import Path

from harness.bounded import HEAVY, bounded

ROOT = Path(__file__).resolve().parents[1]


def cpu() -> float:
    """CPU seconds of the children waited for so far: the difference around one run is that run's."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        (tmp / "long.txt").write_text("The animal didn't cross the street because it was too tired. " * (1 << 18))
        row = "[" + ", ".join(["0.123456789012345678"] * 700) + "]"
        (tmp / "w.json").write_text("[" + ", ".join([row] * 4096) + "]")  # 4096 x 700: 65 MB of JSON
        (tmp / "batch.json").write_text("[" + ",".join(["[[1]]"] * 8_400_000) + "]")
        (tmp / "batch2.json").write_text("[" + ",".join(["[[1, 2]]"] * 200_000) + "]")
        cases = {
            "--model minilm, 16 MiB --sentence-file": ["--model", "minilm", "--sentence-file", str(tmp / "long.txt")],
            "--block-size 1, 512 tokens, 16 heads, d 256": [*HEAVY, "--block-size", "1"],
            "--format script, 512 tokens, 16 heads, d 256": [*HEAVY, "--format", "script"],
            "--w-query of 65 MB (4096 x 700)": ["--d-model", "4096", "--d-k", "700", "--w-query", str(tmp / "w.json")],
            "--embeddings batch of 8.4 M sequences": ["--embeddings", str(tmp / "batch.json")],
            "--embeddings batch of 200,000 sequences": ["--embeddings", str(tmp / "batch2.json")],
        }
        print("| case | exit | seconds | CPU seconds | peak MB | stderr |\n|---|---|---|---|---|---|")
        for name, argv in [("--list-presets (the interpreter and torch alone)", ["--list-presets"]), *cases.items()]:
            before = cpu()
            status, out, err, seconds, peak = bounded(*argv, timeout=300)
            line = err.strip().splitlines()[0] if err.strip() else f"({len(out):,} bytes written)"
            used = cpu() - before
            print(f"| {name} | {status} | {seconds:.1f} | {used:.1f} | {peak:.0f} | {line[:100]} |", flush=True)


if __name__ == "__main__":
    main()
