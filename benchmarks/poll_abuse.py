"""The class poll against one hostile client (issue 50): the attacks the issue found, replayed at full speed.

    .venv/bin/python -m benchmarks.poll_abuse [--json out.json]

Against a Poll over a real redis-server (as the room's replicas share one), one client address:
  - opens rooms until refused (the issue: 988 rooms in 221 s, then every instructor refused for 4 hours), then
    another address opens one;
  - stuffs a ballot: 200 answers with tokens it makes up (the issue: 200 counted in 41 s), then joins as many devices
    as it is given and sends answers until refused, while a class of 60 behind another single address answers;
  - tries room codes from one session, then from fresh sessions, until refused (the issue: 5.7 tries a second).
Counts, not timings: what each attack got, beside what the class got. The limits are server.poll's constants.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.redis_server import RedisServer, find_redis, free_port
from server.poll import Poll, PollError, PollQuestion, RedisStore

QUESTION = PollQuestion("q", "Which?", "choice", ("a", "b", "c"), answer="1")
ATTACKER, SCHOOL, OTHER = "203.0.113.66", "198.51.100.20", "192.0.2.7"


def until_refused(act, most: int = 100_000) -> tuple[int, str]:
    """How many times `act` succeeds before its first refusal, and the refusal's sentence."""
    for n in range(most):
        try:
            act(n)
        except PollError as e:
            return n, str(e)
    return most, ""


def run(poll: Poll) -> dict:
    report: dict = {}
    opened, said = until_refused(lambda _: poll.open(ATTACKER), 988)
    report["rooms opened by one address (the issue: 988)"] = opened
    report["its refusal"] = said
    report["another address then opens a room"] = bool(poll.open(OTHER))

    code, key = poll.open(OTHER)
    poll.ask(code, key, QUESTION)
    made_up = [f"{n:027d}".replace("0", "A") for n in range(200)]
    counted = sum(1 for t in made_up if _tries(lambda t=t: poll.answer(code, t, "q", "2", ATTACKER)))
    report["answers counted from 200 made-up tokens (the issue: 200)"] = counted
    class_tokens = [poll.join(code, SCHOOL) for _ in range(60)]
    for t in class_tokens:
        poll.answer(code, t, "q", "1", SCHOOL)
    stuffer: list[str] = []
    joined, said = until_refused(lambda _: stuffer.append(poll.join(code, ATTACKER)))
    report["devices one address joined before refused"] = joined
    report["its refusal (joining)"] = said
    sent, said = until_refused(lambda n: poll.answer(code, stuffer[n % len(stuffer)], "q", "2", ATTACKER))
    report["answers one address sent before refused"] = sent
    report["its refusal (answering)"] = said
    tally = poll.tally(code, QUESTION)
    room = poll.room(code)
    report["the class of 60 (one school address): counted"] = tally.counts.get("1", 0)
    report["the projector: answered / devices joined"] = f"{tally.answered} / {room.joined}"

    real, _ = poll.open(OTHER)
    wrong = [c for c in ("ABCDE", "FGHJK", "MNPQR", "STUVW", "XYZ23", "45678", "9ABCD") if c != real]
    tries, said = until_refused(lambda n: _miss(poll, wrong[n % len(wrong)], ATTACKER, "one-session"))
    report["wrong codes one session tried before refused"] = tries
    fresh, _ = until_refused(lambda n: _miss(poll, wrong[n % len(wrong)], ATTACKER, f"fresh-{n}"))
    report["then from fresh sessions of the same address"] = fresh
    report["its refusal (codes)"] = said
    report["another address enters the right code"] = poll.enter(real, OTHER, "another").code == real
    return report


def _tries(act) -> bool:
    try:
        act()
    except PollError:
        return False
    return True


def _miss(poll: Poll, code: str, address: str, session: str) -> None:
    try:
        poll.enter(code, address, session)
    except PollError as e:
        if "Too many" in str(e):
            raise
        return  # a wrong code: counted, not refused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args()
    binary = find_redis()
    if binary is None:
        sys.exit("poll_abuse: no redis-server (apt-get install redis-server)")
    redis = RedisServer(binary, free_port())
    redis.start()
    try:
        report = run(Poll(RedisStore(redis.url)))
    finally:
        redis.stop()
    width = max(map(len, report))
    for k, v in report.items():
        print(f"{k:<{width}}  {v}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
