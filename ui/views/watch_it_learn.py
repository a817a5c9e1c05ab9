"""Watch it learn's page helpers: the page's buttons and what they do, its live view and timeline, and the charts
of a run (loss against chance, each head's scores over the steps). The runs themselves are the server's
(server/training.py: one run a setting, shared by every visitor, trained in worker processes or a thread); the
math is attention/models/tiny/; the page is pages/watch_it_learn.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

import streamlit as st
import torch

from attention.models import tiny
from server import sessions
from server.training import (
    HOLD_S,
    WORKERS,
    Job,
    NoRoom,
    service,
)
from server.warmup import lazy

from .. import charts, keys, state
from ..charts import PALETTE
from .watch_it_learn_settings import PREFIX

pd = lazy("pandas")  # imported at first use (server/warmup.py): the course imports this module with `ui`

# charts of a run -------------------------------------------------------------------------------------------


def loss_frame(run: tiny.Run) -> pd.DataFrame:
    """Long table for the loss chart: step, value, series (training loss, loss on the answers, chance)."""
    task = "loss on the repeated half" if run.settings.task == "induction" else "loss on the answers"
    rows = []
    for s in run.snapshots:
        rows += [(s.step, s.loss, "training loss"), (s.step, s.task_loss, task)]
    return pd.DataFrame(rows, columns=["step", "value", "series"])


def score_frame(run: tiny.Run, name: str) -> pd.DataFrame:
    """Long table of one score over the steps: step, value, head ('L1H0')."""
    rows = []
    for s in run.snapshots:
        for layer, heads in enumerate(s.scores[name]):
            rows += [(s.step, v, f"L{layer}H{h}") for h, v in enumerate(heads)]
    return pd.DataFrame(rows, columns=["step", "value", "head"])


def curve_spec(
    title: str, y_title: str, color: str, *, rule: float | None = None, rule_label: str = "",
    mark_step: int | None = None, mark_label: str = "", current: int | None = None, y_max: float | None = None,
    height: int = 220,
) -> dict:  # fmt: skip
    """A Vega-Lite line chart over the steps, with a dashed horizontal rule (chance, the threshold), a vertical rule
    at the step a head formed, named, and a grey one at the step shown."""
    y: dict[str, Any] = {"field": "value", "type": "quantitative", "title": y_title}
    if y_max is not None:
        y["scale"] = {"domain": [0, y_max]}
    layers: list[dict] = [
        {
            "mark": {"type": "line", "point": False},
            "encoding": {
                "x": {"field": "step", "type": "quantitative", "title": "step"},
                "y": y,
                "color": {
                    "field": color,
                    "type": "nominal",
                    "title": None,
                    "scale": {"range": PALETTE},
                    # three entries a row: in a column on a projector, a row of four heads ran past the chart's edge
                    "legend": {"orient": "bottom", "labelLimit": 0, "columns": 3},
                },
                "tooltip": [
                    {"field": color, "type": "nominal"},
                    {"field": "step", "type": "quantitative"},
                    {"field": "value", "type": "quantitative", "format": ".3f"},
                ],
            },
        }
    ]
    if rule is not None:
        layers.append({"data": {"values": [{"y": rule, "label": rule_label}]}, "layer": [
            {"mark": {"type": "rule", "strokeDash": [4, 4], "color": "#888"}, "encoding": {"y": {"field": "y",
             "type": "quantitative"}}},
            {"mark": {"type": "text", "align": "left", "dx": 4, "dy": -6, "color": "#666"},
             "encoding": {"y": {"field": "y", "type": "quantitative"}, "x": {"value": 0},
                          "text": {"field": "label"}}},
        ]})  # fmt: skip
    if current is not None:
        layers.append({"data": {"values": [{"x": current}]}, "mark": {"type": "rule", "color": "#bbb"},
                       "encoding": {"x": {"field": "x", "type": "quantitative"}}})  # fmt: skip
    if mark_step is not None:
        layers.append({"data": {"values": [{"x": mark_step, "label": mark_label}]}, "layer": [
            {"mark": {"type": "rule", "color": "#d62728", "strokeWidth": 2}, "encoding": {"x": {"field": "x",
             "type": "quantitative"}}},
            {"mark": {"type": "text", "align": "left", "dx": 4, "baseline": "top", "color": "#d62728",
                      "fontWeight": "bold"},
             "encoding": {"x": {"field": "x", "type": "quantitative"}, "y": {"value": 2}, "text": {"field": "label"}}},
        ]})  # fmt: skip
    return {"title": title, "height": height, "layer": layers}


def curve(frame: pd.DataFrame, spec: dict, *, key: str, container: Any = None) -> None:
    """A curve chart whose plot is the spec's height, with its title, axis and legend around it (`charts.chart`)."""
    charts.chart(frame, spec, height=spec["height"], key=key, container=container)


def curves(run: tiny.Run, at: int | None = None) -> None:
    """The loss and the heads' scores over the steps, a grey rule at step `at` (the snapshot shown) and a red one where
    a head formed. A run with no snapshot yet draws them empty (axes, chance, the threshold): the browser then fetches
    and compiles Vega's code (a 775 kB chunk, loaded on the first chart) while the visitor reads, not after Play,
    where it took 0.5-1.6 s of the first redraw (measured at load 7-11), and Play only adds the points."""
    name, formed = run.settings.score_name, run.formed
    mark = {} if formed is None else {"mark_step": formed.step, "mark_label": f"{formed.name} forms"}
    curve(loss_frame(run), curve_spec(
        "Loss", "nats", "series", rule=tiny.CHANCE, rule_label=f"chance: ln {tiny.VOCAB} = {tiny.CHANCE:.2f}",
        current=at, height=170, **mark,
    ), key="tr:loss")  # fmt: skip
    left, right = st.columns(2)
    curve(score_frame(run, "previous_token"), curve_spec(
        "Previous-token score", "weight on the token before", "head", current=at, y_max=1.0, height=150,
    ), key="tr:prev", container=left)  # fmt: skip
    if name != "previous_token":
        curve(score_frame(run, name), curve_spec(
            f"{name.capitalize()} score", "weight on the key that solves it", "head", rule=tiny.FORMED_SCORE,
            rule_label="formed above 0.4", current=at, y_max=1.0, height=150, **mark,
        ), key="tr:task", container=right)  # fmt: skip


@dataclass(frozen=True)
class Progress:
    """What a page says about a run: its status in words and whether it still moves."""

    words: str
    moving: bool


def progress(job: Job, position: int, workers: int = WORKERS) -> Progress:
    s = job.settings
    if job.status == "queued":
        ahead = f"{position} run{'s' * (position != 1)}"
        return Progress(f"Queued: {ahead} ahead of this one (this server trains {workers} at a time).", True)
    if job.status == "training":
        return Progress(f"Training: step {job.step} of {s.steps}.", True)
    if job.status == "stopped":
        return Progress(f"Stopped: {job.message}.", False)
    if job.status == "failed":
        return Progress(f"Failed: {job.message}.", False)
    if job.status == "cancelled":
        return Progress(f"Cancelled: {job.message}.", False)
    took = (job.finished or 0) - (job.started or 0)
    return Progress(f"Trained: {s.steps} steps in {took:.1f} s. {KEPT_WORDS}", False)


# how long a finished run stays: Service's hold, in the page's words
KEPT_WORDS = (
    f"Kept for you while this page is open in your tab, up to {HOLD_S / 60:.0f} minutes after you last use it; "
    "then it may make room for other visitors' runs."
)


# what the page says about a setting and its run -----------------------------------------------------------------

TASK_WORDS = {
    "induction": "continue a random run of tokens that repeats",
    "reverse": "write a random run of tokens backwards after a separator",
    "sort": "write a random run of tokens sorted after a separator",
    "previous_token": "name the token before each one of a random run",
}


def intro(settings: tiny.Settings) -> str:
    """The page's opening words for a setting: its layers as set, and what the task's head needs of them."""
    s = settings
    said = f"A {s.layers}-layer transformer with nothing but attention is trained to {TASK_WORDS[s.task]}."
    if s.task == "induction" and not s.task_layers:
        said += (
            " An induction head needs two layers: a head in layer 0 marks each token's previous one, and a head "
            "above reads that mark to find the token after the earlier copy. With one layer no induction head can "
            "form" + ("" if s.fixed else ", and the loss on the repeated half stays far above half of chance")
        ) + ": set Layers to 2 to watch one form."
    elif s.task == "induction":
        above = "layer 1" if s.layers == 2 else f"a layer from 1 to {s.layers - 1}"
        said += (
            f" For hundreds of steps the loss sits near chance; then a head in {above} learns to look at the token "
            "after the earlier copy of the current one (an induction head), and the loss on the repeated half falls "
            "off a cliff."
        )
    else:
        said += " Watch the loss on the answers fall as a head learns to look at the key that holds each answer."
    if s.fixed:
        said += " With one fixed run length the model can find the answer by its position alone instead."
    return said


def formation_words(run: tiny.Run, finished: bool) -> str:
    """What the run did, in a sentence: the head that formed and when (`tiny.formation`: a head in the task's layers,
    so a layer-0 head is never called an induction head), or, plainly, that none formed, and why where it is known.
    finished: whether the run has stopped training (until then, no head has formed *yet*)."""
    s, formed, last = run.settings, run.formed, run.snapshots[-1]
    name, half = s.score_name.replace("_", "-"), "the repeated half" if s.task == "induction" else "the answers"
    rows = last.scores[s.score_name]
    if formed is not None:
        return (
            f"**{formed.name} formed at step {formed.step}**: from that snapshot on, its {name} score stays above "
            f"{tiny.FORMED_SCORE} and the loss on {half} below half of chance ({tiny.CHANCE / 2:.2f} nats)."
        )
    layer, head = tiny.best_head(last, s, range(s.layers))
    if last.task_loss < tiny.CHANCE / 2 and rows[layer][head] > tiny.FORMED_SCORE and layer not in s.task_layers:
        return (
            f"**No {name} head formed.** The loss on {half} fell below half of chance, but the head that reads the "
            f"answer, L{layer}H{head} ({name} score {rows[layer][head]:.2f}), is in layer {layer}, where no head can "
            f"know what followed an earlier copy of a token: it finds the answer by its position alone"
            + (", which one fixed run length allows (the test at other lengths below shows it)." if s.fixed else ".")
        )
    if not s.task_layers:
        return (
            f"**No head formed, and none can**: an induction head needs a second layer, and this model has one. "
            f"The loss on {half}: {last.task_loss:.2f} nats at step {last.step} (chance "
            f"{tiny.CHANCE:.2f})."
        )
    if not finished:
        return f"No head has formed yet (step {last.step} of {s.steps})."
    return (
        f"**No head formed** in {last.step} steps: no {name} score stayed above {tiny.FORMED_SCORE} with the loss on "
        f"{half} below half of chance ({tiny.CHANCE / 2:.2f} nats). More steps, another seed or learning rate may form "
        "one."
    )


def ablation_words(settings: tiny.Settings) -> str:
    """What switching a head off does, as far as this model has the heads it speaks of."""
    said = "Its context is set to zero, so it adds nothing to the residual stream."
    if settings.task == "induction" and settings.task_layers:
        said += (
            " Switching off layer 0's previous-token head also breaks the induction head above it: that head finds "
            "'the token after the earlier copy' by reading what the previous-token head wrote."
        )
    return said


# the page's controls and live view ----------------------------------------------------------------------------

PLAYING, SHOWN, FOR = "tr:playing", "tr:shown", "tr:for"  # session keys: playing?, the snapshot shown, its run
REFUSED = "tr:refused"  # session key: why the last Play or Step could not start a run (the pool's sentence)
TIMELINE = "tr:timeline"  # the timeline's box (the clicker's keys find its slider by it) and its sliders' key prefix
MOVES = "tr:moves"  # session key: how many times the page itself has moved the timeline (its slider's generation)
TICK_S = 0.5  # while playing, the live view redraws this often (each redraw is a rerun of the page's live part)
FIRST_WAIT_S = 1.0  # Play waits at most this long for a new run's first chunk: the first redraw shows a curve


def settings_values() -> dict[str, Any]:
    """The settings the page's widgets hold (the link's, or the defaults)."""
    return {n: state.get(PREFIX + n) for n in tiny.SETTINGS}


def follow(settings: tiny.Settings) -> None:
    """A new setting shows its own run from its start, paused."""
    ss = st.session_state
    if ss.get(FOR) != settings:
        ss[FOR], ss[SHOWN], ss[PLAYING] = settings, 0, False


def _start(settings: dict[str, Any]) -> Job | None:
    """Start (or join) the setting's run for this visitor; None, with the pool's sentence kept for the page, when it
    cannot be kept."""
    ss = st.session_state
    try:
        job = service().start(tiny.Settings.from_dict(settings), sessions.current())
    except NoRoom as refused:
        ss[REFUSED], ss[PLAYING] = str(refused), False
        return None
    ss.pop(REFUSED, None)
    return job


def shown_run(settings: tiny.Settings) -> Job | None:
    """The kept run of the setting the page shows, if any: held for this visitor while they look at it."""
    return service().see(settings, sessions.current())


def play(settings: dict[str, Any]) -> None:
    """Play: train the setting (or join its run), and follow it; a finished run replays from the start."""
    server = service()
    job = _start(settings)
    if job is None:
        return
    if server.queue_position(job) < server.workers:  # it trains now (a queued run would keep the page waiting)
        # The first chunk is a few steps: drawn as soon as it lands, the first redraw shows the curve moving;
        # without the wait it would move a tick (TICK_S) later.
        job.wait(2, FIRST_WAIT_S)
    ss = st.session_state
    if job.finished_training and ss.get(SHOWN, 0) >= len(job.snapshots) - 1:
        ss[SHOWN] = 0
    ss[PLAYING] = True


def pause() -> None:
    st.session_state[PLAYING] = False


def step(settings: dict[str, Any]) -> None:
    """Step: one snapshot further (training the setting if nobody has)."""
    if _start(settings) is None:
        return
    st.session_state[PLAYING] = False
    st.session_state[SHOWN] = st.session_state.get(SHOWN, 0) + 1


def reset() -> None:
    """Reset: back to the first snapshot, paused (the run itself is kept: it is every visitor's)."""
    st.session_state[PLAYING], st.session_state[SHOWN] = False, 0


def timeline(steps: list[int], step: int) -> None:
    """The timeline slider at `step`, the snapshot shown; moving it shows that snapshot, paused (`pick_step`).

    The page moves the timeline too (each tick of a play, Step, Reset, the clicker), and a browser reports the slider
    as it last drew it: a fragment's timer (`run_every`) sends every widget's value each TICK_S, also while the run
    that moved the slider is still on its way, so a slider whose value the script set would be reported back at its
    old value and read as the learner's move (the play paused by itself on an earlier snapshot). So the page never
    sets the value of a slider the browser has drawn: each move of its own draws a new slider (a new key, MOVES), and
    the slider drawn last can then differ from the value the page gave it only by the learner's hand. The browser
    goes on sending the older sliders' last values too, and Streamlit calls their on_change (it has dropped their
    values, not their callbacks): `pick_step` ignores them."""
    ss = st.session_state
    key = _timeline_key()
    if key in ss and ss[key] != step:  # the page moved it, not the learner (whose move `pick_step` followed)
        ss[MOVES] = ss.get(MOVES, 0) + 1
        key = _timeline_key()
    if key not in ss:
        ss[key] = step
    st.container(key=TIMELINE).select_slider("Timeline: the snapshot shown", steps, key=key, on_change=pick_step,
                                             args=(key, steps))  # fmt: skip


def _timeline_key() -> str:
    return f"{TIMELINE}:{st.session_state.get(MOVES, 0)}"


def pick_step(key: str, steps: list[int]) -> None:
    """The learner moved the timeline: show that snapshot, paused. A slider the page has since replaced is ignored:
    what it reports is its last value, or a move on a snapshot the page has already moved away from."""
    if key != _timeline_key():
        return
    st.session_state[PLAYING] = False
    st.session_state[SHOWN] = steps.index(st.session_state[key])


def clicker(job: Job | None) -> None:
    """A presenter's clicker on the timeline: PageDown or → shows the next snapshot, PageUp or ← the one before,
    paused (as moving the timeline does). Call it before `buttons`, so that Play and Pause show the pause."""
    ss = st.session_state
    last = len(job.snapshots) - 1 if job is not None else -1
    shown = min(ss.get(SHOWN, 0), max(last, 0))
    move = keys.clicks("timeline", shown, slider=TIMELINE)
    if move and last >= 0:
        ss[PLAYING] = False
        ss[SHOWN] = min(max(shown + move, 0), last)


def buttons(settings: tiny.Settings, container: Any) -> str | None:
    """Play, Pause, Step, Reset; beside them, before Play, why this setting's run cannot be kept now (Play and Step
    are then off: the reason is returned), or that Play here cancels the visitor's own run of another setting."""
    row = container.container(horizontal=True)
    args = (settings.to_dict(),)
    ss = st.session_state
    playing = ss.get(PLAYING, False)
    server, me = service(), sessions.current()
    refused = server.room(settings, me)
    row.button("Play", icon=":material/play_arrow:", on_click=play, args=args, disabled=playing or bool(refused),
               type="primary", key="tr:play")  # fmt: skip
    row.button("Pause", icon=":material/pause:", on_click=pause, disabled=not playing, key="tr:pause")
    row.button("Step", icon=":material/skip_next:", on_click=step, args=args, disabled=bool(refused), key="tr:step")
    row.button("Reset", icon=":material/skip_previous:", on_click=reset, key="tr:reset")
    said = refused or ss.pop(REFUSED, None)
    if said:
        container.warning(said, icon=":material/memory:")
        if refused:
            _wait_for_room(settings)
        return refused
    own = server.own(me)
    if own is not None and own.settings != settings:
        where = "waits in the queue" if own.status == "queued" else f"is at step {own.step} of {own.settings.steps}"
        container.caption(
            f"Your run of another setting {where}: Play here cancels it (one run a visitor at a time), unless "
            "another visitor is watching it too."
        )
    return None


ROOM_CHECK_S = 5.0  # a page refused for room looks again this often, and turns Play back on by itself


@st.fragment(run_every=ROOM_CHECK_S)
def _wait_for_room(settings: tiny.Settings) -> None:
    """While Play is off for want of room, look again every ROOM_CHECK_S (draws nothing): once another visitor has
    left, the whole page runs again and Play is back on, without the visitor having to do anything."""
    if service().room(settings, sessions.current()) is None:
        st.rerun()


def ticking(job: Job | None) -> bool:
    """Whether the live view redraws by itself: while playing, and while the run trains (paused, the timeline stays
    where it is, but the curves and the status keep up)."""
    return bool(st.session_state.get(PLAYING)) or (job is not None and not job.finished_training)


def shown_index(job: Job) -> int:
    """Which snapshot to draw this tick: while playing, the newest of a run in training, or the next one of a
    finished run (a replay); paused, the chosen one. Playing stops at the end of a finished run."""
    ss = st.session_state
    n = len(job.snapshots)
    if n == 0:
        return 0
    if ss.get(PLAYING):
        if job.finished_training:
            ss[SHOWN] = min(ss.get(SHOWN, 0) + 1, n - 1)
            if ss[SHOWN] == n - 1:
                ss[PLAYING] = False
        else:
            ss[SHOWN] = n - 1
    ss[SHOWN] = min(ss.get(SHOWN, 0), n - 1)
    return ss[SHOWN]


def _key(settings: tiny.Settings) -> str:
    return json.dumps(settings.to_dict(), sort_keys=True)


class Drawn(NamedTuple):
    """What the page draws of a layer's attention on the probe: kept instead of the whole Result (every
    intermediate of attention.compute, about 375 kB at the largest setting, against about 40 kB for these)."""

    tokens: tuple[str, ...]
    weights: torch.Tensor  # (heads, T, T)
    mask: torch.Tensor | None  # (T, T), True: may attend


def layer_result(run: tiny.Run, index: int, layer: int) -> Drawn:
    """What `tiny.layer_result` of a snapshot draws, kept in the server's scrub cache (bounded by bytes, inside the
    memory budget, let go of when the visitors who drew it have left: server/scrub.py); a replay and thirty
    watchers draw the same ones."""
    snap, settings = run.snapshots[index], run.settings

    def make() -> Drawn:
        result = tiny.layer_result(snap, settings, layer)
        mask = None if result.mask is None else result.mask.clone()
        return Drawn(tuple(result.tokens), result.weights.detach().clone(), mask)

    return service().scrub.get(("layer", _key(settings), snap.step, layer), make, sessions.current())


def lengths(run: tiny.Run, at: int) -> list[tiny.LengthTest]:
    """`tiny.evaluate_lengths` of a run at a step, kept in the scrub cache too (a snapshot never changes once
    taken; a few hundred bytes each, counted as LENGTHS_BYTES)."""
    make = lambda: tiny.evaluate_lengths(run, step=at)  # noqa: E731
    key = ("lengths", _key(run.settings), at)
    return service().scrub.get(key, make, sessions.current(), nbytes=lambda tests: LENGTHS_BYTES)


LENGTHS_BYTES = 4096  # a generous count for a list of ~30 LengthTest of floats (no tensors to measure)


def lengths_frame(tests: list[tiny.LengthTest]) -> pd.DataFrame:
    return pd.DataFrame(
        {"run length": [t.length for t in tests], "right": [t.accuracy for t in tests],
         "in training": ["seen in training" if t.seen else "never seen" for t in tests]}
    )  # fmt: skip


def lengths_spec() -> dict:
    """Bars: the share of answers right at each run length, coloured by whether training saw that length."""
    return {
        "title": "Share of the answers right, by run length",
        "mark": {"type": "bar"},
        "encoding": {
            "x": {"field": "run length", "type": "ordinal"},
            "y": {"field": "right", "type": "quantitative", "scale": {"domain": [0, 1]}, "axis": {"format": "%"}},
            "color": {"field": "in training", "type": "nominal", "title": None, "legend": {"orient": "bottom"},
                      "scale": {"domain": ["seen in training", "never seen"], "range": ["#1f77b4", "#ff7f0e"]}},
        },
    }  # fmt: skip
