"""`python -m attention ARGV` in a fresh interpreter held to 1 GB (a cgroup v1 memory limit where this machine has
one, else its peak resident memory is read), and HEAVY, a toy run past the command line's size checks: shared by
tests/unit/attention/io/cli/test_bounds.py and benchmarks/cli_bounds.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CGROUP = Path("/sys/fs/cgroup/memory")
LIMIT = 1 << 30  # 1 GiB
WORDS = " ".join(f"w{i}" for i in range(512))
HEAVY = ["--sentence", WORDS, "--heads", "16", "--d-model", "256", "--d-k", "256", "--d-v", "256"]


def _group() -> Path | None:
    """A fresh cgroup v1 memory group of LIMIT bytes, or None where there is none to make."""
    path = CGROUP / f"attention_cli_bounds_{os.getpid()}_{time.monotonic_ns()}"
    try:
        path.mkdir()
        (path / "memory.limit_in_bytes").write_text(str(LIMIT))
        try:
            (path / "memory.memsw.limit_in_bytes").write_text(str(LIMIT))  # no escape into swap
        except OSError:
            pass
    except OSError:
        return None
    return path


def bounded(*argv: str, timeout: float = 120) -> tuple[int, str, str, float, float]:
    """`python -m attention ARGV` in a fresh interpreter under 1 GB: (status, stdout, stderr, seconds, peak MB).

    The peak is the cgroup's (resident memory and page cache charged to it), else the child's largest resident set.
    """
    group = _group()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "2"}

    def join() -> None:  # in the child, before exec: from its first byte
        if group is not None:
            (group / "cgroup.procs").write_text(str(os.getpid()))

    t0 = time.monotonic()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "attention", *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, preexec_fn=join)  # fmt: skip
        out, err = proc.communicate(timeout=timeout)
        seconds = time.monotonic() - t0
        if group is not None:
            peak = int((group / "memory.max_usage_in_bytes").read_text()) / 1e6
        else:
            import resource

            peak = (
                resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e3
            )  # the largest child so far: an upper bound
    finally:
        if group is not None:
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"), seconds, peak
