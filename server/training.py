"""Training runs for every visitor of the server: one run a setting, a few trained at a time, none blocking a page.

What belongs here: the server-wide `Service` (the runs it keeps, its queue, its worker processes and its scrub
cache). The math is attention/models/tiny/; the page is pages/watch_it_learn.py, drawn by ui/views/watch_it_learn.py.

A run is a pure function of its `tiny.Settings`, so thirty visitors pressing Play on one setting share one
training. At most WORKERS settings train at a time; the others wait in order and their pages say so. Training
happens in worker processes (spawned, one torch thread each): a training thread in the server's own process would
hold Python's GIL between its thousands of small torch calls and slow every other visitor's page, and would share
torch's process-wide thread count with them. The workers run at the lowest CPU priority (nice 19), so the server's
pages get the cores first, and end after IDLE_S seconds with nothing to train. They train a chunk of steps at a
time (`tiny.Trainer.state` carries the run between chunks, with the same numbers as one uninterrupted run), and
each chunk's snapshots are published as they come, so a page shows the curve moving. A server of several
processes (deploy/) keeps runs per process.

Runs are kept for their visitors. Each visitor (a Streamlit session, `server/sessions.py`) holds the run they last
pressed Play or Step on and the run their page shows, while their tab is open and up to HOLD_S after they last
used it; a held run is never evicted. Kept runs hold at most KEPT_BYTES together: runs no visitor holds are
evicted least recently used first to make room, and a Play that would still not fit is refused before it is
pressed, with a sentence beside the button. One run of their own a visitor: a second Play cancels their first if
it still waits or trains for them alone, and a run whose visitors have all left (GRACE_S after their tab
disconnected) is cancelled, queued or training.

KEPT_BYTES is three of the largest runs (tiny.MAX_RUN_BYTES, 48 MB), so three visitors at the largest setting each
keep theirs and smaller ones share the rest; a fourth large one is told to wait or pick a smaller run. RESERVE_BYTES
more is for small runs alone (the default setting, the course's, any as light): they are never refused for other
visitors' large runs (issue 50), and a reserve full of small runs lets another visitor's least recently used
finished small one go (it trains again in seconds). On the hosted copy (690 MB, 370-480 MB at rest) that is what is
left beside one large Result; the runs no visitor holds go first when the memory budget is short (`_let_go`).
$ATTENTION_LAB_KEPT_MB sets it.

A worker warms up before its first task (`tiny.worker_init`: two throwaway steps) and the page starts the pool when
it opens, so Play's first chunk trains at once. Training uses `tiny.AdamW`, not torch's optimizer, which imports
torch._dynamo (about 1 s and 70 MB for good, and slower garbage collections: benchmarks/README.md).

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
import weakref
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import streamlit as st

from attention.models import tiny

from . import budget, sessions
from .jobs import Job as Job  # re-exported: callers write training.Job, training.NoRoom
from .jobs import NoRoom as NoRoom
from .scrub import ScrubCache

WORKERS = 2  # settings trained at once, server-wide (the others queue)
IDLE_S = 300.0  # worker processes (each imports torch: large) end after this long with nothing to train
MAX_RUNS = 32  # runs kept for the visitors
# what the kept runs hold together: three of the largest (see above)
KEPT_BYTES = int(float(os.environ.get("ATTENTION_LAB_KEPT_MB", 3 * tiny.MAX_RUN_BYTES / 2**20)) * 2**20)
# room for small runs alone, beyond KEPT_BYTES: the default setting, the course's runs and any as light never wait
# for room behind other visitors' large runs (issue 50)
# a run at most this heavy is small (the default's is about 2 MB); a test server playing the largest runs with small
# stand-ins sets ATTENTION_LAB_SMALL_RUN_MB=0
_SMALL_MB = 2 * tiny.Settings().run_bytes / 2**20
SMALL_RUN_BYTES = int(float(os.environ.get("ATTENTION_LAB_SMALL_RUN_MB", _SMALL_MB)) * 2**20)
RESERVE_BYTES = 4 * tiny.Settings().run_bytes
HOLD_S = 1800.0  # a visitor holds their runs while their tab is open, up to this long after they last used them
GRACE_S = 10.0  # a tab disconnected this long has left (one that reconnects sooner keeps its session id)
SWEEP_S = 2.0  # how often the service looks for visitors who left
PROCESS_MIN_LIMIT = 2 * 2**30  # below this memory limit the server trains in its own process (see above)
THREAD_PAUSE_S = 0.002  # a training thread's pause between snapshots: other sessions' scripts take the GIL
FIRST_PAUSE_S = 0.3  # and after a run's first chunk: the page that pressed Play draws it with the GIL to itself
FIRST_CHUNK = 1  # snapshots in the first chunk: the curve starts moving as soon as the first one lands
CHUNK = 4  # snapshots a chunk after that (fewer round trips)


def _mb(n: int) -> str:
    """MB as tiny.Settings says a run's size (2**20 bytes), a decimal under 10 (a small run is not "0 MB")."""
    mb = n / 2**20
    return f"{mb:.1f} MB" if mb < 10 else f"{mb:.0f} MB"


class Service:
    """The server's runs: one a setting, kept for its visitors, trained WORKERS at a time in worker processes.

    Each visitor (session) holds at most two runs: their own, the last they pressed Play or Step on (queued,
    training or finished), and the one their page shows. A held run is never evicted; a queued or training run no
    visitor holds is cancelled. A visitor holds a run while their tab is open, up to hold_s after they last used
    it, and lets go of it grace_s after their tab disconnected (`alive`: Streamlit's session registry)."""

    def __init__(
        self,
        workers: int = WORKERS,
        processes: bool = True,
        idle_s: float = IDLE_S,
        *,
        kept_bytes: int = KEPT_BYTES,
        reserve_bytes: int = RESERVE_BYTES,
        small_bytes: int = SMALL_RUN_BYTES,
        hold_s: float = HOLD_S,
        grace_s: float = GRACE_S,
        sweep_s: float = SWEEP_S,
        alive: Callable[[str], bool] = sessions.alive,
    ) -> None:
        self.workers = workers if processes else 1
        self.processes = processes
        self.idle_s = idle_s
        self.kept_bytes = kept_bytes
        self.reserve_bytes, self.small_bytes = reserve_bytes, small_bytes
        self.hold_s = hold_s
        self.grace_s = grace_s
        self.alive = alive
        self.scrub = ScrubCache()  # what scrubbing the runs' timelines draws (ui.views.watch_it_learn.layer_result)
        self._lock = threading.Lock()
        self._jobs: OrderedDict[tiny.Settings, Job] = OrderedDict()
        self._count = 0
        self._started: dict[str, Job] = {}  # each visitor's own run
        self._seen: dict[str, Job] = {}  # the run each visitor's page shows
        self._touched: dict[str, float] = {}  # when each visitor last used the pool
        self._absent: dict[str, float] = {}  # since when a visitor's tab has been disconnected
        self._drivers = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="train-driver")
        self._pool: ProcessPoolExecutor | None = None
        self._here = threading.Lock()  # training in this process: one at a time (torch's thread count is global)
        self._warmer = ThreadPoolExecutor(1, thread_name_prefix="train-warm")
        self._warmed: Future | None = None
        self._closed = threading.Event()
        threading.Thread(target=self._sweeping, args=(sweep_s,), name="train-sweep", daemon=True).start()
        _SERVICES.add(self)

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

    # visitors and the runs they hold ------------------------------------------------------------------------

    def _holders(self, job: Job, but: str | None = None) -> set[str]:
        """The visitors holding a run (under the lock), leaving out `but`."""
        now = time.monotonic()
        return {
            sid
            for table in (self._started, self._seen)
            for sid, held in table.items()
            if held is job and sid != but and now - self._touched.get(sid, now) < self.hold_s
        }

    def _freeable(self, job: Job, session: str | None = None) -> bool:
        """Whether a run would let go of its room once `session` (about to start another) let go of it: finished and
        held by no one else, or queued or training for no one else (it would be cancelled)."""
        if self._holders(job, but=session):
            return False
        return job.finished_training or (not job.anonymous and session is not None)

    def _hold(self, session: str, job: Job) -> None:
        """The visitor's own run, and the one shown, is now this one: a run they started before and nobody else
        holds is cancelled if it still trains or waits (one run a visitor)."""
        before = self._started.get(session)
        self._started[session] = self._seen[session] = job
        self._touched[session] = job.used = time.monotonic()
        if before is not None and before is not job and not before.finished_training and not self._holders(before):
            self._cancel(before, "its visitor started another run")

    def _cancel(self, job: Job, why: str) -> None:
        """(Under the lock.) The driver sees the status before its next chunk and stops."""
        job.status, job.message, job.finished = "cancelled", why, time.perf_counter()
        if self._jobs.get(job.settings) is job:
            del self._jobs[job.settings]
        with job.changed:
            job.changed.notify_all()

    def _sweep_locked(self) -> list[str]:
        """(Under the lock.) Visitors whose tab has been gone grace_s let go of their runs; queued or training runs
        that nobody holds any more are cancelled. Returns the visitors gone."""
        now = time.monotonic()
        gone = []
        for sid in set(self._touched):
            if self.alive(sid):
                self._absent.pop(sid, None)
            elif now - self._absent.setdefault(sid, now) >= self.grace_s:
                gone.append(sid)
        for sid in gone:
            for table in (self._started, self._seen, self._touched, self._absent):
                table.pop(sid, None)
        for job in list(self._jobs.values()):
            if not job.finished_training and not job.anonymous and not self._holders(job):
                self._cancel(job, "its visitors left")
        return gone

    def sweep(self) -> None:
        """Let go of what visitors who left held: their queued and training runs, their scrub cache."""
        with self._lock:
            gone = self._sweep_locked()
        if gone:
            self.scrub.forget(gone)

    def _sweeping(self, every_s: float) -> None:
        while not self._closed.wait(every_s):
            self.sweep()

    # runs ---------------------------------------------------------------------------------------------------

    def room(self, settings: tiny.Settings, session: str | None = None) -> str | None:
        """None if Play can keep this setting's run (kept already, or room once unheld runs are evicted); else why
        not, in the page's words."""
        with self._lock:
            return self._room_locked(settings, session)

    def _small(self, settings: tiny.Settings) -> bool:  # light enough for the reserve
        return settings.run_bytes <= self.small_bytes

    def _room_for(self, settings: tiny.Settings) -> tuple[int, int]:
        """The bytes and the number of runs this setting's run may share with the kept ones: a small run may take
        the reserve too."""
        if self._small(settings):
            return self.kept_bytes + self.reserve_bytes, MAX_RUNS + self.reserve_bytes // max(self.small_bytes, 1)
        return self.kept_bytes, MAX_RUNS

    def _displaceable(self, session: str | None) -> list[Job]:
        """(Under the lock.) Finished small runs other visitors hold, least recently used first: what a small run
        that finds even the reserve full may take the place of (it trains again in seconds)."""
        runs = [j for j in self._jobs.values() if j.finished_training and self._small(j.settings)
                and not self._freeable(j, session)]  # fmt: skip
        return sorted(runs, key=lambda j: j.used)

    def _room_locked(self, settings: tiny.Settings, session: str | None) -> str | None:
        job = self._jobs.get(settings)
        if job is not None and job.status != "failed":
            return None
        need = settings.run_bytes
        smaller = "fewer steps, a snapshot every more steps, or a smaller model"
        room, count = self._room_for(settings)
        if need > room:
            return (
                f"This run would keep {_mb(need)} of weights, more than the {_mb(room)} this server keeps "
                f"for all its visitors' runs: pick {smaller}."
            )
        held = [j for j in self._jobs.values() if not self._freeable(j, session)]
        taken = sum(j.settings.run_bytes for j in held)
        if taken + need <= room and len(held) < count:
            return None
        if self._small(settings):
            n = len(held)
            for j in self._displaceable(session):  # a finished small run of another visitor makes way
                taken, n = taken - j.settings.run_bytes, n - 1
                if taken + need <= room and n < count:
                    return None
            return (
                f"Every visitor's runs, trained or training while they watch, hold {_mb(taken)} of the "
                f"{_mb(room)} this server keeps, and the runs training now are not stopped for another: this run "
                "starts as soon as one of them finishes, in a minute or so."
            )
        return (
            f"This run would keep {_mb(need)} of weights, and other visitors' runs, trained or training while they "
            f"watch, hold {_mb(taken)} of the {_mb(self.kept_bytes)} this server keeps: Play is back when one of "
            f"them leaves, or now with {smaller}."
        )

    def start(self, settings: tiny.Settings, session: str | None = None) -> Job:
        """The run of this setting: the kept one, or a new one queued for training; held for the visitor `session`
        (their earlier run, still queued or training for them alone, is cancelled). NoRoom when it cannot be kept."""
        with self._lock:
            gone = self._sweep_locked()
            job = self._jobs.get(settings)
            new = job is None or job.status == "failed"
            if new:
                refused = self._room_locked(settings, session)
                if refused is not None:
                    raise NoRoom(refused)
                self._count += 1
                job = Job(settings, self._count, anonymous=session is None)
            if session is not None:
                self._hold(session, job)
            else:
                job.used = time.monotonic()
            if new:
                self._evict(settings.run_bytes, settings, session)
                self._jobs[settings] = job
            else:
                self._jobs.move_to_end(settings)
        if gone:
            self.scrub.forget(gone)
        if new:
            self._drivers.submit(self._drive, job)
        return job

    def see(self, settings: tiny.Settings, session: str | None = None) -> Job | None:
        """The kept run of this setting, if any; the visitor's page shows it, so it is held for them."""
        with self._lock:
            job = self._jobs.get(settings)
            if session is not None:
                now = time.monotonic()
                self._touched[session] = now
                if job is None:
                    self._seen.pop(session, None)
                else:
                    self._seen[session], job.used = job, now
            return job

    def get(self, settings: tiny.Settings) -> Job | None:
        with self._lock:
            return self._jobs.get(settings)

    def own(self, session: str | None) -> Job | None:
        """The visitor's own run, while it is queued or training."""
        with self._lock:
            job = self._started.get(session) if session is not None else None
            return job if job is not None and not job.finished_training else None

    def queue_position(self, job: Job) -> int:
        """How many runs train or wait ahead of a queued one (0 once it trains)."""
        if job.status != "queued":
            return 0
        with self._lock:
            return sum(1 for j in self._jobs.values() if j.number < job.number and not j.finished_training)

    def kept(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())

    def kept_bytes_used(self) -> int:
        with self._lock:
            return sum(j.settings.run_bytes for j in self._jobs.values())

    def _evict(self, need: int = 0, settings: tiny.Settings | None = None, session: str | None = None) -> None:
        """(Under the lock.) Finished runs that no visitor holds go, the least recently used first, until the kept
        ones and `need` (of `settings`, started by `session`) fit MAX_RUNS and kept_bytes (a small run: the reserve
        too). A held run stays: its visitor is watching it; unless a small run needs its place and it is a finished
        small one (`_displaceable`)."""
        room, most = self._room_for(settings) if settings is not None else (self.kept_bytes, MAX_RUNS)
        total = sum(j.settings.run_bytes for j in self._jobs.values()) + need
        count = len(self._jobs) + (need > 0)
        spare = sorted((j for j in self._jobs.values() if j.finished_training and not self._holders(j)),
                       key=lambda j: j.used)  # fmt: skip
        if settings is not None and self._small(settings):
            spare += [j for j in self._displaceable(session) if j not in spare]
        for job in spare:
            if count <= most and total <= room:
                break
            if self._jobs.get(job.settings) is job:
                del self._jobs[job.settings]
            total, count = total - job.settings.run_bytes, count - 1

    def let_go(self) -> None:
        """The server's memory budget is short: the scrub cache goes, and every kept run no visitor holds."""
        self.scrub.clear()
        with self._lock:
            for job in [j for j in self._jobs.values() if j.finished_training and not self._holders(j)]:
                del self._jobs[job.settings]

    def _drive(self, job: Job) -> None:
        """In a driver thread: send the run to a worker chunk by chunk, publishing each chunk's snapshots; stop at
        once when the run was cancelled (its visitors left) while it waited or between chunks."""
        with self._lock:
            if job.status == "cancelled":
                return
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
                self.sweep()
                with self._lock:
                    if self._closed.is_set() and job.status != "cancelled":  # shut down: no more chunks
                        job.status, job.message = "cancelled", "the server stopped"
                    if job.status == "cancelled":
                        break
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
            if job.status != "cancelled":
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
        self._closed.set()
        self._drivers.shutdown(wait=False, cancel_futures=True)
        self._warmer.shutdown(wait=False, cancel_futures=True)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self.scrub.clear()


_SERVICES: weakref.WeakSet[Service] = weakref.WeakSet()


@budget.evictor
def _let_go() -> None:
    """The server's budget is short: every service's scrub cache and unheld kept runs go (`Service.let_go`)."""
    for service in list(_SERVICES):
        service.let_go()


def train_in_processes(limit: int | None = None, env: str | None = None) -> bool:
    """Whether training runs in worker processes: `ATTENTION_LAB_TRAIN_IN` (process|thread) when set, else only
    where the server's memory is not limited below PROCESS_MIN_LIMIT."""
    env = os.environ.get("ATTENTION_LAB_TRAIN_IN", "") if env is None else env
    if env in ("process", "thread"):
        return env == "process"
    limit = budget.memory_limit() if limit is None else limit
    return limit is None or limit >= PROCESS_MIN_LIMIT


# One for the process, for good (ttl None): what it keeps is bounded by MAX_RUNS and KEPT_BYTES, and a new one would
# lose the runs in training
@st.cache_resource(max_entries=1, ttl=None, show_spinner=False)
def service() -> Service:
    """The server's one Service (every session of the process shares it)."""
    return Service(processes=train_in_processes())
