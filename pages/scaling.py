"""Why divide by √d_k: score spread, weight entropy and largest weight over d_k, with and without the scaling."""

import pandas as pd
import streamlit as st

import ui
from attention.basics import sizes
from attention.lessons import scaling

T_MIN, T_MAX = 2, 32  # the sweep's sequence length follows the sentence within these bounds (its cost grows as T²)
METRICS = {
    "spread": ("Score spread", "std of the scores", "Unscaled, q·k has variance d_k: the scores spread "
               "out like √d_k; divided by √d_k they keep a spread of 1."),
    "entropy": ("Row entropy", "mean row entropy (nats)", "Unscaled, the rows lose their entropy "
                "(one key takes everything); scaled, it stays near the same level at every d_k."),
    "top": ("Largest weight", "mean largest weight", "Unscaled, each row's largest weight heads for 1: "
            "the softmax saturates and its gradients vanish."),
}  # fmt: skip

st.title("Why divide by √d_k")
st.caption(
    "The dot product of two random vectors of width d_k has variance d_k, so unscaled scores grow with d_k "
    "and the softmax turns into a hard max; dividing by √d_k keeps them at unit spread."
)
ui.show_url_warnings()
ui.lesson_link("pages/scaling.py")  # this page's lesson in the course
ui.controls(["sentence", "d_k", "heads", "seed", "mask", "padding", "window"])

n_tokens = len(ui.tokens_or_stop())  # a paste over ui.MAX_CHARS is refused before it is split
t = min(max(n_tokens, T_MIN), T_MAX)
d_k, first_seed = int(ui.get("d_k")), int(ui.get("seed"))
n_seeds = int(ui.slider("nseeds", container=st, help="Each seed draws its own q and k ~ N(0, 1)."))
sweep = ui.scaling_sweep(t, first_seed, n_seeds)
here = ui.scaling_sweep(t, first_seed, n_seeds, (d_k,))
ui.explain(
    f"q, k ~ N(0, 1) for {t} tokens and seeds {first_seed} to {first_seed + n_seeds - 1}; lines are the mean "
    "over the seeds, bands run from the 10th to the 90th percentile, the dashed rule is your d_k."
)

cols = ui.chart_row(3, key="scaling")  # in one row where the page is wide, one under another on a projector
for col, (metric, (title, y_title, sentence)) in zip(cols, METRICS.items(), strict=True):
    ui.band_chart(ui.sweep_frame(sweep, metric), title=title, y_title=y_title, current=d_k, key=f"sc:{metric}",
                  container=col)  # fmt: skip
    col.caption(sentence)

st.markdown(
    f"**At your d_k = {d_k}** (mean over the seeds; the uniform row has entropy ln {t} = {here.max_entropy:.3f})"
)
st.dataframe(
    pd.DataFrame(
        {
            "": [METRICS[m][0] for m in METRICS],
            "unscaled": [here.band(m, "unscaled")[0].item() for m in METRICS],
            "scaled (÷ √d_k)": [here.band(m, "scaled")[0].item() for m in METRICS],
        }
    ),
    hide_index=True,
    column_config={c: st.column_config.NumberColumn(format="%.3f") for c in ("unscaled", "scaled (÷ √d_k)")},
)
with st.expander("The numbers behind the charts"):
    ui.explain("Mean over the seeds at each d_k of the sweep.")
    st.dataframe(ui.sweep_table(sweep), hide_index=True)

st.subheader("Temperature on your sentence")
ui.explain("Dividing the scores by a temperature τ does the same thing directly: small τ sharpens, large τ flattens.")
temp = float(ui.slider("temp", container=st, step=0.1))
reference_config = ui.config_or_stop(scale="sqrt", dropout=0.0)
heated_config = ui.config_or_stop(scale="temperature", temperature=temp, dropout=0.0)
head = ui.head_picker(heated_config.heads)
# the head drawn of each, one Result at a time (at 512 tokens and 16 heads a Result is ~120 MB: server/budget.py)
reference = ui.kept_or_stop("This setting", reference_config, lambda r: sizes.one_head(r, head))
heated = ui.kept_or_stop("This setting", heated_config, lambda r: sizes.one_head(r, head))
tok = ui.labels(heated.tokens)
left, right = st.columns(2)
for col, result, title, key in (
    (left, reference, f"τ = √d_k = {reference.scale:.3g} (the usual scaling)", "sc:ref"),
    (right, heated, f"τ = {temp:g}", "sc:temp"),
):
    entropy, top = scaling.mean_row_stats(result.weights[0], result.mask)
    ui.heatmap(result.weights[0], tok, tok, title=title, kind="weights", blocked=result.mask,
               key=key, container=col)  # fmt: skip
    # each metric as wide as its label, side by side where they fit and one under the other where they do not (a
    # quarter of a projector's 1024 px cut the label)
    metrics = col.container(horizontal=True)
    metrics.metric("Mean row entropy (nats)", f"{entropy:.3f}", width="content")
    metrics.metric("Mean largest weight", f"{top:.3f}", width="content")
left.caption("The weights as the other pages compute them: omega / √d_k.")
right.caption("The same scores divided by your τ instead.")
ui.finish()
