"""The class poll: rooms where a class answers the instructor's question, shared by every session of the server.

    server/poll/rooms.py   the logic: codes, the instructor's key, questions, answers, reveal, rate, export
    server/poll/store.py   where rooms live: MemoryStore (this process) or RedisStore (every replica)
    server/poll/resp.py    a small Redis client (RESP over a socket): the `redis` package is not in the lock
    server/poll/tokens.py  a learner's token, issued and signed by the server for one room

`shared()` is the server's one Poll: in Redis when ATTENTION_LAB_REDIS_URL is set (redis://host:6379/0; the room
recipe, compose and Kubernetes set it), else in this process (`streamlit run`, Community Cloud).
"""

from __future__ import annotations

import functools
import os

from .rooms import (
    ADDRESS_RATE,
    CODE_LENGTH,
    CODE_TRIES,
    IDLE_S,
    JOINS_PER_ADDRESS,
    RATE,
    ROOMS_PER_ADDRESS,
    UNJOINED_S,
    NoRoom,
    Poll,
    PollError,
    PollQuestion,
    Room,
    Tally,
    is_browser,
    normal_code,
    who,
)
from .store import Full, MemoryStore, RedisStore, Store, Unavailable

ENV = "ATTENTION_LAB_REDIS_URL"

__all__ = [
    "ADDRESS_RATE",
    "CODE_LENGTH",
    "CODE_TRIES",
    "ENV",
    "IDLE_S",
    "JOINS_PER_ADDRESS",
    "RATE",
    "ROOMS_PER_ADDRESS",
    "UNJOINED_S",
    "Full",
    "MemoryStore",
    "NoRoom",
    "Poll",
    "PollError",
    "PollQuestion",
    "RedisStore",
    "Room",
    "Store",
    "Tally",
    "Unavailable",
    "is_browser",
    "normal_code",
    "shared",
    "store_from_env",
    "who",
]


def store_from_env(environ: dict[str, str] | None = None) -> Store:
    """Redis at ATTENTION_LAB_REDIS_URL when it is set, else this process's memory."""
    url = (environ if environ is not None else os.environ).get(ENV, "").strip()
    return RedisStore(url) if url else MemoryStore()


@functools.lru_cache(maxsize=1)  # one Poll a process: every session shares its rooms
def shared() -> Poll:
    return Poll(store_from_env())
