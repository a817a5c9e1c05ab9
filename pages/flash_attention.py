"""FlashAttention: the tiled online softmax, key block by key block, and the memory it saves."""

import streamlit as st

import ui
from attention.llm import flash
from ui.views import llm

st.title("FlashAttention")
st.caption(
    "The softmax without the whole score matrix: visit the keys one block at a time, keeping a running max m, "
    "a running sum l and a running output per query row, and end with exactly the ordinary result."
)
ui.show_url_warnings()
ui.lesson_link("pages/flash_attention.py")  # this page's lesson in the course
ui.controls(["sentence", "d_k", "d_v", "heads", "seed", "mask", "window"])
result = ui.result_or_stop()
st.info(
    "A teaching implementation, not a kernel: in Python it is slower than the ordinary computation. Real "
    "FlashAttention wins on a GPU by keeping each tile in fast on-chip SRAM, so the T × T scores never travel "
    "to and from the GPU's main memory.",
    icon=":material/school:",
)

tok = ui.labels(result.tokens)
n = len(tok)
head = ui.head_picker(result.heads)

sliders = st.columns(2)
if n > 1:
    ui.slider("block_size", container=sliders[0], top=n)
size = min(int(ui.get("block_size")), n)  # one token: one block of 1
smallest = llm.smallest_block(result)
if size < smallest:
    ui.stop(
        f"Block size {size} cuts {n} tokens into {len(flash.blocks(n, size)) ** 2:,} tiles, more than this teaching "
        f"implementation keeps on a shared server. Pick a block size of at least {smallest}.",
        "warning",
    )
key_blocks = flash.blocks(n, size)
# a presenter's PageDown/PageUp: the next key block, or back; each press brings the block's figures to the window's top
j = ui.clicker("tile", len(key_blocks) - 1, stage=".st-key-fa-stage", on_open=False)
if len(key_blocks) > 1:
    ui.slider("tile", container=sliders[1], top=len(key_blocks) - 1, help="The key blocks are visited in order; "
              "this is the last one visited so far (counted from 0). Keys: PageDown / → next block, PageUp / ← "
              "back.")  # fmt: skip
else:
    sliders[1].caption(f"One block of {size} holds all {n} keys: a smaller block size gives tiles to step through.")
current = key_blocks[j]

tiled = llm.tiled(result, size)
running_max, running_sum, output = llm.after_block(tiled, j)
skipped = sum(t.skipped for t in tiled.tiles)

first, last = tok[current.start], tok[current.stop - 1]
stage = st.container(key="fa-stage")  # what a press changes: the block's scores, the running state and output
stage.subheader(f"After key block {j}: keys {first} to {last}")
stage.caption(
    f"Key blocks of {size} and query blocks of {size} make {len(tiled.tiles)} tiles"
    + (f", {skipped} of them skipped because the mask blocks every cell. " if skipped else ". ")
    + "Each block of query rows keeps its own state (side by side on a GPU); all are shown after the same key block."
)
left, right = stage.columns([3, 2])
# no numbers in the cells: a key not visited yet is grey like a masked one, and its score is not −∞, only unread
ui.heatmap(result.masked[head], tok, tok, title=f"Scores S = Q Kᵀ / {result.scale:.4g}, visited so far",
           blocked=llm.columns_up_to(result.mask, current.stop), annotate=False, key="fa:scores",
           container=left)  # fmt: skip
left.caption("Coloured: the keys visited so far. Grey: not visited yet, or blocked by the mask.")
block = slice(current.start, current.stop)
ui.heatmap(result.masked[head][:, block], tok, tok[block], title=f"Key block {j}'s scores",
           blocked=result.mask[:, block], key="fa:block", container=right)  # fmt: skip
right.caption("The one column of tiles read now: only these scores are held; the earlier ones are gone.")

stats = stage.columns([1, 1, 1.6])  # m and l at least 240 px wide at a projector's 1024 px (presenter mode)
numbered = n <= ui.heatmaps.ANNOTATE_MAX  # the cells print their values: no colour bar needed in a narrow column
ui.heatmap(running_max[head][:, None], tok, ["m"], title="Running max m", key="fa:m", legend=not numbered,
           container=stats[0])  # fmt: skip
stats[0].caption("Largest score seen so far; grey: none yet.")
ui.heatmap(running_sum[head][:, None], tok, ["l"], title="Running sum l", key="fa:l", row_labels=False,
           legend=not numbered, container=stats[1])  # fmt: skip
stats[1].caption("Σ exp(S − m) so far.")
ui.heatmap(output[head], tok, ui.dim_labels(result.d_v), title=f"Running output O after key block {j}",
           key="fa:partial", row_labels=False, container=stats[2])  # fmt: skip
stats[2].caption("The softmax-weighted average of the values seen so far; after the last block, the output.")
st.markdown(
    "**When key block j arrives** with scores S: m_new = max(m, rowmax S); P = exp(S − m_new), 0 where blocked; "
    "l_new = exp(m − m_new) · l + rowsum P; O_new = (exp(m − m_new) · l · O + P V_j) / l_new. "
    "The factor exp(m − m_new) ≤ 1 rescales what was summed under the old max, so no exponent is ever positive and "
    "nothing overflows; the scores of earlier blocks are never needed again."
)

st.subheader("After the last block: the same output")
ordinary = flash.ordinary_attention(result.queries, result.keys, result.values, scale=result.scale, mask=result.mask)
left, right = st.columns(2)
ui.heatmap(tiled.output[head], tok, ui.dim_labels(result.d_v), title="Tiled output (online softmax)",
           key="fa:tiled", container=left)  # fmt: skip
ui.heatmap(ordinary[head], tok, ui.dim_labels(result.d_v), title="Ordinary output: softmax(S) V", key="fa:ordinary",
           container=right)  # fmt: skip
difference = llm.largest_difference(tiled.output, ordinary)
st.markdown(
    f"{llm.check_mark(difference <= 1e-5)} Largest difference over every head: **{difference:.2g}** "
    "(float32 rounding: the sums are added in a different order)."
)

st.subheader("Memory for the scores")
memory = flash.memory_numbers(n, n, size, result.heads)
c1, c2, c3 = st.columns(3)
c1.metric("Ordinary: the whole S", f"{memory.full_scores:,} numbers",
          help=f"heads × T × T = {result.heads} × {n} × {n}")  # fmt: skip
c2.metric("Tiled: one tile + m and l", f"{memory.tile_scores + memory.statistics:,} numbers",
          help=f"one tile, heads × B × B = {memory.tile_scores:,}, and m and l of every row, heads × T × 2 = "
          f"{memory.statistics:,}")  # fmt: skip
c3.metric("Fewer numbers held", f"{memory.ratio:.3g}×")
ui.explain(
    "The ordinary form's T × T grows with the square of the length; the tiled form holds one tile and two numbers "
    "a row, so long contexts fit. The output, T × d_v, is the same size either way."
)
ui.finish()
