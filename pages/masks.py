"""Masks and dropout: omega, the mask, the masked scores and the weights side by side; a custom mask grid."""

import streamlit as st

import ui

EDITOR_MAX = 40  # a bigger grid of checkboxes is no longer editable by hand

st.title("Masks and dropout")
st.caption(
    "A mask decides which keys each query may see: blocked scores become −∞ before the softmax, "
    "so their weights are exactly zero; dropout then zeroes random weights while training."
)
ui.show_url_warnings(mask="causal")  # opens on the lesson: a mask that hides the future
ui.lesson_link("pages/masks.py")  # this page's lesson in the course
ui.controls(["sentence", "d_k", "heads", "seed"])

tokens = ui.tokens_or_stop()  # a paste over ui.MAX_CHARS is refused before it is split
n_tokens = len(tokens)
c1, c2, c3 = st.columns(3)
kind = ui.select("mask", container=c1)
if kind == "padding":
    ui.slider("padding", container=c2, top=max(n_tokens, 1))
elif kind == "window":
    ui.slider("window", container=c2, top=max(n_tokens, 1))
ui.slider("dropout", container=c3, help="Each weight is zeroed with probability p; the rest are scaled by 1/(1−p).")

if kind == "custom" and 0 < n_tokens <= EDITOR_MAX:
    st.subheader("Custom mask")
    ui.explain("Tick the keys (columns) each query (row) may attend to; the heatmaps below follow your grid.")
    ui.custom_mask_editor(tokens, tokens, key="masks:cmask")
elif kind == "custom" and n_tokens > EDITOR_MAX:
    # the stored mask (from a link) is used when it fits these tokens; otherwise the causal mask (ui.custom_mask)
    stored = [row for row in str(ui.get("custom_mask")).split(".") if row]
    fits = len(stored) == n_tokens and all(len(row) == n_tokens for row in stored)
    used = "the custom mask from the link, as it is" if fits else "the causal mask (no custom mask of this size)"
    st.info(
        f"The grid editor shows sentences of up to {EDITOR_MAX} tokens; this one has {n_tokens}, so it uses {used}."
    )

result = ui.result_or_stop()
tok = ui.labels(result.tokens)
head = ui.head_picker(result.heads)

if result.has_empty_rows:
    empty = [tok[i] for i in range(len(tok)) if bool(result.empty_rows[i])]
    st.warning(
        f"Every key is blocked for {len(empty)} quer{'y' if len(empty) == 1 else 'ies'} "
        f"({ui.plain(', '.join(empty))}): {'its' if len(empty) == 1 else 'their'} weights and context "
        "are zero, not NaN."
    )

top, bottom = st.columns(2), st.columns(2)
ui.heatmap(result.omega[head], tok, tok, title="Omega = Q Kᵀ", key="mk:omega", container=top[0])
top[0].caption("The raw scores before masking: every query against every key.")
ui.heatmap(result.mask, tok, tok, title="Mask (1 = may attend)", kind="mask", key="mk:mask", container=top[1])
top[1].caption("Blue cells may attend, grey cells are blocked (PyTorch's convention: True = may attend).")
ui.heatmap(
    result.masked[head],
    tok,
    tok,
    title=f"Masked scores: omega / {result.scale:.4g}",
    blocked=result.mask,
    key="mk:masked",
    container=bottom[0],
)
bottom[0].caption("Scaled scores, with blocked cells replaced by −∞ (grey) so the softmax gives them nothing.")
ui.heatmap(
    result.weights[head],
    tok,
    tok,
    title="Softmax weights",
    kind="weights",
    blocked=result.mask,
    key="mk:weights",
    container=bottom[1],
)
bottom[1].caption("Each row's allowed weights sum to 1; blocked weights are exactly 0.")

st.subheader("Dropout")
p = result.config.dropout
left, right = st.columns(2)
ui.heatmap(
    result.weights[head],
    tok,
    tok,
    title="Weights before dropout",
    kind="weights",
    blocked=result.mask,
    key="mk:before",
    container=left,
)
left.caption("The softmax weights, as used at inference time.")
ui.heatmap(
    result.dropped_weights[head],
    tok,
    tok,
    title=f"Weights after dropout p = {p:.2f}",
    kind="weights",
    blocked=result.mask,
    key="mk:after",
    container=right,
)
if p > 0:
    right.caption(f"Zeroed at random with probability {p:.2f}; the kept weights are scaled by {1 / (1 - p):.3g}.")
else:
    right.caption("Dropout is 0: move its slider to zero some weights, as in training.")

st.subheader("Take it with you")
ui.downloads(result, head, key="mk:dl")
ui.code(result.config)
ui.finish()
