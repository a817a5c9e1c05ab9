"""The class poll as a room uses it (issue 35): learners answer through 3 replicas behind HAProxy, the instructor's
projector counts them; then the projector's replica is killed, and Redis stops for 10 s.

    .venv/bin/python -m benchmarks.poll_room [--learners 60] [--replicas 3] [--every 0.25] [--netns] [--json FILE]

`deploy/run.sh` (HAProxy, supervisord, the replicas) on loopback, given a redis-server of this script's own, so that
Redis can be stopped and continued. With --netns (root), a rehearsal across hosts on this machine instead: Redis,
HAProxy and each replica in a network namespace of its own (`ip netns`), joined by a bridge as hosts by a switch;
each replica listens on its own address (deploy/replica.sh's LAB_REPLICA_ADDRESS), HAProxy runs deploy/haproxy.cfg
with those addresses, and the browser reaches the proxy's address from this machine's own namespace. There a
killed replica is not started again (no supervisord): its learners go on through the others.

The projector is Chromium (headless) at 1024 x 768: it opens a room and asks the demo's first question. Each learner
is simulated at the protocol level (`Learner`: Streamlit's websocket messages, as a browser sends them, with its own
cookies, so HAProxy places it) on the room's link; the learner's view itself, on a phone in Chromium, is
tests/system/test_poll_replicas.py's. Then:

1. every learner answers, one every --every seconds, while the projector's count is read every 50 ms: the time from
   each click to the count that includes it (the k-th click to the first count of k or more), and from the last
   click to the count of all;
2. the replica that serves the projector is killed (SIGKILL; supervisord starts it again); the projector reloads
   (HAProxy sends it to a live replica) and must show the same room, question and count;
3. Redis is stopped (SIGSTOP) for 10 s: the projector and a learner's page must say the poll is paused, and no page
   show an error; once it is back, a sixth of the learners change their answer, and the projector's split must hold
   every change.

Prints a JSON report (and writes it with --json); exits 1 when a check fails. A benchmark, not a test: loopback
only, bounded waits, and its timings depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import server.poll
from benchmarks import load_test
from harness import live_server
from harness.redis_server import RedisServer, find_redis, free_port

ROOT = Path(__file__).resolve().parents[1]

CHOICES = ("1", "the number of keys")  # two of the demo's first question's answers (ui/views/poll.py, demo_questions)
PAUSE_S = 10


@dataclass
class Room:
    """Where the run's learners go: the proxy's address, each replica's pid by name (s1, s2, ...) and Redis's."""

    proxy: str
    replica_pid: object  # name -> pid
    redis_pid: int
    stop: object  # () -> None
    where: dict = field(default_factory=dict)


def recipe_room(replicas: int, logs: Path) -> Room:
    """deploy/run.sh on loopback, given a redis-server of this script's own."""
    redis = RedisServer(find_redis(), free_port())
    redis.start()
    try:
        recipe = live_server.start_recipe(replicas, logs, env={server.poll.ENV: redis.url})
    except BaseException:
        redis.stop()
        raise

    def stop() -> None:
        live_server.stop_recipe(recipe)
        redis.stop()

    return Room(recipe.proxy, lambda name: live_server.replica_pid(recipe, name), redis.process.pid, stop,
                {"topology": "deploy/run.sh on loopback (supervisord, HAProxy)"})  # fmt: skip


SUBNET = "10.77.0"  # the namespaces' hosts: .1 this machine (the bridge), .2 Redis, .10 HAProxy, .11 on replicas
BRIDGE = "labbr0"


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


def host(name: str, address: str, veth: str) -> None:
    """A network namespace `name` with `address` on its eth0, cabled to the bridge, routed through this machine."""
    sh("ip", "netns", "add", name)
    sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name)
    sh("ip", "link", "set", veth, "master", BRIDGE, "up")
    inside = [
        ("ip", "addr", "add", f"{address}/24", "dev", "eth0"),
        ("ip", "link", "set", "eth0", "up"),
        ("ip", "link", "set", "lo", "up"),
        ("ip", "route", "add", "default", "via", f"{SUBNET}.1"),
    ]
    for argv in inside:
        sh("ip", "netns", "exec", name, *argv)


def netns_room(replicas: int, logs: Path) -> Room:
    """Redis, HAProxy and each replica on a host (network namespace) of its own, on one bridge."""
    names = {"redis": ("lab-redis", f"{SUBNET}.2"), "proxy": ("lab-proxy", f"{SUBNET}.10")}
    names |= {f"s{i}": (f"lab-s{i}", f"{SUBNET}.{10 + i}") for i in range(1, replicas + 1)}
    procs: dict[str, subprocess.Popen] = {}

    def stop() -> None:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        for ns, _ in names.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)

    stop()  # what an interrupted run left behind
    try:
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        sh("ip", "addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        for key, (ns, address) in names.items():
            host(ns, address, f"veth-{key}")
        redis_address = names["redis"][1]
        out = lambda name: (logs / f"{name}.log").open("wb")  # noqa: E731
        procs["redis"] = subprocess.Popen(["ip", "netns", "exec", "lab-redis", find_redis(), "--port", "6379", "--bind",
                                           redis_address, "--protected-mode", "no", "--save", "", "--appendonly", "no"],
                                          stdout=out("redis"), stderr=subprocess.STDOUT)  # fmt: skip
        env = {**os.environ, server.poll.ENV: f"redis://{redis_address}:6379/0", "LAB_FIRST_PORT": "8501",
               "LAB_PYTHON": sys.executable}  # fmt: skip
        for i in range(1, replicas + 1):
            ns, address = names[f"s{i}"]
            procs[f"s{i}"] = subprocess.Popen(["ip", "netns", "exec", ns, "bash", "deploy/replica.sh", "1"], cwd=ROOT,
                                              env={**env, "LAB_REPLICA_ADDRESS": address}, stdout=out(f"s{i}"),
                                              stderr=subprocess.STDOUT)  # fmt: skip
        servers = logs / "servers.cfg"
        lines = ["global", f"    stats socket {logs}/haproxy.sock mode 600 level admin", "backend streamlit"]
        lines += [f"    server s{i} {names[f's{i}'][1]}:8501 cookie s{i}" for i in range(1, replicas + 1)]
        servers.write_text("\n".join(lines) + "\n")
        proxy_address = names["proxy"][1]
        haproxy = live_server.find_haproxy() or "/usr/sbin/haproxy"
        argv = ["ip", "netns", "exec", "lab-proxy", haproxy, "-db", "-f", "deploy/haproxy.cfg", "-f", str(servers)]
        env = {**os.environ, "LAB_ADDRESS": proxy_address, "LAB_PORT": "8501", "LAB_LOG_DIR": str(logs)}
        procs["proxy"] = subprocess.Popen(argv, cwd=ROOT, stdout=out("haproxy"), stderr=subprocess.STDOUT, env=env)
        proxy = f"http://{proxy_address}:8501"
        urls = [proxy] + [f"http://{names[f's{i}'][1]}:8501" for i in range(1, replicas + 1)]
        live_server.wait_for("every host answering", lambda: all(live_server.health(u) == "ok" for u in urls), 240)
        time.sleep(3)  # HAProxy marks a server up after two good checks
    except BaseException:
        stop()
        raise

    def pid(name: str) -> int | None:
        proc = procs.get(name)
        return proc.pid if proc is not None and proc.poll() is None else None  # ip netns exec execs the command

    where = {"topology": "network namespaces on one bridge",
             "hosts": {key: f"{ns} {address}" for key, (ns, address) in names.items()}}  # fmt: skip
    return Room(proxy, pid, procs["redis"].pid, stop, where)


def cpu_s(pid: int | None) -> float:
    """A process's CPU seconds so far (user + system), from /proc; 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError, TypeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int | None) -> float:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, IndexError, TypeError):
        return 0.0


# What the capacity is read against (docs/deploy.md, "How big a room"): a replica's 690 MiB limit less its 6 %
# reserve and 200 MB for large runs (benchmarks/capacity.py's budget), and 80 % of its one core.
REPLICA_MIB, RESERVE, LARGE_RUNS_MIB, CORE_SHARE = 690, 0.06, 200 * 1e6 / 2**20, 0.8
REFRESH_S = 3  # a learner's page looks for the next question this often (ui/views/poll.py, LEARNER_EVERY_S)


def refresh_cost(learner: Learner, pid: int | None, looks: int = 30, rounds: int = 3) -> dict:
    """The CPU one learner's refresh costs its replica: `looks` runs of the learner's page, less what the replica
    spends meanwhile without them (its other sessions: the projector's ticks), median of `rounds`. A whole run of
    the page, where the refresh reruns only its fragment: an upper bound."""
    costs = []
    for _ in range(rounds):
        before, t0 = cpu_s(pid), time.monotonic()
        time.sleep(3)
        idle_rate = (cpu_s(pid) - before) / (time.monotonic() - t0)
        before, t0 = cpu_s(pid), time.monotonic()
        for _ in range(looks):
            learner.look()
        spent = cpu_s(pid) - before - idle_rate * (time.monotonic() - t0)
        costs.append(max(spent, 0.0) / looks)
    return {"median_ms": round(1000 * statistics.median(costs), 2), "runs_ms": [round(1000 * c, 2) for c in costs]}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def replica_of(context) -> str:
    """The replica HAProxy placed this browser on: its SRV cookie (deploy/haproxy.cfg)."""
    return next((c["value"] for c in await context.cookies() if c["name"] == "SRV"), "?")


async def count(projector) -> int | None:
    try:
        text = await projector.get_by_test_id("stMetricValue").first.inner_text(timeout=2_000)
        return int(text.strip())
    except Exception:  # a rerun between reads: no metric for a moment
        return None


async def split(projector) -> dict[str, int]:
    """The projector's split, {choice: count}, from its lines 'choice: n (p %)'."""
    body = await projector.inner_text("body")
    return {c: int(m.group(1)) for c in CHOICES if (m := re.search(rf"(?m)^{re.escape(c)}: (\d+) \(", body))}


async def wait_until(what: str, check, timeout: float, every: float = 0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = await check()
        if got:
            return got
        await asyncio.sleep(every)
    raise TimeoutError(f"{what}: not within {timeout:g} s")


class Learner:
    """A learner's browser at the protocol level: load_test's WsClient speaks Streamlit's own websocket messages,
    as the browser does, without drawing anything (60 Chromium pages would take the 2 cores themselves). It opens the
    room's link through the proxy (whose cookie places it on a replica), keeps the voter token the page gives it in
    its address, and clicks an answer's button as a browser's click does (the button's trigger)."""

    def __init__(self, base: str, code: str) -> None:
        self.base = base
        self.client = load_test.WsClient(base=base, page="poll", query=f"room={code}")
        self.reconnects = 0
        self.shown = self.look()

    @property
    def replica(self) -> str:
        return self.client.cookies.get("SRV", "?")

    def look(self) -> dict:
        _, self.shown = self._rerun(())
        return self.shown

    def click(self, label: str) -> dict:
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        def press() -> list:
            if label not in self.shown["buttons"]:  # the page it last saw had no answers (paused): look again first
                self.look()
            return [WidgetState(id=self.shown["buttons"][label], trigger_value=True)]

        _, self.shown = self._rerun(press)
        return self.shown

    def _rerun(self, states) -> tuple[float, dict]:
        """One run; when the websocket has closed (its replica died), the browser's reconnect first: the same
        address (its voter token included) and cookies, which HAProxy sends to a live replica, then the run again.
        states: the widget states, or a function that makes them from what the page shows."""
        import websocket

        deadline = time.monotonic() + 60
        while True:
            try:
                return self.client.rerun(states=states() if callable(states) else states)
            except (OSError, websocket.WebSocketException):
                if time.monotonic() > deadline:
                    raise
                self.client.ws.close()
                time.sleep(0.5)
                try:
                    self.client = load_test.WsClient(
                        base=self.base, page="poll", query=self.client.query, cookies=self.client.cookies
                    )
                    _, self.shown = self.client.rerun()  # the view from the address, before the move again
                    self.reconnects += 1
                except (OSError, websocket.WebSocketException):
                    continue


async def run(args: argparse.Namespace) -> dict:
    from playwright.async_api import async_playwright

    report: dict = {"learners": args.learners, "replicas": args.replicas, "click_every_s": args.every,
                    "cpus": os.cpu_count(), "checks": {}}  # fmt: skip
    checks = report["checks"]
    logs = Path(tempfile.mkdtemp(prefix="poll-room-"))
    room = (netns_room if args.netns else recipe_room)(args.replicas, logs)
    report["room"] = room.where
    try:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=live_server.require_chromium(),
                                               args=live_server.CHROMIUM_ARGS)  # fmt: skip
            host = await browser.new_context(viewport={"width": 1024, "height": 768})
            projector = await host.new_page()
            await projector.goto(room.proxy + "/poll_room", timeout=120_000)
            await projector.get_by_role("button", name="Open a room").click(timeout=120_000)
            await projector.get_by_role("button", name="Ask").click(timeout=60_000)
            await projector.get_by_text(re.compile("^Answered$")).first.wait_for(timeout=60_000)
            code = re.search(r"Room code\s+([A-Z2-9]{5})", await projector.inner_text("body")).group(1)
            report["projector_replica"] = await replica_of(host)
            names = [f"s{i}" for i in range(1, args.replicas + 1)]
            rest = {n: rss_mib(room.replica_pid(n)) for n in names}

            started = time.monotonic()
            learners: list[Learner] = []
            for first in range(0, args.learners, 6):  # six learners open the link at once
                batch = range(first, min(first + 6, args.learners))
                learners += await asyncio.gather(*(asyncio.to_thread(Learner, room.proxy, code) for _ in batch))
            report["learners_loaded_s"] = round(time.monotonic() - started, 1)
            loaded = {n: rss_mib(room.replica_pid(n)) for n in names}
            report["replica_rss_mib"] = {"at rest": {n: round(v) for n, v in rest.items()},
                                         "learners in": {n: round(v) for n, v in loaded.items()}}  # fmt: skip
            report["mib_a_learner"] = round((sum(loaded.values()) - sum(rest.values())) / args.learners, 2)
            busy = {n: cpu_s(room.replica_pid(n)) for n in names}
            phase = time.monotonic()
            checks["every learner sees the question's answers"] = all(
                CHOICES[0] in x.shown["buttons"] for x in learners
            )
            placed = [x.replica for x in learners]
            report["learners_per_replica"] = {r: placed.count(r) for r in sorted(set(placed))}
            errors = []  # error elements any learner's run showed

            # 1. every learner answers; the projector's count read every 50 ms meanwhile
            seen: list[tuple[float, int]] = []
            done = asyncio.Event()

            async def watch() -> None:
                while not done.is_set():
                    n = await count(projector)
                    if n is not None:
                        seen.append((time.monotonic(), n))
                    await asyncio.sleep(0.05)

            watcher = asyncio.create_task(watch())
            clicks, picks = [], []
            for i, learner in enumerate(learners):
                pick = CHOICES[i % 3 == 0]
                clicks.append(time.monotonic())
                errors.append((await asyncio.to_thread(learner.click, pick))["exception"])
                picks.append(pick)
                await asyncio.sleep(args.every)

            async def all_in() -> bool:
                return bool(seen) and seen[-1][1] >= args.learners

            try:
                await wait_until("the projector counts every answer", all_in, 60)
            finally:
                done.set()
                await watcher
            latencies = []
            for k, clicked in enumerate(clicks, start=1):
                counted = next((t for t, n in seen if n >= k and t >= clicked), None)
                latencies.append(None if counted is None else counted - clicked)
            measured = [x for x in latencies if x is not None]
            report["answer_to_count_s"] = {"median": round(statistics.median(measured), 3),
                                           "p95": round(percentile(measured, 0.95), 3), "max": round(max(measured), 3),
                                           "measured": len(measured)}  # fmt: skip
            all_counted = next(t for t, n in seen if n >= args.learners)
            report["last_answer_to_all_counted_s"] = round(all_counted - clicks[-1], 3)
            checks["all counted within 2 s of the last answer"] = report["last_answer_to_all_counted_s"] <= 2
            checks["p95 answer to count <= 1 s"] = report["answer_to_count_s"]["p95"] <= 1
            want = {c: picks.count(c) for c in CHOICES}
            checks["split as answered"] = await split(projector) == want

            took = time.monotonic() - phase
            report["replica_cores_busy_while_answering"] = {
                n: round((cpu_s(room.replica_pid(n)) - busy[n]) / took, 2) for n in names
            }
            pid = room.replica_pid(learners[0].replica) if learners[0].replica in names else None
            cost = await asyncio.to_thread(refresh_cost, learners[0], pid)
            report["learner_refresh_cpu_ms"] = cost
            by_cpu = CORE_SHARE * REFRESH_S / max(cost["median_ms"] / 1000, 1e-4)
            budget = REPLICA_MIB * (1 - RESERVE) - LARGE_RUNS_MIB - statistics.median(rest.values())
            by_memory = budget / max(report["mib_a_learner"], 0.05)
            report["learners_a_replica"] = {"by cpu": int(by_cpu), "by memory": int(by_memory),
                                            "both": int(min(by_cpu, by_memory))}  # fmt: skip

            # 2. the projector's replica dies; the room and its count are intact on reload
            name = report["projector_replica"]
            os.kill(room.replica_pid(name), signal.SIGKILL)
            killed = time.monotonic()
            print(json.dumps(report), file=sys.stderr, flush=True)  # what phase 1 measured, whatever follows
            await projector.reload(timeout=180_000)
            try:
                await wait_until("the projector's room after the kill", lambda: count(projector), 180)
            except TimeoutError:  # a check that fails, not a run that stops: the figures above are kept
                report["projector_back_after_kill_s"] = None
            body = await projector.inner_text("body")
            if "projector_back_after_kill_s" not in report:
                report["projector_back_after_kill_s"] = round(time.monotonic() - killed, 1)
            report["projector_replica_after_kill"] = await replica_of(host)
            checks["room intact after the projector's replica died"] = (
                re.search(rf"Room code\s+{code}", body) is not None
                and await count(projector) == args.learners
                and await split(projector) == want
            )

            # 3. Redis stops for 10 s; the poll pauses, nothing breaks; answers after it is back all count
            os.kill(room.redis_pid, signal.SIGSTOP)
            stopped = time.monotonic()
            try:
                paused = await wait_until("the projector says paused", lambda: projector.get_by_text(
                    re.compile("poll is paused")).count(), PAUSE_S)  # fmt: skip
                report["paused_shown_after_s"] = round(time.monotonic() - stopped, 1)
                looked = await asyncio.to_thread(learners[1].look)  # a learner's page while Redis is away
                await asyncio.sleep(max(0.0, PAUSE_S - (time.monotonic() - stopped)))
            except TimeoutError:
                paused, looked = 0, {"text": [], "exception": 0}
            finally:
                os.kill(room.redis_pid, signal.SIGCONT)
            report["redis_stopped_s"] = round(time.monotonic() - stopped, 1)
            checks["paused shown while Redis was stopped"] = bool(paused)
            checks["a learner's page says paused while Redis is stopped"] = any("paused" in t for t in looked["text"])
            errors.append(looked["exception"])
            checks["no traceback on the projector"] = "Traceback" not in await projector.inner_text("body")
            await wait_until("the count after Redis is back", lambda: count(projector), 60)
            changers = range(0, args.learners, 6)
            for i in changers:
                other = CHOICES[picks[i] == CHOICES[0]]
                errors.append((await asyncio.to_thread(learners[i].click, other))["exception"])
                picks[i] = other
            want = {c: picks.count(c) for c in CHOICES}

            async def holds_every_change() -> bool:
                return await split(projector) == want and await count(projector) == args.learners

            try:
                await wait_until("every change after Redis is back counted", holds_every_change, 30)
                checks["no answer lost after Redis is back"] = True
            except TimeoutError:
                checks["no answer lost after Redis is back"] = False
            report["learner_reconnects"] = sum(x.reconnects for x in learners)
            report["split_at_end"] = await split(projector)
            report["split_answered"] = want
            checks["no error element on any learner's page"] = sum(errors) == 0
            await browser.close()
    finally:
        room.stop()
    report["ok"] = all(checks.values())
    return report


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--learners", type=int, default=60)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--every", type=float, default=0.25, help="seconds between two learners' answers")
    p.add_argument("--netns", action="store_true", help="each server on a host of its own (network namespaces; root)")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    report = asyncio.run(run(args))
    report["load_average_1min_at_end"] = round(os.getloadavg()[0], 2)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    sys.exit(0 if report["ok"] else 1)


if __name__ == "__main__":
    main()
