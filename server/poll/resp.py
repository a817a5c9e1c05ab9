"""A small Redis client: RESP2 over a socket, the handful of commands the poll uses, no dependency.

The `redis` package is not in the lock, and the poll needs only a few commands (EVALSHA/EVAL for its scripts,
HGETALL, HGET, SET, PING, AUTH, SELECT), so this speaks the protocol itself: a command is an array of bulk strings;
a reply is a simple string (+), an error (-), an integer (:), a bulk string ($, -1 for nil) or an array (*).
Connections are pooled and each is used by one thread at a time (Streamlit runs every session in its own thread).
No TLS and no Cluster redirections: the poll's Redis is a Service beside the replicas (deploy/kubernetes/redis.yaml).
"""

from __future__ import annotations

import socket
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class RedisError(Exception):
    """An error reply from Redis (a script's error, a wrong password): the server answered."""


class Unreachable(ConnectionError):
    """Redis did not answer (down, restarting, the network): the caller says the poll is paused."""


def _encode(*args: str | bytes | int | float) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class _Connection:
    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")

    def call(self, *args: str | bytes | int | float) -> Any:
        self.sock.sendall(_encode(*args))
        return self.read()

    def read(self) -> Any:
        line = self.file.readline()
        if not line.endswith(b"\r\n"):
            raise Unreachable("connection closed")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            if size < 0:
                return None
            data = self.file.read(size + 2)
            if len(data) != size + 2:
                raise Unreachable("connection closed")
            return data[:-2].decode()
        if kind == b"*":
            size = int(rest)
            return None if size < 0 else [self.read() for _ in range(size)]
        raise Unreachable(f"not a RESP reply: {line[:20]!r}")

    def close(self) -> None:
        try:
            self.file.close()
            self.sock.close()
        except OSError:
            pass


class Client:
    """Commands to one Redis, from any thread: `client.call("HGETALL", key)`.

    url: redis://[[user]:password@]host[:port][/db]. A command that finds Redis gone raises Unreachable and drops
    its connection; the next command connects afresh, so the poll resumes by itself when Redis is back."""

    def __init__(self, url: str, timeout_s: float = 1.0, pool: int = 16) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "redis":
            raise ValueError(f"a Redis address starts with redis:// (rediss://, TLS, is not supported): {url!r}")
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 6379
        self.db = int(parts.path.strip("/") or 0)
        self.user = urllib.parse.unquote(parts.username) if parts.username else None
        self.password = urllib.parse.unquote(parts.password) if parts.password else None
        self.timeout_s = timeout_s
        self._idle: list[_Connection] = []
        self._pool = pool
        self._lock = threading.Lock()
        self._scripts: dict[str, str] = {}  # source -> sha1, once loaded

    def _connect(self) -> _Connection:
        try:
            conn = _Connection(self.host, self.port, self.timeout_s)
        except OSError as e:
            raise Unreachable(f"Redis at {self.host}:{self.port}: {e}") from e
        try:
            if self.password is not None:
                conn.call("AUTH", *([self.user] if self.user else []), self.password)
            if self.db:
                conn.call("SELECT", self.db)
        except (OSError, RedisError):
            conn.close()
            raise
        return conn

    @contextmanager
    def _connection(self) -> Iterator[_Connection]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        conn = conn or self._connect()
        try:
            yield conn
        except RedisError:  # the server answered: the connection is fine
            self._give_back(conn)
            raise
        except OSError as e:  # timeouts and resets: the connection's state is unknown, drop it
            conn.close()
            raise Unreachable(f"Redis at {self.host}:{self.port}: {e}") from e
        except BaseException:
            conn.close()
            raise
        else:
            self._give_back(conn)

    def _give_back(self, conn: _Connection) -> None:
        with self._lock:
            if len(self._idle) < self._pool:
                self._idle.append(conn)
                return
        conn.close()

    def call(self, *args: str | bytes | int | float) -> Any:
        with self._connection() as conn:
            return conn.call(*args)

    def script(self, source: str, keys: list[str], args: list[str | int | float]) -> Any:
        """Run a Lua script atomically (EVALSHA, loading it on first use or after a Redis restart)."""
        sha = self._scripts.get(source)
        if sha is not None:
            try:
                return self.call("EVALSHA", sha, len(keys), *keys, *args)
            except RedisError as e:
                if not str(e).startswith("NOSCRIPT"):
                    raise
        self._scripts[source] = self.call("SCRIPT", "LOAD", source)
        return self.call("EVALSHA", self._scripts[source], len(keys), *keys, *args)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
