"""Soak: fresh sessions, one after another, open the heaviest link, move a slider, ask for every export and
leave; the server's resident memory is sampled throughout, and a second round follows once the first
round's sessions have expired.

    python benchmarks/soak.py [--sessions 30] [--rounds 2] [--ttl 120] [--matrices omega ...] [--query Q]
                              [--json FILE]

Starts `streamlit run dashboard.py` on a free loopback port with `server.disconnectedSessionTTL` set to
--ttl seconds: Streamlit keeps a session whose websocket closed for that long (120 s by default, kept here)
in case its tab reconnects, so the sessions that left in the last two minutes are all still held.

Each session speaks Streamlit's websocket protocol (the load test's client): it opens the self-attention
page at the largest sizes the controls allow (512 tokens, 16 heads, d_model, d_k and d_v 256), moves the
seed slider to a value of its own (so each has its own result, ~140 MB at these sizes, as different
visitors would), and then asks for every download the page offers, for every choice of the page's "Matrix"
select box (or those given with --matrices): a deferred download is requested over the websocket, as a
click does, and its file fetched over HTTP from the media endpoint; then it closes its websocket. --query
opens another link instead (e.g. a result whose JSON is just inside the download bound).

Meanwhile a light session on the default link reruns the page every 0.2 s: its rerun times during an
export show how long another user waits behind one. After each round the benchmark waits for the
sessions to expire and records the server's resident memory twice: while Streamlit still holds the expired
sessions (it drops them only when it stores another, so on an idle server they stay, up to 128 of them),
and after a session connecting and leaving has made it drop them. Memory is the process and its children,
in MB of 10^6 bytes: the stricter reading of Community Cloud's "690MB".

Passes (exit 0) when the peak stays under --limit-mb (690) and the second round adds less than
--growth-mb (50) to what the first left, counted either way; a benchmark, not a test: loopback only, numbers
depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import live_server  # noqa: E402  (the tests' way to start the server)
import load_test  # noqa: E402  (its websocket client and memory reading)

HEAVY = {
    "sentence": " ".join(f"w{i}" for i in range(1, 513)),  # 512 distinct tokens: the most the page allows
    "heads": "16",
    "d_model": "256",
    "d_k": "256",
    "d_v": "256",
}
LIMIT_MB = 690.0  # Streamlit Community Cloud's guaranteed memory for the whole app, every visitor together
GROWTH_MB = 50.0
SAMPLE_S = 0.1
PROBE_PAUSE_S = 0.2


def rss_mb(server) -> float:
    """Resident memory of the server process and its children, in MB (10^6 bytes)."""
    return load_test.rss_mib(server) * 2**20 / 1e6


class Sampler(threading.Thread):
    """Samples the server's memory every SAMPLE_S seconds, each sample tagged with the current phase."""

    def __init__(self, server) -> None:
        super().__init__(daemon=True)
        self.server = server
        self.phase = "start"
        self.samples: list[tuple[float, float, str]] = []  # (seconds since start, MB, phase)
        self.stopped = threading.Event()
        self.t0 = time.monotonic()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.samples.append((time.monotonic() - self.t0, rss_mb(self.server), self.phase))
            self.stopped.wait(SAMPLE_S)

    def peak(self) -> tuple[float, str]:
        _, mb, phase = max(self.samples, key=lambda s: s[1])
        return mb, phase

    def settled(self, seconds: float = 2.0) -> float:
        """The median of the last few seconds' samples."""
        time.sleep(seconds)
        cut = time.monotonic() - self.t0 - seconds
        return statistics.median(mb for t, mb, _ in self.samples if t >= cut)


class Probe(threading.Thread):
    """A light session rerunning the default page over and over: (start, seconds) of each rerun."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.client = load_test.WsClient(port, query="seed=1")
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
    load_s: float = 0.0
    slider_s: float = 0.0
    reruns_s: list[float] = field(default_factory=list)
    exports: list[Export] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the page said about its downloads
    failures: list[str] = field(default_factory=list)


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


def visit(port: int, page: str, query: str, step: int, matrices: Sequence[str] = ()) -> Visit:
    """One fresh session: open the link, move the seed slider `step` up (each session its own result, as
    different visitors have), ask for every export (of the matrix picker's choices: these, or all), leave."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    v = Visit()
    client = load_test.WsClient(port, query=query, page=page)
    try:
        v.load_s, shown = client.rerun()
        seed = int(dict(urllib.parse.parse_qsl(query)).get("seed", 123))
        v.slider_s, shown = client.rerun({"seed": seed + step})
        # the matrix picker's other choices, each a rerun (the seed stays: the page keeps it in the session)
        picker = next((w for k, w in shown["selectboxes"].items() if k.startswith("Matrix")), None)
        choices = [None, *(c for c in (picker[1][1:] if picker else []) if not matrices or c in matrices)]
        asked: set[str] = set()
        for choice in choices:
            if choice is not None:
                seconds, shown = client.rerun(states=[WidgetState(id=picker[0], string_value=choice)])
                v.reruns_s.append(seconds)
            if shown["exception"]:
                v.failures.append(f"the page showed an error: {[t[:200] for t in shown['text']][:3]}")
            v.notes += [t for t in shown["text"] if "download" in t.lower() or "command line" in t.lower()]
            # a run's buttons are asked for before the next run: each run registers new deferred files
            for button in shown["downloads"]:
                if button["label"] not in asked:
                    asked.add(button["label"])
                    v.exports.append(download(client, button))
    except Exception as exc:  # a lost connection, a timeout
        v.failures.append(f"{type(exc).__name__}: {exc}")
    finally:
        client.ws.close()
    return v


def reap(port: int) -> None:
    """Let Streamlit drop expired sessions: it does so when it stores another (a session leaving)."""
    client = load_test.WsClient(port, query="seed=2")
    client.rerun()
    client.ws.close()


def soak(args: argparse.Namespace) -> dict:
    port = live_server.free_port()
    options = ("--server.disconnectedSessionTTL", str(args.ttl))
    server = live_server.start(port, Path(args.log), options=options)
    sampler = Sampler(server)
    sampler.start()
    query = args.query or urllib.parse.urlencode(HEAVY)
    memory: dict[str, float] = {"server started": rss_mb(server)}
    visits: list[list[Visit]] = []
    probe = None
    try:
        probe = Probe(port)  # imports torch, pandas and the rest: the first run
        memory["one light session"] = sampler.settled()
        probe.start()
        for r in range(args.rounds):
            sampler.phase = f"round {r + 1}"
            visits.append([])
            for i in range(args.sessions):
                step = r * args.sessions + i + 1
                visits[-1].append(visit(port, args.page, query, step, args.matrices))
                print(f"round {r + 1} session {i + 1}: {rss_mb(server):.0f} MB", file=sys.stderr, flush=True)
            sampler.phase = f"after round {r + 1}"
            memory[f"round {r + 1} just ended"] = sampler.settled(1.0)  # the last --ttl seconds' sessions held
            time.sleep(args.ttl + 2)  # every session of the round has expired, but Streamlit still holds them
            memory[f"after round {r + 1}, expired"] = sampler.settled(3.0)
            reap(port)  # ... until another session leaves
            memory[f"after round {r + 1}, dropped"] = sampler.settled(3.0)
    finally:
        if probe is not None:
            probe.stopped.set()
            probe.join(timeout=60)
        sampler.stopped.set()
        sampler.join()
        live_server.stop(server)
    return summary(args, memory, sampler, visits, probe)


def summary(args: argparse.Namespace, memory: dict, sampler: Sampler, visits: list[list[Visit]], probe) -> dict:
    peak, phase = sampler.peak()
    every = [v for round_ in visits for v in round_]
    exports = [e for v in every for e in v.exports]
    by_label: dict[str, dict[str, Any]] = {}
    for e in exports:
        s = by_label.setdefault(e.label, {"asked": 0, "statuses": {}, "max_s": 0.0, "max_bytes": 0, "answers": []})
        s["asked"] += 1
        s["statuses"][e.status] = s["statuses"].get(e.status, 0) + 1
        s["max_s"] = round(max(s["max_s"], e.seconds), 3)
        s["max_bytes"] = max(s["max_bytes"], e.bytes)
        if e.head and e.head not in s["answers"]:
            s["answers"].append(e.head)
    windows = [(e.start, e.start + e.seconds) for e in exports if e.status == "ok" and e.seconds > 0.05]
    during, other = [], []
    for start, seconds in probe.reruns if probe else []:
        overlaps = any(start < end and start + seconds > begin for begin, end in windows)
        (during if overlaps else other).append(seconds)
    growth = None
    if "after round 2, dropped" in memory:  # the larger of the two: with the expired sessions held, and dropped
        growth = max(memory[f"after round 2, {w}"] - memory[f"after round 1, {w}"] for w in ("expired", "dropped"))
    failures = [f for v in every for f in v.failures] + (probe.failures if probe else [])
    notes = sorted({n for v in every for n in v.notes})

    def ms(values: list[float], q: float) -> int | None:
        return round(1000 * load_test.percentile(values, q)) if values else None

    return {
        "sessions_per_round": args.sessions,
        "rounds": len(visits),
        "ttl_s": args.ttl,
        "link": f"/{args.page}?" + (args.query[:200] or urllib.parse.urlencode({**HEAVY, "sentence": "w1 … w512"})),
        "peak_mb": round(peak, 1),
        "peak_phase": phase,
        "memory_mb": {k: round(v, 1) for k, v in memory.items()},
        "second_round_growth_mb": None if growth is None else round(growth, 1),
        "load_s_median": round(statistics.median(v.load_s for v in every), 2) if every else None,
        "slider_s_median": round(statistics.median(v.slider_s for v in every), 2) if every else None,
        "exports": by_label,
        "notes": notes[:10],
        "probe_reruns": len(probe.reruns) if probe else 0,
        "probe_ms_during_exports": {"n": len(during), "p50": ms(during, 0.5), "max": ms(during, 1.0)},
        "probe_ms_otherwise": {"n": len(other), "p50": ms(other, 0.5), "max": ms(other, 1.0)},
        "failures": failures[:20],
        "ok": not failures and peak < args.limit_mb and (growth is None or growth < args.growth_mb),
    }


def report(r: dict) -> None:
    print(f"\n== soak: {r['rounds']} rounds of {r['sessions_per_round']} sessions on {r['link']}, TTL {r['ttl_s']} s")
    print(f"peak {r['peak_mb']} MB ({r['peak_phase']}); " + ", ".join(f"{k}: {v}" for k, v in r["memory_mb"].items()))
    print(f"second round added {r['second_round_growth_mb']} MB")
    print(f"load {r['load_s_median']} s, slider {r['slider_s_median']} s (medians)")
    for label, s in r["exports"].items():
        print(f"  {label}: {s['statuses']}, up to {s['max_s']} s and {s['max_bytes'] / 1e6:.2f} MB {s['answers'][:1]}")
    for note in r["notes"]:
        print(f"  note: {note[:200]}")
    print(f"probe reruns during exports (ms): {r['probe_ms_during_exports']}; otherwise: {r['probe_ms_otherwise']}")
    print(f"failures: {len(r['failures'])}")
    for failure in r["failures"]:
        print("  " + failure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=30, help="fresh sessions a round (default 30, at most 60)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds (default 2)")
    parser.add_argument(
        "--ttl", type=int, default=120, help="server.disconnectedSessionTTL in seconds (default 120, Streamlit's)"
    )
    parser.add_argument("--page", default="", help="the page's URL path (default: the self-attention page)")
    parser.add_argument("--query", default="", help="another link's query string (default: the heaviest link)")
    parser.add_argument(
        "--matrices", nargs="*", default=(), help="the matrix picker's choices to download (default: all of them)"
    )
    parser.add_argument("--limit-mb", type=float, default=LIMIT_MB, help="the peak must stay under this")
    parser.add_argument("--growth-mb", type=float, default=GROWTH_MB, help="the second round must add less")
    parser.add_argument("--log", default="/tmp/attention-lab-soak-server.log", help="the server's output")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if not 1 <= args.sessions <= 60 or not 1 <= args.rounds <= 5 or not 1 <= args.ttl <= 600:
        parser.error("--sessions must be 1..60, --rounds 1..5 and --ttl 1..600")
    result = soak(args)
    report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
