"""Self-attention: embeddings, omega, weights and context side by side, then follow one token."""

import streamlit as st

import ui

st.title("Self-attention")
st.caption(
    "Every token asks every token how relevant it is (omega = Q Kᵀ), turns the answers into weights "
    "(softmax), and mixes the value vectors with them (context)."
)
ui.show_url_warnings()
ui.lesson_link("pages/self_attention.py")  # this page's lesson in the course
ui.controls(["sentence", "d_k", "d_v", "heads", "seed", "mask", "padding", "window"])
result = ui.result_or_stop()

tok = ui.labels(result.tokens)
head = ui.head_picker(result.heads)

if result.has_empty_rows:
    st.warning("Some queries may attend to no key under this mask: their weights and context are zero.")

stepmode = ui.toggle("stepmode", container=st, help="Reveal the computation one stage at a time, for workshops.")
if stepmode:
    ui.stepper(result, head)
    ui.stop()

top, bottom = st.columns(2), st.columns(2)
cols = [top[0], top[1], bottom[0], bottom[1]]
ui.heatmap(result.embeddings, tok, [f"d{k + 1}" for k in range(result.embeddings.shape[1])],
           title="Embeddings x", key="sa:emb", container=cols[0])  # fmt: skip
cols[0].caption(ui.inputs_note(result.config))
ui.heatmap(result.omega[head], tok, tok, title="Omega = Q Kᵀ", key="sa:omega", container=cols[1])
cols[1].caption("Raw scores: query row · key column, before scaling and softmax.")
picked = ui.heatmap(
    result.dropped_weights[head], tok, tok, title="Softmax weights", kind="weights", blocked=result.mask,
    key="sa:weights", selectable=True, container=cols[2],
)  # fmt: skip
cols[2].caption("Each row sums to 1: how much each token attends to each key. Click a row to follow it.")
ui.heatmap(result.context[head], tok, [f"d{k + 1}" for k in range(result.d_v)], title="Context vectors",
           key="sa:context", container=cols[3])  # fmt: skip
cols[3].caption("Each row is the weights' mix of the value vectors: the token's new representation.")

st.subheader("Follow one token")
if picked is not None:
    ui.put("token", picked)
focus = ui.pick("token", list(range(len(tok))), "Token to follow", format_func=lambda i: tok[i])
ui.walkthrough(result, head, focus)

st.subheader("Take it with you")
ui.downloads(result, head, key="sa:dl")
ui.code(result.config)
ui.finish()
