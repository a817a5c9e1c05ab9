"""The room while one client floods it: one address holds idle websockets through the proxy, a class visits.

    python -m benchmarks.room_flood [--sockets 2000] [--learners 50] [--processes 2]
                                    [--per-address N] [--rate-per-address N] [--browser]

Starts the room (`bash deploy/run.sh N`: replicas behind HAProxy) on free loopback ports. One client, from
127.0.0.2, opens --sockets websockets to Streamlit through the proxy (the upgrade a browser's tab makes, with the
`streamlit` subprotocol) and holds them open and idle, answering the server's pings as a browser does, so they
stay open for as long as it likes (HAProxy's tunnel timeout is an hour). While they are held, --learners
learners visit from another address, 127.0.0.1, all from the same one as a class behind a school's NAT: each
opens the page, connects its websocket and checks that it is shown exactly its own numbers (load_test's
client), a few at a time, and keeps its tab open until every learner has visited.

Reports how many of the flood's sockets the proxy let through (and how many HAProxy counts for that address),
how many learners were refused (an HTTP error such as 503, a closed or refused connection, no answer in 30 s) or
shown wrong numbers, and how long the visits took. --per-address / --rate-per-address set LAB_CONN_PER_ADDRESS /
LAB_CONN_RATE_PER_ADDRESS (deploy/haproxy.cfg); a large --per-address shows the room without the bound.
--browser also opens the page once in headless Chromium from 127.0.0.1 and reports the most connections that
browser held at once while the page loaded, and how many it still held 15 s later (what the per-address bound
must leave room for, a learner at a time).

A benchmark, not a test (tests/system/test_proxy.py asserts the outcome): loopback only, bounded in sockets,
time and waits; timings depend on the machine.
"""

from __future__ import annotations

import argparse
import base64
import os
import resource
import selectors
import socket
import statistics
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from harness import live_server

ROOT = Path(__file__).resolve().parents[1]

FLOOD_ADDRESS = "127.0.0.2"  # the whole 127.0.0.0/8 is loopback on Linux: another client address, same machine
CLASS_ADDRESS = live_server.LOOPBACK
CONNECT_TIMEOUT_S = 30.0


def load_test():
    """benchmarks/load_test.py, imported at its first use (its websocket client)."""
    from benchmarks import load_test

    return load_test


def raise_file_limit(wanted: int) -> None:
    """Room for `wanted` more open sockets in this process (up to the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, wanted), hard))


@dataclass
class Flood:
    """One client's idle websockets through the proxy: those held, and what became of the others."""

    held: list[socket.socket] = field(default_factory=list)
    refused: int = 0  # closed or reset before any answer: HAProxy's `tcp-request connection reject`
    answered: dict[str, int] = field(default_factory=dict)  # another HTTP status than 101: count
    pings: int = 0
    closed: int = 0  # held, then closed by the other side
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    @property
    def open(self) -> int:
        return len(self.held) - self.closed

    def close(self) -> None:
        self.stop.set()
        if self.thread:
            self.thread.join(timeout=10)
        for s in self.held:
            s.close()


def upgrade(proxy: str, source: str, cookie: str = "") -> tuple[str, socket.socket | None]:
    """One websocket upgrade to Streamlit's stream through the proxy, from `source`: ("101", the socket), or
    (another status, None), or ("refused", None) when the connection was closed or reset before an answer."""
    host, port = urllib.parse.urlsplit(proxy).netloc.split(":")
    key = base64.b64encode(os.urandom(16)).decode()
    request = (f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: streamlit\r\n"
               + (f"Cookie: SRV={cookie}\r\n" if cookie else "") + "\r\n")  # fmt: skip
    try:
        s = socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S, source_address=(source, 0))
    except OSError:
        return "refused", None
    try:
        s.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
    except OSError:
        head = b""
    if not head:
        s.close()
        return "refused", None
    status = head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/") else "?"
    if status != "101":
        s.close()
        return status, None
    return status, s


def open_flood(proxy: str, sockets: int, source: str = FLOOD_ADDRESS, cookie: str = "", threads: int = 16) -> Flood:
    """`sockets` websockets from `source`, opened `threads` at a time, kept open and answering pings."""
    raise_file_limit(sockets + 1024)
    flood = Flood()
    # Pings are answered from the first socket on: one left silent is closed by the server within a minute, which
    # would free its place while the rest are still being opened.
    flood.thread = threading.Thread(target=answer_pings, args=(flood,), daemon=True)
    flood.thread.start()

    def one(_: int) -> None:
        status, s = upgrade(proxy, source, cookie)
        with flood.lock:
            if s is not None:
                flood.held.append(s)
            elif status == "refused":
                flood.refused += 1
            else:
                flood.answered[status] = flood.answered.get(status, 0) + 1

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(sockets)))
    return flood


def answer_pings(flood: Flood) -> None:
    """What an open tab does for its websocket: answer each ping from the server with a pong (a client's frames
    are masked), so the server never closes it for silence. Anything else the server sends is read and dropped."""
    selector = selectors.DefaultSelector()
    buffers: dict[socket.socket, bytes] = {}
    while not flood.stop.is_set():
        with flood.lock:
            new = flood.held[len(buffers) :]
        for s in new:  # held since the last round
            s.setblocking(False)
            selector.register(s, selectors.EVENT_READ)
            buffers[s] = b""
        if not buffers:
            time.sleep(0.05)
            continue
        for key, _ in selector.select(timeout=0.2):
            s = key.fileobj
            try:
                data = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                selector.unregister(s)
                flood.closed += 1
                continue
            buffers[s] += data
            while (frame := next_frame(buffers[s])) is not None:
                opcode, payload, used = frame
                buffers[s] = buffers[s][used:]
                if opcode == 0x9:  # ping
                    flood.pings += 1
                    mask = os.urandom(4)
                    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
                    s.setblocking(True)
                    s.sendall(bytes([0x8A, 0x80 | len(payload)]) + mask + masked)
                    s.setblocking(False)
    selector.close()


def next_frame(buffer: bytes) -> tuple[int, bytes, int] | None:
    """(opcode, payload, bytes used) of the first whole unmasked frame in `buffer` (a server's), else None."""
    if len(buffer) < 2:
        return None
    opcode, length, at = buffer[0] & 0x0F, buffer[1] & 0x7F, 2
    if length == 126:
        if len(buffer) < 4:
            return None
        length, at = int.from_bytes(buffer[2:4], "big"), 4
    elif length == 127:
        if len(buffer) < 10:
            return None
        length, at = int.from_bytes(buffer[2:10], "big"), 10
    if len(buffer) < at + length:
        return None
    return opcode, buffer[at : at + length], at + length


@dataclass
class Visits:
    served: int = 0
    refused: list[str] = field(default_factory=list)  # why, a learner each
    wrong: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    clients: list = field(default_factory=list)


def visit_class(proxy: str, learners: int, seed: int = 38, at_once: int = 5) -> Visits:
    """`learners` learners open the page through the proxy from one address, `at_once` at a time; each is served
    (its own numbers shown), refused, or shown wrong numbers. Their websockets stay open: call `leave`."""
    lt = load_test()
    import websocket

    visits = Visits()
    lock = threading.Lock()

    def one(session) -> None:
        start = time.perf_counter()
        try:
            client = lt.WsClient(base=proxy, session=session)
            _, shown = client.rerun()
        except (OSError, websocket.WebSocketException) as exc:  # urllib's HTTPError is an OSError
            with lock:
                visits.refused.append(f"{type(exc).__name__}: {str(exc)[:80]}")
            return
        with lock:
            visits.clients.append(client)
            visits.seconds.append(time.perf_counter() - start)
            if client.check(shown):
                visits.served += 1
            else:
                visits.wrong.append(session.failures[-1][:200])

    with ThreadPoolExecutor(at_once) as pool:
        list(pool.map(one, lt.make_sessions(learners, seed=seed)))
    return visits


def leave(visits: Visits) -> None:
    for client in visits.clients:
        client.ws.close()


def address_table(recipe: live_server.Recipe) -> dict[str, dict[str, int]]:
    """HAProxy's per-address counters (its stick table, `show table attention_lab`): {address: {conn_cur: ...}}."""
    table = {}
    for line in live_server.proxy_command(recipe, "show table attention_lab").splitlines():
        fields = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
        if "key" in fields:
            address = fields.pop("key").removeprefix("::ffff:")
            table[address] = {name.split("(")[0]: int(v) for name, v in fields.items() if v.isdigit()}
    return table


def browser_connections(recipe: live_server.Recipe) -> tuple[int, int]:
    """(the most connections one Chromium held to the proxy at once while its page loaded, how many 15 s later)."""
    from playwright.sync_api import sync_playwright

    lt = load_test()
    session = lt.make_sessions(1, seed=5)[0]
    peak, stop = 0, threading.Event()

    def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, address_table(recipe).get(CLASS_ADDRESS, {}).get("conn_cur", 0))
            time.sleep(0.02)

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=live_server.require_chromium(), args=live_server.CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1024, "height": 768})
            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            page.goto(session.url(recipe.proxy))
            shown = lambda: lt.mismatch(page.evaluate(lt.SNAPSHOT_JS), lt.expected(session)) is None  # noqa: E731
            live_server.wait_for("the page's numbers", shown, 120)
            stop.set()
            watcher.join()
            time.sleep(15)
            later = address_table(recipe).get(CLASS_ADDRESS, {}).get("conn_cur", 0)
        finally:
            browser.close()
    return peak, later


def run(recipe: live_server.Recipe, sockets: int, learners: int) -> dict:
    """The flood, then the class's visits while it is held; the figures."""
    t0 = time.perf_counter()
    flood = open_flood(recipe.proxy, sockets)
    flood_s = time.perf_counter() - t0
    try:
        counted = address_table(recipe).get(FLOOD_ADDRESS, {}).get("conn_cur", 0)
        visits = visit_class(recipe.proxy, learners)
        try:
            still_open = flood.open
        finally:
            leave(visits)
    finally:
        flood.close()
    return {"sockets": sockets, "held": len(flood.held), "refused_sockets": flood.refused,
            "answered": flood.answered, "counted": counted, "still_open": still_open, "pings": flood.pings,
            "flood_s": flood_s, "learners": learners, "served": visits.served, "refused": visits.refused,
            "wrong": visits.wrong, "visit_s": visits.seconds}  # fmt: skip


def report(r: dict) -> None:
    print(f"flood from {FLOOD_ADDRESS}: {r['sockets']} websockets asked in {r['flood_s']:.1f} s; "
          f"{r['held']} held (HAProxy counts {r['counted']} open), {r['refused_sockets']} refused, "
          f"other answers {r['answered'] or 'none'}; {r['still_open']} still open while the class visited, "
          f"{r['pings']} pings answered")  # fmt: skip
    seconds = sorted(r["visit_s"])
    timing = f"visit p50 {statistics.median(seconds):.2f} s, max {seconds[-1]:.2f} s" if seconds else "no visit"
    print(f"class from {CLASS_ADDRESS}: {r['learners']} learners, {r['served']} served with their own numbers, "
          f"{len(r['refused'])} refused, {len(r['wrong'])} shown wrong numbers; {timing}")  # fmt: skip
    for why in sorted(set(r["refused"]))[:5]:
        print(f"  refused: {why} (x{r['refused'].count(why)})")
    for why in r["wrong"][:3]:
        print(f"  wrong: {why}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sockets", type=int, default=2000)
    parser.add_argument("--learners", type=int, default=50)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--per-address", type=int, help="LAB_CONN_PER_ADDRESS (deploy/haproxy.cfg's default: 500)")
    parser.add_argument("--rate-per-address", type=int, help="LAB_CONN_RATE_PER_ADDRESS (default 1000 in 10 s)")
    parser.add_argument("--browser", action="store_true", help="also count one Chromium's connections")
    parser.add_argument("--log", default="", help="folder for the room's logs (default: a new temporary one)")
    args = parser.parse_args()
    env = {}
    if args.per_address:
        env["LAB_CONN_PER_ADDRESS"] = str(args.per_address)
    if args.rate_per_address:
        env["LAB_CONN_RATE_PER_ADDRESS"] = str(args.rate_per_address)
    import tempfile

    log = Path(args.log or tempfile.mkdtemp(prefix="room-flood-"))
    recipe = live_server.start_recipe(args.processes, log, env)
    try:
        print(f"room: {args.processes} replicas, limits {env or 'as deploy/haproxy.cfg'}; load average "
              f"{os.getloadavg()[0]:.1f}; logs {log}")  # fmt: skip
        if args.browser:
            peak, later = browser_connections(recipe)
            print(f"one Chromium: at most {peak} connections at once while its page loaded, {later} after 15 s")
        report(run(recipe, args.sockets, args.learners))
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
    finally:
        live_server.stop_recipe(recipe)


if __name__ == "__main__":
    main()
