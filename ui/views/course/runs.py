"""The server's runs for the lessons that need a model: the chat page's cache and the training pool, passed to the
package's questions in every lesson's inputs (`RUNS`), so a lesson never runs a model a second time.
"""

from __future__ import annotations

import time
from typing import Any

from streamlit.runtime.scriptrunner import get_script_run_ctx

from attention.lessons import course
from attention.models import tiny
from server import sessions
from server.chat import prompt_run
from server.training import NoRoom, service

from ...results import or_stop
from .. import watch_it_learn


def smollm2_run(ids: tuple[int, ...]):
    """The chat page's run of these tokens (the server's shared, budgeted cache, server/chat.py; a run the server's
    memory cannot take now is explained and the page stopped); outside a page's run (a script, a test of the
    package in the same process), the package's own."""
    if get_script_run_ctx() is None:
        return course.forward(ids)
    with or_stop("The chat model"):
        return prompt_run(ids)


def _job(settings: tiny.Settings):
    """The training pool's run of the lesson's setting, kept or started for this visitor (as Play does)."""
    return service().start(settings, sessions.current())


def pool_run(settings: tiny.Settings) -> tiny.Run:
    """A finished run of this setting from the training pool (kept for every visitor; trained now if nobody has);
    outside a page, the package trains it."""
    if get_script_run_ctx() is None:
        return tiny.train(settings)
    job = _job(settings)
    while not job.finished_training:
        job.wait(len(job.snapshots) + 1, 1.0)
    if job.status not in ("done", "stopped"):
        raise RuntimeError(f"the lesson's training run {job.status}: {job.message}")
    return job.run


# The server's runs for the questions that need a model (attention.lessons.course.runner): passed in every
# lesson's inputs, so a lesson never runs a model a second time.
RUNS = {"smollm2": smollm2_run, "tiny": pool_run}


def lesson_run(i: dict[str, Any]) -> tiny.Run:
    return pool_run(course.lesson_settings(i))


def training_wait(i: dict[str, Any]) -> str | None:
    """None once the lesson's run is trained (kept by the pool), else where it stands, in words."""
    try:
        job = _job(course.lesson_settings(i))
    except NoRoom as refused:
        return str(refused)
    if job.finished_training:
        return None
    words = watch_it_learn.progress(job, service().queue_position(job), service().workers).words
    if job.status == "training" and job.step > 0 and job.started is not None:  # at the pace so far
        left = (time.perf_counter() - job.started) * (job.settings.steps - job.step) / job.step
        words += f" About {max(left, 1):.0f} s left."
    return words


def run_so_far(i: dict[str, Any]) -> tiny.Run | None:
    """The lesson's run as far as it has trained (its snapshots so far), None before its first."""
    try:
        job = _job(course.lesson_settings(i))
    except NoRoom:
        return None
    return job.run if job.snapshots else None
