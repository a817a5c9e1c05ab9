"""A training run as every page sees it (`Job`: its snapshots so far and where it stands), and the pool's refusal
(`NoRoom`). The pool that trains and keeps them is server/training.py."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from attention.models import tiny


class NoRoom(ValueError):
    """A run the pool cannot keep now: its message is the page's sentence (what holds the room, and what fits)."""


@dataclass(eq=False)
class Job:
    """One setting's training: its snapshots so far (appended as chunks land), and where it stands."""

    settings: tiny.Settings
    number: int  # order of arrival: the queue is served in this order
    status: str = "queued"  # queued | training | done | stopped | failed | cancelled
    message: str | None = None  # why it stopped (a NaN loss), failed or was cancelled
    snapshots: list[tiny.Snapshot] = field(default_factory=list)
    started: float | None = None
    finished: float | None = None
    created: float = field(default_factory=time.perf_counter)
    used: float = field(default_factory=time.monotonic)  # when a visitor last played it or looked at it
    anonymous: bool = False  # started outside any page (a test, a script): no visitor to wait for, never cancelled
    changed: threading.Condition = field(default_factory=threading.Condition, repr=False)  # a chunk landed, or the end

    def wait(self, snapshots: int, timeout: float) -> None:
        """Until the run has this many snapshots or has finished training, at most `timeout` seconds."""
        with self.changed:
            self.changed.wait_for(lambda: len(self.snapshots) >= snapshots or self.finished_training, timeout)

    @property
    def finished_training(self) -> bool:
        return self.status in ("done", "stopped", "failed", "cancelled")

    @property
    def run(self) -> tiny.Run:
        """The run so far (a copy of the list: a chunk may land while a page draws)."""
        return tiny.Run(self.settings, tuple(self.snapshots), self.message if self.status == "stopped" else None)

    @property
    def step(self) -> int:
        return self.snapshots[-1].step if self.snapshots else 0
