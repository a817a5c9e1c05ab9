"""Grouped-query heads: query heads that share key/value heads, and what that saves in a KV cache."""

import pandas as pd
import streamlit as st
import torch

import ui
from attention.llm import gqa, kv_memory

st.title("Grouped-query heads")
st.caption(
    "Chat models keep every token's keys and values while they write (the KV cache). Grouped-query attention lets "
    "several query heads share one key/value head: fewer numbers to keep, nearly the same attention."
)
ui.show_url_warnings(heads=8, kv_heads=2)
ui.controls(["sentence", "heads", "d_k", "d_v", "seed", "mask", "padding", "window"])
heads = int(ui.get("heads"))
choices = gqa.divisors(heads)
wanted = int(ui.get("kv_heads"))
if wanted not in choices:  # a link's kv_heads=3 with 8 heads, or heads changed under it: say so, keep the nearest
    nearest = max(n for n in choices if n <= max(wanted, 1))
    st.warning(
        f"kv_heads={wanted} does not divide heads={heads} (each K/V head serves an equal group of query heads): "
        f"using {nearest}. Pick one of {', '.join(map(str, choices))}."
    )
    ui.put("kv_heads", nearest, touched=False)
names = {n: f"{n} ({kv_memory.layout(heads, n)})" for n in choices}
kv = int(ui.pick("kv_heads", choices, "K/V heads", format_func=names.get, container=st.sidebar))
result = ui.result_or_stop(kv_heads=kv)
tok = ui.labels(result.tokens)
group = result.config.group
layout = kv_memory.layout(heads, kv)

st.subheader(f"{heads} query heads, {kv} key/value head{'s' * (kv > 1)}: {layout}")
left, right = st.columns([1, 2])
reads = torch.tensor([[h // group == j for j in range(kv)] for h in range(heads)])  # (h, h_kv)
ui.heatmap(reads, [f"q{h + 1}" for h in range(heads)], [f"kv{j + 1}" for j in range(kv)], kind="mask",
           title="K/V head read", key="gq:groups", container=left)  # fmt: skip
with right:
    st.markdown(
        {"MHA": "**Multi-head**: every query head has its own keys and values.",
         "MQA": "**Multi-query**: all query heads read one key/value head.",
         "GQA": f"**Grouped-query**: each key/value head serves a group of {group} query heads."}[layout]
    )  # fmt: skip
    view = ui.radio("headview", container=st, label="Heatmaps below show")
what = result.dropped_weights if view == "weights" else result.omega
top = float(what.max()) if view == "weights" else 1.0
biggest = ui.largest_abs(what) if view == "omega" else None
per_row = min(group, 4)  # four across the page keep a projector's cells at 12 px or more
for j in range(kv):
    st.markdown(f"**K/V head {j + 1}**: its keys and values are read by query heads "
                + ", ".join(str(h + 1) for h in range(j * group, (j + 1) * group)))  # fmt: skip
    cols = st.columns([1.4] + [1] * (per_row - 1))  # the first also holds the row labels
    for n, h in enumerate(range(j * group, (j + 1) * group)):
        ui.heatmap(what[h], tok, tok, title=f"query head {h + 1}", kind="weights" if view == "weights" else
                   "diverging", blocked=result.mask, key=f"gq:head:{h}", container=cols[n % per_row],
                   legend=False, annotate=False, top=top, max_abs=biggest, row_labels=n % per_row == 0)  # fmt: skip
st.caption("One colour scale for all heads. Heads of a group share keys, so their patterns differ only through "
           "their own queries.")  # fmt: skip

st.subheader("What the KV cache keeps")
per_number = ui.segmented("kv_dtype")  # in the link, like every control
size = kv_memory.BYTES_PER_NUMBER[per_number]
t = len(result.tokens)
# keys of d_k numbers and values of d_v numbers (24 and 28 by default: not 2 · d_k)
here = kv_memory.kv_cache_bytes(1, kv, result.d_k, t, size, d_v=result.d_v)
full = kv_memory.kv_cache_bytes(1, heads, result.d_k, t, size, d_v=result.d_v)
c = st.columns(3)
c[0].metric("This setting, one layer", kv_memory.format_bytes(here), help="layers · kv_heads · (d_k + d_v) · tokens "
            "· bytes per number (a key and a value a token)")  # fmt: skip
c[1].metric("Multi-head (MHA)", kv_memory.format_bytes(full), help="One K/V head per query head.")
c[2].metric("Saved", f"{1 - here / full:.0%}", help="Fewer K/V heads keep fewer numbers per token.")

model_name = ui.select("kv_model", container=st)
model = kv_memory.MODELS[model_name]
points = kv_memory.cache_series(model, bytes_per_number=size)
frame = pd.DataFrame({"x": [p.tokens for p in points], "y": [p.bytes / 2**20 for p in points],
                      "series": [f"{p.layout}: {p.kv_heads} K/V head{'s' * (p.kv_heads > 1)}" for p in points],
                      "shown": [kv_memory.format_bytes(p.bytes) for p in points]})  # fmt: skip
ui.lines(frame, log=True, title=f"KV cache of {model.name} ({per_number}) against context length", x_title="tokens",
             y_title="MiB", key="gq:memory")  # fmt: skip
table = pd.DataFrame(
    [{"model": m.name, "heads": f"{m.heads} / {m.kv_heads} ({m.attention})", "layers": m.layers,
      f"cache at full context ({per_number})": f"{kv_memory.format_bytes(m.cache_bytes(m.context, size))} "
      f"at {m.context:,}", "source": m.source} for m in kv_memory.MODELS.values()]
)  # fmt: skip
# narrow enough for a projector's 1024 px: the heads as "query / K/V", the source link shown as its file name
st.dataframe(table, hide_index=True, column_config={
    "heads": st.column_config.TextColumn("heads (query / K/V)"),
    "source": st.column_config.LinkColumn("source", display_text="config.json")})  # fmt: skip
ui.explain(
    "Each model's numbers are read from its published config.json (linked). A 4k-token chat on Llama 2 7B "
    "keeps 2 GiB of keys and values per sequence in float16; Llama 2 70B's GQA keeps its cache smaller."
)
ui.code(result.config)
ui.finish()
