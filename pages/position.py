"""Position: attention alone cannot tell word order; four ways to put it back, each made visible."""

import pandas as pd
import streamlit as st

import ui
from attention import Result
from attention.basics import position
from attention.lessons import permutation, rope_demo
from ui.views.position import shuffle_button, shuffles

# No mask and no dropout here, whatever another page set: a causal mask is itself a signal of order (each word
# sees only the words before it), and dropout draws differ between the two sentences of the experiment.
PINNED = {"mask": "none", "dropout": 0.0}
SLIDE = 24  # key positions the RoPE pair is moved over
TABLE_ROWS = 32  # positions drawn in the angle and sinusoidal tables, at least (more when the sentence is longer)
PER_ROW = 4  # ALiBi's bias heatmaps side by side
CELLS_MAX = 4 * 256 * 256  # bias cells drawn for all heads together (each cell is sent on every rerun)
NAMES = {
    "none": "no positional encoding",
    "sinusoidal": "the sinusoidal table",
    "learned": "a learned table",
    "rope": "RoPE",
    "alibi": "ALiBi",
}

st.title("Position")
st.caption(
    "Attention by itself does not know word order: it compares every word with every word, wherever they stand. "
    "Models put position back in one of four ways: a table added to the inputs (sinusoidal or learned), queries "
    "and keys rotated by their position (RoPE), or a penalty on the scores growing with distance (ALiBi)."
)
# opens on RoPE (what current LLMs use), four heads, so that ALiBi's slopes differ from head to head, and the
# dashboard's scaled normal weights: Raschka's all-positive torch.rand weights give scores in the hundreds, a softmax
# with one weight of 1 in every row, and no room for ALiBi's penalty to show
ui.show_url_warnings(position="rope", heads=4)
ui.lesson_link("pages/position.py")  # this page's lesson in the course
ui.controls(["sentence", "position", "rope_base", "heads", "d_model", "d_k", "d_v", "init", "seed"])
config = ui.config_or_stop("This setting", **PINNED)
kind = config.position
tokens = config.tokens
tok = ui.labels(tokens)
t = len(tokens)
if ui.get("mask") != "none" or ui.get("dropout"):
    st.caption("This page computes without a mask and without dropout: a causal mask alone tells words apart by order.")
head = 0
if config.heads > 1:  # the head every figure below shows, in a column of its own (the page is wide)
    head = int(ui.pick("head", list(range(config.heads)), "Head shown", format_func=lambda i: f"head {i + 1}",
                       container=st.columns(3)[0]))  # fmt: skip
last = t - 1
shown = max(1, min(config.heads, CELLS_MAX // max(1, t * t)))  # ALiBi's heads drawn


def alibi_view(r: Result) -> tuple:
    """What section 3 draws of ALiBi: the first heads' biases, the slopes, the last word's weights."""
    return r.position.bias[:shown], r.position.slopes, r.weights[head, last]


def last_row(r: Result):
    return r.weights[head, last]


# Five computations: the sentence, the sentence shuffled, and ALiBi, no position and a learned table (the
# sentence's own kind is one of them). At 512 tokens, 16 heads and d 256 each Result is ~120 MB: held together
# they would pass the server's memory. So the others come first, one at a time, each let go of once what is drawn
# of it (a matrix, a row) is copied out, and the sentence's own Result last (server/budget.py).
perm = permutation.shuffled_order(tokens, seed=shuffles())
shuffled_tokens = permutation.apply_order(tokens, perm)
shuffled_context = ui.kept_or_stop(
    "The shuffled sentence",
    ui.config_or_stop("The shuffled sentence", sentence=" ".join(shuffled_tokens), **PINNED),
    lambda r: r.context,
)  # (h, T, d_v)
if kind != "alibi":
    alibi_bias, slopes, alibi_row = ui.kept_or_stop(
        "ALiBi", ui.config_or_stop("ALiBi", position="alibi", **PINNED), alibi_view
    )
if kind != "none":
    plain_row = ui.kept_or_stop("No position", ui.config_or_stop("No position", position="none", **PINNED), last_row)
if kind != "learned":
    table = ui.kept_or_stop(
        "Learned", ui.config_or_stop("Learned", position="learned", **PINNED), lambda r: r.position.table
    )  # (T, d_model)
result = ui.result_or_stop(**PINNED)
if kind == "alibi":
    alibi_bias, slopes, alibi_row = alibi_view(result)
elif kind == "none":
    plain_row = last_row(result)
elif kind == "learned":
    table = result.position.table


def position_labels(n: int) -> list[str]:
    """Rows of a table by position: 'p0 Life' where the sentence has a word there, 'p7' past its end."""
    return [f"p{p} {tokens[p]}" if p < t else f"p{p}" for p in range(n)]


def slope_text(slope: float) -> str:
    return f"1/{1 / slope:.3g}"


# 1. the permutation experiment ---------------------------------------------------------------------------
st.header("1. Shuffle the words")
ui.explain(
    f"The same words in another order, computed with {NAMES[kind]}. Each word keeps its own vector (one vector a "
    "word of the vocabulary); only where it stands changes."
)
words, shuffle = st.columns([3, 1], vertical_alignment="bottom")
shuffle_button(shuffle, disabled=len(set(tokens)) <= 1)
words.markdown(f"**Sentence:** {ui.plain(' '.join(tokens))}  \n**Shuffled:** {ui.plain(' '.join(shuffled_tokens))}")
check = permutation.permutation_check(result.context, shuffled_context, perm)

left, right = st.columns(2)
scale = max(ui.largest_abs(result.context[head]), ui.largest_abs(shuffled_context[head]))
ui.heatmap(result.context[head], tok, ui.dim_labels(result.d_v), title="Context: the sentence", key="pos:ctx",
           container=left, max_abs=scale)  # fmt: skip
left.caption("One row per word: what attention made of it, in the sentence's order.")
ui.heatmap(shuffled_context[head], ui.labels(shuffled_tokens), ui.dim_labels(result.d_v),
           title="Context: the shuffled sentence", key="pos:shuffled", container=right, max_abs=scale)  # fmt: skip
right.caption("The same words shuffled. Find a word in both: is its row the same?")

if len(set(tokens)) <= 1:
    st.info(
        ("One word: " if t == 1 else "Every word is the same: ")
        + "shuffling gives back the same sentence, so this experiment cannot tell anything. "
        "Type a sentence of two different words or more."
    )
elif check.equivariant and kind != "none":
    st.success(
        f"✅ Same rows, reordered, even with {NAMES[kind]}: the largest difference is {check.max_difference:.2g}. "
        + (
            "With two words the only shuffle is the reversal, and ALiBi's penalty depends on the distance |i − j| "
            "only, which a reversal keeps: it cannot tell a sentence from its mirror image. Add a word."
            if kind == "alibi"
            else "This shuffle happens to leave what position adds unchanged. Shuffle again."
        )
    )
elif check.equivariant:
    st.success(
        f"✅ Same rows, reordered: every word's context row is the same wherever the word stands. The largest "
        f"difference is {check.max_difference:.2g} (float rounding, next to values up to {check.largest:.3g}): "
        "attention alone cannot tell word order."
    )
else:
    st.info(
        f"❌ Not the same rows: with {NAMES[kind]}, the shuffled sentence's rows differ from the original rows by up "
        f"to {check.max_difference:.3g} (next to values up to {check.largest:.3g}). The same word at another "
        "position gets another context: the model can tell word order."
    )
if len(set(tokens)) > 1:
    other = "rope" if kind == "none" else "none"
    st.button(f"Try it with {NAMES[other]}", key="pos:try", on_click=ui.put, args=("position", other))

# 2. RoPE ---------------------------------------------------------------------------------------------------
st.header("2. RoPE: the score depends on the distance only")
if kind != "rope":
    note, button = st.columns([4, 1], vertical_alignment="center")
    note.info(
        "RoPE turns each query and key by an angle proportional to its position, pair of numbers by pair of numbers. "
        f"Position is {kind} now: switch to RoPE to see it."
    )
    button.button("Switch to RoPE", key="pos:rope", on_click=ui.put, args=("position", "rope"))
else:
    base = result.config.rope_base
    focus = ui.pick("token", list(range(t)), "Query word (the key is the first word)", format_func=lambda i: tok[i],
                    container=st.columns(3)[0])  # fmt: skip
    distance = int(focus)
    q, k = result.unrotated_queries[head, focus], result.unrotated_keys[head, 0]
    slide = range(SLIDE)
    rope_scores = rope_demo.pair_scores(q, k, distance, slide, base)
    table_scores = rope_demo.sinusoidal_pair_scores(
        result.embeddings[focus], result.embeddings[0], result.w_query[head], result.w_key[head], distance, slide,
        b_query=None if result.b_query is None else result.b_query[head],
        b_key=None if result.b_key is None else result.b_key[head],
    )  # fmt: skip
    frame = pd.concat(
        [
            pd.DataFrame({"x": list(slide), "y": rope_scores.numpy(), "series": "RoPE"}),
            pd.DataFrame({"x": list(slide), "y": table_scores.numpy(), "series": "sinusoidal table instead"}),
        ],
        ignore_index=True,
    )
    chart_col, words_col = st.columns([2, 1])
    ui.lines(
        frame,
        title=f"q · k of “{tokens[focus]}” and “{tokens[0]}”, {distance} apart",
        x_title="key position (the query is that + distance)",
        y_title="score q · k",
        key="pos:pair",
        container=chart_col,
    )
    words_col.markdown(
        f"The query “{ui.plain(tokens[focus])}” and the key “{ui.plain(tokens[0])}” keep their vectors and stay "
        f"**{distance} apart**; both slide along the sentence, from key position 0 to {SLIDE - 1}."
    )
    words_col.markdown(
        f"- **RoPE**: the score moves by {rope_demo.spread(rope_scores):.2g} in all: flat. Both vectors turn by "
        "their positions, and only the difference of the angles survives the dot product.\n"
        f"- **Sinusoidal table**: the score moves by {rope_demo.spread(table_scores):.3g}. The table is added to "
        "the inputs, so the pair's score depends on where it stands, not only on how far apart."
    )

    before, after = st.columns(2)
    omega_before = rope_demo.omega_before_rotation(result)
    scale = max(ui.largest_abs(omega_before[head]), ui.largest_abs(result.omega[head]))
    ui.heatmap(omega_before[head], tok, tok, title="Omega before rotation", key="pos:omega0", container=before,
               max_abs=scale)  # fmt: skip
    before.caption("Q Kᵀ of the queries and keys before RoPE turns them: the scores with no position at all.")
    ui.heatmap(result.omega[head], tok, tok, title="Omega after rotation (RoPE)", key="pos:omega1", container=after,
               max_abs=scale)  # fmt: skip
    after.caption("The same vectors turned by their positions: each score now also depends on how far apart.")

    rows = max(t, TABLE_ROWS)
    angles = rope_demo.wrapped_angles(position.rope_angles(rows, result.d_k, base))  # (rows, d_k/2)
    half = result.d_k // 2
    pairs = [f"d{i + 1}·d{i + 1 + half}" for i in range(half)]
    angle_col, words_col = st.columns([2, 1])
    ui.heatmap(angles, position_labels(rows), pairs, title="RoPE's rotation angle by position and pair (radians)",
               key="pos:angles", max_abs=3.1416, annotate=False, container=angle_col)  # fmt: skip
    words_col.markdown(
        f"Row p turns each pair of query/key numbers by p × θᵢ, θᵢ = {base:g}^(−2i/d_k), shown within one turn "
        f"(−π to π). Column d1·d{1 + half} is the pair of numbers 1 and {1 + half} of each query and key (Llama's "
        "rotate-half pairing). The first pairs spin fast (they tell neighbours apart), the last barely move (they keep "
        "distant words comparable)."
    )

# 3. ALiBi --------------------------------------------------------------------------------------------------
st.header("3. ALiBi: a penalty growing with distance")
slopes = slopes.tolist()
h = config.heads
bias_max = ui.largest_abs(alibi_bias)
ui.explain(
    "ALiBi adds −m × distance to every scaled score before the softmax, with one slope m a head, each a fixed "
    f"fraction of the one before. Colours: white 0 to blue −{bias_max:.3g}, the same in every head."
)
per_row = min(shown, PER_ROW)
for start in range(0, shown, per_row):
    cols = st.columns([1.4] + [1] * (per_row - 1)) if per_row > 1 else st.columns(2)
    for i in range(start, min(start + per_row, shown)):
        ui.heatmap(
            alibi_bias[i], tok, tok, title=f"head {i + 1}: m = {slope_text(slopes[i])}",
            key=f"pos:bias:{i}", container=cols[i - start], annotate=per_row <= 2, legend=False,
            max_abs=bias_max, row_labels=i == start,
        )  # fmt: skip
if shown < h:
    st.caption(f"Heads 1 to {shown} of {h} shown: at {t} words, more would be slow to send.")

distances = position.relative_positions(t, t)[last].tolist()  # how far each key lies before the last word
weights_frame = pd.concat(
    [
        pd.DataFrame({"x": distances, "y": plain_row.numpy(), "series": "no position"}),
        pd.DataFrame(
            {
                "x": distances,
                "y": alibi_row.numpy(),
                "series": f"ALiBi, slope {slope_text(slopes[head])}",
            }
        ),  # fmt: skip
    ],
    ignore_index=True,
)
chart_col, words_col = st.columns([2, 1])
ui.lines(
    weights_frame,
    title=f"Weights of the last word “{tokens[last]}”, head {head + 1}",
    x_title="distance back from the last word",
    y_title="softmax weight",
    key="pos:alibi",
    container=chart_col,
)
words_col.markdown(
    f"The last word “{ui.plain(tokens[last])}” looks back over the sentence. Under ALiBi head {head + 1} subtracts "
    f"{slope_text(slopes[head])} from its score per word of distance: near words (left) gain weight, far ones "
    "(right) lose it. "
    + "Slopes of the heads: "
    + ", ".join(f"head {i + 1}: {slope_text(s)}" for i, s in enumerate(slopes))
    + ". Steep heads look locally; gentle ones still see the whole sentence."
)

# 4. the tables ---------------------------------------------------------------------------------------------
st.header("4. The encodings themselves")
d_model = result.config.width
rows = max(t, TABLE_ROWS)
sinus = position.sinusoidal(rows, d_model)  # (rows, d_model)
top, bottom = st.columns(2), st.columns(2)
ui.heatmap(sinus, position_labels(rows), ui.dim_labels(d_model), title="Sinusoidal table: position × dimension",
           key="pos:sin", container=top[0], annotate=False)  # fmt: skip
top[0].caption("Row p is added to the word at position p: sines and cosines, fast in the first columns, slow later.")
ui.heatmap(position.position_similarity(sinus), position_labels(rows), position_labels(rows),
           title="Sinusoidal: similarity of positions (cosine)", key="pos:sinsim", container=top[1],
           annotate=False)  # fmt: skip
top[1].caption("Near positions have similar rows, far ones less: the table carries distance as well as place.")
ui.heatmap(table, position_labels(t), ui.dim_labels(d_model), title="Learned table (before training)",
           key="pos:learned", container=bottom[0], annotate=d_model <= 8)  # fmt: skip
bottom[0].caption("A random row per position, drawn from the seed, as BERT and GPT-2 start; training shapes it.")
ui.heatmap(position.position_similarity(table), position_labels(t), position_labels(t),
           title="Learned: similarity of positions (cosine)", key="pos:learnedsim", container=bottom[1])  # fmt: skip
bottom[1].caption("Untrained, the similarities are random: neighbours are no more alike than far positions.")

ui.code(result.config)
ui.finish()
