"""Inside a chat model: SmolLM2-135M-Instruct's 30 x 9 heads, its KV cache, sinks, induction heads and ablation."""

import streamlit as st

import attention.models.circuits.chat
import ui
from attention.llm import decoding
from attention.models import circuits, smollm2
from ui.views import chat, llm

st.title("Inside a chat model")
st.caption(
    "SmolLM2-135M-Instruct, a trained Llama-architecture chat model (30 layers; 9 query heads share 3 key/value "
    "heads of 64 numbers; RoPE; 49,152 byte-level BPE tokens), read offline from 4-bit weights and run by this "
    "project's own forward pass. Layers and heads count from 0."
)
ui.show_url_warnings(prefix=chat.PREFIX)  # a link's temperature=... is this page's
ui.lesson_link("pages/chat_model.py")  # this page's lesson in the course
model = chat.model_or_stop()
preset = ui.toggle(chat.PREFIX + "induction", container=st)
if preset:
    ids = smollm2.induction_ids(model)
    prompt = smollm2.Prompt("", ids, smollm2.labels(model, ids), False)
    st.caption("20 random tokens, then the same 20 again: from the second copy on, the next token is predictable.")
else:
    text = str(ui.text(chat.PREFIX + "prompt", container=st, label="Prompt"))
    prompt = chat.prompt_or_stop(model, text)
run = chat.run(prompt.ids)

st.subheader("The tokens the model sees")
chat.token_chips(prompt.tokens)
st.caption(f"{len(prompt.ids)} tokens; ␣ marks a leading space, which belongs to the token after it.")

st.subheader("The next token")
c = st.columns(2)
temperature = float(ui.slider(chat.PREFIX + "temperature", container=c[0], step=0.05))
top_k = int(ui.slider(chat.PREFIX + "top_k", container=c[0]))
probabilities = smollm2.next_token_probabilities(run.logits[-1], temperature, top_k)
c[1].dataframe(chat.top_frame(model, probabilities, min(top_k, 10)), hide_index=True, height=250)
c[0].caption("The model's probabilities for the token after the prompt: softmax(logits / temperature) over the "
             "top-k.")  # fmt: skip

n = int(chat.p("generate"))
generation = chat.generated(prompt.ids, n, temperature, top_k)
asked, n = n, min(n, len(generation))  # a link's many tokens come over several clicks (chat.STEPS_PER_RUN)
row = st.container(horizontal=True, vertical_alignment="center")
row.button("Generate one token", on_click=chat.add_token, args=(n + 1,), disabled=n >= smollm2.MAX_GENERATE,
           icon=":material/arrow_forward:")  # fmt: skip
many = int(row.number_input("Tokens to generate", 1, smollm2.MAX_GENERATE, 16, key="chat:many", width=120,
                            label_visibility="collapsed", help="Tokens one click generates, streamed."))  # fmt: skip
streaming = row.button(f"Generate {many} tokens", disabled=n >= smollm2.MAX_GENERATE, key="chat:stream",
                       icon=":material/fast_forward:")  # fmt: skip
row.button("Start again", on_click=chat.add_token, args=(0,), disabled=n == 0)
chat.generation_bound(asked, n)
if streaming:
    chat.stream(model, prompt, n, many, temperature, top_k)  # each token written as it comes, then one rerun
if n:
    new = generation.tokens[:n]
    chat.token_chips([*prompt.tokens, *smollm2.labels(model, new)], generated_from=len(prompt.ids))
    chat.speed_caption()
    cached = generation.prompt_length + n  # tokens in the cache after step n
    layer_bytes = decoding.cache_bytes(model.kv_heads, cached, model.d_head, model.d_head)
    layer_now = int(chat.p("layer"))
    st.markdown(
        f"Step {n}: the token **“{chat.visible(smollm2.labels(model, [new[-1]])[0])}”** went through the model as one "
        f"query reading the cache of {cached - 1} earlier tokens; the cache now holds {cached} tokens, "
        f"{model.n_layers * layer_bytes / 1024:,.0f} KiB in all ({layer_bytes / 1024:,.1f} KiB a layer: keys and "
        f"values of {model.kv_heads} K/V heads × {cached} tokens × {model.d_head} numbers × 4 bytes)."
    )
    keys = [str(j) for j in range(cached)]
    heads = [f"q{h} ← kv{h // model.group}" for h in range(model.heads)]
    ui.heatmap(generation.rows[n - 1][layer_now], heads, keys, title=f"The new row of attention, layer {layer_now}",
               kind="weights", key="chat:newrow", annotate=False)  # fmt: skip
    st.caption(
        "One row a query head: what the new token reads in every cached key. Heads 0-2 share K/V head 0, 3-5 "
        "K/V head 1, 6-8 K/V head 2: 9 query heads read 3 cached K/V heads."
    )
    st.dataframe(chat.next_frame(model, generation, n), hide_index=True)

st.subheader("Every head at once")
weights_map = run.weights
scores = smollm2.head_scores(weights_map, prompt.ids)
behaviour = ui.segmented(chat.PREFIX + "behaviour", format_func=smollm2.BEHAVIOURS.get)
layer, head = int(chat.p("layer")), int(chat.p("head"))
chat.head_map(scores[behaviour], f"{smollm2.BEHAVIOURS[behaviour]} score of every head", layer, head)
best = divmod(int(scores[behaviour].argmax()), model.heads)
st.caption(
    f"Click a cell to open that head (outlined: layer {layer}, head {head}). Highest {smollm2.BEHAVIOURS[behaviour]} "
    f"score: layer {best[0]}, head {best[1]} ({float(scores[behaviour].max()):.2f})."
)

st.subheader("What each head writes")
writes = llm.writes_or_warn(prompt.ids)
if writes is not None:
    candidates = [int(i) for i in run.logits[-1].topk(10).indices]
    name = lambda i: f"“{chat.visible(smollm2.labels(model, [i])[0])}”"  # noqa: E731
    c = st.columns(2)
    # by rank among the 10 most probable, so that a link names the same choice on the same prompt
    rank = ui.pick(chat.PREFIX + "target", list(range(len(candidates))), "The next token", container=c[0],
                   format_func=lambda k: name(candidates[k]))  # fmt: skip
    other = ui.pick(chat.PREFIX + "versus", list(range(len(candidates) + 1)), "Minus the logit of", container=c[1],
                    format_func=lambda k: "nothing" if k == 0 else name(candidates[k - 1]))  # fmt: skip
    target, versus = candidates[int(rank)], None if int(other) == 0 else candidates[int(other) - 1]
    split = attention.models.circuits.chat.attribution(model, writes, target, versus)
    grid = circuits.by_head(split, model.n_layers, model.heads)
    what = f"logit[{name(target)}]" + ("" if versus is None else f" − logit[{name(versus)}]")
    cell = ui.heatmap(grid, [f"L{i}" for i in range(model.n_layers)], [f"h{h}" for h in range(model.heads)],
                      title=f"Each head's direct contribution to {what}", key="chat:writes", selectable="cell",
                      annotate=False, picked=layer * model.heads + head)  # fmt: skip
    if cell is not None and divmod(cell, model.heads) != (layer, head):
        chat.go_to(*divmod(cell, model.heads))
        st.rerun()
    parts = circuits.totals(split)
    st.caption(
        f"{what} = {float(split.logit):.2f} = the embedding {parts['embed']:+.2f} + the 270 heads "
        f"{parts['head']:+.2f} + the 30 MLPs {parts['mlp']:+.2f}. Each part of the last token's residual stream, "
        "divided by the final RMSNorm's scale on the whole stream (frozen), times the norm's weight, on the "
        "token's unembedding row: the parts add up to the logit exactly. Orange pushes the token up, blue down; click "
        "a cell to open that head here and below."
    )
    row = run.weights[layer, head, -1]  # (T,) where the last token looks
    tok = ui.labels(prompt.tokens)
    ui.heatmap(row[None], ["last"], tok, title=f"Where L{layer}H{head} looks from the last token", kind="weights",
               key="chat:looks", annotate=False)  # fmt: skip
    read = sorted(range(len(row)), key=lambda j: -float(row[j]))[:3]
    st.markdown(f"**What L{layer}H{head} writes** when it reads the tokens it looks at most "
                f"({float(grid[layer, head]):+.3f} of {what})")  # fmt: skip
    st.dataframe(llm.ov_frame(tok, row, read, layer, head, prompt.ids, lambda ids: smollm2.labels(model, ids)),
                 hide_index=True)  # fmt: skip
    with st.spinner("The copying score (once per server: Eᵀ E over 49,152 tokens)…"):
        copying = attention.models.circuits.chat.head_copying(model, layer, head)
    st.caption(
        "Each row: a token this head reads, and the tokens its OV circuit (W_E W_V W_O W_U, norm gains folded) "
        "writes most when it reads it (own rank: where the token read ranks among them). Copying score "
        f"{float(copying.score):+.2f}: Σλ / Σ|λ| over the eigenvalues of the OV circuit (Elhage et al. 2021), from "
        "the 64 × 64 matrix W_O (W_U W_E) W_V; +1 when the head copies what it reads, −1 when it suppresses it."
    )
    key = next((j for j in read if j > 0), read[0])
    qk = attention.models.circuits.chat.qk(model, writes, layer, head, len(prompt.ids) - 1, key)
    st.markdown(f"**Why it looks there**: the last token's score for “{tok[key]}”, split")
    st.dataframe(llm.qk_frame(qk), hide_index=True)
    st.caption(
        "The key's residual stream is its token's embedding plus what earlier layers wrote at it; both go through "
        "the layer's RMSNorm with the scale of the whole stream frozen, then W_K. RoPE turns the query and the key "
        "by their positions: q·k without it is what the contents match, the rest is the rotation's effect. Every "
        "row adds up exactly; what a part would score alone (under its own norm scale) is not what it adds here, "
        "and the softmax that follows is not linear."
    )

st.subheader("One head, step by step")
c = st.columns(2)
layer = int(ui.pick(chat.PREFIX + "layer", list(range(model.n_layers)), "Layer", container=c[0]))
head = int(ui.pick(chat.PREFIX + "head", list(range(model.heads)), "Query head", container=c[1],
                   format_func=lambda h: f"{h} (reads K/V head {h // model.group})"))  # fmt: skip
result = chat.head_or_warn(prompt.ids, layer, head)  # None (said in plain words) when memory is short
if result is not None:
    tok = ui.labels(prompt.tokens)
    top, bottom = st.columns(2), st.columns(2)
    ui.heatmap(result.embeddings, tok, ui.dim_labels(result.embeddings.shape[1]), title=f"Normalized input entering "
               f"layer {layer}", key="chat:x", container=top[0], annotate=False)  # fmt: skip
    top[0].caption("RMSNorm(x) × gain: 576 numbers a token, what every head of this layer reads.")
    unrotated = smollm2.omega_without_rope(result)[0]
    rope_on = ui.toggle(chat.PREFIX + "rope", container=top[1])
    ui.heatmap(result.omega[0] if rope_on else unrotated, tok, tok,
               title="Omega = Q Kᵀ" + (" (RoPE)" if rope_on else " (without RoPE)"), key="chat:omega",
               container=top[1], annotate=False)  # fmt: skip
    top[1].caption("Queries and keys turned by their positions (θ = 100,000): switch off to see the scores unturned.")
    picked = ui.heatmap(result.weights[0], tok, tok, title="Softmax weights (causal)", kind="weights",
                        key="chat:weights", selectable=True, container=bottom[0], annotate=False)  # fmt: skip
    bottom[0].caption("softmax(omega / √64) over the earlier tokens: computed by attention.compute from the real "
                      "weights.")  # fmt: skip
    ui.heatmap(result.context[0], tok, ui.dim_labels(result.d_v), title="Context vectors", key="chat:context",
               container=bottom[1], annotate=False)  # fmt: skip
    bottom[1].caption("Each row: the weights' mix of this head's 64-number values.")
    st.markdown("**Follow one token**")
    if picked is not None:
        ui.put("token", picked)
    focus = ui.pick("token", list(range(len(tok))), "Token to follow", format_func=lambda i: tok[i])
    ui.walkthrough(result, 0, focus, head_name=f"layer {layer}, head {head}")

st.subheader("Attention sinks")
chat.sink_chart(run.weights)
st.markdown(
    "Most heads past the first layers send most of every query's attention to the first token, whatever it is "
    "(Xiao et al. 2023, *Efficient Streaming Language Models with Attention Sinks*). The softmax must put its "
    "weight somewhere; a head with nothing to read parks it on token 0, which every query can see. That is why "
    "a cache that drops old tokens keeps the first few."
)

st.subheader("Induction heads")
if preset:
    ind = scores["induction"]
    b_layer, b_head = divmod(int(ind.argmax()), model.heads)
    st.markdown(
        f"Best induction head: **layer {b_layer}, head {b_head}**, score {float(ind.max()):.2f} (the mean weight "
        "a token of the second copy puts on the token after its first copy). Its attention shows the offset "
        "diagonal, 19 below the main one (Olsson et al. 2022)."
    )
    ui.heatmap(run.weights[b_layer, b_head], tok, tok, title=f"Layer {b_layer}, head {b_head}", kind="weights",
               key="chat:induction", annotate=False)  # fmt: skip
    st.button("Open this head", on_click=chat.go_to, args=(b_layer, b_head))
else:
    st.markdown("Switch on **Induction preset** at the top: a random run of tokens said twice shows which heads copy.")

st.subheader("Switch a head off")
ablate = ui.segmented(chat.PREFIX + "ablate", format_func={"none": "nothing", "head": f"head {head} of layer {layer}",
                                                            "layer": f"all 9 heads of layer {layer}"}.get)  # fmt: skip
if ablate != "none":
    off = ((layer, head),) if ablate == "head" else tuple((layer, h) for h in range(model.heads))
    after = smollm2.next_token_probabilities(chat.ablated_logits(prompt.ids, off), temperature, top_k)
    before_top, after_top = chat.top_frame(model, probabilities, 5), chat.top_frame(model, after, 5)
    left, right = st.columns(2)
    left.markdown("**With every head**")
    left.dataframe(before_top, hide_index=True)
    right.markdown(f"**With {'that head' if ablate == 'head' else 'that layer'} switched off**")
    right.dataframe(after_top, hide_index=True)
    st.caption(
        f"{chat.changes_caption(model, probabilities, after)} The head's context is zeroed before the output "
        "projection; everything else runs as before."
    )
ui.finish()
