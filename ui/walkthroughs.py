"""The lessons drawn from a Result: the walkthrough of one query with its numbers, and step mode.

What belongs here: text and figures that teach a computation in order (equations with the Result's numbers,
the stages of step mode and what a presenter says at each). Numbers come from the Result, never recomputed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import streamlit as st
import torch

from attention import Config, Result
from attention.basics.weights import vocabulary
from server.warmup import lazy

from .heatmaps import heatmap
from .keys import clicks
from .markup import explain, labels, plain
from .settings import STAGES
from .state import get, put

pd = lazy("pandas")  # imported at first use, after the first page's heatmaps (server/warmup.py)


def _num(x: float) -> str:
    """A number for an equation: up to four decimals; scientific notation (4.87 × 10⁻⁷) when tiny or huge."""
    if math.isinf(x):
        return r"-\infty" if x < 0 else r"\infty"
    if x != 0 and (abs(x) < 5e-5 or abs(x) >= 1e4):
        mantissa, exponent = f"{x:.3e}".split("e")
        return rf"{mantissa} \times 10^{{{int(exponent)}}}"
    return f"{x:.4f}".rstrip("0").rstrip(".")


def _terms(pairs: Sequence[tuple[float, float]], limit: int = 3) -> str:
    """The first products of a dot product, two to a line of an aligned block (an equation stays inside a
    projector's 1024 px instead of running off the page and hiding its result)."""
    shown = [f"({_num(a)})({_num(b)})" for a, b in pairs[:limit]]
    if len(pairs) > limit:
        shown.append(r"\cdots")
    lines = [" + ".join(shown[k : k + 2]) for k in range(0, len(shown), 2)]
    return r" \\ &\quad + ".join(lines)


def walkthrough(result: Result, head: int, i: int, head_name: str | None = None) -> None:
    """Query i of one head written out with its numbers: q.k, scaling, softmax, weighted sum.

    head_name: how the heading names the head, when its index in this result is not its name (a real model's
    head computed on its own is head 0 of its result)."""
    q = result.queries[head, i]
    keys, values = result.keys[head], result.values[head]
    omega, scaled = result.omega[head, i], result.scaled[head, i]
    weights = result.dropped_weights[head, i]
    allowed = result.mask[i]
    n = i + 1
    cols = labels(result.key_tokens)
    st.markdown(f"**Following token {n}: {plain(result.tokens[i])}** ({head_name or f'head {head + 1}'})")
    j = int(torch.argmax(torch.where(allowed, omega, torch.tensor(float("-inf"))))) if allowed.any() else 0
    st.latex(
        rf"\begin{{aligned}}\omega_{{{n},{j + 1}}} &= q^{{({n})}} \cdot k^{{({j + 1})}} \\ &= "
        + _terms(list(zip(q.tolist(), keys[j].tolist(), strict=True)))
        + rf" \\ &= {_num(float(omega[j]))}\end{{aligned}}"
    )
    factor = result.scale
    if factor != 1.0:
        st.latex(
            rf"\tilde\omega_{{{n},j}} = \frac{{\omega_{{{n},j}}}}{{{_num(factor)}}}"
            + (r"\quad(\sqrt{d_k} = \sqrt{" + str(result.d_k) + "})" if result.config.scale == "sqrt" else "")
        )
    if result.has_empty_rows and bool(result.empty_rows[i]):
        st.info("Every key is masked for this query: its weights and its context are zero.")
        return
    exps = [(jj, float(scaled[jj])) for jj in range(len(cols)) if allowed[jj]]
    shown = exps[:3]
    st.latex(
        r"\begin{aligned}"
        + rf"\alpha_{{{n},j}} &= \frac{{e^{{\tilde\omega_{{{n},j}}}}}}{{\sum_{{j'}} e^{{\tilde\omega_{{{n},j'}}}}}}"
        + r" \\ & "
        + ", ".join(rf"\alpha_{{{n},{jj + 1}}} = {_num(float(weights[jj]))}" for jj, _ in shown)
        + (r", \ldots" if len(exps) > 3 else "")
        + r"\end{aligned}"
    )
    z = result.context[head, i]
    first = [(float(weights[jj]), float(values[jj, 0])) for jj in range(len(cols))]
    st.latex(
        rf"\begin{{aligned}}z^{{({n})}}_1 &= \sum_j \alpha_{{{n},j}} v^{{(j)}}_1 \\ &= "
        + _terms(first)
        + rf" \\ &= {_num(float(z[0]))}\end{{aligned}}"
    )
    table = pd.DataFrame(
        {
            "key": cols,
            "q·k (omega)": omega.tolist(),
            "scaled": scaled.tolist(),
            "may attend": allowed.tolist(),
            "weight": weights.tolist(),
        }
    )
    # four decimals for scores; weights to four significant digits, so a tiny one reads 1.234e-18, not 0.000000…
    formats = {
        "q·k (omega)": st.column_config.NumberColumn(format="%.4f"),
        "scaled": st.column_config.NumberColumn(format="%.4f"),
        "weight": st.column_config.NumberColumn(format="%.4g"),
    }
    st.dataframe(table, hide_index=True, width="stretch", height=min(38 + 35 * len(cols), 400), column_config=formats)


def inputs_note(config: Config) -> str:
    """Where a toy page's input vectors come from, in a caption: random and untrained, and (the tutorial's
    nn.Embedding over the sentence's sorted words) why a word's vector follows its alphabetical rank, so that a
    learner reads no meaning into it: in another sentence another word takes that rank, and that very vector."""
    if config.embeddings is not None:
        return "Each row is one token's input vector, as given."
    if config.embedding_init != "embedding":
        return "Each row is one token's input vector: random numbers drawn from the seed, untrained."
    words = vocabulary(config)
    first = words[0] if len(words[0]) <= 24 else words[0][:20] + "…"
    whose = "the two sentences'" if config.is_cross else "this sentence's"
    return (
        f"Each row is one token's input vector, random and untrained, as the tutorial builds it: each distinct word "
        f"takes a row of a random table in alphabetical order (capitals first: “{plain(first)}” is row 1 of "
        f"{len(words)}). So a vector follows the word's rank in {whose} words, not its meaning: another sentence gives "
        f"that rank, and that very vector, to another word."
    )


# What a presenter says at each stage, under its title: one sentence for the room.
SAY = (
    "Every word starts as a row of numbers; at this point no token knows anything about the others.",
    "Each token asks a question (its query), offers an answer (its key) and carries content (its value).",
    "Every query is compared with every key: a big dot product means a good match.",
    "We divide by √d_k so that wider vectors do not make the scores, and the softmax, explode.",
    "A mask decides what each token may look at: blocked scores become −∞ and will get no weight.",
    "Softmax turns each row of scores into weights: all positive, and each row sums to 1.",
    "Each token's new vector is the weighted mix of the values it attended to: its context.",
)


def _move_step(delta: int | None) -> None:
    """Button callback: one stage on or back (None: the first), kept within the stages."""
    step = 0 if delta is None else int(get("step")) + delta
    put("step", min(max(step, 0), len(STAGES) - 1))


def clicker(name: str, last: int, *, stage: str | None = None, on_open: bool = True) -> int:
    """A presenter's clicker (PageDown/PageUp, or the arrow keys) moves the int parameter `name` one on or back,
    within 0..last; returns its value. Call it before the widgets that show the parameter, so they show the move.

    stage: a CSS selector of what to scroll to the window's top whenever the value changes, and when it first shows
    unless on_open is False (see `clicks`); None leaves the page where it is.
    """
    value = min(max(int(get(name)), 0), last)
    moved = min(max(value + clicks(name, value, stage=stage, slider="w:" + name, on_open=on_open), 0), last)
    if moved != value:
        put(name, moved)
        # the keys' component was drawn with the old value: run again, so that it (and the stage it scrolls to)
        # shows the new one, as after a button's callback
        st.rerun()
    return value


STAGE_BOX = "st-key-al-stage"  # the class of step mode's box: buttons, stage title, what to say and the figure
STEP_PLOT_MAX = 300  # px (before presenter mode's enlarging): a stage's heatmap fits a projector's 768 px


def stepper(result: Result, head: int) -> None:
    """Workshop mode: one stage at a time, its title and a sentence to say; Previous/Next on the page and on the
    keyboard (PageDown/PageUp, as presenters' clickers send, and the arrow keys). The whole stage fits a 1024 x 768
    window, and the window scrolls to it when it changes."""
    clicker("step", len(STAGES) - 1, stage="." + STAGE_BOX)
    # the buttons move the step in callbacks, before this run, so Previous/Next are disabled at the right stage
    step = int(get("step"))
    box = st.container(key=STAGE_BOX.removeprefix("st-key-"))
    nav = box.container(horizontal=True, vertical_alignment="center")  # buttons as wide as their labels
    nav.button("◀ Previous", disabled=step == 0, key="step:back", on_click=_move_step, args=(-1,))
    nav.button("Next ▶", disabled=step == len(STAGES) - 1, key="step:next", type="primary", on_click=_move_step,
               args=(1,))  # fmt: skip
    nav.button("Restart", key="step:reset", on_click=_move_step, args=(None,))
    nav.caption(f"Stage {step + 1} of {len(STAGES)} · keys: PageDown / → next, PageUp / ← previous")
    box.subheader(f"{step + 1}. {STAGES[step]}")
    box.markdown(f"**Say:** {SAY[step]}")
    with box:
        _stage(step, result, head, labels(result.tokens), labels(result.key_tokens))


def _dims(n: int) -> list[str]:
    return [f"d{k + 1}" for k in range(n)]


def _stage(s: int, r: Result, h: int, tok: list[str], keys: list[str]) -> None:
    if s == 0:
        explain(inputs_note(r.config))
        heatmap(
            r.embeddings,
            tok,
            _dims(r.embeddings.shape[1]),
            title="embeddings x",
            key="st:emb",
            max_height=STEP_PLOT_MAX,
        )
    elif s == 1:
        explain(
            "Three matrices, W_q, W_k and W_v, project every token into a query, a key and a value. Here they are "
            "random and untrained: a trained model learns them, and only then do the scores mean anything."
        )
        c = st.columns(3)
        heatmap(
            r.queries[h],
            tok,
            _dims(r.d_k),
            title="queries Q = x W_q",
            key="st:q",
            max_height=STEP_PLOT_MAX,
            container=c[0],
        )
        heatmap(
            r.keys[h], keys, _dims(r.d_k), title="keys K = x W_k", key="st:k", max_height=STEP_PLOT_MAX, container=c[1]
        )
        heatmap(
            r.values[h],
            keys,
            _dims(r.d_v),
            title="values V = x W_v",
            key="st:v",
            max_height=STEP_PLOT_MAX,
            container=c[2],
        )
    elif s == 2:
        explain("omega = Q Kᵀ: how well each query matches each key (a dot product).")
        heatmap(r.omega[h], tok, keys, title="omega = Q Kᵀ", key="st:omega", max_height=STEP_PLOT_MAX)
    elif s == 3:
        explain(f"The scores are divided by {r.scale:.4g} so the softmax does not saturate as d_k grows.")
        heatmap(r.scaled[h], tok, keys, title=f"omega / {r.scale:.4g}", key="st:scaled", max_height=STEP_PLOT_MAX)
    elif s == 4:
        explain("Blocked scores become −∞, so the softmax gives them exactly zero weight.")
        heatmap(
            r.masked[h], tok, keys, title="masked scores", blocked=r.mask, key="st:masked", max_height=STEP_PLOT_MAX
        )
    elif s == 5:
        explain("Softmax turns each row into weights that are positive and sum to 1.")
        heatmap(
            r.dropped_weights[h],
            tok,
            keys,
            title="softmax weights",
            kind="weights",
            blocked=r.mask,
            key="st:weights",
            max_height=STEP_PLOT_MAX,
        )
    else:
        explain("Each context vector is the weights' mix of the value vectors: Z = A V.")
        heatmap(r.context[h], tok, _dims(r.d_v), title="context Z = A V", key="st:context", max_height=STEP_PLOT_MAX)
