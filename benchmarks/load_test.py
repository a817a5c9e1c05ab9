"""Many sessions against one `streamlit run` server: every session sees only its own numbers; latency; memory.

    python -m benchmarks.load_test [--client both|ws|browser] [--sessions 20] [--duration 60] [--think 0]
                                   [--processes N | --url URL [--server-pid PID ...]] [--json FILE]

Starts `streamlit run dashboard.py` on a free loopback port and opens N sessions on the self-attention page,
each with its own seed, sentence and mask in the URL. For --duration seconds every session moves its own
sliders (seed, d_k, d_v, heads) one step at a time and, after each move, checks that it is shown exactly
`attention.compute()` of its own config: every cell of the softmax-weights and context heatmaps and the
walkthrough's weights, no exception element, no lost connection. Two clients:

  ws       Streamlit's own websocket protocol (what the browser sends and receives), one thread a session:
           light, so it measures the server. Latency: from sending the slider's new value to the end of
           the run's messages (the heatmaps' data included).
  browser  Playwright contexts in one headless Chromium, sliders moved with the keyboard; the numbers are
           read from the heatmaps' SVG marks. Latency: from the key press to the page showing the new
           heatmap (Streamlit's slider debounce and the browser's rendering included). A page that shows
           other numbers for 30 s, an exception element, a connection state other than CONNECTED or a
           "Connection error" dialog is a failure.

Where the sessions go:

  (default)      one `streamlit run` process, started here.
  --processes N  the deploy recipe, started here: `bash deploy/run.sh N` (N Streamlit processes behind HAProxy
                 with sticky sessions) on free loopback ports; the sessions open the proxy's address. Each
                 session loads its page first and sends back the cookies it was given, as a browser does, so
                 its websocket and its downloads stay on one process. Reports how many sessions each process
                 took (the proxy's cookie, and each process's own count of connects) and each one's CPU.
  --url URL      a server already running there (a loopback address): one process or a proxy. Its CPU and
                 memory are measured only for the processes given with --server-pid (each with its children).

--faults (with --processes 2 or more, the websocket client): the room under faults. 10 s after every session
has loaded, one replica is killed (SIGKILL; supervisord starts it again), 40 s later another one is stopped
(SIGSTOP: hung; deploy/watchdog.py kills it after about 30 s and supervisord starts it again; after 60 s at most
it is continued). A session whose websocket closes reconnects as the browser does (the
same link and cookies: the proxy sends it to a live replica, which opens its view from the URL) and repeats the
move it was making; the move's latency includes the reconnect. A move that gets no answer in 30 s is a frozen
session (a failure: a browser would wait for ever). Reports when HAProxy marked each replica down and up and
when supervisord restarted each, the p95 latency of the moves started in the 10 s after each fault
and of all the others, and the reconnects. Use --duration 110 or more, so that the whole schedule runs.

Reports p50/p95 latency, and the server's resident memory (the process and its children) after 1, 10 and
N sessions have loaded and at the end, and the CPU the server, the browser and this client used.
A benchmark, not a test: loopback only, bounded in sessions, time and waits; numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

import ui  # the dashboard's own number formatting and defaults
from attention import Config, compute
from harness import live_server  # the tests' way to start the server and find Chromium

ROOT = Path(__file__).resolve().parents[1]

LOOPBACK = live_server.LOOPBACK
WORDS = ("the", "chef", "prepared", "a", "delicious", "meal", "life", "is", "short", "eat", "dessert", "first",
         "cat", "sat", "on", "mat", "and", "it", "was", "served", "with", "wine", "journey", "starts")  # fmt: skip
MASKS = ("none", "causal", "padding", "window")
SLIDERS = {"d_k": "d_k (", "d_v": "d_v (", "heads": "heads"}  # name: aria-label prefix (the seed is a number box)
MATCH_TIMEOUT_S = 30.0
EXPORT_TIMEOUT_S = 180.0  # how long Streamlit's frontend waits for a deferred download's file
STICKY_COOKIE = "SRV"  # the cookie in which deploy/haproxy.cfg names a session's process
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via an HTTP(S)_PROXY

# What one page shows: the cells of two heatmaps (the numbers each heatmap component drew), the walkthrough's
# equations, and any sign of trouble.
SNAPSHOT_JS = """() => {
  const charts = {};
  for (const root of document.querySelectorAll('.al-heatmap[data-drawn]')) {
    const drawn = root.alHeatmap;  // what the canvas shows: header, values (blocked cells 0), blocked flags
    if (!drawn) continue;
    const cells = [];
    const c = drawn.header.c;
    drawn.values.forEach((v, k) => cells.push([Math.floor(k / c), k % c, v]));
    charts[drawn.header.title] = cells;
  }
  const app = document.querySelector('[data-testid=stApp]');
  return {
    charts,
    latex: [...document.querySelectorAll('.katex-mathml annotation')].map(e => e.textContent),
    exception: document.querySelectorAll('[data-testid=stException]').length,
    connection: app ? app.getAttribute('data-test-connection-state') : null,
    script: app ? app.getAttribute('data-test-script-state') : null,
    dialog: [...document.querySelectorAll('[role=dialog]')].map(e => e.innerText.slice(0, 80)),
    closes: window.__wsCloses || [],
  };
}"""

# Records why a websocket closed (code, reason, seconds since the page loaded), for the failure report.
WS_CLOSES_JS = """(() => {
  const Native = window.WebSocket;
  window.__wsCloses = [];
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      const at = () => `at ${(performance.now() / 1000).toFixed(1)} s`;
      window.__wsCloses.push(`new ${at()}`);
      this.addEventListener('open', () => window.__wsCloses.push(`open ${at()}`));
      this.addEventListener('error', () => window.__wsCloses.push(`error ${at()}`));
      this.addEventListener('close', e => window.__wsCloses.push(`close ${e.code} ${e.reason} clean ${e.wasClean}`
        + ` ${at()}`));
    }
  };
})();"""


@dataclass
class Session:
    index: int
    sentence: str
    mask: str
    values: dict[str, int]  # seed, d_k, d_v, heads
    rng: random.Random
    latencies: list[float] = field(default_factory=list)
    started: list[float] = field(default_factory=list)  # each latency's move: when it began (time.monotonic())
    failures: list[str] = field(default_factory=list)
    changes: int = 0
    console: list[str] = field(default_factory=list)  # the page's last warnings and errors (browser client)
    replica: str = ""  # the process a sticky proxy sent it to (its cookie), "" without one
    reconnects: int = 0  # websockets it had to open again (--faults)
    reconnect_s: list[float] = field(default_factory=list)  # how long each took, retries included
    retried: list[str] = field(default_factory=list)  # why a reconnect was tried again

    def config(self) -> Config:
        p = ui.PARAMS
        return Config(
            sentence=self.sentence, mask=self.mask, d_model=p["d_model"].default, padding=p["padding"].default,
            window=p["window"].default, init=p["init"].default, **self.values,
        )  # fmt: skip

    def url(self, base: str) -> str:
        query = {"sentence": self.sentence, "mask": self.mask, **{k: str(v) for k, v in self.values.items()}}
        return base + "/self_attention?" + urllib.parse.urlencode(query)


def expected(session: Session) -> dict:
    """What the page must show for this session's config: compute() of it, as the page formats it."""
    r = compute(session.config())
    weights = r.dropped_weights[0].masked_fill(~r.mask, 0)
    i = 1 if len(r.tokens) > 1 else 0  # the walkthrough follows token 2 by default, and shows 3 allowed keys
    alphas = [j for j in range(len(r.key_tokens)) if r.mask[i, j]][:3]
    return {
        "Softmax weights": weights,
        "Context vectors": r.context[0],
        "alphas": [
            rf"\alpha_{{{i + 1},{j + 1}}} = {ui.walkthroughs._num(float(r.dropped_weights[0, i, j]))}" for j in alphas
        ],
    }


def mismatch(shown: dict, want: dict) -> str | None:
    """None when the page shows exactly the wanted numbers, else what differs (for the report)."""
    if shown["exception"]:
        return "an exception element"
    if shown["connection"] != "CONNECTED" or shown["dialog"]:
        return f"connection {shown['connection']} {shown['dialog']} websocket closes: {shown.get('closes')}"
    for title in ("Softmax weights", "Context vectors"):
        cells, matrix = shown["charts"].get(title), want[title]
        if not cells or len(cells) != matrix.numel():
            return f"{title}: {0 if not cells else len(cells)} cells, want {matrix.numel()}"
        for i, j, v in cells:
            if i >= matrix.shape[0] or j >= matrix.shape[1] or abs(v - float(matrix[i, j])) > 1e-5 * (1 + abs(v)):
                return f"{title}[{i},{j}] = {v}"
    latex = " ".join(shown["latex"])
    for alpha in want["alphas"]:
        if alpha not in latex:
            return f"walkthrough lacks {alpha}"
    return None


# Cheap to ask often: is the script still running (then the full snapshot can wait)?
RUNNING_JS = """() => {
  const app = document.querySelector('[data-testid=stApp]');
  return !!app && app.getAttribute('data-test-script-state') === 'running'
    && app.getAttribute('data-test-connection-state') === 'CONNECTED';
}"""
POLL_S = 0.1


async def until_shows(page, session: Session, timeout: float = MATCH_TIMEOUT_S) -> float:
    """Seconds until the page shows this session's numbers; records a failure after `timeout`."""
    want = expected(session)
    start = time.perf_counter()
    last = None
    while time.perf_counter() - start < timeout:
        if await page.evaluate(RUNNING_JS):
            await asyncio.sleep(POLL_S)
            continue
        shown = await page.evaluate(SNAPSHOT_JS)
        last = mismatch(shown, want)
        if last is None:
            return time.perf_counter() - start
        lost = any(e.startswith(("close", "error")) for e in shown["closes"])
        if last.startswith("an exception") or shown["dialog"] or lost:
            break  # a page still connecting (its first load) is waited for; a dropped connection is a failure
        await asyncio.sleep(POLL_S)
    console = f"; console: {session.console[-5:]}" if session.console else ""
    session.failures.append(f"session {session.index} {session.values}: {last}{console}")
    return float("nan")


async def move(page, session: Session) -> None:
    """Press an arrow key on one of the session's sliders and wait for the page to show the new numbers."""
    name = session.rng.choice(tuple(SLIDERS))
    slider = page.locator(f"[data-testid=stSlider] input[type=range][aria-label^='{SLIDERS[name]}']")
    p = ui.PARAMS[name]
    value = session.values[name]
    key = "ArrowRight" if value < p.hi and (value <= p.lo or session.rng.random() < 0.5) else "ArrowLeft"
    await slider.focus()
    t0 = time.perf_counter()
    await page.keyboard.press(key)
    session.values[name] = int(await slider.input_value())
    session.changes += 1
    waited = await until_shows(page, session)
    if waited == waited:  # not NaN
        session.latencies.append(time.perf_counter() - t0)


def tree(pids: list[int]) -> list[psutil.Process]:
    """These processes and all their children, each once."""
    found: dict[int, psutil.Process] = {}
    for pid in pids:
        try:
            root = psutil.Process(pid)
            for p in (root, *root.children(recursive=True)):
                found[p.pid] = p
        except psutil.NoSuchProcess:
            pass
    return list(found.values())


def rss_mib(proc: subprocess.Popen | Sequence[int]) -> float:
    """Resident memory of the server process (or these processes) and all their children, in MiB."""
    total = 0
    for p in tree([proc.pid] if isinstance(proc, subprocess.Popen) else list(proc)):
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 2**20


def cpu_seconds(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def make_sessions(n: int, seed: int) -> list[Session]:
    rng = random.Random(seed)
    sessions = []
    for i in range(n):
        words = rng.sample(WORDS, rng.randint(4, 8))
        values = {"seed": rng.randint(0, 9999), "d_k": rng.randint(2, 40), "d_v": rng.randint(2, 40)}
        values["heads"] = rng.randint(1, 4)
        sessions.append(Session(i, " ".join(words), MASKS[i % len(MASKS)], values, random.Random(seed + i)))
    return sessions


def next_value(session: Session) -> tuple[str, int]:
    """One of the session's sliders, and its value one step up or down (inside its range)."""
    name = session.rng.choice(tuple(SLIDERS))
    p, value = ui.PARAMS[name], session.values[name]
    up = value < p.hi and (value <= p.lo or session.rng.random() < 0.5)
    return name, value + 1 if up else value - 1


# --------------------------------------------------------------------------- the websocket client


class WsClient:
    """One session over Streamlit's websocket protocol, as the browser speaks it (protobuf messages).

    query and page open another link than the session's (the soak benchmark's heavy one); `request_file`
    and `fetch` download what a download button offers, as a click in the browser does. base is the
    server's address when it is not loopback:port (a proxy's); cookies are sent from the first request
    on (a proxy's sticky cookie picks the process), and the ones the server sets are kept and sent back.
    """

    def __init__(self, port: int = 0, session: Session | None = None, *, query: str = "", page: str = "",
                 base: str = "", cookies: dict[str, str] | None = None) -> None:  # fmt: skip
        import websocket

        self.session = session
        self.base = base.rstrip("/") or f"http://{LOOPBACK}:{port}"
        self.query = query or urllib.parse.urlsplit(session.url("")).query
        # a page's URL path ("masks"); "" opens Self-attention, the page a Session's numbers are on (the default
        # page, "/", is the course's map)
        page = page or "self_attention"
        self.page = page
        self.cookies = dict(cookies or {})
        # The page first, as a browser opens a link: a sticky proxy answers it with the cookie that keeps
        # this session's websocket and its downloads on one process.
        self.get(f"/{page}?{self.query}")
        self.ws = websocket.create_connection(
            "ws" + self.base.removeprefix("http") + "/_stcore/stream", subprotocols=["streamlit"],
            timeout=MATCH_TIMEOUT_S, cookie=self.cookie_header() or None,
        )  # fmt: skip
        self.sliders: dict[str, str] = {}  # name -> widget id (the seed's: its number box)
        self.numbers: set[str] = set()  # which of them are number boxes (an int value, not a slider's array)
        self.requests = 0
        self.session_id = ""

    def rerun(self, widgets: dict[str, int] | None = None, states: Sequence[Any] = ()) -> tuple[float, dict]:
        """Send one rerun (with new slider values, and any other WidgetStates) and read its messages:
        (seconds, what it showed). A session's first run of a page that is not the default one may draw nothing
        (ui/_frame.py: the frame runs first and asks for the page again): it is run once more, as the browser
        does, and the seconds are both runs'."""
        first = not self.session_id
        seconds, shown = self._rerun(widgets, states)
        if first and not (shown["text"] or shown["charts"] or shown["exception"]):
            again, shown = self._rerun(widgets, states)
            seconds += again
        return seconds, shown

    def _rerun(self, widgets: dict[str, int] | None, states: Sequence[Any]) -> tuple[float, dict]:
        import websocket
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        msg = BackMsg()
        msg.rerun_script.query_string = self.query
        msg.rerun_script.page_name = self.page
        for name, value in (widgets or {}).items():
            state = WidgetState(id=self.sliders[name])
            if name in self.numbers:
                state.int_value = int(value)
            else:
                state.double_array_value.data.append(value)
            msg.rerun_script.widget_states.widgets.append(state)
        msg.rerun_script.widget_states.widgets.extend(states)
        t0 = time.perf_counter()
        self.ws.send_binary(msg.SerializeToString())
        shown = {"charts": {}, "latex": [], "exception": 0, "connection": "CONNECTED", "dialog": [],
                 "downloads": [], "selectboxes": {}, "buttons": {}, "text": []}  # fmt: skip
        while True:
            data = self.ws.recv()
            if not data:  # a close frame
                raise websocket.WebSocketConnectionClosedException("the server closed the websocket")
            fwd = ForwardMsg()
            fwd.ParseFromString(data)
            kind = fwd.WhichOneof("type")
            if kind == "page_info_changed":
                self.query = fwd.page_info_changed.query_string
            elif kind == "new_session":
                self.session_id = fwd.new_session.initialize.session_id  # backend operations name it
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                el = fwd.delta.new_element
                what = el.WhichOneof("type")
                heatmap = what == "bidi_component" and el.bidi_component.component_name == "attention_lab.heatmap"
                if heatmap and el.bidi_component.bytes:  # (no bytes: dashboard.py's early one, drawn empty)
                    header, values, _ = ui.decode_heatmap(el.bidi_component.bytes)
                    c = header["c"]
                    shown["charts"][header["title"]] = [
                        [k // c, k % c, float(v)] for k, v in enumerate(values.reshape(-1).tolist())
                    ]
                elif what == "markdown" and el.markdown.body.startswith("$$"):
                    shown["latex"].append(el.markdown.body)
                elif what == "exception" or (what == "alert" and el.alert.format == 1):  # 1: error
                    shown["exception"] += 1
                elif what == "slider":
                    for name, prefix in SLIDERS.items():
                        if el.slider.label.startswith(prefix.rstrip(" (")):
                            self.sliders[name] = el.slider.id
                elif what == "number_input" and el.number_input.label == "seed":  # a seed is a number box
                    self.sliders["seed"] = el.number_input.id
                    self.numbers.add("seed")
                elif what == "download_button":
                    b = el.download_button
                    shown["downloads"].append({"label": b.label, "deferred": b.deferred_file_id, "url": b.url,
                                               "disabled": b.disabled})  # fmt: skip
                elif what == "selectbox":
                    shown["selectboxes"][el.selectbox.label] = (el.selectbox.id, list(el.selectbox.options))
                elif what == "button":  # label: id (a click is a WidgetState with trigger_value)
                    shown["buttons"][el.button.label] = el.button.id
                if what in ("markdown", "alert"):
                    shown["text"].append(getattr(el, what).body)
                elif what == "code":
                    shown["text"].append(el.code.code_text)
            elif kind == "script_finished":
                if fwd.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                    continue  # the script asked for a rerun (st.rerun): what the person waits for is that one too
                return time.perf_counter() - t0, shown

    def request_file(self, file_id: str) -> str:
        """Ask for a deferred download's file as a click on its button does: the server runs the button's
        callable now and answers with the URL to fetch the file from. RuntimeError when the callable failed."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        self.requests += 1
        msg = BackMsg()
        request_id = f"ws-client-{self.requests}"
        msg.backend_operation_request.request_id = request_id
        msg.backend_operation_request.session_id = self.session_id
        msg.backend_operation_request.deferred_file.file_id = file_id
        self.ws.send_binary(msg.SerializeToString())
        self.ws.settimeout(EXPORT_TIMEOUT_S)  # the browser waits this long for the file (Streamlit's frontend)
        try:
            return self._file_url(request_id)
        finally:
            self.ws.settimeout(MATCH_TIMEOUT_S)

    def _file_url(self, request_id: str) -> str:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        while True:
            fwd = ForwardMsg()
            fwd.ParseFromString(self.ws.recv())
            if fwd.WhichOneof("type") == "backend_operation_response":
                response = fwd.backend_operation_response
                if response.request_id != request_id:
                    continue
                if response.error_msg:
                    raise RuntimeError(response.error_msg)
                return response.deferred_file.url

    def fetch(self, url: str) -> bytes:
        """The body at a media URL (what the browser downloads), over loopback."""
        return self.get(url, timeout=EXPORT_TIMEOUT_S)

    def get(self, path: str, timeout: float = MATCH_TIMEOUT_S) -> bytes:
        """The body at a path of the server, asked with this session's cookies; keeps the cookies it sets.
        urllib.error.HTTPError for an answer other than 2xx."""
        request = urllib.request.Request(self.base + path, headers={"Cookie": self.cookie_header()})
        with OPENER.open(request, timeout=timeout) as response:
            for header in response.headers.get_all("Set-Cookie") or ():
                name, _, value = header.split(";", 1)[0].partition("=")
                self.cookies[name.strip()] = value.strip()
            return response.read()

    def idle(self, seconds: float) -> bool:
        """Wait as an open tab does: reading the socket, so the server's pings are answered (Streamlit closes a
        websocket that has not answered its pings for about a minute). False when the websocket has closed."""
        import websocket

        end = time.monotonic() + seconds
        try:
            while (left := end - time.monotonic()) > 0 or seconds == 0:
                self.ws.settimeout(max(left, 0.001))
                try:
                    if not self.ws.recv():
                        return False  # a close frame
                except websocket.WebSocketTimeoutException:
                    if seconds == 0:
                        break
            return True
        except (OSError, websocket.WebSocketException):
            return False
        finally:
            self.ws.settimeout(MATCH_TIMEOUT_S)

    def reopened(self, timeout: float = 60) -> WsClient:
        """What the browser does when its websocket closes: the same link and cookies again (a sticky proxy sends
        it to a live replica when its own is down), retried while the proxy answers 502/503 or refuses. The new
        session has run once (its view from the URL), unchecked: the caller repeats its move."""
        import websocket

        start = time.monotonic()
        while True:
            try:
                again = WsClient(session=self.session, query=self.query, page=self.page, base=self.base,
                                 cookies=self.cookies)  # fmt: skip
                again.rerun()
                return again
            except (OSError, websocket.WebSocketException) as exc:  # urllib's HTTPError is an OSError
                self.session.retried.append(
                    f"{type(exc).__name__} {str(exc)[:40]} after {time.monotonic() - start:.1f} s"
                )
                if time.monotonic() - start > timeout:
                    raise TimeoutError(f"no reconnect in {timeout:g} s: {exc}") from exc
                time.sleep(0.5)

    def cookie_header(self) -> str:
        return "; ".join(f"{name}={value}" for name, value in self.cookies.items())

    @property
    def replica(self) -> str:
        """The process a sticky proxy sent this session to (its cookie's value), "" without a proxy."""
        return self.cookies.get(STICKY_COOKIE, "")

    def check(self, shown: dict) -> bool:
        problem = mismatch(shown, expected(self.session))
        if problem:
            self.session.failures.append(f"session {self.session.index} {self.session.values}: {problem}")
        return problem is None


def run_ws(args: argparse.Namespace, port: int, server: subprocess.Popen | Sequence[int] | None,
           sessions: list[Session], memory: dict, *, base: str = "",
           on_loaded: Callable[[], None] | None = None):  # fmt: skip
    """Open every session (its memory measured after 1, 10 and all), then move sliders for args.duration
    seconds from one thread a session; on_loaded is called in between. Returns the first loads' seconds."""
    clients, loads = [], []
    for s in sessions:  # one at a time, so the memory after 1, 10 and N sessions is measurable
        client = WsClient(port, s, base=base)
        s.replica = client.replica
        seconds, shown = client.rerun()
        if client.check(shown):
            loads.append(seconds)
        clients.append(client)
        for loaded in clients:  # the sessions already open answer the server's pings meanwhile
            loaded.idle(0)
        if len(clients) in (1, 10, len(sessions)) and server is not None:
            memory[f"{len(clients)} sessions loaded"] = rss_mib(server)
    if on_loaded:
        on_loaded()
    deadline = time.monotonic() + args.duration

    faults = getattr(args, "faults", False)

    def drive(client: WsClient) -> None:
        import websocket

        s = client.session

        def pause(seconds: float) -> None:  # an open tab waits; when its websocket closes it reconnects at once
            nonlocal client
            if not client.idle(seconds):
                if not faults:
                    raise ConnectionError("the websocket closed while the session was idle")
                client = reconnect(client)

        def reconnect(lost: WsClient) -> WsClient:
            lost.ws.close()
            t_lost = time.perf_counter()
            again = lost.reopened()  # the browser reconnects when its websocket closes
            s.reconnect_s.append(time.perf_counter() - t_lost)
            s.reconnects += 1
            s.replica = again.replica
            return again

        try:
            # Learners do not all move in the same instant: spread the first moves over one pause.
            pause(args.think * s.rng.uniform(0, 1))
            while time.monotonic() < deadline and len(s.failures) < 3:
                name, value = next_value(s)
                s.values[name] = value
                s.changes += 1
                began, t0 = time.monotonic(), time.perf_counter()
                while True:
                    try:
                        _, shown = client.rerun({name: value})
                        break
                    except (OSError, websocket.WebSocketException) as exc:
                        if not faults:
                            raise
                        if isinstance(exc, (websocket.WebSocketTimeoutException, TimeoutError)):
                            s.failures.append(f"session {s.index}: frozen (no answer in {MATCH_TIMEOUT_S:g} s)")
                        client = reconnect(client)
                if client.check(shown):
                    s.latencies.append(time.perf_counter() - t0)
                    s.started.append(began)
                pause(args.think * s.rng.uniform(0.5, 1.5))
        except Exception as exc:  # a lost connection, a timeout
            s.failures.append(f"session {s.index}: {type(exc).__name__}: {exc}")
        finally:
            client.ws.close()

    threads = [threading.Thread(target=drive, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return loads


# --------------------------------------------------------------------------- the browser client


async def run_browser(args: argparse.Namespace, base: str, server: subprocess.Popen | Sequence[int] | None,
                      sessions: list[Session], memory: dict, *,
                      on_loaded: Callable[[], None] | None = None):  # fmt: skip
    from playwright.async_api import async_playwright

    loads = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=args.chromium,
            args=[
                *live_server.CHROMIUM_ARGS,
                "--disable-renderer-backgrounding",
                "--disable-background-timer-throttling",
                "--disable-backgrounding-occluded-windows",
                "--disable-dev-shm-usage",
            ],  # fmt: skip
        )
        pages = []
        for s in sessions:
            context = await browser.new_context(viewport={"width": 1400, "height": 1000})
            loopback = r"^(?!(https?|wss?)://127\.0\.0\.1[:/]|data:|blob:)"
            await context.route(re.compile(loopback), lambda route: route.abort())  # loopback only
            await context.add_init_script(WS_CLOSES_JS)
            page = await context.new_page()
            page.on("console", lambda m, s=s: m.type in ("warning", "error") and s.console.append(m.text[:200]))
            t0 = time.perf_counter()
            await page.goto(s.url(base))
            waited = await until_shows(page, s, timeout=90)
            if waited == waited:  # not NaN: it showed its numbers
                loads.append(time.perf_counter() - t0)
            s.replica = next((c["value"] for c in await context.cookies() if c["name"] == STICKY_COOKIE), "")
            pages.append(page)
            if len(pages) in (1, 10, len(sessions)) and server is not None:
                memory[f"{len(pages)} sessions loaded"] = rss_mib(server)
        if on_loaded:
            on_loaded()
        deadline = time.monotonic() + args.duration

        async def drive(page, s: Session) -> None:
            await asyncio.sleep(args.think * s.rng.uniform(0, 1))  # learners do not all move in the same instant
            while time.monotonic() < deadline and len(s.failures) < 3:
                await move(page, s)
                await asyncio.sleep(args.think * s.rng.uniform(0.5, 1.5))

        await asyncio.gather(*(drive(page, s) for page, s in zip(pages, sessions, strict=True)))
        for page, s in zip(pages, sessions, strict=True):  # finally: every page still shows its own numbers
            await until_shows(page, s, timeout=10)
        await browser.close()
    return loads


# --------------------------------------------------------------------------- one measurement


@dataclass
class Target:
    """Where the sessions go; pids: the server's processes (measured with their children), named: each of
    them by name (s1, s2, haproxy), replicas: each Streamlit process's own address, by name."""

    base: str
    what: str
    stop: Callable[[], None]
    pids: list[int] = field(default_factory=list)
    named: dict[str, int] = field(default_factory=dict)
    replicas: dict[str, str] = field(default_factory=dict)
    recipe: live_server.Recipe | None = None  # the deploy recipe, when this script started it


def start_target(args: argparse.Namespace) -> Target:
    """One `streamlit run` (default), the deploy recipe (--processes N) or a running server (--url)."""
    url, processes = getattr(args, "url", None), getattr(args, "processes", 0)
    if url:
        pids = list(getattr(args, "server_pid", None) or [])
        return Target(url.rstrip("/"), f"the server at {url}", lambda: None, pids)
    if processes:
        recipe = live_server.start_recipe(processes, Path(args.log).with_suffix(".deploy"))
        names = {urllib.parse.urlsplit(base).port: f"s{i}" for i, base in enumerate(recipe.replicas, 1)}
        named = {}
        for child in psutil.Process(recipe.proc.pid).children(recursive=True):  # supervisord's children
            cmd = child.cmdline()
            if "--server.port" in cmd:
                named[names[int(cmd[cmd.index("--server.port") + 1])]] = child.pid
            elif cmd and Path(cmd[0]).name == "haproxy":
                named["haproxy"] = child.pid
        return Target(recipe.proxy, f"{processes} streamlit processes behind HAProxy (deploy/run.sh)",
                      lambda: live_server.stop_recipe(recipe), [recipe.proc.pid], named,
                      dict(zip(sorted(names.values()), recipe.replicas, strict=True)), recipe)  # fmt: skip
    port = live_server.free_port()
    server = live_server.start(port, Path(args.log))
    return Target(f"http://{LOOPBACK}:{port}", "one streamlit process", lambda: live_server.stop(server), [server.pid])


def stcore_metric(base: str, name: str) -> float | None:
    """One line of a Streamlit process's /_stcore/metrics (e.g. 'active_sessions'), None when absent."""
    with OPENER.open(base + "/_stcore/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
    return None


# --faults: when, after every session has loaded, one replica is killed; after that, another is stopped, and
# how long it is left stopped at most (unless the watchdog has killed it; then it is continued).
KILL_AFTER_S = 10.0
HANG_AFTER_S = 40.0
HANG_FOR_S = 60.0
SETTLE_S = 10.0  # the moves started this long after a fault are "settled"


def inject_faults(recipe: live_server.Recipe, t0: float, events: dict, done: threading.Event) -> None:
    """The --faults schedule (SIGKILL one replica, later SIGSTOP another, then SIGCONT), and when supervisord
    and HAProxy saw each step, in seconds since t0 (every session loaded). Stops early when `done` is set."""
    names = [f"s{i}" for i in range(1, len(recipe.replicas) + 1)]
    killed, hung = names[1], names[2] if len(names) > 2 else names[0]

    def at(seconds: float) -> bool:  # sleep until t0 + seconds; False when the load ended first
        return not done.wait(max(0.0, t0 + seconds - time.monotonic()))

    def until(checks: dict, since: float, limit: float = 90) -> None:
        """When each check() first held, all polled together: a step another one makes moot is not waited for
        (a killed replica restarted before HAProxy's checks saw it down is never marked down). None: never."""
        left = dict(checks)
        for what in checks:
            events[what] = None
        while left and time.monotonic() - since <= limit and not done.is_set():
            for what, check in list(left.items()):
                if check():
                    events[what] = round(time.monotonic() - since, 1)
                    del left[what]
            time.sleep(0.1)

    state = lambda name: live_server.proxy_servers(recipe).get(name)  # noqa: E731
    if not at(KILL_AFTER_S):
        return
    old = live_server.replica_pid(recipe, killed)
    os.kill(old, signal.SIGKILL)
    t_kill = time.monotonic()
    events.update(killed=killed, kill_at_s=round(t_kill - t0, 1))
    restarted = lambda: live_server.replica_pid(recipe, killed) not in (None, old)  # noqa: E731
    until({"killed_marked_down_after_s": lambda: state(killed) == "DOWN", "killed_restarted_after_s": restarted,
           # serving again: the new process answers its health check, and HAProxy has it UP
           "killed_back_up_after_s": lambda: events["killed_restarted_after_s"] is not None
           and live_server.health(recipe.replicas[names.index(killed)]) == "ok" and state(killed) == "UP"},
          t_kill, HANG_AFTER_S - 1)  # fmt: skip
    if not at(KILL_AFTER_S + HANG_AFTER_S):
        return
    pid = live_server.replica_pid(recipe, hung)
    os.kill(pid, signal.SIGSTOP)
    t_stop = time.monotonic()
    events.update(hung=hung, hang_at_s=round(t_stop - t0, 1))
    try:
        # deploy/watchdog.py kills it once its health check has failed for about 30 s; supervisord restarts it.
        until({"hung_marked_down_after_s": lambda: state(hung) == "DOWN",
               "hung_restarted_after_s": lambda: live_server.replica_pid(recipe, hung) not in (None, pid)},
              t_stop, HANG_FOR_S)  # fmt: skip
    finally:
        try:
            os.kill(pid, signal.SIGCONT)  # if the watchdog has not killed it
        except ProcessLookupError:
            pass
    until({"hung_back_up_after_s": lambda: state(hung) == "UP"}, t_stop)


def fault_windows(events: dict, t0: float) -> list[tuple[float, float]]:
    """The SETTLE_S seconds after each fault, as time.monotonic() intervals."""
    return [(t0 + events[k], t0 + events[k] + SETTLE_S) for k in ("kill_at_s", "hang_at_s") if k in events]


def measure(args: argparse.Namespace, client: str) -> dict:
    target = start_target(args)
    sessions = make_sessions(args.sessions, args.seed)
    server = target.pids or None  # without: no server processes to measure (--url without --server-pid)
    memory: dict[str, float] = {"server started": rss_mib(server)} if server else {}
    me = psutil.Process()
    # CPU seconds so far, by whom; "whole machine" shows what else ran on the same cores (other work).
    groups: dict[str, Callable[[], float]] = {
        "server": lambda: cpu_seconds(tree(target.pids)),
        "this client": lambda: cpu_seconds([me]),
        **{name: (lambda pid=pid: cpu_seconds(tree([pid]))) for name, pid in target.named.items()},
        "whole machine": lambda: (t := psutil.cpu_times()).user + t.nice + t.system + t.irq + t.softirq,
    }

    def snapshot() -> tuple[float, dict[str, float]]:
        return time.monotonic(), {k: seconds() for k, seconds in groups.items()}

    marks: dict[str, tuple[float, dict[str, float]]] = {}
    faults = getattr(args, "faults", False)
    events: dict = {}
    done = threading.Event()
    injector = None
    try:
        marks["start"] = snapshot()
        ours = {p.pid for p in tree(target.pids)}
        browser0 = cpu_seconds([p for p in me.children(recursive=True) if p.pid not in ours])

        def loaded() -> None:  # every session has loaded its page: from here on they move sliders
            nonlocal injector
            marks.setdefault("loaded", snapshot())
            if faults:
                injector = threading.Thread(target=inject_faults, args=(target.recipe, time.monotonic(), events, done))
                injector.start()

        if client == "ws":
            loads = run_ws(args, 0, server, sessions, memory, base=target.base, on_loaded=loaded)
        else:
            loads = asyncio.run(run_browser(args, target.base, server, sessions, memory, on_loaded=loaded))
        marks["end"] = snapshot()
        done.set()
        if injector:
            injector.join()
        if server:
            memory["at the end"] = rss_mib(server)
        connects = {name: stcore_metric(base, 'session_events_total{type="connect"}')
                    for name, base in target.replicas.items()}  # fmt: skip

        def cores(a: str, b: str) -> dict[str, float]:  # cores busy on average between two marks
            (t0, cpu0), (t1, cpu1) = marks[a], marks[b]
            return {k: round((cpu1[k] - cpu0[k]) / (t1 - t0), 2) for k in cpu0}

        busy, moving = cores("start", "end"), cores("loaded", "end")
        if client == "browser":  # the browser has exited: its CPU time is in this process's children's times
            t, wall = os.times(), marks["end"][0] - marks["start"][0]
            busy["chromium"] = round((t.children_user + t.children_system - browser0) / wall, 2)
    finally:
        done.set()
        if injector:
            injector.join()
        target.stop()
    latencies = [x for s in sessions for x in s.latencies]
    under_faults = {}
    if faults and "loaded" in marks:
        windows = fault_windows(events, marks["loaded"][0])
        moves = [(t, x) for s in sessions for t, x in zip(s.started, s.latencies, strict=True)]
        near = [x for t, x in moves if any(a <= t < b for a, b in windows)]
        settled = [x for t, x in moves if not any(a <= t < b for a, b in windows)]
        under_faults = {
            "events": events,
            f"p95_ms_within_{SETTLE_S:g}_s_of_a_fault": round(1000 * percentile(near, 0.95)) if near else None,
            f"max_ms_within_{SETTLE_S:g}_s_of_a_fault": round(1000 * max(near)) if near else None,
            "moves_within": len(near),
            "p95_ms_otherwise": round(1000 * percentile(settled, 0.95)) if settled else None,
            "moves_otherwise": len(settled),
            # Recovery over time: each 10 s of the run (from every session loaded), its moves' p95 and count.
            "p95_ms_by_10_s": [
                (round(1000 * percentile(xs, 0.95)) if xs else None, len(xs))
                for k in range(int(args.duration // 10) + 1)
                for xs in [[x for t, x in moves if 10 * k <= t - marks["loaded"][0] < 10 * (k + 1)]]
            ],
            "reconnects": sum(s.reconnects for s in sessions),
            "reconnect_s_p50_max": [round(f(rs), 1) for f in (statistics.median, max)]
            if (rs := [x for s in sessions for x in s.reconnect_s])
            else None,
            "reconnects_retried": [r for s in sessions for r in s.retried][:20],
            "sessions_that_reconnected": sum(1 for s in sessions if s.reconnects),
            "frozen": sum(1 for s in sessions for f in s.failures if "frozen" in f),
        }
    return {
        "client": client,
        "target": target.what,
        "sessions": args.sessions,
        "duration_s": args.duration,
        "think_s": args.think,
        "cpus": os.cpu_count(),
        "changes": sum(s.changes for s in sessions),
        "changes_shown_correctly": len(latencies),
        "latency_p50_ms": round(1000 * statistics.median(latencies)) if latencies else None,
        "latency_p95_ms": round(1000 * percentile(latencies, 0.95)) if latencies else None,
        "latency_max_ms": round(1000 * max(latencies)) if latencies else None,
        "first_load_p50_s": round(statistics.median(loads), 2) if loads else None,
        "rss_mib": {k: round(v, 1) for k, v in memory.items()},
        "cpu_cores_busy": busy,  # from the start, loading included
        "cpu_cores_busy_moving": moving,  # while the sessions move their sliders
        "sessions_per_process": dict(sorted(collections.Counter(s.replica for s in sessions if s.replica).items())),
        "connects_per_process": connects,  # each Streamlit process's own count of sessions it accepted
        "load_average_1min_at_end": round(os.getloadavg()[0], 1),
        "failures": [f for s in sessions for f in s.failures],
        "faults": under_faults,
    }


def report(r: dict) -> None:
    print(
        f"\n== {r['client']}: {r['sessions']} sessions on {r['target']}, {r['duration_s']:g} s of slider moves "
        f"(think time {r['think_s']:g} s), {r['cpus']} CPUs"
    )
    if r["sessions_per_process"] or r["connects_per_process"]:
        print(f"sessions per process: {r['sessions_per_process']} (the proxy's cookie); "
              f"{r['connects_per_process']} (each process's connects)")  # fmt: skip
    print(f"slider changes: {r['changes']}, shown correctly: {r['changes_shown_correctly']}")
    print(f"latency p50 / p95 / max: {r['latency_p50_ms']} / {r['latency_p95_ms']} / {r['latency_max_ms']} ms")
    print(f"first load p50: {r['first_load_p50_s']} s")
    print("server RSS (MiB, process and children): " + ", ".join(f"{k}: {v}" for k, v in r["rss_mib"].items()))
    print(f"CPU cores busy (of {r['cpus']}): {r['cpu_cores_busy']}; 1-min load {r['load_average_1min_at_end']}")
    print(f"CPU cores busy while moving: {r['cpu_cores_busy_moving']}")
    if r.get("faults"):
        print("under faults: " + json.dumps(r["faults"]))
    print(f"failures: {len(r['failures'])}")
    for failure in r["failures"][:20]:
        print("  " + failure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--client", choices=("both", "ws", "browser"), default="both")
    parser.add_argument("--sessions", type=int, default=20, help="sessions (default 20; at most 200, 40 browsers)")
    parser.add_argument("--duration", type=float, default=60, help="seconds of slider moves (default 60, at most 600)")
    parser.add_argument(
        "--think",
        type=float,
        default=0.0,
        help="seconds a session waits after seeing a change before its next move (default 0: "
        "back to back, the heaviest load)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds the sessions' configs and moves")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--processes", type=int, default=0, help="start deploy/run.sh with N Streamlit processes behind HAProxy"
    )
    where.add_argument("--url", help="a server already running at this loopback address (one process or a proxy)")
    parser.add_argument(
        "--server-pid", type=int, action="append", help="with --url: a server process to measure, with its children"
    )
    parser.add_argument(
        "--faults", action="store_true", help="with --processes: kill one replica, later hang another (see above)"
    )
    parser.add_argument("--chromium", default=live_server.find_chromium()[0])
    parser.add_argument("--log", default="/tmp/attention-lab-load-test-server.log", help="the server's output")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    clients = ("ws", "browser") if args.client == "both" else (args.client,)
    most = 40 if "browser" in clients else 200  # the websocket client is a thread a session
    if not 1 <= args.sessions <= most or not 0 < args.duration <= 600:
        parser.error(f"--sessions must be 1..{most} and --duration 0..600")
    if not 0 <= args.processes <= 16:
        parser.error("--processes must be 1..16")
    if args.processes and not (live_server.find_haproxy() and live_server.find_supervisord()):
        parser.error("--processes needs haproxy and supervisor: `apt-get install -y haproxy supervisor`")
    if args.faults and (args.processes < 2 or clients != ("ws",)):
        parser.error("--faults needs --processes 2 or more and --client ws")
    if args.url and urllib.parse.urlsplit(args.url).hostname not in (LOOPBACK, "localhost"):
        parser.error("--url must be a loopback address: this load test sends its traffic to this machine only")
    if args.server_pid and not args.url:
        parser.error("--server-pid goes with --url")
    if "browser" in clients and not args.chromium:
        parser.error("no Chromium found: pass --chromium PATH or set CHROMIUM_PATH (or use --client ws)")
    results = []
    for client in clients:
        results.append(measure(args, client))
        report(results[-1])
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    sys.exit(1 if any(r["failures"] for r in results) else 0)


if __name__ == "__main__":
    main()
