"""Multi-head: one small heatmap per head, both head layouts, the concatenation, the output projection, the shapes."""

import dataclasses
import math

import pandas as pd
import streamlit as st

import ui
from attention.basics import views

PER_ROW = 4  # small heatmaps side by side
NARROW = 8  # a heatmap in half the page prints its values up to this many columns
# heatmap cells drawn for all heads together (4 heads at 512 tokens, all 16 at 256): each cell costs 5 bytes
# sent on every rerun, and a row of four small multiples shows no more than that anyway
CELLS_MAX = 4 * 512 * 512
COLS_MAX = 256  # columns of the concatenation and output heatmaps

st.title("Multi-head attention")
st.caption(
    "Several heads attend in parallel, each with its own queries, keys and values; their context vectors "
    "are concatenated side by side and, optionally, mixed back to d_model by an output projection."
)
# opens on four heads with the dashboard's scaled normal weights: Raschka's all-positive torch.rand weights make every
# head attend alike (one-hot), nn.Linear's make every head nearly uniform, and the lesson is that heads differ
ui.show_url_warnings(heads=4)
ui.lesson_link("pages/multi_head.py")  # this page's lesson in the course
ui.controls(["sentence", "d_model", "head_layout", "heads", "d_k", "d_v", "init", "seed", "mask", "padding", "window"])
c1, c2 = st.columns(2)
view = ui.radio("headview", container=c1)
ui.toggle("out_proj", container=c2, help="Multiply the concatenated heads by W_out (as nn.MultiheadAttention does).")
result = ui.result_or_stop()
tok, keys = ui.labels(result.tokens), ui.labels(result.key_tokens)
h, d_v = result.heads, result.d_v

st.subheader(f"{h} head{'s' if h > 1 else ''}")
if result.config.head_layout == "split":
    ui.explain(f"Split layout: one projection of width {h * result.d_k} is cut into {h} heads of d_k = {result.d_k}.")
else:
    ui.explain(
        (f"Independent layout: each of the {h} heads has" if h > 1 else "Independent layout: the head has")
        + f" its own W_q, W_k (d_k = {result.d_k}), W_v (d_v = {d_v})."
    )


def works(heads: int) -> bool:
    """Whether this setting can run with that many heads (the split layout needs one that divides d_model)."""
    try:
        dataclasses.replace(result.config, heads=heads)
    except ValueError:
        return False
    return True


if h == 1:
    more = next((n for n in (4, 3, 2) if works(n)), None)  # a head count to try
    note, button = st.columns([4, 1], vertical_alignment="center")
    note.info("One head is plain self-attention. With several, each head has its own projections and its own pattern.")
    if more:
        button.button(f"Show {more} heads", on_click=ui.put, args=("heads", more), key="mh:more")
shown = max(1, min(h, CELLS_MAX // max(1, len(tok) * len(keys))))
if view == "weights":
    matrices, kind, blocked = result.weights, "weights", result.mask
else:
    matrices, kind, blocked = result.omega, "diverging", None
per_row = min(shown, PER_ROW)
# one colour scale for every head, so the same shade means the same number in each; its key is one line
scale_max = max(ui.largest_abs(m) for m in matrices[:shown])
# weights run from 0 to the largest one shown (rounded up), not to 1: heads with soft, near-uniform weights would
# otherwise be one flat block of purple, their differences invisible
top = min(1.0, math.ceil(scale_max * 100) / 100) if view == "weights" else 1.0
if shown > 1:
    ui.explain(
        f"Colours: dark purple 0 to yellow {top:.2f} (the largest weight here), the same in every head; "
        "hover a cell for its value."
        if view == "weights"
        else f"Colours: blue negative, orange positive, from −{scale_max:.4g} to {scale_max:.4g} in every head; "
        "hover a cell for its value."
    )
for start in range(0, shown, per_row):
    # the first of a row also holds the row labels: a little wider, so its cells match the others'
    cols = st.columns([1.4] + [1] * (per_row - 1)) if per_row > 1 else st.columns(1)
    for i in range(start, min(start + PER_ROW, shown)):
        ui.heatmap(
            matrices[i],
            tok,
            keys,
            title=f"head {i + 1}: {view}",
            kind=kind,
            blocked=blocked,
            key=f"mh:head:{i}",
            container=cols[i - start],
            annotate=per_row <= 2,  # small multiples keep their values in the tooltip
            legend=shown == 1,
            max_abs=scale_max,
            top=top,
            row_labels=i == start,  # the heads of a row share their rows' labels: more width for the cells
        )
if shown < h:
    megabytes = h * len(tok) * len(keys) * 5 / 1e6
    st.info(
        f"Showing heads 1 to {shown} of {h}: at {len(tok)} tokens all of them would send {megabytes:.0f} MB on "
        "every change. Pick a head below to download it, or shorten the sentence to see them all."
    )

st.subheader("Shapes along the way")
ui.explain("Every tensor from the inputs to the output, with the sizes of this setting.")
steps = views.shape_steps(result)
st.dataframe(
    pd.DataFrame(
        {
            "step": [s.step for s in steps],
            "tensor": [s.tensor for s in steps],
            "shape": [s.dims for s in steps],
            "here": [" × ".join(str(n) for n in s.shape) for s in steps],
        }
    ),
    hide_index=True,
    width="stretch",
    height="content",  # every step shows: no inner scroll bar hiding the last rows (the output)
)

left, right = st.columns(2)
concat = result.concat
concat_cols = [f"h{k // d_v + 1}.d{k % d_v + 1}" for k in range(concat.shape[1])]
ui.heatmap(
    concat[:, :COLS_MAX],
    tok,
    concat_cols[:COLS_MAX],
    title=f"Concatenated heads ({len(tok)} × {h} · {d_v})",
    key="mh:concat",
    container=left,
)
left.caption(
    "Each token's context vectors of all heads side by side (column h2.d1 is head 2's first value dimension)."
    + (f" First {COLS_MAX} of {concat.shape[1]} columns." if concat.shape[1] > COLS_MAX else "")
)
if result.w_out is not None:
    out = result.output
    ui.heatmap(
        out[:, :COLS_MAX],
        tok,
        ui.dim_labels(out.shape[1])[:COLS_MAX],
        title=f"Output = concat W_out + b ({out.shape[0]} × {out.shape[1]})",
        key="mh:output",
        container=right,
        annotate=out.shape[1] <= NARROW,
    )
    right.caption(
        "The output projection mixes the heads back into one vector per token."
        + (f" First {COLS_MAX} of {out.shape[1]} columns." if out.shape[1] > COLS_MAX else "")
    )
else:
    right.info("No output projection: the output is the concatenation. Turn on “Output projection” above to add W_out.")

st.subheader("Take it with you")
ui.downloads(result, ui.head_picker(h), key="mh:dl")
ui.code(result.config)
ui.finish()
