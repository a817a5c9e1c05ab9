"""Compare A/B: two settings on the same sentence, side by side, with B − A heatmaps and a one-line summary."""

import streamlit as st

import ui
from attention.basics import sizes
from attention.lessons import compare

# the typical comparisons: (button, A's values, B's changes); every other B value is copied from A
PRESETS = {
    "seed 1 vs 2": ({"seed": 1}, {"seed": 2}),
    "scaled vs unscaled": ({"scale": "sqrt"}, {"scale": "none"}),
    "no mask vs causal": ({"mask": "none"}, {"mask": "causal"}),
    "1 head vs 4": ({"heads": 1}, {"heads": 4}),
}
VIEWS = {"weights": "Softmax weights", "omega": "Omega = Q Kᵀ", "context": "Context vectors"}


def side(prefix: str, container) -> None:
    """One side's controls, two to a row: A's are the usual parameters (shared with the other pages), B's b_..."""
    c = container.columns(2)
    for n, name in enumerate(("d_k", "d_v", "heads", "seed")):
        ui.slider(prefix + name, container=c[n % 2])
    ui.select(prefix + "mask", container=c[0])
    ui.select(prefix + "scale", container=c[1])
    for name, column in (("padding", c[0]), ("window", c[0]), ("temperature", c[1])):
        if ui.in_use(prefix + name):  # shown only with the mask or scale it belongs to
            ui.slider(prefix + name, container=column)


st.title("Compare A/B")
st.caption("Change one thing and see what it does: two settings on the same sentence, side by side, and B − A.")
ui.show_url_warnings()
ui.controls(["sentence"])
ui.widgets.weights_note()  # both sides draw these weights: which ones, and the tutorial's one click away

st.markdown("**Typical comparisons**")
buttons = st.container(horizontal=True, wrap=True)  # buttons as wide as their labels, wrapping when narrow
for label, (a, b) in PRESETS.items():
    buttons.button(label, key=f"cmp:preset:{label}", on_click=ui.copy_a_to_b, args=(a, b))
buttons.button("Copy A to B", key="cmp:copy", on_click=ui.copy_a_to_b, type="primary",
               help="Make B the same as A, then change one thing on the B side.")  # fmt: skip

left, right = st.columns(2)
left.subheader("A")
side("", left)
right.subheader("B")
side("b_", right)

# no dropout: these pages have no control for it, and a comparison should not draw random zeros
config_a = ui.config_or_stop("Setting A", dropout=0.0)
config_b = ui.config_or_stop("Setting B", dropout=0.0, **{name: ui.get("b_" + name) for name in ui.B_SIDE})
head = ui.head_picker(max(config_a.heads, config_b.heads))
head_a, head_b = min(head, config_a.heads - 1), min(head, config_b.heads - 1)
# Only the head drawn is kept of each side (at 512 tokens and 16 heads a Result is ~120 MB): A is computed, its head
# copied out and the Result let go of, then B, so that one Result at a time is held (server/budget.py).
a = ui.kept_or_stop("Setting A", config_a, lambda r: sizes.one_head(r, head_a))
b = ui.kept_or_stop("Setting B", config_b, lambda r: sizes.one_head(r, head_b))
tok, keys = ui.labels(a.tokens), ui.labels(a.key_tokens)
d = compare.diff(a, b)  # head 0 of each view: A's head_a and B's head_b

st.info(ui.plain(d.summary(tok, keys)))
if a.heads != b.heads:
    same = " Its weights are the same on both sides: adding heads adds heads." if d.largest == 0 and not d.also else ""
    ui.explain(
        f"A has {a.heads} head(s), B has {b.heads}: A's head {head_a + 1} is compared with B's head {head_b + 1}."
        + same
    )

view = ui.radio("cview", container=st, format_func=VIEWS.get)
cols = st.columns(3)
if view == "context":
    dims_a, dims_b = ui.dim_labels(a.d_v), ui.dim_labels(b.d_v)
    ui.heatmap(a.context[0], tok, dims_a, title="A: context", key="cmp:a", container=cols[0])
    ui.heatmap(b.context[0], tok, dims_b, title="B: context", key="cmp:b", container=cols[1])
    if d.context is None:
        cols[2].info(f"A's d_v is {a.d_v} and B's is {b.d_v}: the context vectors have different widths.")
    else:
        ui.heatmap(d.context, tok, dims_a, title="B − A: context", key="cmp:d", container=cols[2])
elif view == "omega":
    ui.heatmap(a.omega[0], tok, keys, title="A: omega", key="cmp:a", container=cols[0])
    ui.heatmap(b.omega[0], tok, keys, title="B: omega", key="cmp:b", container=cols[1])
    ui.heatmap(d.omega, tok, keys, title="B − A: omega", key="cmp:d", container=cols[2])
else:
    ui.heatmap(a.dropped_weights[0], tok, keys, title="A: weights", kind="weights", blocked=a.mask,
               key="cmp:a", container=cols[0])  # fmt: skip
    ui.heatmap(b.dropped_weights[0], tok, keys, title="B: weights", kind="weights", blocked=b.mask,
               key="cmp:b", container=cols[1])  # fmt: skip
    ui.heatmap(d.weights, tok, keys, title="B − A: weights", key="cmp:d", container=cols[2])
cols[0].caption(f"Setting A, head {head_a + 1}.")
cols[1].caption(f"Setting B, head {head_b + 1}.")
cols[2].caption("Orange where B is larger than A, blue where it is smaller, white where they agree.")

ui.finish()
