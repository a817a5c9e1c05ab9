"""A supervisord event listener that restarts a hung replica (deploy/supervisord.conf runs it).

supervisord starts again a replica that exits, but not one that is alive and answers nothing (stopped, deadlocked,
swapping): HAProxy takes such a replica out of rotation within seconds and closes its connections, and this
listener, every 5 s (supervisord's TICK_5 event), asks each running replica's /_stcore/health itself, all at
once. A replica that has answered "ok" since it started and then gives no "ok" for LAB_WATCHDOG_S seconds
(default 30) is killed (SIGKILL to its process group), and supervisord starts it again. A replica that has never
answered is given 4 x LAB_WATCHDOG_S (at least 60 s) from when the watchdog first saw it before it is killed too:
one that hangs before its first answer reached the watchdog (which asks every 5 s) must not be taken for one
still starting, for ever. The standard library only: it speaks supervisord's event listener protocol
on stdin and stdout, and its XML-RPC interface on the control socket for the replicas' pids.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import sys
import threading
import time
import urllib.request
import xmlrpc.client

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class UnixTransport(xmlrpc.client.Transport):
    """XML-RPC over supervisord's unix control socket."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def make_connection(self, host):
        path = self.path

        class Connection(http.client.HTTPConnection):
            def connect(self) -> None:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.settimeout(10)
                self.sock.connect(path)

        return Connection("localhost")


def healthy(port: int) -> bool:
    try:
        with OPENER.open(f"http://127.0.0.1:{port}/_stcore/health", timeout=3) as response:
            return response.read() == b"ok"
    except OSError:
        return False


def running_replicas(supervisor) -> dict[str, int]:
    """{"s1": pid, ...} for the replicas supervisord has running."""
    infos = supervisor.supervisor.getAllProcessInfo()
    return {i["name"]: i["pid"] for i in infos if i["group"] == "replica" and i["statename"] == "RUNNING"}


def check(supervisor, first_port: int, limit_s: float, last_ok: dict[int, float],
          first_seen: dict[int, float] | None = None) -> None:  # fmt: skip
    """One round: every running replica's health at once; kills one that answered before and has given no "ok"
    for limit_s seconds since, or one that has never answered in 4 x limit_s (at least 60 s) since first seen."""
    replicas = running_replicas(supervisor)
    answers: dict[str, bool] = {}
    threads = [threading.Thread(target=lambda n=name: answers.__setitem__(n, healthy(first_port + int(n[1:]) - 1)))
               for name in replicas]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    now = time.monotonic()
    first_seen = {} if first_seen is None else first_seen
    for name, pid in replicas.items():
        seen = first_seen.setdefault(pid, now)
        if answers.get(name):
            last_ok[pid] = now
        elif (pid in last_ok and now - last_ok[pid] >= limit_s) or (
            pid not in last_ok and now - seen >= max(4 * limit_s, 60.0)
        ):
            since = last_ok.get(pid, seen)
            print(f"watchdog: {name} (pid {pid}) has not answered /_stcore/health for {now - since:.0f} s: "
                  "killed, supervisord starts it again", file=sys.stderr, flush=True)  # fmt: skip
            try:
                os.killpg(pid, signal.SIGKILL)  # supervisord made it a process group leader
            except ProcessLookupError:
                pass
            last_ok.pop(pid, None)
    for pid in set(last_ok) - set(replicas.values()):  # gone
        del last_ok[pid]
    for pid in set(first_seen) - set(replicas.values()):
        del first_seen[pid]


def main() -> None:
    first_port = int(os.environ["LAB_FIRST_PORT"])
    limit_s = float(os.environ.get("LAB_WATCHDOG_S") or 30)
    supervisor = xmlrpc.client.ServerProxy(
        "http://localhost", transport=UnixTransport(f"{os.environ['LAB_LOG_DIR']}/supervisor.sock")
    )
    last_ok: dict[int, float] = {}  # pid: when it last answered "ok"
    first_seen: dict[int, float] = {}  # pid: when this watchdog first saw it running
    while True:
        sys.stdout.write("READY\n")
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            return  # supervisord has gone
        header = dict(field.split(":", 1) for field in line.split())
        sys.stdin.read(int(header.get("len", 0)))
        if header.get("eventname", "").startswith("TICK"):
            try:
                check(supervisor, first_port, limit_s, last_ok, first_seen)
            except (OSError, xmlrpc.client.Error) as exc:  # supervisord busy or shutting down: next tick
                print(f"watchdog: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        sys.stdout.write("RESULT 2\nOK")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
