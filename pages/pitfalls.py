"""Pitfalls: common mistakes computed next to the correct version on the same input, with the invariants each breaks."""

import math

import pandas as pd
import streamlit as st

import ui
from attention.lessons import pitfalls

MAX_TOKENS = 64  # the every-head mistake holds h·h·T·T weights
KEPT, BROKEN = "✔ kept", "✘ broken"  # Dingbats: drawn by every font, unlike the ✅ ❌ emoji

st.title("Pitfalls")
st.caption(
    "Seven mistakes people make when writing attention by hand, each computed on the same queries, keys and "
    "values as the correct version, and checked against what correct weights always keep."
)
ui.show_url_warnings()
ui.controls(["sentence", "d_k", "d_v", "heads", "seed", "mask", "padding", "window"])
if len(ui.tokens_or_stop()) > MAX_TOKENS:  # a paste over ui.MAX_CHARS is refused before it is split
    ui.stop(f"The pitfalls are computed for sentences of up to {MAX_TOKENS} tokens: shorten the sentence.", "info")

config = ui.config_or_stop()
used = pitfalls.pitfall_config(config)
# up to ~120 MB while computed (64 tokens, 16 heads, d 256): admitted against the server's memory budget first
versions = ui.run_or_stop("The pitfalls", pitfalls.pitfalls_bytes(config), lambda: pitfalls.pitfalls(config),
                                 holder=lambda v: v[0])  # fmt: skip
correct, mistakes = versions[0], versions[1:]
tok, keys = ui.labels(used.tokens), ui.labels(used.key_tokens)
h = correct.weights.shape[0]
head = ui.head_picker(h)

notes = ["The output projection is on here, since forgetting it is one of the mistakes."]
if used.mask != config.mask:
    notes.append("Your mask blocks no key, so a causal mask is used: the masking mistakes need blocked keys to show.")
ui.explain(" ".join(notes))


def colour(cell: str) -> str:
    # dark text on a pale cell of its own: 6.6:1 and 6.9:1 in either theme (one text colour cannot clear 4.5:1 on
    # both backgrounds); the words and marks say it without the colour
    return ("color: #116329; background-color: #dafbe1" if cell == KEPT
            else "color: #a40e26; background-color: #ffebe9; font-weight: bold")  # fmt: skip


st.subheader("Which invariants each version keeps")
ui.explain("A mistake can keep every check and still be wrong: no scaling breaks none of them.")
table = pd.DataFrame(
    [[p.name, *(KEPT if p.invariants[name] else BROKEN for name in pitfalls.INVARIANTS)] for p in versions],
    columns=["version", *pitfalls.INVARIANTS],
)
# a static table: its text wraps, so every column shows at a projector's width
st.table(table.style.map(colour, subset=list(pitfalls.INVARIANTS)).hide(axis="index"))


def draw(m, what: str, title: str, key: str, container) -> None:
    """The matrix where a mistake shows: one head's weights (T_q x T_k), or the output (T_q x d_out)."""
    if what == "output":
        ui.heatmap(m, tok, ui.dim_labels(m.shape[1]), title=title, key=key, container=container)
    else:
        ui.heatmap(m, tok, keys, title=title, kind="weights", key=key, container=container)


for n, p in enumerate(mistakes):
    st.subheader(p.name)
    st.markdown(ui.plain(p.what_goes_wrong))
    st.code(p.code, language="python", wrap_lines=True)
    # the two matrices side by side, each half the page (at 1024 px an output's 16 columns keep 12 px cells), and
    # the invariants under them
    left, middle = st.columns(2)
    right = st.container()
    what = "output" if p.shown == "output" else f"head {head + 1} weights"
    draw(correct.matrix(p.shown, head), p.shown, f"Correct: {what}", f"pf:ok:{n}", left)
    if p.weights.dim() == 4:
        what = f"head {head + 1} queries · head {(head + 1) % h + 1} keys"
    draw(p.matrix(p.shown, head), p.shown, f"Mistake: {what}", f"pf:bad:{n}", middle)
    right.markdown(
        "  \n".join(
            f":green[:material/check_circle:] {name}" if ok else f":red[:material/cancel:] **{name}: broken**"
            for name, ok in p.invariants.items()
        )
    )
    lo, hi = p.row_sum_range
    if math.isnan(lo):
        right.caption("Some weights are NaN (drawn as 0): a key every query is blocked from leaves 0 / 0.")
    else:
        right.caption(
            f"Row sums {lo:.3f} to {hi:.3f}; mean largest weight {p.mean_largest_weight:.3f} "
            f"(correct: {correct.mean_largest_weight:.3f})."
        )
    right.caption(
        f"Shapes: weights {tuple(p.weights.shape)}, output {tuple(p.output.shape)} "
        f"(correct: {tuple(correct.weights.shape)}, {tuple(correct.output.shape)})."
    )
    if p.weights.dim() == 4 and h == 1:
        right.caption("With one head the mix-up only shows in the shapes: set heads to 2 or more.")

ui.finish()
