"""Watch it learn: the page trains, plays, steps and resets; runs are shared server-wide, queued beyond the workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention.models import tiny
from harness.charts import _walk, heatmaps, open_page
from server import training
from ui.views import watch_it_learn

SMALL = {"train_steps": "50", "train_every": "25"}


def timeline(at: AppTest) -> Any:
    """The timeline slider (its key changes each time the page moves it: `training.timeline`)."""
    return next(s for s in at.select_slider if s.label.startswith("Timeline"))


def wait(job: training.Job, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not job.finished_training:
        assert time.monotonic() < end, f"{job.status} at step {job.step}"
        time.sleep(0.05)


@pytest.fixture
def in_thread(monkeypatch: pytest.MonkeyPatch) -> Iterator[training.Service]:
    """The page's service, training in its driver threads (no worker processes to start in a test)."""
    service = training.Service(processes=False)
    monkeypatch.setattr(watch_it_learn, "service", lambda: service)
    yield service
    service.shutdown()


def curves(at: AppTest) -> dict[str, int]:
    """Each Vega chart on the page by title: the rows of data it draws."""
    out = {}
    for node in _walk(at._tree):
        if getattr(node, "type", None) == "vega_lite_chart":
            rows = pa.ipc.open_stream(node.proto.data.data).read_all().num_rows if node.proto.data.data else 0
            out[json.loads(node.proto.spec)["title"]] = rows
    return out


def test_the_curves_are_drawn_empty_before_play(in_thread: training.Service) -> None:
    """Before Play the charts stand empty (the browser loads Vega's code while the visitor reads); Play fills them."""
    at = open_page("watch_it_learn", **SMALL)
    assert curves(at) == {"Loss": 0, "Previous-token score": 0, "Induction score": 0}
    at.button(key="tr:play").click().run()
    wait(in_thread.get(tiny.Settings(steps=50, every=25)))
    at.run()
    # 3 snapshots: two loss series a snapshot, a score a head (2 layers x 2 heads); once the replay has reached the
    # end, the run-length bars follow
    assert curves(at).items() >= {"Loss": 6, "Previous-token score": 12, "Induction score": 12}.items()


def test_play_trains_and_the_page_draws_every_snapshot(in_thread: training.Service) -> None:
    at = open_page("watch_it_learn", **SMALL)
    assert any("Press **Play**" in i.value for i in at.info)
    at.button(key="tr:play").click().run()
    settings = tiny.Settings(steps=50, every=25)
    job = in_thread.get(settings)
    assert job is not None
    wait(job)
    for _ in range(4):  # the play ticks on through the finished run's snapshots, then stops at the last
        at.run()
        if not at.session_state[watch_it_learn.PLAYING]:
            break
    assert not at.session_state[watch_it_learn.PLAYING]
    assert not at.exception, [e.value for e in at.exception]
    assert any(s.value.startswith("Trained: 50 steps") for s in at.success)
    assert list(timeline(at).options) == ["0", "25", "50"]
    drawn = heatmaps(at)
    titles = [t for t in drawn if t.startswith("L")]
    assert [t.split(":")[0] for t in titles] == ["L0H0", "L0H1", "L1H0", "L1H1"]
    # the heatmap is the layer's attention.compute on the probe, at the snapshot shown (the last: play went through)
    result = tiny.layer_result(job.run.snapshots[-1], settings, 1)
    values, rows, _ = drawn[titles[2]]
    assert values.shape == result.weights[0].shape and abs(values - result.weights[0]).max() < 1e-6
    assert rows[:2] == [f"{p + 1} {tiny.NAMES[int(i)]}" for p, i in enumerate(tiny.probe(settings).ids[0, :2])]
    assert any(h.value == "Test it on run lengths it never saw" for h in at.subheader)
    assert [m.label for m in at.metric][:2] == ["Loss on the repeated half", "Right"]


def test_step_and_reset_move_the_timeline(in_thread: training.Service) -> None:
    at = open_page("watch_it_learn", **SMALL)
    at.button(key="tr:step").click().run()
    wait(in_thread.get(tiny.Settings(steps=50, every=25)))
    at.run()
    assert any(m.value.startswith("**Step 25**") for m in at.markdown)
    at.button(key="tr:step").click().run()
    assert any(m.value.startswith("**Step 50**") for m in at.markdown)
    at.button(key="tr:reset").click().run()
    assert any(m.value.startswith("**Step 0**") for m in at.markdown)
    timeline(at).set_value(25).run()
    assert any(m.value.startswith("**Step 25**") for m in at.markdown)


def shown(at: AppTest) -> int:
    """The step of the snapshot the page shows ("**Step 40**: loss on ...")."""
    return next(int(m.value.split("**")[1].split()[1]) for m in at.markdown if m.value.startswith("**Step "))


def test_the_timeline_as_the_browser_last_drew_it_does_not_pause_a_play(in_thread: training.Service) -> None:
    """A fragment's timer sends every widget's value each tick, the timeline's as the browser last drew it, also while
    the run that moved it on is still on its way: that old value is no move of the learner's, and the replay goes on
    to its end (it used to pause on the earlier snapshot). The learner's own move still pauses it."""
    at = open_page("watch_it_learn", train_steps="100", train_every="20")
    at.button(key="tr:play").click().run()
    wait(in_thread.get(tiny.Settings(steps=100, every=20)))
    at.button(key="tr:reset").click().run()
    at.button(key="tr:play").click().run()  # a replay: a snapshot on each run
    assert at.session_state[watch_it_learn.PLAYING] and shown(at) == 20
    drawn = next(w for w in at._tree.get_widget_states().widgets if w.id == timeline(at).id)
    at.run()
    assert at.session_state[watch_it_learn.PLAYING] and shown(at) == 40
    states = at._tree.get_widget_states()  # the browser's next tick: the timeline still as it drew it, at 20
    kept = [w for w in states.widgets if w.id != drawn.id]
    del states.widgets[:]
    states.widgets.extend([*kept, drawn])
    at._run(widget_state=states)
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state[watch_it_learn.PLAYING] and shown(at) == 60, "the old value paused the play"
    at.run()
    timeline(at).set_value(20).run()  # the learner's move
    assert not at.session_state[watch_it_learn.PLAYING] and shown(at) == 20
    at.button(key="tr:play").click().run()
    while at.session_state[watch_it_learn.PLAYING]:
        at.run()
    assert shown(at) == 100


def test_a_setting_that_cannot_train_is_named(in_thread: training.Service) -> None:
    at = open_page("watch_it_learn", train_d_model="30", train_heads="4")
    assert [e.value for e in at.error] == [
        "This setting cannot be trained: d_model=30 must divide into heads=4 equal heads: pick a d_model that 4 "
        "divides."
    ]


def test_thirty_visitors_on_one_setting_cost_one_training(in_thread: training.Service) -> None:
    settings = tiny.Settings(steps=20, every=10)
    jobs: list[training.Job] = []
    threads = [threading.Thread(target=lambda: jobs.append(in_thread.start(settings))) for _ in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(jobs) == 30 and len({id(j) for j in jobs}) == 1
    assert len(in_thread.kept()) == 1
    wait(jobs[0])
    assert [s.to_dict() for s in jobs[0].snapshots] == [s.to_dict() for s in tiny.train(settings).snapshots]


def test_settings_beyond_the_workers_queue_and_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """In the server's own process one run trains at a time, whatever WORKERS is: the second queues and says so."""
    gate = threading.Event()
    real = tiny.advance

    def held(*args: object) -> tuple:
        gate.wait(60)
        return real(*args)

    monkeypatch.setattr(tiny, "advance", held)
    service = training.Service(processes=False)
    try:
        first = service.start(tiny.Settings(steps=10, every=10))
        second = service.start(tiny.Settings(steps=10, every=10, seed=1))
        time.sleep(0.2)
        assert (first.status, second.status) == ("training", "queued")
        assert service.queue_position(second) == 1
        words = watch_it_learn.progress(second, service.queue_position(second), service.workers).words
        assert words == "Queued: 1 run ahead of this one (this server trains 1 at a time)."
        gate.set()
        wait(second)
        assert first.status == second.status == "done"
    finally:
        gate.set()
        service.shutdown()


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_worker_processes_train_the_same_numbers_at_low_priority_and_end_when_idle() -> None:
    service = training.Service(workers=1, idle_s=2.0)
    try:
        assert service._get_pool().submit(os.nice, 0).result(timeout=300) == 19  # the pages' processes come first
        # it trained its warm-up steps with tiny.AdamW: torch._dynamo (70 MB, which torch's own optimizers import) never
        assert not service._get_pool().submit(eval, "'torch._dynamo' in __import__('sys').modules").result(timeout=60)
        settings = tiny.Settings(steps=30, every=10, seed=2)
        job = service.start(settings)
        wait(job, timeout=300)
        assert job.status == "done"
        end = time.monotonic() + 60
        while service._pool is not None:  # nothing more to train: the worker process ends
            assert time.monotonic() < end
            time.sleep(0.1)
        assert [s.to_dict() for s in job.snapshots] == [s.to_dict() for s in tiny.train(settings).snapshots]
    finally:
        service.shutdown()


def test_a_link_opens_its_setting_and_the_page_writes_it_back(in_thread: training.Service) -> None:
    at = open_page("watch_it_learn", train_layers="1", train_seed="3", **SMALL)
    at.button(key="tr:play").click().run()
    job = in_thread.get(tiny.Settings(layers=1, seed=3, steps=50, every=25))
    assert job is not None
    wait(job)
    at.run()
    assert at.query_params["train_layers"] == "1" and at.query_params["train_seed"] == "3"
    assert "train_heads" not in at.query_params  # defaults stay out of the link


def test_a_nan_loss_stops_the_run_and_the_page_says_so(
    in_thread: training.Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tiny.losses
    monkeypatch.setattr(tiny.trainer, "losses", lambda f, s: (real(f, s)[0] * float("nan"), real(f, s)[1]))
    at = open_page("watch_it_learn", **SMALL)
    at.button(key="tr:play").click().run()
    wait(in_thread.get(tiny.Settings(steps=50, every=25)))
    at.run()
    assert not at.exception
    assert any(e.value.startswith("Stopped: the loss became nan at step 1") for e in at.error), at.error


ORPHAN = """
import multiprocessing, os
from concurrent.futures import ProcessPoolExecutor
from attention.models import tiny
if __name__ == "__main__":
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=tiny.worker_init)
    print(pool.submit(os.getpid).result(), flush=True)
    os._exit(0)  # a server killed without shutting its pool down
"""


@pytest.mark.thorough  # a fresh interpreter or a model run: --all, not the fast tier
def test_a_worker_ends_when_its_server_is_killed(tmp_path) -> None:  # noqa: ANN001
    script = tmp_path / "server.py"
    script.write_text(ORPHAN)
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=root,
                          env={**os.environ, "PYTHONPATH": root})  # fmt: skip
    worker = int(done.stdout.split()[0])
    end = time.monotonic() + 30
    while Path(f"/proc/{worker}").exists() and Path(f"/proc/{worker}/cmdline").read_bytes():
        assert time.monotonic() < end, "the worker outlived its server"
        time.sleep(0.2)


def _run(settings: tiny.Settings, *snapshots: tuple[int, float, list[list[float]]]) -> tiny.Run:
    """A run of made-up snapshots (step, loss on the answers, task scores per layer and head): the words only."""
    weights = tiny.init_weights(settings, torch.Generator().manual_seed(0))
    snaps = tuple(
        tiny.Snapshot(step, loss, loss, 0.5, {"previous_token": scores, settings.score_name: scores}, weights)
        for step, loss, scores in snapshots
    )
    return tiny.Run(settings, snaps)


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_the_page_names_the_layers_as_set_and_one_layer_says_no_head_forms(
    in_thread: training.Service, layers: int
) -> None:
    at = open_page("watch_it_learn", train_layers=str(layers), **SMALL)
    said = [c.value for c in at.main.caption]
    assert said[0].startswith(f"A {layers}-layer transformer with nothing but attention")
    sidebar = " ".join(c.value for c in at.sidebar.caption)
    if layers == 1:
        assert "no induction head can form" in said[0] and "no induction head can form" in sidebar
        assert "falls off a cliff" not in said[0]
    else:
        assert "induction head" in said[0] and "no induction head" not in said[0] + sidebar
    at.button(key="tr:play").click().run()
    wait(in_thread.get(tiny.Settings(layers=layers, steps=50, every=25)))
    at.run()
    words = " ".join(m.value for m in at.markdown)
    assert "**No head formed" in words and " formed at step" not in words  # 50 steps form nothing, and it says so
    if layers == 1:
        assert "none can" in words
        assert "previous-token head also breaks" not in " ".join(c.value for c in at.main.caption)


def test_a_layer_0_head_on_the_induction_keys_is_a_shortcut_not_an_induction_head() -> None:
    """The fixed-length run of issue 32: layer 0's heads score 0.99 on the induction keys by position alone; the page
    calls no head formed and says why, where it used to say 'L0H1 formed at step 100'."""
    settings = tiny.Settings(fixed=True, steps=200, every=100)
    run = _run(settings, (0, 3.5, [[0.09, 0.09], [0.09, 0.09]]), (100, 0.43, [[0.99, 1.0], [0.14, 0.3]]),
               (200, 0.04, [[0.98, 0.99], [0.14, 0.32]]))  # fmt: skip
    assert run.formed is None
    words = watch_it_learn.formation_words(run, finished=True)
    assert words.startswith("**No induction head formed.**") and "L0H1 (induction score 0.99" in words
    assert "is in layer 0" in words and "fixed run length" in words
    # the same scores in layer 1 are an induction head, named where it formed
    run = _run(settings, (0, 3.5, [[0.09, 0.09], [0.09, 0.09]]), (100, 0.43, [[0.14, 0.3], [0.99, 1.0]]),
               (200, 0.04, [[0.14, 0.32], [0.99, 0.99]]))  # fmt: skip
    assert (run.formed.name, run.formed.step) == ("L1H1", 100)
    assert watch_it_learn.formation_words(run, finished=True).startswith("**L1H1 formed at step 100**")
    start = _run(settings, (0, 3.5, [[0.09, 0.09], [0.09, 0.09]]))
    assert watch_it_learn.formation_words(start, finished=False) == "No head has formed yet (step 0 of 200)."


def test_the_composition_of_the_previous_token_head_into_the_induction_head_is_drawn_over_the_steps(
    in_thread: training.Service,
) -> None:
    """Issue 49: once trained, a chart of how much the second layer's induction head reads what the first layer's
    previous-token head writes (K-, Q-, V-composition) at every snapshot, with the head's induction score."""
    from attention.models.circuits import trained

    at = open_page("watch_it_learn", **SMALL)
    at.button(key="tr:play").click().run()
    job = in_thread.get(tiny.Settings(steps=50, every=25))
    wait(job)
    for _ in range(4):
        at.run()
        if not at.session_state[watch_it_learn.PLAYING]:
            break
    assert not at.exception, [e.value for e in at.exception]
    g = trained.growth(job.run)
    writer, reader = (f"L{layer}H{head}" for layer, head in (g.writer, g.reader))
    title = f"How much {reader} reads what {writer} writes"
    assert "Two heads become a circuit" in [s.value for s in at.subheader]
    for node in _walk(at._tree):
        if getattr(node, "type", None) == "vega_lite_chart" and json.loads(node.proto.spec)["title"] == title:
            table = pa.ipc.open_stream(node.proto.data.data).read_all().to_pandas()
            break
    else:
        raise AssertionError(f"no chart titled {title!r}")
    k = table[table["series"].str.startswith("K-composition")]
    assert k["step"].tolist() == [0, 25, 50] and len(table) == 12
    torch.testing.assert_close(torch.tensor(k["value"].tolist()), g.k, atol=1e-6, rtol=0)
    assert ((table["value"] >= 0) & (table["value"] <= 1)).all()
