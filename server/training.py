"""Training runs for every visitor of the server: one run a setting, a few trained at a time, none blocking a page.

What belongs here: the server-wide `Service` (the runs it keeps, its queue and its worker processes). The math is
attention/models/tiny.py; the page is pages/watch_it_learn.py, drawn by ui/training.py.

A run is a pure function of its `tiny.Settings`, so thirty visitors pressing Play on one setting share one
training: the service keeps each setting's run (bounded by MAX_RUNS and BUDGET_BYTES, least recently used first
out, never one still training). At most WORKERS settings train at a time; the others wait in order and their
pages say so. Training happens in worker processes (spawned, one torch thread each): a training thread in the
server's own process would hold Python's GIL between its thousands of small torch calls and slow every other
visitor's page, and would share torch's process-wide thread count with them. The workers run at the lowest CPU
priority (nice 19), so the server's pages get the cores first, and end after IDLE_S seconds with nothing to
train. They train a chunk of steps at a time (`tiny.Trainer.state` carries the run between chunks, with the same
numbers as one uninterrupted run), and each chunk's snapshots are published as they come, so a page shows the
curve moving. A server of several processes (deploy/) keeps runs per process.

A worker warms up before its first task (`tiny.worker_init`: two throwaway steps) and the page starts the pool when
it opens, so Play's first chunk trains at once. Training uses `tiny.AdamW`, not torch's optimizer, which imports
torch._dynamo (about 1 s and 70 MB for good): in the server's own process (thread mode, the hosted copy) dynamo's
~120,000 objects, imported after `ui` froze the start-up's (gc.freeze), also made every full garbage collection
56 ms longer, and another session's rerun took twice as long (median 124 -> 249 ms during four trainings, 62 ->
136 ms after them, at load 4.5).

Under a memory limit (the hosted copy has 690 MB for everything) a worker process costs too much: importing torch
alone is about 150 MB of anonymous memory, twice that for two workers. A server whose memory is limited below
PROCESS_MIN_LIMIT (its cgroup's limit, v1 or v2) therefore trains in its own process instead, one run at a time, in
a thread that hands the GIL over between snapshots; `ATTENTION_LAB_TRAIN_IN=process|thread` overrides the choice.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from attention.models import tiny

from . import budget

WORKERS = 2  # settings trained at once, server-wide (the others queue)
IDLE_S = 300.0  # worker processes (about 240 MB each, torch imported) end after this long with nothing to train
MAX_RUNS = 32  # runs kept for every visitor
BUDGET_BYTES = 64 * 2**20  # and the memory they may hold together (tiny.Settings.run_bytes)
PROCESS_MIN_LIMIT = 2 * 2**30  # below this memory limit the server trains in its own process (see above)
THREAD_PAUSE_S = 0.002  # a training thread's pause between snapshots: other sessions' scripts take the GIL
FIRST_PAUSE_S = 0.3  # and after a run's first chunk: the page that pressed Play draws it with the GIL to itself
FIRST_CHUNK = 1  # snapshots in the first chunk: the curve starts moving as soon as the first one lands
CHUNK = 4  # snapshots a chunk after that (fewer round trips)


# a run as every page sees it --------------------------------------------------------------------------------


@dataclass(eq=False)
class Job:
    """One setting's training: its snapshots so far (appended as chunks land), and where it stands."""

    settings: tiny.Settings
    number: int  # order of arrival: the queue is served in this order
    status: str = "queued"  # queued | training | done | stopped | failed
    message: str | None = None  # why it stopped (a NaN loss) or failed
    snapshots: list[tiny.Snapshot] = field(default_factory=list)
    started: float | None = None
    finished: float | None = None
    created: float = field(default_factory=time.perf_counter)
    changed: threading.Condition = field(default_factory=threading.Condition, repr=False)  # a chunk landed, or the end

    def wait(self, snapshots: int, timeout: float) -> None:
        """Until the run has this many snapshots or has finished training, at most `timeout` seconds."""
        with self.changed:
            self.changed.wait_for(lambda: len(self.snapshots) >= snapshots or self.finished_training, timeout)

    @property
    def finished_training(self) -> bool:
        return self.status in ("done", "stopped", "failed")

    @property
    def run(self) -> tiny.Run:
        """The run so far (a copy of the list: a chunk may land while a page draws)."""
        return tiny.Run(self.settings, tuple(self.snapshots), self.message if self.status == "stopped" else None)

    @property
    def step(self) -> int:
        return self.snapshots[-1].step if self.snapshots else 0


class Service:
    """The server's runs: one a setting, kept for every visitor, trained WORKERS at a time in worker processes."""

    def __init__(self, workers: int = WORKERS, processes: bool = True, idle_s: float = IDLE_S) -> None:
        self.workers = workers if processes else 1
        self.processes = processes
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._jobs: OrderedDict[tiny.Settings, Job] = OrderedDict()
        self._count = 0
        self._drivers = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="train-driver")
        self._pool: ProcessPoolExecutor | None = None
        self._here = threading.Lock()  # training in this process: one at a time (torch's thread count is global)
        self._warmer = ThreadPoolExecutor(1, thread_name_prefix="train-warm")
        self._warmed: Future | None = None

    # the pool of worker processes, started on first use (or ahead of it: `warm`)
    def _get_pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                ctx = multiprocessing.get_context("spawn")  # never fork a threaded server
                self._pool = ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=tiny.worker_init)
            return self._pool

    def warm(self) -> Future | None:
        """Get ready for Play while the visitor reads: start a worker process (importing torch and warming up take
        it about 4 CPU s; two at once took twice as long on 2 cores, and Play found both still warming at load 3-4).
        The pool starts another when two runs train at once. Training in this process: `tiny.warm` once, in a
        thread of its own."""
        if not self.processes:
            with self._lock:
                if self._warmed is None:
                    self._warmed = self._warmer.submit(self._train_here, tiny.warm)
                return self._warmed
        if self._pool is None:  # not started yet, or ended when idle
            return self._get_pool().submit(tiny.worker_ready)
        return None

    def _train_here(self, fn: Any, *args: Any) -> Any:
        with self._here:
            return fn(*args)

    def start(self, settings: tiny.Settings) -> Job:
        """The run of this setting: the kept one, or a new one queued for training."""
        with self._lock:
            job = self._jobs.get(settings)
            if job is not None and job.status != "failed":
                self._jobs.move_to_end(settings)
                return job
            self._count += 1
            job = Job(settings, self._count)
            self._jobs[settings] = job
            self._evict()
        self._drivers.submit(self._drive, job)
        return job

    def get(self, settings: tiny.Settings) -> Job | None:
        with self._lock:
            return self._jobs.get(settings)

    def queue_position(self, job: Job) -> int:
        """How many runs train or wait ahead of a queued one (0 once it trains)."""
        if job.status != "queued":
            return 0
        with self._lock:
            return sum(1 for j in self._jobs.values() if j.number < job.number and not j.finished_training)

    def kept(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())

    def _evict(self) -> None:
        """Least recently used finished runs out until the kept ones fit MAX_RUNS and BUDGET_BYTES (under the lock).
        Runs still training or queued stay: their pages are waiting for them."""
        total = sum(j.settings.run_bytes for j in self._jobs.values())
        for settings, job in list(self._jobs.items()):
            if len(self._jobs) <= MAX_RUNS and total <= BUDGET_BYTES:
                break
            if job.finished_training:
                del self._jobs[settings]
                total -= settings.run_bytes

    def _drive(self, job: Job) -> None:
        """In a driver thread: send the run to a worker chunk by chunk, publishing each chunk's snapshots."""
        job.status, job.started = "training", time.perf_counter()
        settings, state = job.settings.to_dict(), None
        chunk = FIRST_CHUNK
        try:
            while True:
                steps = chunk * job.settings.every
                if self.processes:
                    state, snaps, stopped = self._get_pool().submit(tiny.advance, settings, state, steps).result()
                else:
                    state, snaps, stopped = self._train_here(tiny.advance, settings, state, steps)
                with job.changed:
                    job.snapshots.extend(tiny.Snapshot.from_dict(s) for s in snaps)
                    job.changed.notify_all()
                if stopped is not None:
                    job.status, job.message = "stopped", stopped
                    break
                if state["step"] >= job.settings.steps:
                    job.status = "done"
                    break
                if not self.processes:  # hand the GIL over to the other sessions' scripts
                    time.sleep(FIRST_PAUSE_S if chunk == FIRST_CHUNK else THREAD_PAUSE_S)
                chunk = CHUNK
        except BrokenProcessPool:
            with self._lock:
                self._pool = None  # a worker died (killed for memory?): the next run starts a fresh pool
            job.status, job.message = "failed", "the training process stopped unexpectedly; press Play to try again"
        except Exception as exc:  # noqa: BLE001 -- a page says what went wrong instead of waiting forever
            job.status, job.message = "failed", f"training failed: {exc}"
        finally:
            job.finished = time.perf_counter()
            with job.changed:
                job.changed.notify_all()
        with self._lock:
            self._evict()
        timer = threading.Timer(self.idle_s, self._stop_if_idle)
        timer.daemon = True
        timer.start()

    def _stop_if_idle(self) -> None:
        """End the worker processes when nothing has trained for idle_s seconds (a later Play starts them again)."""
        with self._lock:
            busy = any(not j.finished_training for j in self._jobs.values())
            last = max((j.finished or 0.0 for j in self._jobs.values()), default=0.0)
            if busy or self._pool is None or time.perf_counter() - last < self.idle_s - 1e-3:
                return
            pool, self._pool = self._pool, None
        pool.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        self._drivers.shutdown(wait=False, cancel_futures=True)
        self._warmer.shutdown(wait=False, cancel_futures=True)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def train_in_processes(limit: int | None = None, env: str | None = None) -> bool:
    """Whether training runs in worker processes: `ATTENTION_LAB_TRAIN_IN` (process|thread) when set, else only
    where the server's memory is not limited below PROCESS_MIN_LIMIT."""
    env = os.environ.get("ATTENTION_LAB_TRAIN_IN", "") if env is None else env
    if env in ("process", "thread"):
        return env == "process"
    limit = budget.memory_limit() if limit is None else limit
    return limit is None or limit >= PROCESS_MIN_LIMIT


# One for the process, for good (ttl None): what it keeps is bounded by MAX_RUNS and BUDGET_BYTES, and a new one would
# lose the runs in training
@st.cache_resource(max_entries=1, ttl=None, show_spinner=False)
def service() -> Service:
    """The server's one Service (every session of the process shares it)."""
    return Service(processes=train_in_processes())
