"""KV cache: generation one token at a time, the cache of keys and values growing, one row of weights a step."""

import streamlit as st

import ui
from attention.llm import decoding
from attention.llm.kv_memory import MODELS, format_bytes
from ui.views import llm

st.title("KV cache")
st.caption(
    "How an LLM writes: one token a step, keeping every earlier token's key and value in a cache, "
    "so each step computes one new row of attention instead of the whole matrix."
)
ui.show_url_warnings(mask="causal")  # decoding needs a mask that hides the future
ui.lesson_link("pages/kv_cache.py")  # this page's lesson in the course
ui.controls(["sentence", "d_k", "d_v", "heads", "seed", "mask", "window"])
result = ui.result_or_stop()
n = len(result.tokens)
# a presenter's PageDown/PageUp: next token, back (one token: step 0); each press brings the step's figures to the
# window's top, below the fold of a projector's 768 px otherwise
t = ui.clicker("decode_step", n - 1, stage=".st-key-kv-stage", on_open=False)

try:
    (step,) = decoding.decode_result(result, steps=[t])  # the one step shown: it reads the cache as it is at t
except ValueError as exc:
    st.warning(f"This mask cannot be decoded token by token: {ui.plain(str(exc))}.")
    st.button("Show the causal mask", key="kv:causal", type="primary", on_click=llm.choose, args=("mask", "causal"))
    ui.stop()  # the warning and the way out are drawn

tok = ui.labels(result.tokens)
head = ui.head_picker(result.heads)

if n > 1:
    controls = st.container(horizontal=True, vertical_alignment="bottom")
    # the tokens' labels count from 1 ("1 Life"), the steps from 0: the label says which token a step brings
    ui.slider("decode_step", container=controls, top=n - 1, label="Decoding step t (token t + 1 arrives)",
              help="Step t appends the key and value of the token at position t + 1 to the cache and computes its "
              "one row of weights.")  # fmt: skip
    controls.button("Next token ▶", key="kv:next", type="primary", disabled=t >= n - 1, on_click=llm.advance,
                    args=("decode_step", n - 1))  # fmt: skip
    controls.button("Restart", key="kv:restart", disabled=t == 0, on_click=llm.choose, args=("decode_step", 0))
    controls.caption("Keys: PageDown / → next token")
else:
    st.info("One token: the cache holds just its key and value. Add words to the sentence to watch it grow.")

stage = st.container(key="kv-stage")  # what a press changes, from the step's line to its new row of weights
# the step's heading: what arrives and how big the cache is now (one line: a projector shows the whole stage)
stage.subheader(
    f"Step {t}: *{ui.plain(tok[t])}* arrives, the cache holds {step.tokens} of {n} token{'s' if n > 1 else ''}"
)
left, right = stage.columns(2)
cached = tok[: t + 1]
ui.heatmap(step.cache_keys[head], cached, ui.dim_labels(result.d_k),
           title=f"Cached keys ({step.tokens} × {result.d_k})", key="kv:keys", container=left)  # fmt: skip
left.caption("Row j is token j's key, computed once when token j arrived and kept.")
ui.heatmap(step.cache_values[head], cached, ui.dim_labels(result.d_v),
           title=f"Cached values ({step.tokens} × {result.d_v})", key="kv:values", container=right)  # fmt: skip
right.caption("Row j is token j's value: what the new token's weights mix.")

stage.subheader("One new row of weights")
left, right = stage.columns(2)
row, shown = llm.padded_row(step.weights[head], step.allowed, n)
ui.heatmap(row, [tok[t]], tok, title=f"Step {t}: query {tok[t]} against the cache", kind="weights", blocked=shown,
           key="kv:row", container=left)  # fmt: skip
ui.heatmap(result.weights[head], tok, tok, title="The full masked weight matrix, rows so far", kind="weights",
           blocked=llm.rows_up_to(result.mask, t), key="kv:full", container=left)  # fmt: skip
left.caption(
    "The step's one row (top) lines up with row t of the whole matrix (below): the rows after t are grey, "
    "their tokens do not exist yet; the rows above were computed at earlier steps and thrown away. "
    "A cache keeps keys and values, not weights."
)
difference = llm.largest_difference(step.weights[head], result.weights[head, t, : t + 1])
agree = difference <= 1e-5
right.markdown(
    f"{llm.check_mark(agree)} The new row equals row {t} of the full causal computation: "
    f"largest difference **{difference:.2g}**."
)
right.markdown(
    "**Why a cache.** Without one, each step would recompute the keys and values of every earlier token: "
    "1 + 2 + … + T projections for T tokens, O(T²). With it each token's key and value are projected once, "
    "and a step only scores the new query against the cached keys."
)
c1, c2 = right.columns(2)
c1.metric("q·k this step", f"{step.products:,}",
          help=f"Query-key products this step: heads × tokens in the cache = {step.heads} × {step.tokens}")  # fmt: skip
c2.metric("Cache size", format_bytes(step.cache_bytes),
          help=f"{step.kv_heads} heads × {step.tokens} tokens × (d_k + d_v = {result.d_k} + {result.d_v}) "
          "numbers × 4 bytes (float32)")  # fmt: skip
projected = (t + 1) * (t + 2) // 2  # 1 + 2 + ... + (t + 1): every step projects every token so far again
c1.metric("K/V projections", f"{step.tokens:,}", help="Keys and values projected so far with the cache: once a token.")
c2.metric("…with no cache", f"{projected:,}", help="Without a cache every step projects every token so far again.")
if step.attended < step.tokens:
    right.caption(
        f"The window lets query {ui.plain(tok[t])} see {step.attended} of the {step.tokens} cached keys; all are "
        "scored here, and a sliding-window server would drop the older ones from the cache."
    )

if n > 1:  # one point is no line
    d_k, d_v = step.cache_keys.shape[-1], step.cache_values.shape[-1]
    sizes = [decoding.cache_bytes(step.kv_heads, tokens, d_k, d_v) for tokens in range(1, n + 1)]
    # below the columns, the page's width: in the right column a projector's 1024 px left its plot under 200 px wide
    llm.cache_bytes_chart(list(range(1, n + 1)), sizes, step.tokens, key="kv:bytes")
llama = MODELS["Llama 2 7B"]
st.caption(
    f"The cache grows linearly with the tokens, here for one layer of this toy model. A real model keeps one per "
    f"layer: {llama.name} ({llama.layers} layers × {llama.kv_heads} K/V heads × {llama.d_head} numbers, float16) "
    f"holds {format_bytes(llama.cache_bytes(llama.context))} for one sequence of {llama.context:,} tokens."
)
ui.finish()
