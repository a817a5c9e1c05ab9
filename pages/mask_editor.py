"""Mask editor: tick which keys each query may see, watch the weights follow, export the mask for the command line."""

import streamlit as st

import ui
from attention import masks
from attention.io import export

EDITOR_MAX = 40  # a bigger grid of checkboxes is no longer editable by hand
KEY = "me:cmask"

st.title("Mask editor")
st.caption(
    "A mask is a T × T grid: row = query, column = key, ticked = may attend. Start from a template, tick or "
    "untick cells, and the weights follow; every page's “custom” mask is this one."
)
ui.show_url_warnings()
ui.controls(["sentence", "d_k", "heads", "seed"])

tokens = ui.tokens_or_stop()  # a paste over ui.MAX_CHARS is refused before it is split
t = len(tokens)
if t > EDITOR_MAX:
    ui.stop(f"The grid editor shows sentences of up to {EDITOR_MAX} tokens; this one has {t}: shorten it.", "info")
if t == 0:
    ui.config_or_stop()  # explains the empty sentence and stops

st.markdown("**Start from a template**")
c1, c2 = st.columns(2)  # each template: its slider, then its button below it
n = int(ui.slider("padding", container=c1, top=t))
w = int(ui.slider("window", container=c2, top=t))
c1.button("Start from padding", key="me:padding", on_click=ui.set_custom_mask,
          args=(KEY, masks.padding(t, t, n).tolist()), help="Block the last n keys for every query.")  # fmt: skip
c2.button("Start from window", key="me:window", on_click=ui.set_custom_mask,
          args=(KEY, masks.window(t, t, w).tolist()), help="Query i sees keys i − w + 1 to i.")  # fmt: skip

st.subheader("The mask")
ui.explain("Tick the keys (columns) each query (row) may attend to; the buttons reset the whole grid.")
ui.custom_mask_editor(tokens, tokens, key=KEY)

result = ui.result_or_stop(mask="custom", dropout=0.0)  # the weights as used at inference
tok = ui.labels(result.tokens)
head = ui.head_picker(result.heads)
if result.has_empty_rows:
    empty = [tok[i] for i in range(t) if bool(result.empty_rows[i])]
    st.warning(
        f"Every key is blocked for {ui.plain(', '.join(empty))}: such a query's weights and context are zero. "
        "Tick at least one key in its row."
    )

left, right = st.columns(2)
ui.heatmap(result.mask, tok, tok, title="Mask (1 = may attend)", kind="mask", key="me:mask", container=left)
left.caption("Your grid as the computation sees it: blue may attend, grey is blocked.")
ui.heatmap(result.dropped_weights[head], tok, tok, title="Softmax weights", kind="weights", blocked=result.mask,
           key="me:weights", container=right)  # fmt: skip
right.caption("Blocked scores become −∞ before the softmax, so their weights are exactly 0 and each row sums to 1.")

st.subheader("Take it to the command line")
ui.explain(
    "Save mask.json (the mask and the sentence); run in its folder, this command recomputes these weights, "
    "in bash, PowerShell or cmd.exe alike."
)
row = st.container(horizontal=True, vertical_alignment="center")  # the button as wide as its label
row.download_button(
    "mask.json",
    export.mask_json(result.mask, result.tokens, config=result.config),
    file_name="mask.json",
    mime="application/json",
    key="me:json",
    on_click="ignore",
    icon=":material/download:",
)
# the sentence travels in mask.json: every argument is a flag, a number or a choice, so no shell needs quotes; the
# line wraps (the page's --init=normal --draws=stable make it wider than a 1024 px window), its copy stays one line
command = " ".join(["python", "-m", "attention", *export.cli_args(result.config, "mask.json")])
row.code(command, language="bash", wrap_lines=True)
ui.finish()
