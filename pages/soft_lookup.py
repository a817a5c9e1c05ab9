"""Attention as a soft lookup: one query's weights over the keys beside the value rows they mix into its context."""

import pandas as pd
import streamlit as st

import ui
from attention.lessons import soft_lookup

st.title("Attention as a soft lookup")
st.caption(
    "A dictionary returns the value of the one key that matches; attention returns every value at once, "
    "each scaled by how well its key matches the query, and adds them up."
)
ui.show_url_warnings()
ui.lesson_link("pages/soft_lookup.py")  # this page's lesson in the course
ui.controls(["sentence", "d_k", "d_v", "heads", "seed", "mask", "padding", "window"])
result = ui.result_or_stop(dropout=0.0)  # the lookup at inference: the weights sum to 1
tok, keys = ui.labels(result.tokens), ui.labels(result.key_tokens)

c1, c2 = st.columns(2)
with c1:
    focus = ui.pick("token", list(range(len(tok))), "Query token", format_func=lambda i: tok[i])
with c2:
    head = ui.head_picker(result.heads)
look = soft_lookup.soft_lookup(result, head, focus)
dims = ui.dim_labels(result.d_v)

st.subheader(f"Query {ui.plain(tok[focus])}")
if result.has_empty_rows and bool(result.empty_rows[focus]):
    st.info("The mask blocks every key for this query: all its weights are 0, so its context is 0.")
left, middle, right = ui.chart_row(3, key="lookup")  # wraps on a narrow page: the bars keep a readable width
ui.bars(look.weights, keys, title="weights α", blocked=look.allowed, key="sl:bars", container=left)
left.caption("How well each key matches the query, after the softmax: the bars sum to 1.")
# one colour scale for the values, α · v and z (± the largest |value|), so a row the weights shrink fades in the
# picture as the caption says, instead of being stretched back to full strength by a scale of its own
shared = ui.largest_abs(look.values)
ui.heatmap(look.values, keys, dims, title="values v", key="sl:values", container=middle, max_abs=shared)
middle.caption("What each key holds: its value vector.")
ui.heatmap(look.weighted, keys, dims, title="α · v", key="sl:weighted", container=right, max_abs=shared)
right.caption("Each value row times its bar, on the values' colour scale: rows with small weights fade to 0.")

ui.heatmap(look.context[None], [f"z {tok[focus]}"], dims, title="context z = Σ α · v", key="sl:context",
           container=right, max_abs=shared)  # fmt: skip
right.caption("The column sums of α · v: a blend of the values, mostly of the best-matching keys.")

with st.expander("The numbers"):
    st.dataframe(
        pd.DataFrame({"key": keys, "weight α": look.weights.tolist(), "may attend": look.allowed.tolist()}),
        hide_index=True,
        width="stretch",
        column_config={"weight α": st.column_config.ProgressColumn(format="%.4f", min_value=0.0, max_value=1.0)},
    )
ui.finish()
