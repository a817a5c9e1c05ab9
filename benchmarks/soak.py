"""Soak: fresh visitors on every page's heaviest link, a few at a time, each asking for every download, with the
server held to Community Cloud's 690 MiB by a real kernel limit; then a second round once the first has expired.

    python -m benchmarks.soak [--sessions 30] [--rounds 2] [--at-once 3] [--ttl 120] [--limit-mib 690]
                              [--pages self_attention position ...] [--matrices omega ...] [--companions]
                              [--json FILE]

The pages are dashboard.PAGES (a page added there is soaked too), each opened at its heaviest link: `HEAVIEST`
below, the largest sizes its controls allow (512 tokens, 16 heads, d_model, d_k and d_v 256, and the page's own
heaviest setting), or its plain URL when the table has no entry for it. Visitor i of a round opens page
i mod 15 with a seed of its own (so each visitor has its own results, as different people would), moves the
seed slider once more where the page has one, asks for every download the page offers (a deferred download is
requested over the websocket, as a click does, and its file fetched from the media endpoint) and leaves.
--at-once visitors are in flight at a time.

The server is `streamlit run dashboard.py` on a free loopback port, started inside a cgroup v1 memory group
(/sys/fs/cgroup/memory/<name>, memory.limit_in_bytes = --limit-mib MiB, swap included) from its first byte: the
kernel kills it if it passes the limit, as Community Cloud does. Without root or cgroup v1 (or with
--no-cgroup) it runs without a limit and the peak is only read. `server.disconnectedSessionTTL` is --ttl:
Streamlit keeps a closed session that long in case its tab comes back.

Meanwhile a light session on the default link reruns every 0.2 s: its rerun times (p95) are what another visitor
waits while the soak goes on. After each round the benchmark waits for the sessions to expire and records the
server's memory (process and children, MB of 10^6 bytes: resident and anonymous, sampled every 0.1 s; and the
cgroup's own peak, page cache included).

Passes (exit 0) when the server was never killed, its sampled anonymous peak stays under --limit-mb (690), the
second round adds less than --growth-mb (50) to what the first left, the probe's p95 stays under --p95-ms (1000)
and no visit failed.

--companions adds two steady visitors for the whole of the rounds, each a fresh session a cycle: one generates 8
tokens on the chat model after a short prompt of its own (a prompt run and 8 model steps, each a small run of
44-55 MB), the other opens the Real model page on a sentence of its own. The server logs every admission
(ATTENTION_LAB_LOG_LEVEL=DEBUG: "admission: admitted 55.0 MB (small) after 0.00 s"), and the report gives the
admission waits by run size (median, p95, longest), the refusals, and the companions' page loads; with it the
soak passes only with no refusal and every small run admitted within --small-wait-s (10).

Anonymous memory is what the process alone holds; its resident figure also counts the pages
of torch's and the other libraries' files, shared with every Python process on the machine (and charged to the
cgroup of whichever process read them first), which the kernel drops and reads again rather than kill. A
benchmark, not a test: loopback only, numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ui  # the dashboard's parameters: what a link accepts
from attention.models import tiny  # Watch it learn's settings
from benchmarks import load_test  # its websocket client
from harness import live_server  # the tests' way to start the server

ROOT = Path(__file__).resolve().parents[1]

WORDS = " ".join(f"w{i}" for i in range(1, 513))  # 512 distinct tokens: the most the pages allow
HEAVY = {"sentence": WORDS, "heads": "16", "d_model": "256", "d_k": "256", "d_v": "256"}


def heaviest_training() -> dict[str, str]:
    """Watch it learn's largest run that the page accepts: every size at the top of its control's range, and the
    most snapshots a run may keep (the smallest `every` that tiny.Settings accepts: MAX_RUN_BYTES, MAX_SNAPSHOTS).
    Derived from the declarations, so it stays the heaviest (and accepted) when a range changes."""
    prefix = ui.views.watch_it_learn_settings.PREFIX
    top = {n: int(ui.PARAMS[prefix + n].hi) for n in ("layers", "heads", "d_model", "batch", "steps")}
    every = ui.PARAMS[prefix + "every"]
    for n in range(int(every.lo), int(every.hi) + 1):
        try:
            tiny.Settings(**top, every=n)
        except ValueError:
            continue
        return {prefix + name: str(v) for name, v in {**top, "every": n}.items()}
    raise ValueError(f"no snapshot interval makes {top} a run the page accepts")


# Each page's heaviest link (URL parameters); a page not listed opens its plain URL. "{visitor}" in a value is
# the visitor's number, at the start of a text, before any cut: the Real model and chat pages get a text, and
# Watch it learn a seed, of their own per visitor (a model run of its own, as different people would).
HEAVIEST: dict[str, dict[str, str]] = {
    "self_attention": HEAVY,
    "masks": {**HEAVY, "mask": "causal", "dropout": "0.5"},  # six (h, T, T) matrices: the most of any page
    "multi_head": HEAVY,
    "cross_attention": {**HEAVY, "cross_sentence": " ".join(f"k{i}" for i in range(1, 513))},
    "position": {**HEAVY, "position": "rope"},  # five results at once before server/budget.py
    "compare": {**HEAVY, "b_heads": "16", "b_d_k": "256", "b_d_v": "256"},
    "scaling": {**HEAVY, "nseeds": "64"},
    "pitfalls": HEAVY,
    "mask_editor": HEAVY,
    "soft_lookup": HEAVY,
    "real_model": {"sentence": "visitor {visitor} " + " ".join(f"word{j}" for j in range(400))},  # cut to 510
    "grouped_query": HEAVY,
    "kv_cache": {**HEAVY, "decode_step": "511"},
    "flash_attention": {**HEAVY, "block_size": "1"},
    # the chat model's prompt cut to the page's token limit; a visitor's own prompt is a run of its own
    "chat_model": {"chat_prompt": "visitor {visitor} " + " ".join(f"word{j}" for j in range(400))},
    # the largest model and the most snapshot weights a run may keep (attention.models.tiny.MAX_RUN_BYTES)
    "watch_it_learn": {**heaviest_training(), "train_seed": "{visitor}"},
}
# The button a visitor presses on a page, once it has loaded (Watch it learn trains only after Play), and how long
# the visitor then watches: until the page draws the run's first snapshot, at most this many seconds.
PRESS: dict[str, str] = {"watch_it_learn": "Play"}
WATCH_S = 60.0
WATCH_TICK_S = 1.0
# What a page says when its link holds a value it refused (ui.widgets.show_url_warnings)
REFUSED_WORDS = ("reset to defaults", "This link was not read")
LIMIT_MIB = 690  # Streamlit Community Cloud's memory for the whole app, every visitor together
LIMIT_MB = 690.0  # the sampled peak must stay under this many MB (10^6 bytes): the stricter reading
GROWTH_MB = 50.0
P95_MS = 1000.0
SAMPLE_S = 0.1
PROBE_PAUSE_S = 0.2
VISIT_TIMEOUT_S = 180.0  # one message of a visit's run: a run may wait for the server's memory budget first
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
SMALL_WAIT_S = 10.0  # with --companions: every small run admitted within this
COMPANION_PAUSE_S = 1.0


def pages() -> list[str]:
    """Every page of the dashboard, by URL path (its file name), in the navigation's order."""
    import dashboard

    return [Path(path).stem for section in dashboard.PAGES.values() for path, _, _ in section]


def link(page: str, visitor: int) -> str:
    """The query string of a page's heaviest link for one visitor: its own seed, and "{visitor}" filled in."""
    params = {k: v.replace("{visitor}", str(visitor)) for k, v in HEAVIEST.get(page, {}).items()}
    return urllib.parse.urlencode({**params, "seed": str(1000 + visitor)})


# --------------------------------------------------------------------------- the server in a memory cgroup


def cgroup_available() -> str | None:
    """None when a cgroup v1 memory group can be made here, else why not."""
    if not (CGROUP_ROOT / "memory.limit_in_bytes").exists():
        return f"no cgroup v1 memory controller at {CGROUP_ROOT}"
    if os.geteuid() != 0 or not os.access(CGROUP_ROOT, os.W_OK):
        return f"{CGROUP_ROOT} is not writable (needs root)"
    return None


class Cgroup:
    """A cgroup v1 memory group of limit_mib MiB, swap included (a process in it is killed rather than swapped)."""

    def __init__(self, name: str, limit_mib: int) -> None:
        self.path = CGROUP_ROOT / name
        self.path.mkdir(exist_ok=True)
        self.limit = limit_mib << 20
        (self.path / "memory.limit_in_bytes").write_text(str(self.limit))
        memsw = self.path / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            memsw.write_text(str(self.limit))

    def join(self) -> None:
        """Move the calling process in (a preexec_fn: the server is in the group from its first byte)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def read(self, name: str) -> str:
        return (self.path / name).read_text()

    def stat(self) -> dict[str, int]:
        return {k: int(v) for k, v in (line.split() for line in self.read("memory.stat").splitlines())}

    def oom_kills(self) -> int:
        fields = dict(line.split() for line in self.read("memory.oom_control").splitlines())
        return int(fields.get("oom_kill", 0))

    def summary(self) -> dict[str, Any]:
        return {
            "limit_bytes": self.limit,
            "max_usage_mb": round(int(self.read("memory.max_usage_in_bytes")) / 1e6, 1),
            "max_usage_note": "page cache included (reclaimed before anything is killed)",
            "failcnt": int(self.read("memory.failcnt")),
            "oom_kills": self.oom_kills(),
        }

    def remove(self) -> None:
        try:
            self.path.rmdir()
        except OSError:
            pass


def start_server(port: int, log: Path, ttl: int, group: Cgroup | None) -> subprocess.Popen:
    """`streamlit run dashboard.py` as live_server.start runs it, inside `group` from its first byte."""
    cmd = [sys.executable, "-m", "streamlit", "run", "dashboard.py", "--server.port", str(port),
           "--server.address", live_server.LOOPBACK, "--server.headless", "true", "--server.fileWatcherType", "none",
           "--browser.gatherUsageStats", "false", "--server.disconnectedSessionTTL", str(ttl)]  # fmt: skip
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ATTENTION_LAB_LOG_LEVEL": "DEBUG"}  # every admission logged
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, preexec_fn=group.join if group else None)  # fmt: skip
    deadline = time.monotonic() + live_server.HEALTH_TIMEOUT_S
    while live_server.health(f"http://{live_server.LOOPBACK}:{port}") != "ok":
        if proc.poll() is not None or time.monotonic() > deadline:
            live_server.stop(proc)
            raise RuntimeError(f"streamlit did not come up ({proc.returncode}):\n{live_server.log_tail(log)}")
        time.sleep(0.2)
    return proc


def memory_mb(pid: int) -> tuple[float, float]:
    """(resident, anonymous) MB of a process and its children (a page may run a model in a worker process): what
    they hold, and what only they hold (no file pages)."""
    import psutil

    resident = anonymous = 0
    for p in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
        try:
            with open(f"/proc/{p.pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        resident += int(line.split()[1]) * 1024
                    elif line.startswith("Anonymous:"):
                        anonymous += int(line.split()[1]) * 1024
        except OSError:  # a child that just ended
            pass
    return resident / 1e6, anonymous / 1e6


def psutil_errors() -> type[Exception]:
    import psutil

    return psutil.Error


class Sampler(threading.Thread):
    """Samples the server's memory every SAMPLE_S seconds, each sample tagged with the current phase."""

    def __init__(self, server: subprocess.Popen) -> None:
        super().__init__(daemon=True)
        self.server = server
        self.phase = "start"
        self.samples: list[tuple[float, float, float, str]] = []  # (seconds since start, resident, anon, phase)
        self.stopped = threading.Event()
        self.t0 = time.monotonic()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                resident, anonymous = memory_mb(self.server.pid)
            except (OSError, StopIteration, psutil_errors()):  # the server is gone
                break
            self.samples.append((time.monotonic() - self.t0, resident, anonymous, self.phase))
            self.stopped.wait(SAMPLE_S)

    def peak(self, which: int = 1) -> tuple[float, str]:
        if not self.samples:
            return 0.0, "none"
        sample = max(self.samples, key=lambda s: s[which])
        return sample[which], sample[3]

    def settled(self, seconds: float = 2.0) -> float:
        """The median resident memory of the last few seconds' samples."""
        time.sleep(seconds)
        cut = time.monotonic() - self.t0 - seconds
        recent = [mb for t, mb, _, _ in self.samples if t >= cut]
        return statistics.median(recent) if recent else 0.0


# --------------------------------------------------------------------------- visitors


class Probe(threading.Thread):
    """A light session rerunning the default page over and over: (start, seconds) of each rerun."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.client = load_test.WsClient(port, query="seed=1")
        self.client.ws.settimeout(VISIT_TIMEOUT_S)
        self.client.rerun()
        self.reruns: list[tuple[float, float]] = []
        self.failures: list[str] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        seed = 1
        try:
            while not self.stopped.is_set():
                seed = 3 - seed  # a new value each time: a real rerun, as a person moving a slider
                start = time.monotonic()
                seconds, shown = self.client.rerun({"seed": seed})
                self.reruns.append((start, seconds))
                if shown["exception"]:
                    self.failures.append("the probe's page showed an error")
                self.stopped.wait(PROBE_PAUSE_S)
        except Exception as exc:  # a lost connection, a timeout
            self.failures.append(f"probe: {type(exc).__name__}: {exc}")
        finally:
            self.client.ws.close()


@dataclass
class Export:
    label: str
    status: str  # ok, disabled, error
    seconds: float = 0.0
    bytes: int = 0
    start: float = 0.0  # time.monotonic() when asked
    head: str = ""  # the first bytes, for a short answer (a note instead of the file)


@dataclass
class Visit:
    page: str
    start: float = 0.0
    end: float = 0.0
    load_s: float = 0.0
    slider_s: float | None = None
    reruns_s: list[float] = field(default_factory=list)
    exports: list[Export] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the page said about its downloads or its memory
    failures: list[str] = field(default_factory=list)
    pressed: str = ""  # the button pressed (PRESS)
    watched: str = ""  # what the page showed of the run it started, when the visitor left


def download(client: load_test.WsClient, button: dict) -> Export:
    """Ask for one download button's file as the browser does; how long it took and what came back."""
    if button["disabled"]:
        return Export(button["label"], "disabled")
    start = time.monotonic()
    try:
        url = client.request_file(button["deferred"]) if button["deferred"] else button["url"]
        body = client.fetch(url)
    except Exception as exc:  # the callable failed, or the file was gone
        return Export(button["label"], f"error: {exc}", time.monotonic() - start, start=start)
    head = body[:120].decode("utf-8", "replace") if len(body) < 4096 else ""
    return Export(button["label"], "ok", time.monotonic() - start, len(body), start, head)


NOTE_WORDS = ("download", "command line", "memory", "try again")


def visit(port: int, page: str, query: str, matrices: Sequence[str] = ()) -> Visit:
    """One fresh visitor: open the link, move the seed slider one up where the page has one (another result of
    its own), ask for every download (for each of the matrix picker's choices given in `matrices`), leave."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    v = Visit(page, start=time.monotonic())
    client = None
    try:
        client = load_test.WsClient(port, query=query, page=page)
        client.ws.settimeout(VISIT_TIMEOUT_S)
        v.load_s, shown = client.rerun()
        if not shown["text"] and not shown["charts"]:  # the frame's own rerun (ui.ensure_frame): the page comes next
            seconds, shown = client.rerun()
            v.load_s += seconds
        refused = [t for t in shown["text"] if any(w in t for w in REFUSED_WORDS)]
        if refused:
            v.failures.append(f"{page}: the page refused its link: {refused[0][:200]}")
        runs = [shown]
        if page in PRESS:
            shown = press(client, PRESS[page], shown, v)
            runs.append(shown)
        if "seed" in client.sliders:
            seed = int(dict(urllib.parse.parse_qsl(query)).get("seed", 123))
            v.slider_s, shown = client.rerun({"seed": seed + 1})
            runs.append(shown)
        picker = next((w for k, w in shown["selectboxes"].items() if k.startswith("Matrix")), None)
        asked: set[str] = set()
        for i, choice in enumerate([None, *(c for c in (picker[1][1:] if picker else []) if c in matrices)]):
            if choice is not None:
                seconds, shown = client.rerun(states=[WidgetState(id=picker[0], string_value=choice)])
                v.reruns_s.append(seconds)
                runs.append(shown)
            for run in runs if i == 0 else [shown]:
                if run["exception"]:
                    v.failures.append(f"{page}: the page showed an error: {[t[:200] for t in run['text']][:3]}")
                v.notes += [t for t in run["text"] if any(w in t.lower() for w in NOTE_WORDS)]
            # a run's buttons are asked for before the next run: each run registers new deferred files
            for button in shown["downloads"]:
                if button["label"] not in asked:
                    asked.add(button["label"])
                    v.exports.append(download(client, button))
    except Exception as exc:  # a lost connection, a timeout
        v.failures.append(f"{page}: {type(exc).__name__}: {exc}")
    finally:
        if client is not None:
            client.ws.close()
        v.end = time.monotonic()
    return v


class Companion(threading.Thread):
    """A steady visitor beside the crowd: a fresh session on `page` every cycle (query(i) its link), until stopped;
    (start, seconds) of each load, and what its pages said about memory."""

    def __init__(self, port: int, name: str, page: str, query: Callable[[int], str]) -> None:
        super().__init__(daemon=True)
        self.port, self.name, self.page, self.query = port, name, page, query
        self.loads: list[tuple[float, float]] = []
        self.notes: list[str] = []
        self.failures: list[str] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stopped.is_set():
            i += 1
            start = time.monotonic()
            try:
                client = load_test.WsClient(self.port, query=self.query(i), page=self.page)
                client.ws.settimeout(VISIT_TIMEOUT_S)
                try:
                    seconds, shown = client.rerun()
                finally:
                    client.ws.close()
                self.loads.append((start, seconds))
                self.notes += [t for t in shown["text"] if any(w in t.lower() for w in ("memory", "try again"))]
                if shown["exception"]:
                    self.failures.append(f"{self.name}: the page showed an error: {shown['text'][:2]}")
            except Exception as exc:  # a lost connection, a timeout
                self.failures.append(f"{self.name}: {type(exc).__name__}: {exc}")
            self.stopped.wait(COMPANION_PAUSE_S)


def companions(port: int) -> list[Companion]:
    """The chat visitor generating tokens after a prompt of its own, and the Real model visitor on a sentence of
    its own, a new one each cycle (so each cycle runs the model, not a kept run)."""
    chat = lambda i: urllib.parse.urlencode(  # noqa: E731
        {"chat_prompt": f"Visitor {i} asks: the cat sat on the mat because it", "chat_generate": "8"}
    )
    real = lambda i: urllib.parse.urlencode(  # noqa: E731
        {"sentence": f"The animal did not cross the street because it was tired, said visitor {i}."}
    )
    return [Companion(port, "chat", "chat_model", chat), Companion(port, "real model", "real_model", real)]


ADMITTED = re.compile(r"admission: admitted ([\d.]+) MB \((small|large)\) after ([\d.]+) s")
REFUSED = re.compile(r"admission: refused ([\d.]+) MB after ([\d.]+) s")


def admissions(log: Path) -> dict[str, Any]:
    """The admission waits by run size from the server's log (median, p95, longest, in s), and its refusals."""
    waits: dict[str, list[float]] = {"small": [], "large": []}
    refused: list[str] = []
    for line in log.read_text(errors="replace").splitlines():
        if m := ADMITTED.search(line):
            waits[m[2]].append(float(m[3]))
        elif REFUSED.search(line):
            refused.append(line.split("admission: ", 1)[1][:400])
    out: dict[str, Any] = {}
    for size, values in waits.items():
        out[size] = {
            "runs": len(values),
            "waited": sum(v > 0 for v in values),
            "median_s": round(statistics.median(values), 2) if values else None,
            "p95_s": round(load_test.percentile(values, 0.95), 2) if values else None,
            "longest_s": round(max(values), 2) if values else None,
        }
    out["refused"] = refused
    return out


def press(client: load_test.WsClient, label: str, shown: dict, v: Visit) -> dict:
    """Press the page's button `label` as a click does, then watch as an open tab does (a rerun every
    WATCH_TICK_S, what the page's live view redraws) until the page draws a snapshot of the run ("**Step N**"), at
    most WATCH_S seconds. What the page last showed."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    if label not in shown["buttons"]:
        v.failures.append(f"{v.page}: no {label} button to press")
        return shown
    v.pressed = label
    seconds, shown = client.rerun(states=[WidgetState(id=shown["buttons"][label], trigger_value=True)])
    v.reruns_s.append(seconds)
    end = time.monotonic() + WATCH_S
    while not (step := next((t for t in shown["text"] if t.startswith("**Step ")), None)):
        if shown["exception"] or time.monotonic() > end:
            break
        time.sleep(WATCH_TICK_S)
        seconds, shown = client.rerun()
        v.reruns_s.append(seconds)
    v.watched = (step or "no snapshot drawn").split(":")[0].strip("*")
    if not step:
        v.failures.append(f"{v.page}: pressed {label}, and no snapshot of the run was drawn in {WATCH_S:g} s")
    return shown


def reap(port: int) -> None:
    """Let Streamlit drop expired sessions: it does so when it stores another (a session leaving)."""
    client = load_test.WsClient(port, query="seed=2")
    client.rerun()
    client.ws.close()


def soak(args: argparse.Namespace) -> dict:
    port = live_server.free_port()
    why_not = "--no-cgroup" if args.no_cgroup else cgroup_available()
    group = None if why_not else Cgroup(f"attention-lab-soak-{os.getpid()}", args.limit_mib)
    server = start_server(port, Path(args.log), args.ttl, group)
    sampler = Sampler(server)
    sampler.start()
    memory: dict[str, float] = {"server started": sampler.settled(0.5)}
    visits: list[list[Visit]] = []
    probe = None
    steady: list[Companion] = []
    names = args.pages or pages()
    try:
        probe = Probe(port)  # imports torch, pandas and the rest: the first run
        memory["one light session"] = sampler.settled()
        probe.start()
        if args.companions:
            steady = companions(port)
            for c in steady:
                c.start()
        for r in range(args.rounds):
            sampler.phase = f"round {r + 1}"
            plan = [(names[i % len(names)], r * args.sessions + i + 1) for i in range(args.sessions)]
            with concurrent.futures.ThreadPoolExecutor(args.at_once) as pool:
                futures = [pool.submit(visit, port, p, link(p, n), args.matrices) for p, n in plan]
                visits.append([])
                try:
                    for (p, n), future in zip(plan, futures, strict=True):
                        visits[-1].append(future.result())
                        _, resident, anonymous, _ = sampler.samples[-1] if sampler.samples else (0, 0, 0, "")
                        print(f"round {r + 1} visitor {n} ({p}): {resident:.0f} MB resident, {anonymous:.0f} MB "
                              f"anonymous", file=sys.stderr, flush=True)  # fmt: skip
                except BaseException:  # stopped: the visitors not yet started never start
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise
            if server.poll() is not None:
                break
            sampler.phase = f"after round {r + 1}"
            if r == args.rounds - 1:  # the companions stay while the crowd is there, not through the last wait
                for c in steady:
                    c.stopped.set()
            memory[f"round {r + 1} just ended"] = sampler.settled(1.0)  # the last --ttl seconds' sessions held
            time.sleep(args.ttl + 2)  # every session of the round has expired, but Streamlit still holds them
            memory[f"after round {r + 1}, expired"] = sampler.settled(3.0)
            reap(port)  # ... until another session leaves
            memory[f"after round {r + 1}, dropped"] = sampler.settled(3.0)
    finally:
        if probe is not None:
            probe.stopped.set()
            probe.join(timeout=60)
        for c in steady:
            c.stopped.set()
            c.join(timeout=VISIT_TIMEOUT_S)
        sampler.stopped.set()
        sampler.join()
        exit_code = server.poll()
        cgroup = group.summary() if group else None
        children = [] if group is None else [int(p) for p in group.read("cgroup.procs").split()]
        if exit_code is None:
            live_server.stop(server)
        for pid in children:  # a page's worker processes, left behind if the server was killed
            if pid != server.pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.5)
        if group:
            group.remove()
    result = summary(args, memory, sampler, visits, probe, exit_code, cgroup, why_not)
    result["admission"] = admissions(Path(args.log))
    refusals = len(result["admission"]["refused"])
    if args.companions:
        result["companions"] = {
            c.name: {
                "loads": len(c.loads),
                "median_s": round(statistics.median([s for _, s in c.loads]), 2) if c.loads else None,
                "longest_s": round(max(s for _, s in c.loads), 2) if c.loads else None,
                "notes": sorted(set(c.notes))[:3],
                "failures": c.failures[:5],
            }
            for c in steady
        }
        small = result["admission"]["small"]["longest_s"]
        result["failures"] += [f for c in steady for f in c.failures]
        result["ok"] = result["ok"] and not refusals and (small is None or small < args.small_wait_s)
        result["ok"] = result["ok"] and not any(c.failures for c in steady)
    return result


def summary(args: argparse.Namespace, memory: dict, sampler: Sampler, visits: list[list[Visit]], probe,
            exit_code: int | None, cgroup: dict | None, why_not: str | None) -> dict:  # fmt: skip
    peak, phase = sampler.peak(1)
    peak_anon, _ = sampler.peak(2)
    every = [v for round_ in visits for v in round_]
    exports = [e for v in every for e in v.exports]
    by_label: dict[str, dict[str, Any]] = {}
    for e in exports:
        s = by_label.setdefault(e.label, {"asked": 0, "statuses": {}, "max_s": 0.0, "max_bytes": 0, "answers": []})
        s["asked"] += 1
        status = e.status if not e.status.startswith("error") else "error"
        s["statuses"][status] = s["statuses"].get(status, 0) + 1
        s["max_s"] = round(max(s["max_s"], e.seconds), 3)
        s["max_bytes"] = max(s["max_bytes"], e.bytes)
        if e.head and e.head not in s["answers"]:
            s["answers"].append(e.head)
    by_page: dict[str, dict[str, Any]] = {}
    for v in every:
        s = by_page.setdefault(v.page, {"visits": 0, "load_s": [], "downloads": 0})
        s["visits"] += 1
        s["load_s"].append(round(v.load_s, 2))
        s["downloads"] += sum(e.status == "ok" for e in v.exports)
        if v.pressed:
            s.setdefault("pressed", []).append(f"{v.pressed}: {v.watched}")
    growth = None
    if "after round 2, dropped" in memory:  # the larger of the two: with the expired sessions held, and dropped
        growth = max(memory[f"after round 2, {w}"] - memory[f"after round 1, {w}"] for w in ("expired", "dropped"))
    failures = [f for v in every for f in v.failures] + (probe.failures if probe else [])
    failures += [f"{e.label}: {e.status}" for e in exports if e.status.startswith("error")]
    notes = sorted({n for v in every for n in v.notes})
    reruns = [seconds for _, seconds in probe.reruns] if probe else []
    windows = [(v.start, v.end) for v in every]
    during = [s for start, s in (probe.reruns if probe else []) if any(a < start < b for a, b in windows)]
    killed = exit_code is not None or bool(cgroup and cgroup["oom_kills"])

    def ms(values: list[float], q: float) -> int | None:
        return round(1000 * load_test.percentile(values, q)) if values else None

    p95 = ms(reruns, 0.95)
    return {
        "sessions_per_round": args.sessions,
        "rounds": len(visits),
        "at_once": args.at_once,
        "ttl_s": args.ttl,
        "pages": sorted(by_page),
        "limit": f"cgroup v1, {args.limit_mib} MiB (swap included)" if cgroup else f"none ({why_not})",
        "killed": killed,
        "server_exit_code": exit_code,
        "cgroup": cgroup,
        "peak_mb": round(peak, 1),
        "peak_phase": phase,
        "peak_anon_mb": round(peak_anon, 1),
        "memory_mb": {k: round(v, 1) for k, v in memory.items()},
        "second_round_growth_mb": None if growth is None else round(growth, 1),
        "by_page": by_page,
        "exports": by_label,
        "notes": notes[:12],
        "probe_reruns": len(reruns),
        "probe_ms": {"p50": ms(reruns, 0.5), "p95": p95, "max": ms(reruns, 1.0)},
        "probe_ms_during_visits": {"n": len(during), "p50": ms(during, 0.5), "p95": ms(during, 0.95)},
        "failures": failures[:20],
        "ok": not killed and not failures and peak_anon < args.limit_mb
        and (growth is None or growth < args.growth_mb) and (p95 is None or p95 < args.p95_ms),
    }  # fmt: skip


def report(r: dict) -> None:
    print(f"\n== soak: {r['rounds']} rounds of {r['sessions_per_round']} visitors, {r['at_once']} at a time, over "
          f"{len(r['pages'])} pages; limit {r['limit']}; TTL {r['ttl_s']} s")  # fmt: skip
    print(f"killed: {r['killed']}; cgroup: {r['cgroup']}")
    print(f"peak {r['peak_mb']} MB resident ({r['peak_phase']}), {r['peak_anon_mb']} MB anonymous")
    print("memory: " + ", ".join(f"{k}: {v}" for k, v in r["memory_mb"].items()))
    print(f"second round added {r['second_round_growth_mb']} MB")
    for page, s in r["by_page"].items():
        pressed = f"; {s['pressed']}" if s.get("pressed") else ""
        print(f"  {page}: {s['visits']} visits, load {s['load_s']} s, {s['downloads']} downloads{pressed}")
    for label, s in r["exports"].items():
        print(f"  {label}: {s['statuses']}, up to {s['max_s']} s and {s['max_bytes'] / 1e6:.2f} MB {s['answers'][:1]}")
    for note in r["notes"]:
        print(f"  note: {note[:200]}")
    print(f"probe reruns (ms): {r['probe_ms']} of {r['probe_reruns']}; during visits: {r['probe_ms_during_visits']}")
    a = r["admission"]
    for size in ("small", "large"):
        w = a[size]
        print(f"admission, {size} runs: {w['runs']} ({w['waited']} waited); wait median {w['median_s']} s, p95 "
              f"{w['p95_s']} s, longest {w['longest_s']} s")  # fmt: skip
    print(f"refusals: {len(a['refused'])}")
    for line in a["refused"][:5]:
        print("  " + line)
    for name, c in r.get("companions", {}).items():
        print(f"companion {name}: {c['loads']} page loads, median {c['median_s']} s, longest {c['longest_s']} s; "
              f"notes {c['notes']}")  # fmt: skip
    print(f"failures: {len(r['failures'])}")
    for failure in r["failures"]:
        print("  " + failure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=30, help="fresh visitors a round (default 30, at most 120)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds (default 2)")
    parser.add_argument("--at-once", type=int, default=3, help="visitors in flight at a time (default 3)")
    parser.add_argument(
        "--ttl", type=int, default=120, help="server.disconnectedSessionTTL in seconds (default 120, Streamlit's)"
    )
    parser.add_argument("--pages", nargs="*", default=(), help="these pages' URL paths (default: every page)")
    parser.add_argument(
        "--matrices", nargs="*", default=(), help="the matrix picker's other choices to download too (default none)"
    )
    parser.add_argument("--companions", action="store_true", help="a chat visitor and a Real model visitor throughout")
    parser.add_argument(
        "--small-wait-s", type=float, default=SMALL_WAIT_S, help="with --companions: small runs admitted within this"
    )
    parser.add_argument("--limit-mib", type=int, default=LIMIT_MIB, help="the cgroup's memory limit (default 690)")
    parser.add_argument("--no-cgroup", action="store_true", help="run the server without a memory limit")
    parser.add_argument("--limit-mb", type=float, default=LIMIT_MB, help="the sampled peak must stay under this")
    parser.add_argument("--growth-mb", type=float, default=GROWTH_MB, help="the second round must add less")
    parser.add_argument("--p95-ms", type=float, default=P95_MS, help="the probe's rerun p95 must stay under this")
    parser.add_argument("--log", default="/tmp/attention-lab-soak-server.log", help="the server's output")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if not 1 <= args.sessions <= 120 or not 1 <= args.rounds <= 5 or not 1 <= args.ttl <= 600:
        parser.error("--sessions must be 1..120, --rounds 1..5 and --ttl 1..600")
    if not 1 <= args.at_once <= 16:
        parser.error("--at-once must be 1..16")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: still stop the server, remove the cgroup
    result = soak(args)
    report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
