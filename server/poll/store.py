"""Where rooms live: one interface, two backends. `MemoryStore` keeps them in this process (one server: the laptop,
Community Cloud); `RedisStore` keeps them in Redis, so every replica behind the room's proxy sees the same room and
a replica's death loses no answer.

A room is a few strings (all of them the server's own: a question's JSON, flags, hashes of keys), its answers
(browser token -> counted value) and its counts (counted value -> how many) per question. Every operation that
changes a room is atomic (a lock here, a Lua script in Redis), renews the whole room's time to live, and refuses
what the room's state forbids: an answer to a question that is no longer the current one, or that was revealed.
The store also keeps the deployment's token secret (server/poll/tokens.py) and the counters of the poll's rate
limits (`hit`, `seen`).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from .resp import Client, Unreachable

MAX_VOTERS = 5_000  # browsers a question counts: a bound on a room's memory (the issue asks for 300)
MAX_ROOMS = 1_000  # rooms one process keeps at once (MemoryStore): when full, the oldest nobody joined makes way


class Unavailable(Exception):
    """The rooms' storage does not answer (Redis down): the page says the poll is paused, and it resumes by itself."""


class Full(Exception):
    """No room for another room (MemoryStore's MAX_ROOMS, every one of them joined): Poll.open says so, with advice."""


class Store(Protocol):
    def create(self, code: str, fields: dict[str, str], ttl_s: float) -> bool:
        """A new room with these fields, unless one has that code (False)."""

    def fields(self, code: str) -> dict[str, str] | None:
        """The room's fields; None when there is no such room (never made, or expired)."""

    def update(self, code: str, fields: dict[str, str], ttl_s: float) -> bool:
        """Set fields of a live room and renew its time to live; False when it is gone."""

    def answer(self, code: str, qid: str, browser: str, value: str, ttl_s: float) -> str:
        """Count `value` as `browser`'s answer to question `qid`, replacing its earlier one: "ok", "same" (no change),
        "gone" (no room), "stale" (not the current question), "closed" (revealed) or "full" (MAX_VOTERS)."""

    def tally(self, code: str, qid: str) -> dict[str, int]:
        """How many browsers gave each value to question `qid` (values nobody gives now left out)."""

    def mine(self, code: str, qid: str, browser: str) -> str | None:
        """`browser`'s current answer to `qid`, if any."""

    def answers(self, code: str, qid: str) -> dict[str, str]:
        """Every browser's current answer to `qid` (token -> value): the inventory pairs a pre- and a post-test by
        token."""

    def join(self, code: str, ttl_s: float) -> int | None:
        """Count one more device joined to the room (its "joined" field) and renew it: the count, None when gone."""

    def hit(self, key: str, window_s: float) -> int:
        """Count one event under `key` in a fixed window of `window_s`: how many so far in this window."""

    def seen(self, key: str) -> int:
        """How many events `hit` has counted under `key` in its current window, counting none."""

    def secret(self, fresh: str) -> str:
        """The deployment's token secret: the one kept here, else `fresh`, kept from now on."""

    def ping(self) -> None:
        """Raise Unavailable when the storage does not answer."""


@dataclass
class _Room:
    fields: dict[str, str]
    expires: float
    answers: dict[str, dict[str, str]] = field(default_factory=dict)  # qid -> browser -> value
    counts: dict[str, Counter] = field(default_factory=dict)  # qid -> value -> browsers


class MemoryStore:
    """Rooms in this process's memory, for every session of one server. `clock` is for tests (time.monotonic)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, max_rooms: int = MAX_ROOMS) -> None:
        self._clock = clock
        self._max_rooms = max_rooms
        self._rooms: dict[str, _Room] = {}
        self._hits: dict[str, tuple[int, float]] = {}  # key -> (count, window's end)
        self._lock = threading.Lock()
        self._secret: str | None = None

    def _live(self, code: str) -> _Room | None:
        room = self._rooms.get(code)
        if room is not None and room.expires <= self._clock():
            del self._rooms[code]
            return None
        return room

    def _purge(self) -> None:
        now = self._clock()
        for code in [c for c, r in self._rooms.items() if r.expires <= now]:
            del self._rooms[code]
        for key in [k for k, (_, end) in self._hits.items() if end <= now]:
            del self._hits[key]

    def create(self, code: str, fields: dict[str, str], ttl_s: float) -> bool:
        with self._lock:
            if self._live(code) is not None:
                return False
            if len(self._rooms) >= self._max_rooms:
                self._purge()
            if len(self._rooms) >= self._max_rooms:  # the room nobody joined that would expire first makes way
                unjoined = [c for c, r in self._rooms.items() if not int(r.fields.get("joined", 0))]
                if not unjoined:
                    raise Full(f"this server holds {self._max_rooms:,} rooms in use already")
                del self._rooms[min(unjoined, key=lambda c: self._rooms[c].expires)]
            self._rooms[code] = _Room(dict(fields), self._clock() + ttl_s)
            return True

    def fields(self, code: str) -> dict[str, str] | None:
        with self._lock:
            room = self._live(code)
            return dict(room.fields) if room is not None else None

    def update(self, code: str, fields: dict[str, str], ttl_s: float) -> bool:
        with self._lock:
            room = self._live(code)
            if room is None:
                return False
            room.fields.update(fields)
            room.expires = self._clock() + ttl_s
            return True

    def answer(self, code: str, qid: str, browser: str, value: str, ttl_s: float) -> str:
        with self._lock:
            room = self._live(code)
            if room is None:
                return "gone"
            if room.fields.get("qid") != qid:
                return "stale"
            if room.fields.get("revealed:" + qid):
                return "closed"
            answers = room.answers.setdefault(qid, {})
            counts = room.counts.setdefault(qid, Counter())
            old = answers.get(browser)
            room.expires = self._clock() + ttl_s
            if old == value:
                return "same"
            if old is None and len(answers) >= MAX_VOTERS:
                return "full"
            if old is not None:
                counts[old] -= 1
                if counts[old] <= 0:
                    del counts[old]
            answers[browser] = value
            counts[value] += 1
            return "ok"

    def tally(self, code: str, qid: str) -> dict[str, int]:
        with self._lock:
            room = self._live(code)
            return dict(room.counts.get(qid, {})) if room is not None else {}

    def mine(self, code: str, qid: str, browser: str) -> str | None:
        with self._lock:
            room = self._live(code)
            return room.answers.get(qid, {}).get(browser) if room is not None else None

    def answers(self, code: str, qid: str) -> dict[str, str]:
        with self._lock:
            room = self._live(code)
            return dict(room.answers.get(qid, {})) if room is not None else {}

    def join(self, code: str, ttl_s: float) -> int | None:
        with self._lock:
            room = self._live(code)
            if room is None:
                return None
            joined = int(room.fields.get("joined", 0)) + 1
            room.fields["joined"] = str(joined)
            room.expires = self._clock() + ttl_s
            return joined

    def seen(self, key: str) -> int:
        with self._lock:
            count, end = self._hits.get(key, (0, 0.0))
            return count if end > self._clock() else 0

    def secret(self, fresh: str) -> str:
        with self._lock:
            self._secret = self._secret or fresh
            return self._secret

    def hit(self, key: str, window_s: float) -> int:
        with self._lock:
            now = self._clock()
            count, end = self._hits.get(key, (0, 0.0))
            if end <= now:
                count, end = 0, now + window_s
                if len(self._hits) > 10 * MAX_VOTERS:
                    self._purge()
            self._hits[key] = (count + 1, end)
            return count + 1

    def ping(self) -> None:
        return None


# Each script renews the room's keys together: the room's hash, and the answers and counts of every question it
# asked (their ids are the hash's q:<id> fields). Keys share the room's {code} hash tag, so one room is one slot.
_TOUCH = """
local function touch(room, prefix, ttl)
  redis.call('PEXPIRE', room, ttl)
  for _, f in ipairs(redis.call('HKEYS', room)) do
    if string.sub(f, 1, 2) == 'q:' then
      local q = string.sub(f, 3)
      redis.call('PEXPIRE', prefix .. 'a:' .. q, ttl)
      redis.call('PEXPIRE', prefix .. 'c:' .. q, ttl)
    end
  end
end
"""
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
"""
_UPDATE = (
    _TOUCH
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
touch(KEYS[1], ARGV[2], ARGV[1])
return 1
"""
)
_ANSWER = (
    _TOUCH
    + """
local room, prefix, qid, browser, value, ttl, most = KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
if redis.call('EXISTS', room) == 0 then return 'gone' end
if redis.call('HGET', room, 'qid') ~= qid then return 'stale' end
if redis.call('HEXISTS', room, 'revealed:' .. qid) == 1 then return 'closed' end
local answers, counts = prefix .. 'a:' .. qid, prefix .. 'c:' .. qid
local old = redis.call('HGET', answers, browser)
if old == value then
  touch(room, prefix, ttl)
  return 'same'
end
if not old and redis.call('HLEN', answers) >= tonumber(most) then return 'full' end
if old then
  if redis.call('HINCRBY', counts, old, -1) <= 0 then redis.call('HDEL', counts, old) end
end
redis.call('HSET', answers, browser, value)
redis.call('HINCRBY', counts, value, 1)
touch(room, prefix, ttl)
return 'ok'
"""
)
_JOIN = (
    _TOUCH
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local joined = redis.call('HINCRBY', KEYS[1], 'joined', 1)
touch(KEYS[1], ARGV[2], ARGV[1])
return joined
"""
)
_SECRET = """
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
"""
_HIT = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n
"""


class RedisStore:
    """Rooms in Redis, shared by every replica that is given the same address (ATTENTION_LAB_REDIS_URL)."""

    def __init__(self, url: str, prefix: str = "attention-lab:poll:", timeout_s: float = 1.0) -> None:
        self.client = Client(url, timeout_s=timeout_s)
        self.prefix = prefix

    def _keys(self, code: str) -> tuple[str, str]:
        base = f"{self.prefix}{{{code}}}:"
        return base + "room", base

    def _call(self, *args: str | int | float):
        try:
            return self.client.call(*args)
        except Unreachable as e:
            raise Unavailable(str(e)) from e

    def _script(self, source: str, keys: list[str], args: list[str | int | float]):
        try:
            return self.client.script(source, keys, args)
        except Unreachable as e:
            raise Unavailable(str(e)) from e

    @staticmethod
    def _ms(ttl_s: float) -> int:
        return max(1, round(ttl_s * 1000))

    @staticmethod
    def _flat(fields: dict[str, str]) -> list[str]:
        return [x for pair in fields.items() for x in pair]

    def create(self, code: str, fields: dict[str, str], ttl_s: float) -> bool:
        room, _ = self._keys(code)
        return self._script(_CREATE, [room], [self._ms(ttl_s), *self._flat(fields)]) == 1

    def fields(self, code: str) -> dict[str, str] | None:
        room, _ = self._keys(code)
        flat = self._call("HGETALL", room)
        return dict(zip(flat[::2], flat[1::2], strict=True)) if flat else None

    def update(self, code: str, fields: dict[str, str], ttl_s: float) -> bool:
        room, base = self._keys(code)
        return self._script(_UPDATE, [room], [self._ms(ttl_s), base, *self._flat(fields)]) == 1

    def answer(self, code: str, qid: str, browser: str, value: str, ttl_s: float) -> str:
        room, base = self._keys(code)
        return self._script(_ANSWER, [room], [base, qid, browser, value, self._ms(ttl_s), MAX_VOTERS])

    def tally(self, code: str, qid: str) -> dict[str, int]:
        _, base = self._keys(code)
        flat = self._call("HGETALL", f"{base}c:{qid}")
        return {k: int(v) for k, v in zip(flat[::2], flat[1::2], strict=True) if int(v) > 0}

    def mine(self, code: str, qid: str, browser: str) -> str | None:
        _, base = self._keys(code)
        return self._call("HGET", f"{base}a:{qid}", browser)

    def answers(self, code: str, qid: str) -> dict[str, str]:
        _, base = self._keys(code)
        flat = self._call("HGETALL", f"{base}a:{qid}")
        return dict(zip(flat[::2], flat[1::2], strict=True)) if flat else {}

    def join(self, code: str, ttl_s: float) -> int | None:
        room, base = self._keys(code)
        joined = int(self._script(_JOIN, [room], [self._ms(ttl_s), base]))
        return joined if joined >= 0 else None

    def hit(self, key: str, window_s: float) -> int:
        return int(self._script(_HIT, [f"{self.prefix}rate:{key}"], [self._ms(window_s)]))

    def seen(self, key: str) -> int:
        return int(self._call("GET", f"{self.prefix}rate:{key}") or 0)

    def secret(self, fresh: str) -> str:
        # No time to live: it lives as long as the rooms' Redis (with them in its append-only file).
        return self._script(_SECRET, [f"{self.prefix}secret"], [fresh])

    def ping(self) -> None:
        self._call("PING")

    def ttl_s(self, code: str) -> float:
        """The room's time to live in seconds (-2: no such key), for tests and the operator."""
        room, _ = self._keys(code)
        ms = self._call("PTTL", room)
        return ms / 1000 if ms >= 0 else float(ms)
