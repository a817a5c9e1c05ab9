"""The attention inventory in a room (issue 46): learners take the test before and after the course through 3
replicas (Polls in processes of their own, onto one redis-server), and the projector's replica pairs the sheets by
token and computes the room's gain. Measures, per run, the time from the last learner's answer to the projector's
report holding every pair, and checks the report's ⟨g⟩ against the one the simulated answers were made to give.

    .venv/bin/python -m benchmarks.inventory_room [--learners 60] [--replicas 3] [--runs 5] [--json FILE]

Learners send at the protocol level of the poll (Poll.join, Poll.answer through their replica's own Redis client),
not through a browser: this is the server's part. The projector's page redraws its report every
ui.views.poll.PROJECTOR_EVERY_S (0.5 s), so a browser shows it within that interval after the report is ready.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

from attention.lessons import inventory
from harness.redis_server import redis_server
from server.poll import Poll, RedisStore
from ui.views.inventory import decode, encode, room_question, room_seed

ROOT = Path(__file__).resolve().parents[1]


def sheet(forms: tuple[inventory.Form, ...], right: int) -> str:
    """Right on the first `right` items, a misconception's answer on the rest; the right reason everywhere."""
    return encode({f.item: (f.answer_key if k < right else min(f.answer_misconceptions), f.reason_key)
                        for k, f in enumerate(forms)})  # fmt: skip


def replica(url: str, prefix: str, code: str, phase: str, jobs: list[tuple[str, int]], done) -> None:
    """One replica's learners: each answers the phase's test with its planned number right."""
    poll = Poll(RedisStore(url, prefix=prefix))
    forms = inventory.test(room_seed(code), phase)
    for token, right in jobs:
        poll.answer(code, token, f"inventory.{phase}", sheet(forms, right), address=f"10.0.0.{hash(token) % 250}")
    done.put(time.perf_counter())


def one_run(url: str, prefix: str, learners: int, replicas: int) -> dict:
    poll = Poll(RedisStore(url, prefix=prefix))
    code, key = poll.open(address="192.0.2.1")
    tokens = [poll.join(code, address=f"10.0.{k // 250}.{k % 250}") for k in range(learners)]
    n = len(inventory.ITEMS)
    before = [k % 4 for k in range(learners)]  # 0 to 3 right before
    after = [min(n, b + 3 + k % 5) for k, b in enumerate(before)]  # 3 to 7 more right after
    pre_mean, post_mean = sum(before) / (learners * n), sum(after) / (learners * n)
    expected = (post_mean - pre_mean) / (1 - pre_mean)
    ctx = mp.get_context("spawn")
    seed = room_seed(code)
    pre_forms, post_forms = (
        inventory.test(seed, "pre"),
        inventory.test(seed, "post"),
    )  # the projector's, drawn once a room

    def projector() -> inventory.Report:
        """What the projector's page computes on each redraw: every sheet by token, paired, and the report."""
        pre = {t: decode(v, pre_forms) for t, v in poll.sheets(code, key, "inventory.pre").items()}
        post = {t: decode(v, post_forms) for t, v in poll.sheets(code, key, "inventory.post").items()}
        return inventory.report(pre_forms, post_forms, pre, post)

    redraws = []
    for phase, plan in (("pre", before), ("post", after)):
        poll.ask(code, key, room_question(code, phase))
        done = ctx.Queue()
        jobs = [[(t, r) for k, (t, r) in enumerate(zip(tokens, plan, strict=True)) if k % replicas == i]
                for i in range(replicas)]  # fmt: skip
        procs = [ctx.Process(target=replica, args=(url, prefix, code, phase, j, done)) for j in jobs]
        for p in procs:
            p.start()
        report = None
        while phase == "post":  # the projector redraws while the answers arrive, until every pair is in
            started = time.perf_counter()
            report = projector()
            redraws.append(time.perf_counter() - started)
            if report.pairs == learners:
                seen = time.perf_counter()
                break
            time.sleep(0.05)
        last = max(done.get() for _ in procs)
        for p in procs:
            p.join()
        poll.reveal(code, key)
    return {"pairs": report.pairs, "gain": report.gain, "expected_gain": expected,
            "last_answer_to_report_s": seen - last, "redraw_median_s": statistics.median(redraws)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=60)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    runs = []
    with redis_server() as redis:
        for k in range(args.runs):
            runs.append(one_run(redis.url, f"bench-inv:{k}:", args.learners, args.replicas))
    seconds = [r["last_answer_to_report_s"] for r in runs]
    out = {
        "learners": args.learners,
        "replicas": args.replicas,
        "runs": runs,
        "median_last_answer_to_report_s": statistics.median(seconds),
        "max_last_answer_to_report_s": max(seconds),
        "all_paired": all(r["pairs"] == args.learners for r in runs),
        "gain_right": all(abs(r["gain"] - r["expected_gain"]) < 1e-9 for r in runs),
    }
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0 if out["all_paired"] and out["gain_right"] else 1


if __name__ == "__main__":
    sys.exit(main())
