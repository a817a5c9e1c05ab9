"""Cross-attention: queries from one sentence, keys and values from another; rectangular omega and weights."""

import streamlit as st

import ui

NARROW = 8  # a heatmap in half the page prints its values up to this many columns

st.title("Cross-attention")
st.caption(
    "The same attention, with two inputs: the first sentence asks the questions (queries), the second "
    "answers them (keys and values), as a decoder attends to an encoder's output."
)
ui.show_url_warnings()
ui.lesson_link("pages/cross_attention.py")  # this page's lesson in the course
ui.controls(["d_k", "d_v", "heads", "seed", "mask", "padding", "window"])
c1, c2 = st.columns(2)
ui.text("sentence", container=c1, label="Query sentence (rows)")
ui.text("cross_sentence", container=c2, label="Key/value sentence (columns)")
result = ui.result_or_stop(cross_sentence=ui.get("cross_sentence"))
tok, keys = ui.labels(result.tokens), ui.labels(result.key_tokens)
head = ui.head_picker(result.heads)
t_q, t_k = len(tok), len(keys)

st.info(
    f"{t_q} queries × {t_k} keys: omega and the weights are {t_q} × {t_k}. The two lengths may differ; "
    f"the context keeps one row per query ({t_q} × {result.d_v})."
)
if result.has_empty_rows:
    st.warning("Some queries may attend to no key under this mask: their weights and context are zero.")

top, bottom = st.columns(2), st.columns(2)
ui.heatmap(
    result.embeddings,
    tok,
    ui.dim_labels(result.embeddings.shape[1]),
    title="Query inputs x (sentence 1)",
    key="ca:x",
    container=top[0],
    annotate=result.embeddings.shape[1] <= NARROW,
)
top[0].caption("The first sentence's vectors: they become the queries. " + ui.inputs_note(result.config))
ui.heatmap(
    result.key_embeddings,
    keys,
    ui.dim_labels(result.key_embeddings.shape[1]),
    title="Key/value inputs (sentence 2)",
    key="ca:xkv",
    container=top[1],
    annotate=result.key_embeddings.shape[1] <= NARROW,
)
top[1].caption(
    "The second sentence's vectors: they become the keys and the values. Both sentences' words share one random "
    "table, so a word in both has the same vector in both."
)
ui.heatmap(result.omega[head], tok, keys, title=f"Omega = Q Kᵀ ({t_q} × {t_k})", key="ca:omega", container=bottom[0])
bottom[0].caption("Each query of the first sentence scored against each key of the second.")
ui.heatmap(
    result.dropped_weights[head],
    tok,
    keys,
    title=f"Softmax weights ({t_q} × {t_k})",
    kind="weights",
    blocked=result.mask,
    key="ca:weights",
    container=bottom[1],
)
bottom[1].caption("Each row sums to 1 over the second sentence's words.")

ui.heatmap(
    result.context[head],
    tok,
    ui.dim_labels(result.d_v),
    title=f"Context vectors ({t_q} × {result.d_v})",
    key="ca:context",
)
ui.explain("One context vector per query word: a mix of the second sentence's value vectors.")

st.subheader("Take it with you")
ui.downloads(result, head, key="ca:dl")
ui.code(result.config)
ui.finish()
