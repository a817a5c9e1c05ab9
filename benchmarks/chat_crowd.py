"""Chat generation beside a crowd, under a real 690 MiB memory limit (issue 50, items 2 and 3).

    python -m benchmarks.chat_crowd [--generators 3] [--heavy 6] [--tokens 64] [--limit-mib 690] [--port 8671]
                                    [--minutes 12] [--alone-clicks 4] [--stream] [--json FILE]

The server is `streamlit run dashboard.py` in a cgroup v1 memory group of --limit-mib MiB from its first byte
(benchmarks/soak.py's `Cgroup`: the kernel kills it if it passes, as Community Cloud does; without root or cgroup
v1 it says so and runs without a limit). First one chat visitor alone presses **Generate one token**
--alone-clicks times on a prompt of its own: the reference. Then, at once:

- --heavy visitors, each opening the dashboard's heaviest links one after another (soak.py's `HEAVIEST`: 512
  tokens, 16 heads, d = 256, each page's own worst) for as long as the generators run;
- --generators chat visitors, each in one session with a prompt of its own of about 64 tokens, pressing
  **Generate one token** until the page shows step --tokens (or --minutes pass); with --stream, the page's
  **Generate 16 tokens** instead (the tokens streamed one model step at a time, each a turn in the queue, then
  one rerun: a click is that whole run).

It reports, per generating visitor, the tokens reached and each click's time (median, p95, longest), the ratio
of the crowd's median click to the reference's (both measured in this run), the longest a generating visitor went
without a new token, the server's admission waits by run size (from its log), the heavy visits done and refused,
and the cgroup's kills and peak. Passes (exit 0) when the server was never killed, every generating visitor
progressed (no gap over --gap-s without a token), and every small run (a chat step) was admitted within
--small-wait-s. A benchmark, not a test: loopback only, numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

from benchmarks import soak  # the cgroup, the server, the heaviest links, a visit, the admission log
from benchmarks.load_test import WsClient, percentile

ROOT = Path(__file__).resolve().parents[1]

STEP = re.compile(r"^Step (\d+):")
GENERATE = "Generate one token"
STREAM = re.compile(r"^Generate \d+ tokens$")  # the page's streamed generation, its number box's default count
HEAVY_PAGES = ("self_attention", "masks", "multi_head", "position", "compare", "cross_attention")


def prompt(visitor: int) -> str:
    """A prompt of its own for each visitor, of about 64 tokens (the page reads at most 64)."""
    return (
        f"Visitor {visitor} writes: the museum opened a new wing where old maps of the river, the harbour and the "
        "hills hang beside letters from sailors, merchants and teachers, and every evening a guide explains how "
        "the town grew from a fishing village into a busy port, while children count the ships and ask"
    )


def step_shown(shown: dict) -> int:
    return max((int(m[1]) for t in shown["text"] if (m := STEP.match(t))), default=0)


class Generator(threading.Thread):
    """One chat visitor in one session: open the chat page on a prompt of its own, press Generate one token until
    step `tokens` or `deadline`; (seconds, step shown) of each click."""

    def __init__(self, port: int, visitor: int, tokens: int, deadline: float, clicks: int | None = None,
                 stream: bool = False) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.port, self.visitor, self.tokens, self.deadline, self.clicks = port, visitor, tokens, deadline, clicks
        self.stream = stream
        self.load_s = 0.0
        self.steps: list[tuple[float, float, int]] = []  # (when, seconds, step shown)
        self.failures: list[str] = []
        self.notes: list[str] = []

    def run(self) -> None:
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        query = urllib.parse.urlencode({"chat_prompt": prompt(self.visitor), "chat_generate": "0"})
        try:
            client = WsClient(self.port, query=query, page="chat_model")
            client.ws.settimeout(soak.VISIT_TIMEOUT_S)
            self.load_s, shown = client.rerun()
            reached = step_shown(shown)
            while reached < self.tokens and time.monotonic() < self.deadline:
                if self.clicks is not None and len(self.steps) >= self.clicks:
                    break
                label = next((b for b in shown["buttons"] if STREAM.match(b)), None) if self.stream else GENERATE
                if label not in shown["buttons"]:
                    self.failures.append(f"visitor {self.visitor}: no {label or STREAM.pattern} button: "
                                         f"{shown['text'][:2]}")  # fmt: skip
                    break
                click = WidgetState(id=shown["buttons"][label], trigger_value=True)
                seconds, shown = client.rerun(states=[click])
                now = step_shown(shown)
                self.steps.append((time.monotonic(), seconds, now))
                self.notes += [t for t in shown["text"] if "memory" in t.lower() or "turn" in t.lower()]
                if shown["exception"]:
                    self.failures.append(f"visitor {self.visitor}: an error: {shown['text'][:2]}")
                reached = max(reached, now)
            client.ws.close()
        except Exception as exc:  # a lost connection, a timeout
            self.failures.append(f"visitor {self.visitor}: {type(exc).__name__}: {exc}")

    @property
    def reached(self) -> int:
        return max((s for _, _, s in self.steps), default=0)

    def longest_gap(self, start: float, end: float) -> float:
        """The longest a visitor went without a new token, from `start` (the crowd's start) to `end` (or its last
        token, once it reached them all)."""
        last, gap, best = start, 0.0, 0
        for when, _, step in self.steps:
            if step > best:
                gap, last, best = max(gap, when - last), when, step
        if best < self.tokens:
            gap = max(gap, end - last)
        return round(gap, 1)


class Heavy(threading.Thread):
    """A heavy visitor: the heaviest links, one page after another, until stopped."""

    def __init__(self, port: int, visitor: int) -> None:
        super().__init__(daemon=True)
        self.port, self.visitor = port, visitor
        self.visits: list[soak.Visit] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        i = self.visitor
        while not self.stopped.is_set():
            page = HEAVY_PAGES[i % len(HEAVY_PAGES)]
            self.visits.append(soak.visit(self.port, page, soak.link(page, 100 * self.visitor + i)))
            i += 1


def clicks_s(gens: list[Generator]) -> list[float]:
    return [s for g in gens for _, s, _ in g.steps]


def stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"n": 0, "median_s": None, "p95_s": None, "longest_s": None}
    return {"n": len(values), "median_s": round(statistics.median(values), 2),
            "p95_s": round(percentile(values, 0.95), 2), "longest_s": round(max(values), 2)}  # fmt: skip


def bench(args: argparse.Namespace) -> dict[str, Any]:
    why_not = "--no-cgroup" if args.no_cgroup else soak.cgroup_available()
    group = None if why_not else soak.Cgroup(f"attention-lab-chat-crowd-{os.getpid()}", args.limit_mib)
    log = Path(args.log)
    server = soak.start_server(args.port, log, 120, group)
    sampler = soak.Sampler(server)
    sampler.start()
    result: dict[str, Any] = {"cgroup": why_not or f"cgroup v1, {args.limit_mib} MiB", "load_start": os.getloadavg(),
                              "click": "Generate 16 tokens" if args.stream else GENERATE}  # fmt: skip
    heavy: list[Heavy] = []
    try:
        alone = Generator(
            args.port, 0, args.tokens, time.monotonic() + 600, clicks=args.alone_clicks, stream=args.stream
        )
        alone.run()  # the reference: one visitor alone (the model read once, as the crowd then finds it)
        sampler.phase = "crowd"
        start = time.monotonic()
        deadline = start + 60 * args.minutes
        heavy = [Heavy(args.port, v) for v in range(1, args.heavy + 1)]
        for h in heavy:
            h.start()
        time.sleep(args.head_start)  # the heavy runs first: the generators find the budget taken
        gens = [Generator(args.port, v, args.tokens, deadline, stream=args.stream)
                for v in range(1, args.generators + 1)]  # fmt: skip
        for g in gens:
            g.start()
        for g in gens:  # a click in flight at the deadline is waited for a minute at most
            g.join(max(deadline - time.monotonic(), 0) + 60)
        crowd_s = time.monotonic() - start
        for h in heavy:  # the heavy visits in flight end with the server
            h.stopped.set()
    finally:
        for h in heavy:
            h.stopped.set()
        sampler.stopped.set()
        killed = server.poll() is not None
        soak.live_server.stop(server)
        result["cgroup_summary"] = group.summary() if group else None
        if group:
            group.remove()
    visits = [v for h in heavy for v in list(h.visits) if v.end]  # the visits that ended before the server did
    alone_s = [s for _, s, _ in alone.steps]
    crowd = stats(clicks_s(gens))
    result.update(
        killed=killed,
        load_end=os.getloadavg(),
        crowd_s=round(crowd_s, 1),
        alone=stats(alone_s),
        crowd_clicks=crowd,
        ratio_median=round(crowd["median_s"] / statistics.median(alone_s), 2) if alone_s and crowd["n"] else None,
        generators=[
            {
                "visitor": g.visitor,
                "reached": g.reached,
                "clicks": len(g.steps),
                "load_s": round(g.load_s, 1),
                "longest_gap_s": g.longest_gap(start, start + crowd_s),
                **stats([s for _, s, _ in g.steps]),
                "failures": g.failures,
                "notes": sorted(set(g.notes))[:3],
            }
            for g in gens
        ],  # fmt: skip
        heavy_visits=len(visits),
        heavy_failed=[f for v in visits for f in v.failures][:10],
        heavy_notes=sorted({n[:160] for v in visits for n in v.notes})[:6],
        admissions=soak.admissions(log),
        peak_anonymous_mb=round(sampler.peak(2)[0], 1),
    )
    small = result["admissions"]["small"]["longest_s"] or 0.0
    result["passed"] = (
        not killed
        and not (result["cgroup_summary"] or {}).get("oom_kills")
        and all(g["reached"] >= args.tokens or g["longest_gap_s"] <= args.gap_s for g in result["generators"])
        and all(g["reached"] > 0 for g in result["generators"])
        and small <= args.small_wait_s
    )
    return result


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("--generators", type=int, default=3)
    cli.add_argument("--heavy", type=int, default=6)
    cli.add_argument("--tokens", type=int, default=64)
    cli.add_argument("--limit-mib", type=int, default=690)
    cli.add_argument("--no-cgroup", action="store_true")
    cli.add_argument("--port", type=int, default=8671)
    cli.add_argument("--minutes", type=float, default=12.0, help="the generators stop after this long")
    cli.add_argument("--alone-clicks", type=int, default=4)
    cli.add_argument("--stream", action="store_true", help="press Generate 16 tokens, not Generate one token")
    cli.add_argument("--head-start", type=float, default=10.0, help="seconds the heavy visitors start first")
    cli.add_argument("--gap-s", type=float, default=60.0, help="the longest a generator may go without a token")
    cli.add_argument("--small-wait-s", type=float, default=10.0)
    cli.add_argument("--log", default="/tmp/attention-lab-chat-crowd.log")
    cli.add_argument("--json", help="write the result here")
    args = cli.parse_args()
    result = bench(args)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    sys.exit(0 if result["passed"] else 1)


if __name__ == "__main__":
    main()
