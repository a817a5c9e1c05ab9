"""What the server process can learn of its own memory: its cgroup's limit (v1 or v2), its anonymous resident
memory (what the kernel kills for), the ceiling under which runs are admitted, and handing free heap pages back.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

MB = 1_000_000


def in_mb(n: int) -> str:
    """Bytes as a page says them: "45 MB" (MB of 10^6 bytes)."""
    return f"{n / MB:.0f} MB"


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def trim_heaps() -> None:
    """glibc hands every whole free page of its heaps back to the system (malloc_trim(0): a few ms at most); nothing
    where the C library is not glibc."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _cgroup_limit_files(proc: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> list[str]:
    """The memory-limit files of this process's own cgroup: v1's memory.limit_in_bytes under the memory controller,
    v2's memory.max (from /proc/self/cgroup), then the mount's top (a container's own cgroup)."""
    files = []
    try:
        lines = open(proc).read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            files.append(f"{root}/memory{path.rstrip('/')}/memory.limit_in_bytes")
        elif controllers == "":
            files.append(f"{root}{path.rstrip('/')}/memory.max")
    return [*files, f"{root}/memory/memory.limit_in_bytes", f"{root}/memory.max"]


def memory_limit(paths: list[str] | None = None) -> int | None:
    """The memory limit of this process's cgroup in bytes (the first of `paths` that sets one); None where there is
    none ("max", v1's huge default, or no such file)."""
    for path in _cgroup_limit_files() if paths is None else paths:
        try:
            text = open(path).read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            return int(text)
    return None


def anonymous_bytes(status: str = "/proc/self/status") -> int:
    """The process's anonymous resident memory (RssAnon): what the kernel cannot drop and read again, and what it
    kills a process in a memory cgroup for. 0 where /proc cannot tell (then only the byte budget counts)."""
    try:
        with open(status) as lines:
            for line in lines:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# Under a limit L, a run of n bytes is admitted while anonymous memory + the bytes of the runs still computing + n
# stays under L - RESERVE. The runs computing are counted for all they may still allocate (their estimates; what
# they have allocated already is counted twice, on the safe side); a finished run's Result is in the anonymous
# memory itself. The reserve is for the pages of torch's and the other libraries' code (file-backed: counted by the
# cgroup, dropped and read again under pressure, but a working set must stay), what a run allocates beyond its
# estimate, and what a page draws. One reserve, applied always: a second one whenever any bytes of the budget were
# held kept the process above its ceiling under a crowd, and small runs waited behind it (the figures:
# benchmarks/results/2026-11-27-design-figures.md, "Admission").
RESERVE_FRACTION = 0.06  # of the limit; $ATTENTION_LAB_RESERVE_MB sets it in MB


def ceiling_for(limit: int | None, reserve_mb: str | None = None, fraction: float = RESERVE_FRACTION) -> int | None:
    """The anonymous memory under which runs are admitted, for a cgroup limit (None: no limit, no ceiling)."""
    if limit is None:
        return None
    reserve = float(reserve_mb) * MB if reserve_mb else fraction * limit
    return int(limit - reserve)
