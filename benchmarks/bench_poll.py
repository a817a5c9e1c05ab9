"""The class poll's storage under a room's load: 300 browsers answer (and a third change their minds) through
this process's memory and through a local redis-server, then the projector's read; and a learner's refresh (the
room and its own answer), the read every learner's page makes every 3 s.

    .venv/bin/python -m benchmarks.bench_poll [--learners 300] [--runs 5]

Prints the median of the runs for each backend, and Redis's time over memory's (the reference ratio), in Markdown.
Needs Debian's redis-server (started on a free loopback port, nothing written to disk).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from harness.redis_server import RedisServer, find_redis, free_port
from server.poll import MemoryStore, Poll, PollQuestion, RedisStore

QUESTION = PollQuestion("b1", "Which?", "choice", ("a", "b", "c", "d"), answer="1")


def one_run(poll: Poll, learners: int) -> dict[str, float]:
    code, key = poll.open()
    poll.ask(code, key, QUESTION)
    addresses = [f"10.1.{i // 200}.{i % 200}" for i in range(learners)]  # a phone an address, as on a campus
    browsers = [poll.join(code, a) for a in addresses]  # tokens the server issues and signs
    where = dict(zip(browsers, addresses, strict=True))
    t0 = time.perf_counter()
    for i, b in enumerate(browsers):
        poll.answer(code, b, "b1", str(i % 4), where[b])
    for b in browsers[::3]:
        poll.answer(code, b, "b1", "1", where[b])
    answers = learners + len(browsers[::3])
    t1 = time.perf_counter()
    tally = poll.tally(code, poll.room(code).question)
    t2 = time.perf_counter()
    assert tally.answered == learners
    for b in browsers:
        poll.mine(code, b, poll.room(code).question)
    t3 = time.perf_counter()
    return {
        "answer (ms)": 1000 * (t1 - t0) / answers,
        "projector read (ms)": 1000 * (t2 - t1),
        "learner refresh (ms)": 1000 * (t3 - t2) / learners,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the medians, {backend: {operation: ms}}, here")
    args = parser.parse_args()
    binary = find_redis()
    if binary is None:
        sys.exit("bench_poll: no redis-server (apt-get install redis-server)")
    redis = RedisServer(binary, free_port())
    redis.start()
    try:
        backends = {"memory": Poll(MemoryStore(), rate=(100, 60.0)),
                    "redis": Poll(RedisStore(redis.url), rate=(100, 60.0))}  # fmt: skip
        runs = {name: [one_run(poll, args.learners) for _ in range(args.runs)] for name, poll in backends.items()}
    finally:
        redis.stop()
    medians = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    keys = list(medians["memory"])
    print(f"{args.learners} learners, median of {args.runs} runs\n")
    print("| backend | " + " | ".join(keys) + " |")
    print("| --- |" + " --- |" * len(keys))
    for name, m in medians.items():
        print(f"| {name} | " + " | ".join(f"{m[k]:.3f}" for k in keys) + " |")
    print("| redis / memory | " + " | ".join(f"{medians['redis'][k] / medians['memory'][k]:.1f}" for k in keys) + " |")
    if args.json:
        args.json.write_text(json.dumps({"learners": args.learners, "runs": args.runs, **medians}, indent=2) + "\n")


if __name__ == "__main__":
    main()
