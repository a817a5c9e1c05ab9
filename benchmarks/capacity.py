"""How big a room: replicas and nodes for a class of 40, 300, 1,000 and 10,000 learners, from measured figures.

    .venv/bin/python -m benchmarks.capacity [--load FILE] [--sessions 30] [--duration 90] [--think 5]
                                            [--node-cpu 4] [--node-gib 16] [--out FILE]

What it measures (or reads):
- a replica's memory at rest and per active learner, and its CPU per active learner: `benchmarks/load_test.py`
  with its websocket client on one `streamlit run` process, --sessions learners on the Self-attention page, each
  moving a slider every --think seconds (a learner following a lesson, not a load generator); or a JSON it wrote
  earlier (--load);
- the class poll's Redis: `benchmarks/bench_poll.py`'s room of 300 answering, against a local redis-server, for the
  time one answer and one learner's refresh (every 3 s) take (a round trip from this process: an upper bound of
  what Redis itself spends);
- what the deploy files promise: a replica's memory limit, CPU request and limit and the autoscaler's maximum
  (deploy/kubernetes/app.yaml), HAProxy's connections per replica and per client address (deploy/haproxy.cfg).

How it counts: a replica takes learners until the first of its memory (its limit less the 6 % reserve and the
200 MB its visitors' large runs may hold together: what is left over its memory at rest, divided by a learner's
share) or its CPU (one core: a Streamlit process runs its scripts under one interpreter lock; 80 % of it, so a
rerun stays prompt) runs out. Nodes hold as many replicas as their CPU (by the request) and memory (by the limit)
allow. A room beyond the autoscaler's maximum, a campus behind one address beyond HAProxy's per-address bound, and
Redis past what one core answers are named as the next limits. Nodes are packed by what a full replica uses (its
CPU request, or more when its learners keep it busier) and by its memory limit.

Prints the table in Markdown and writes it to --out (default: benchmarks/results/<today>-capacity.md). A benchmark
script, not a test: the figures depend on the machine it runs on.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from harness.redis_server import find_redis

ROOT = Path(__file__).resolve().parents[1]

CLASSES = (40, 300, 1_000, 10_000)
CPU_SHARE = 0.8  # of the one core a replica's scripts can use
RESERVE = 0.06  # server/memory.py's RESERVE_FRACTION
RUNS_MB = 200  # server/budget.py's BUDGET_MB: the visitors' large runs, together
REFRESH_S = 3.0  # a learner's poll page reads the room this often
MIB = 2**20


def quantity(text: str) -> float:
    """A Kubernetes quantity in its base unit: "500m" CPU is 0.5, "690Mi" is 690 MiB in bytes."""
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 1e3, "M": 1e6, "G": 1e9}
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text))
    assert match, text
    return float(match.group(1)) * units.get(match.group(2), 1)


def deploy_figures() -> dict[str, float]:
    """What deploy/ promises a replica: memory limit, CPU request and limit, the autoscaler's maximum, HAProxy's
    connections a replica and a client address."""
    docs = list(yaml.safe_load_all((ROOT / "deploy/kubernetes/app.yaml").read_text()))
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    hpa = next(d for d in docs if d and d["kind"] == "HorizontalPodAutoscaler")
    resources = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]
    haproxy = (ROOT / "deploy/haproxy.cfg").read_text()
    per_replica = re.search(r"default-server .*? maxconn (\d+)", haproxy)
    per_address = re.search(r"LAB_CONN_PER_ADDRESS-(\d+)", haproxy)
    assert per_replica and per_address, "deploy/haproxy.cfg: maxconn or the per-address bound moved"
    return {
        "memory_limit_mib": quantity(resources["limits"]["memory"]) / MIB,
        "cpu_request": quantity(resources["requests"]["cpu"]),
        "cpu_limit": quantity(resources["limits"]["cpu"]),
        "max_replicas": hpa["spec"]["maxReplicas"],
        "conn_per_replica": int(per_replica.group(1)),
        "conn_per_address": int(per_address.group(1)),
    }


def measure_load(sessions: int, duration: float, think: float) -> dict:
    """benchmarks/load_test.py's websocket client on one process: its JSON."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    cmd = [sys.executable, "-m", "benchmarks.load_test", "--client", "ws", "--sessions", str(sessions),
           "--duration", str(duration), "--think", str(think), "--json", str(out)]  # fmt: skip
    subprocess.run(cmd, cwd=ROOT, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return json.loads(out.read_text())


def learner_figures(load: dict) -> dict[str, float]:
    """A replica's memory at rest (one session) and a learner's share of memory and CPU, from a load_test JSON."""
    rss = load["rss_mib"]
    n = load["sessions"]
    one = rss["1 sessions loaded"]
    most = max(rss.get(f"{n} sessions loaded", 0.0), rss.get("at the end", 0.0))
    return {
        "sessions": n,
        "think_s": load["think_s"],
        "rest_mib": one,
        "per_learner_mib": max(most - one, 0.0) / max(n - 1, 1),
        "per_learner_cores": load["cpu_cores_busy_moving"]["server"] / n,
        "latency_p95_ms": load["latency_p95_ms"],
    }


def measure_redis(learners: int = 300, runs: int = 3) -> dict[str, float] | None:
    """benchmarks/bench_poll.py's room against a local redis-server, run as load_test is: ms an answer and ms a
    learner's refresh (medians), None without a redis-server."""
    if find_redis() is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "poll.json"
        cmd = [sys.executable, "-m", "benchmarks.bench_poll", "--learners", str(learners), "--runs", str(runs),
               "--json", str(out)]  # fmt: skip
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        medians = json.loads(out.read_text())["redis"]
    return {k: medians[k] for k in ("answer (ms)", "learner refresh (ms)")}


def table(learner: dict, deploy: dict, redis: dict | None, node_cpu: float, node_gib: float) -> str:
    usable = deploy["memory_limit_mib"] * (1 - RESERVE) - RUNS_MB * 1e6 / MIB - learner["rest_mib"]
    by_memory = math.floor(usable / learner["per_learner_mib"]) if learner["per_learner_mib"] > 0 else math.inf
    by_cpu = math.floor(min(1.0, deploy["cpu_limit"]) * CPU_SHARE / learner["per_learner_cores"])
    per_replica = max(1, min(by_memory, by_cpu))
    binds = "memory" if by_memory <= by_cpu else "CPU"
    busy = per_replica * learner["per_learner_cores"]  # what a full replica uses, above its request or not
    per_node = min(math.floor(node_cpu / max(deploy["cpu_request"], busy)),
                   math.floor(node_gib * 1024 / deploy["memory_limit_mib"]))  # fmt: skip
    redis_learners = (REFRESH_S * 1000 / redis["learner refresh (ms)"]) if redis else None
    lines = [
        f"One replica: {learner['rest_mib']:.0f} MiB at rest; an active learner (a slider moved every "
        f"{learner['think_s']:g} s) adds {learner['per_learner_mib']:.1f} MiB and {learner['per_learner_cores']:.3f} "
        f"of a core (measured with {learner['sessions']} learners; their rerun p95 {learner['latency_p95_ms']} ms).",
        f"So a replica ({deploy['memory_limit_mib']:.0f} MiB, {deploy['cpu_limit']:g} CPU) takes {by_memory} learners "
        f"by memory (after the {RESERVE:.0%} reserve and {RUNS_MB} MB for large runs) and {by_cpu} by CPU "
        f"({CPU_SHARE:.0%} of one core): **{per_replica} learners a replica** ({binds} binds).",
        f"A node of {node_cpu:g} vCPU and {node_gib:g} GiB holds {per_node} replicas (each full one busy "
        f"{busy:.2f} of a core, its request {deploy['cpu_request']:g}; memory limit "
        f"{deploy['memory_limit_mib']:.0f} MiB).",
        "",
        "| learners | replicas | + one for failover | nodes | what limits next |",
        "| ---: | ---: | ---: | ---: | --- |",
    ]
    for n in CLASSES:
        replicas = math.ceil(n / per_replica)
        spare = replicas + 1
        nodes = math.ceil(spare / per_node)
        nexts = []
        if spare > deploy["max_replicas"]:
            nexts.append(f"over the autoscaler's maxReplicas {deploy['max_replicas']}: raise it")
        if n > deploy["conn_per_address"]:
            nexts.append(f"a class behind one address (a campus NAT) passes HAProxy's {deploy['conn_per_address']} "
                         "connections per address: raise LAB_CONN_PER_ADDRESS")  # fmt: skip
        if redis_learners is not None and n > redis_learners:
            nexts.append(f"Redis: one core answers about {redis_learners:,.0f} learners' refreshes (every "
                         f"{REFRESH_S:g} s) by this round-trip bound: measure it there, or shard rooms")  # fmt: skip
        if not nexts:
            nexts.append(f"a replica's {binds}")
        lines.append(f"| {n:,} | {replicas} | {spare} | {nodes} | {'; '.join(nexts)} |")
    if redis:
        answer, refresh = redis["answer (ms)"], redis["learner refresh (ms)"]
        said = "Redis (bench_poll's room of 300, a local redis-server, round trips from one client):"
        lines += ["", f"{said} an answer {answer:.2f} ms, a learner's refresh {refresh:.2f} ms."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", help="a benchmarks/load_test.py JSON instead of measuring now")
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--duration", type=float, default=90)
    parser.add_argument("--think", type=float, default=5.0)
    parser.add_argument("--node-cpu", type=float, default=4)
    parser.add_argument("--node-gib", type=float, default=16)
    parser.add_argument("--out", default=str(ROOT / f"benchmarks/results/{datetime.date.today()}-capacity.md"))
    args = parser.parse_args()
    load = json.loads(Path(args.load).read_text()) if args.load else measure_load(args.sessions, args.duration,
                                                                                   args.think)  # fmt: skip
    if isinstance(load, list):  # load_test.py writes one result a client
        load = next(r for r in load if r["client"] == "ws")
    if load.get("failures"):
        sys.exit(f"capacity: the load test failed: {load['failures'][:3]}")
    text = table(learner_figures(load), deploy_figures(), measure_redis(), args.node_cpu, args.node_gib)
    machine = f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end"
    report = (f"# How big a room: capacity from measured figures ({datetime.date.today()})\n\n"
              f"Written by `python -m benchmarks.capacity` ({machine}). Rerun it on the machines the room will use.\n\n"
              f"{text}\n\n<details><summary>The load test's figures</summary>\n\n```json\n"
              f"{json.dumps(load, indent=2)[:6000]}\n```\n</details>\n")  # fmt: skip
    print(text)
    Path(args.out).write_text(report)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
