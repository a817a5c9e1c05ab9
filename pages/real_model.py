"""Inside a real model: all-MiniLM-L6-v2's 6 x 12 heads, one of them through the same panels as the toy."""

import streamlit as st

import ui
from attention.models import interpret, minilm
from ui.views.model import BEHAVIOURS, MODEL_VIEW_MAX, go_to, head_result, model_view, run_or_stop, token_chips

st.title("Inside a real model")
st.caption(
    "all-MiniLM-L6-v2, a trained BERT encoder (6 layers of 12 heads, 32 numbers a head), read offline. Its heads "
    "compute exactly what the toy pages compute, Q Kᵀ, softmax and a mix of values, with weights learned from "
    "a billion sentence pairs. Layers and heads count from 0."
)
ui.show_url_warnings(sentence=minilm.DEFAULT_SENTENCE, head=1)
ui.lesson_link("pages/real_model.py")  # this page's lesson in the course
ui.controls(["sentence"])
model, run = run_or_stop(str(ui.get("sentence")))
tok = ui.labels(run.tokens)

st.subheader("The tokens the model sees")
token_chips(run.tokens)
st.caption(
    f"{len(run.tokens)} subword tokens: [CLS] opens every input and [SEP] closes it; a word the vocabulary lacks "
    "is cut into pieces, the later ones marked ##; a character it cannot read is [UNK]."
)

st.subheader("Every head at once")
if len(run.tokens) <= MODEL_VIEW_MAX:
    model_view(run, int(ui.get("layer")), int(ui.get("head")))
    st.caption(
        "One map a head (h0 to h11, ◆ the one shown below), in each its layers L0 to L5 from top to bottom, each a "
        "query × key map (keys numbered as the tokens) of weights from 0 (dark) to 1 (bright). Click a row to "
        "open that head and follow that token."
    )
else:
    st.info(f"The model view is drawn for up to {MODEL_VIEW_MAX} tokens; pick a layer and head below.")

st.subheader("One head, step by step")
c = st.columns([1, 1, 2])
layer = int(ui.pick("layer", list(range(6)), "Layer", container=c[0]))
head = int(ui.pick("head", list(range(12)), "Head", container=c[1]))
with c[2]:
    toy = ui.toggle("toy", container=st)
    if toy:
        seed = int(ui.slider("seed", container=st))
result = head_result(run, layer, head, seed if toy else None)
if toy:
    st.info(
        "Random weights: the same inputs, shapes and scale as the trained head, with every number of W_query, "
        "W_key and W_value drawn at random. Switch off to see what training put there."
    )

top, bottom = st.columns(2), st.columns(2)
panels = [top[0], top[1], bottom[0], bottom[1]]
ui.heatmap(result.embeddings, tok, ui.dim_labels(result.embeddings.shape[1]),
           title=f"Hidden states entering layer {layer}", key="rm:x", container=panels[0], annotate=False)  # fmt: skip
panels[0].caption("384 numbers a token: the embeddings for layer 0, the previous layer's output after that.")
ui.heatmap(result.omega[0], tok, tok, title="Omega = Q Kᵀ", key="rm:omega", container=panels[1])
panels[1].caption("Raw scores, queries in rows, keys in columns, with the head's real query and key biases.")
picked = ui.heatmap(result.weights[0], tok, tok, title="Softmax weights", kind="weights", key="rm:weights",
                    selectable=True, container=panels[2])  # fmt: skip
panels[2].caption("softmax(omega / √32): each row sums to 1. Click a row to follow it.")
ui.heatmap(result.context[0], tok, ui.dim_labels(result.d_v), title="Context vectors", key="rm:context",
           container=panels[3])  # fmt: skip
panels[3].caption("Each row: the weights' mix of this head's 32-number values.")

st.subheader("Follow one token")
if picked is not None:
    ui.put("token", picked)
focus = ui.pick("token", list(range(len(tok))), "Token to follow", format_func=lambda i: tok[i])
ui.walkthrough(result, 0, focus, head_name=f"layer {layer}, head {head}")

st.subheader("Beyond the weights")
st.markdown(
    "**Attention is not only a weight** (Kobayashi et al. 2020). A key with a large weight may carry a tiny "
    "vector: what it adds to a query's output is α·f(x), its value through the head's share of the output "
    "projection. Much of the weight that goes to [CLS] and [SEP] moves almost nothing."
)
norms = minilm.norm_based(model, run, layer, head)  # index 0: this head
left, right = st.columns(2)
ui.heatmap(norms.weights[0], tok, tok, title=f"Weight α, layer {layer} head {head}", kind="weights",
           key="rm:alpha", container=left, annotate=False)  # fmt: skip
left.caption(f"Share of the weight on [CLS]/[SEP]: {float(norms.weight_share[0].mean()):.0%} (mean over queries).")
ui.heatmap(norms.norms[0], tok, tok, title=f"‖α·f(x)‖, layer {layer} head {head}", kind="weights",
           key="rm:norms", container=right, annotate=False, top=float(norms.norms[0].max()))  # fmt: skip
right.caption(f"Share of the norm on [CLS]/[SEP]: {float(norms.norm_share[0].mean()):.0%} (mean over queries).")
if toy:
    st.caption("These and the analyses below read the trained model: the random head is only in the panels above.")

st.markdown(
    "**Attention rollout** (Abnar & Zuidema 2020). Tokens mix again at every layer, so one layer's weights do not "
    "say which input words an output came from. Rollout averages each layer's heads, adds the residual "
    "connection as attention to oneself, and multiplies the layers up to this one."
)
roll = run.rollout[layer]
left, right = st.columns(2)
ui.heatmap(roll, tok, tok, title=f"Rollout through layer {layer}", kind="weights", key="rm:rollout",
           annotate=False, top=float(roll.max()), container=left)  # fmt: skip
right.caption(
    "Row: a token's representation after this layer; columns: how much of it comes from each input token. "
    "Change the layer above: on this sentence the diagonal (each token itself) fades from about half of each "
    "row after layer 0 to a tenth after layer 5, while the [CLS] column grows."
)

st.markdown("**Head gallery**: every head scored on this sentence for what heads are known to do.")
scores = run.scores
values = scores.scores()
best = interpret.best_heads(scores)
shown = ui.segmented("behaviour", format_func=BEHAVIOURS.get)  # in the link, like every control
ui.heatmap(values[shown], [f"layer {i}" for i in range(6)], [f"h{j}" for j in range(12)],
           title=f"Score: {BEHAVIOURS[shown]}", kind="weights", key="rm:gallery")  # fmt: skip
jumps = st.container(horizontal=True, wrap=True, vertical_alignment="center")  # as wide as their labels
jumps.markdown("**Go to the best head for**")
for name, (b_layer, b_head) in best.items():
    jumps.button(f"{BEHAVIOURS[name]}: L{b_layer} h{b_head}", key=f"rm:best:{name}", on_click=go_to,
                 args=(b_layer, b_head))  # fmt: skip
pair = interpret.coreference_pair(run.encoding.tokens)  # the pronoun and the antecedent the score reads
if scores.coreference is None or pair is None:
    st.info(
        "The coreference score needs a pronoun (it, he, she, they, ...) after a noun in the sentence: it is the "
        "weight from the pronoun's row on its likely antecedent's column."
    )
    coref = "from a pronoun to its likely antecedent"
else:
    pronoun, antecedent = (ui.plain(run.encoding.tokens[i]) for i in pair)
    coref = (f"from “{pronoun}” to “{antecedent}”, the first noun of the pronoun's sentence (readers' first guess: "
             "a heuristic, not a resolution)")  # fmt: skip
st.caption(
    "Previous/next token: mean weight on the neighbour; sink: on [CLS] and [SEP]; same word: on the other pieces "
    f"of one's word; coreference: {coref}."
)
ui.finish()
