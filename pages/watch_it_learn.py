"""Watch it learn: train a tiny attention-only transformer live and see a head find the pattern."""

import pandas as pd
import streamlit as st

import ui
from attention.models import tiny
from ui.views import growth, watch_it_learn

P = watch_it_learn.PREFIX
LEARNING_RATES = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)

st.title("Watch it learn")
intro = st.empty()  # the words follow the settings, read from the widgets below
ui.show_url_warnings()
ui.lesson_link("pages/watch_it_learn.py")  # this page's lesson in the course

side = st.sidebar
ui.select(P + "task", side)
for name in ("layers", "heads", "d_model"):
    ui.slider(P + name, side)
    if name == "layers" and ui.get(P + "layers") == 1 and ui.get(P + "task") == "induction":
        side.caption("One layer: no induction head can form (it reads what a head in the layer below wrote).")
ui.pick(P + "lr", LEARNING_RATES, "Learning rate (AdamW)", container=side)
for name in ("batch", "steps", "seed"):
    ui.slider(P + name, side)
ui.toggle(P + "fixed", side)
ui.slider(P + "length", side)
with side.expander("More"):
    ui.slider(P + "every", st)
    ui.slider(P + "init_std", st, step=0.01)

try:
    settings = tiny.Settings(**watch_it_learn.settings_values())
except ValueError as exc:
    intro.caption("A transformer with nothing but attention, trained live.")
    ui.stop(f"This setting cannot be trained: {exc}.")
intro.caption(watch_it_learn.intro(settings))
watch_it_learn.follow(settings)
service = watch_it_learn.service()
service.warm()  # the worker processes start while the visitor reads: Play then trains at once
watch_it_learn.clicker(watch_it_learn.shown_run(settings))  # a presenter's PageDown/PageUp: the next snapshot, or back
no_room = watch_it_learn.buttons(settings, st)  # why Play is off, when it is

chance, name = tiny.CHANCE, settings.score_name
half = "the repeated half" if settings.task == "induction" else "the answers"


# playing, or the run still trains: the view keeps redrawing
ticking = watch_it_learn.ticking(watch_it_learn.shown_run(settings))


@st.fragment(run_every=watch_it_learn.TICK_S if ticking else None)
def live() -> None:
    job = watch_it_learn.shown_run(settings)
    if job is None:
        st.info(
            f"This setting ({settings.steps} steps of batches of {settings.batch}, {settings.parameters:,} weights) "
            "trains once the server has room to keep its run: Play comes back on by itself."
            if no_room
            else f"Press **Play** to train this setting: {settings.steps} steps of batches of {settings.batch}, "
            f"{settings.parameters:,} weights. A run already trained on this server starts at once."
        )
        watch_it_learn.curves(tiny.Run(settings, ()))  # empty: Vega's code loads now, not after Play
        return
    i = watch_it_learn.shown_index(job)
    said = watch_it_learn.progress(job, service.queue_position(job), service.workers)
    (st.info if said.moving else st.success if job.status == "done" else st.error)(said.words)
    run = job.run
    if not run.snapshots:
        watch_it_learn.curves(run)
        return
    snap = run.snapshots[i]
    steps = [s.step for s in run.snapshots]
    watch_it_learn.timeline(steps, snap.step)
    watch_it_learn.curves(run, snap.step)
    st.markdown(watch_it_learn.formation_words(run, job.finished_training))
    st.markdown(
        f"**Step {snap.step}**: loss on {half} {snap.task_loss:.2f} nats (chance {chance:.2f}), "
        f"{snap.accuracy:.0%} of those tokens right."
    )
    st.subheader(f"Every head on one probe sequence, at step {snap.step}")
    for layer in range(settings.layers):
        result = watch_it_learn.layer_result(run, i, layer)
        tok = ui.labels(result.tokens)
        cols = st.columns(settings.heads)
        for h, col in enumerate(cols):
            prev, task = snap.scores["previous_token"][layer][h], snap.scores[name][layer][h]
            title = f"L{layer}H{h}: previous-token {prev:.2f}" + (f", {name} {task:.2f}" if name in snap.scores else "")
            ui.heatmap(result.weights[h], tok, tok, title=title, kind="weights", blocked=result.mask,
                       key=f"tr:hm:{layer}:{h}", container=col, annotate=False, row_labels=h == 0)  # fmt: skip
    ui.explain(
        "Rows are queries, columns keys; the run is repeated, so an induction head's row for the second copy of a "
        "token lights up the key just after the first copy (a stripe parallel to the diagonal)."
    )
    composed = growth.growth(run) if settings.layers > 1 else None
    if composed is not None:
        st.subheader("Two heads become a circuit")
        growth.chart(composed, name, snap.step)
        writer, reader = (f"L{layer}H{head}" for layer, head in (composed.writer, composed.reader))
        ui.explain(
            f"{writer} is the first layer's best previous-token head, {reader} the best {name} head above it (at the "
            f"latest step). K-composition: how much of what {writer} writes (W_OV) {reader}'s keys read (W_QK), "
            "‖W_OV W_QKᵀ‖ / (‖W_OV‖ ‖W_QK‖), from the weights alone (Elhage et al. 2021); Q- and V-composition the "
            "same for its queries and values. An induction head finds its key through K-composition: the key "
            "holds the token before it, which the previous-token head wrote there."
        )
    if ticking and not watch_it_learn.ticking(job):
        st.rerun()  # the run is trained and the replay at its end: a full run takes the timer off
    if not job.finished_training or st.session_state.get(watch_it_learn.PLAYING):
        return
    after(run, snap.step)


def after(run: tiny.Run, at: int) -> None:
    st.subheader("Test it on run lengths it never saw")
    tests = watch_it_learn.lengths(run, at)
    seen = [t for t in tests if t.seen]
    unseen = [t for t in tests if not t.seen]
    ui.chart(watch_it_learn.lengths_frame(tests), watch_it_learn.lengths_spec(), height=160, key="tr:lengths")
    mean = lambda ts: sum(t.accuracy for t in ts) / len(ts)  # noqa: E731
    trained_on = f"length {settings.length} only" if settings.fixed else "lengths 4 to 16"
    st.markdown(
        f"Trained on {trained_on}: {mean(seen):.0%} right at the lengths it saw, {mean(unseen):.0%} at the "
        f"others."
        + (" **The fixed length was a shortcut: the model learned where the answer sits, not how to find it.**"
           if settings.fixed and mean(unseen) < 0.5 else "")
    )  # fmt: skip
    st.subheader("Switch off one head")
    heads = [(layer, h) for layer in range(settings.layers) for h in range(settings.heads)]
    choice = st.selectbox("Head switched off", heads, format_func=lambda lh: f"L{lh[0]}H{lh[1]}", key="tr:off")
    off = tiny.ablate(run, *choice, step=at)
    cols = st.columns(3)
    cols[0].metric(f"Loss on {half}", f"{off.task_loss_off:.2f}", f"{off.task_loss_off - off.task_loss:+.2f}",
                   delta_color="inverse")  # fmt: skip
    cols[1].metric("Right", f"{off.accuracy_off:.0%}", f"{(off.accuracy_off - off.accuracy) * 100:+.0f} pts")
    cols[2].metric(f"Best {name} score (heads still on)", f"{off.score_off:.2f}", f"{off.score_off - off.score:+.2f}")
    ui.explain(watch_it_learn.ablation_words(settings))


live()
with st.expander("How this works"):
    st.markdown(
        f"Each layer's attention is `attention.compute` on the residual stream entering it (the heatmaps are "
        f"`tiny.layer_result`), the same function every other page draws. A run is a pure function of its settings: "
        f"seeded, one torch thread, the same numbers every time, so every visitor of this server shares it (at most "
        f"{watch_it_learn.WORKERS} settings train at a time; the rest queue). From the command line: "
        f"`python -m attention --train {settings.task} --layers {settings.layers} --heads {settings.heads} "
        f"--steps {settings.steps} --seed {settings.seed} --format table`."
    )
    st.dataframe(pd.DataFrame([settings.to_dict()]), hide_index=True)
ui.finish()
