"""Every cache the app keeps is shared by all sessions of a server, so each must be bounded."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SOURCES = sorted(
    [
        *(ROOT / "ui").rglob("*.py"),
        *(ROOT / "server").rglob("*.py"),
        ROOT / "dashboard.py",
        *(ROOT / "attention").rglob("*.py"),
        *(ROOT / "pages").glob("*.py"),
    ]
)


def decorators(path: Path) -> list[tuple[str, ast.Call | None, int]]:
    """(the decorator's dotted name, its call if it is called, line) for every decorated function."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for dec in node.decorator_list:
                call = dec if isinstance(dec, ast.Call) else None
                found.append((ast.unparse(call.func if call else dec), call, dec.lineno))
    return found


def keywords(call: ast.Call | None) -> dict[str, ast.expr]:
    return {k.arg: k.value for k in call.keywords} if call else {}


CACHES = [
    (path, name, call, line)
    for path in SOURCES
    for name, call, line in decorators(path)
    if name.split(".")[-1] in ("cache_resource", "cache_data", "lru_cache", "cache")
]


def test_the_app_has_caches_to_check() -> None:
    names = {name.split(".")[-1] for _, name, _, _ in CACHES}
    assert {"cache_resource", "lru_cache"} <= names


@pytest.mark.parametrize(("path", "name", "call", "line"), CACHES, ids=[f"{p.name}:{n}" for p, _, _, n in CACHES])
def test_every_cache_is_bounded(path: Path, name: str, call: ast.Call | None, line: int) -> None:
    where = f"{path.relative_to(ROOT)}:{line}"
    kw = keywords(call)
    if name.endswith(("cache_resource", "cache_data")):
        assert "max_entries" in kw and "ttl" in kw, f"{where}: st.{name.split('.')[-1]} needs max_entries and ttl"
    else:
        assert name.endswith("lru_cache"), f"{where}: functools.cache never forgets; use lru_cache(maxsize=...)"
        size = kw.get("maxsize") or (call.args[0] if call and call.args else None)
        assert isinstance(size, ast.Constant) and isinstance(size.value, int), f"{where}: lru_cache needs a maxsize"


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="glibc's heaps: Linux only")
def test_the_server_hands_freed_heap_pages_back_to_the_system() -> None:
    import ctypes
    import threading

    import torch

    import server

    server.start()  # the process's background work, the trimming thread among it (importing ui starts nothing)

    trimmer = [t for t in threading.enumerate() if t.name == "malloc-trim"]
    assert len(trimmer) == 1 and trimmer[0].daemon and trimmer[0].is_alive()

    def anonymous_mb() -> float:
        with open("/proc/self/smaps_rollup") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Anonymous:")) / 1024

    # many blocks under the 1 MiB mapping threshold, freed: the heap keeps their pages until trimmed
    blocks = [torch.ones(60_000) for _ in range(1500)]  # 1500 x 240 KB = 360 MB
    held = anonymous_mb()
    del blocks
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # what the thread does every few seconds
    assert anonymous_mb() < held - 200
