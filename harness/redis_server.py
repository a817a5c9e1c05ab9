"""A real redis-server for the poll's tests: Debian's, on a free loopback port, nothing written to disk.

Without one the test skips with the reason, or fails when CI is set (.ci/run installs Debian's redis-server), so
a CI run can never pass by skipping the poll's Redis tests.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

LOOPBACK = "127.0.0.1"


def find_redis() -> str | None:
    for candidate in (os.environ.get("REDIS_SERVER"), "/usr/bin/redis-server", shutil.which("redis-server")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def require_redis() -> str:
    import pytest

    path = find_redis()
    if path is None:
        message = "no redis-server ($REDIS_SERVER, /usr/bin/redis-server, PATH): apt-get install redis-server"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


@dataclass
class RedisServer:
    binary: str
    port: int
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    def start(self) -> None:
        """Start it (again, on the same port) and wait until it answers."""
        args = [self.binary, "--port", str(self.port), "--bind", LOOPBACK, "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--loglevel", "warning"]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((LOOPBACK, self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(f"redis-server exited: {self.process.stderr.read().decode()[-500:]}") from None
                time.sleep(0.05)
        raise RuntimeError("redis-server did not answer within 10 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer(require_redis(), free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()
