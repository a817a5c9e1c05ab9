"""Head atlas: every head of SmolLM2 or MiniLM scored for what it does, one point each, a click opening it."""

import streamlit as st

import ui
from attention.lessons.atlas import (
    CIRCUIT_SCORES,
    DEFINITIONS,
    INPUTS,
    MODELS,
    NAMES,
    NEED_REPEATS,
    findings,
    top_sentences,
)
from ui.views import atlas

vega = ui.charts.preload()  # a fresh tab fetches Vega's scripts while the server makes the atlas
st.title("Head atlas")
st.caption(
    "Every head of a real model at once: each one scored for what it does (reads the previous token, parks on the "
    "first, copies, spreads wide) over a corpus, over random tokens said twice, or over your own text. Pick any "
    "two scores for the axes; click a head to open it on its model's page. Layers and heads count from 0."
)
ui.show_url_warnings(prefix=atlas.PREFIX)
model = ui.segmented(atlas.PREFIX + "model", format_func=MODELS.get)
source = ui.segmented(atlas.PREFIX + "input", format_func=INPUTS.get)
text = str(ui.text(atlas.PREFIX + "text", container=st, label="Your text")) if source == "text" else None
drop_first = ui.toggle(atlas.PREFIX + "drop_first", container=st)
a = atlas.atlases_or_stop(model, source, text)[int(drop_first)]

read = f"{a.texts} texts, {a.tokens} tokens" if a.texts > 1 else f"{a.tokens} tokens"
st.caption(f"{MODELS[model]}: {a.layers} layers × {a.heads} heads scored over {INPUTS[source]} ({read}).")
missing = a.missing()
if missing:
    more = (
        " Type a text with a repeated word, or pick repeated random tokens." if set(missing) & set(NEED_REPEATS) else ""
    )
    st.info(a.missing_words() + more)

st.subheader("Every head")
offered = [k for k in a.scores if k not in missing]
if len(offered) < 2:  # one token (none left once the first is out): no query has what any two scores need
    ui.stop(f"This text is too short to score its heads: {a.tokens} token{'s' * (a.tokens != 1)} to score. Type a "
            "longer text, or switch off “Leave the first token out”.", "info")  # fmt: skip
offered += atlas.circuit_names(model)  # SmolLM2: what a head writes, beside where it looks (made when picked)
if atlas.p("y") not in offered:  # induction, on a text where nothing repeats: the next score instead
    ui.put(atlas.PREFIX + "y", next(k for k in offered if k != atlas.p("x")))
c = st.columns(3)
x = ui.pick(atlas.PREFIX + "x", offered, "Across (x)", container=c[0], format_func=NAMES.get)
y = ui.pick(atlas.PREFIX + "y", offered, "Up (y)", container=c[1], format_func=NAMES.get)
colour = ui.segmented(atlas.PREFIX + "colour", container=c[2], format_func={
    "layer": "layer", "kv_group": "K/V group"}.get) if a.group > 1 else "layer"  # fmt: skip
circuits = atlas.circuit_scores(model, source, text) if {x, y} & set(CIRCUIT_SCORES) else {}
x, y = (s if s in a.scores or s in circuits else next(k for k in offered if k in a.scores)
        for s in (x, y))  # a circuit score the server could not make now: an attention score instead  # fmt: skip
table = atlas.frame(a, circuits)
vega.empty()
picked = atlas.scatter(table, x, y, colour)
if picked is not None:
    atlas.open_head(model, *picked)
else:
    st.caption("Hover a point for its head and every score; click one for a link that opens it.")

st.subheader("The strongest heads")
st.markdown("\n".join(f"- {s}" for s in top_sentences(a)))

st.subheader("What the atlas says about the model")
st.markdown("\n".join(f"- {s}" for s in findings(a)))
st.caption("Computed from the scores above: change the input or the switch and these sentences change with them.")

# closed until asked, and sent only once opened (a rerun): its grid, Streamlit's heaviest element (1.2 MB of scripts
# loaded lazily), is not on the first screen's clock (issue 45)
table_box = st.expander("Every score of every head: the table", icon=":material/table:", key=atlas.TABLE_OPEN,
                        on_change="rerun")  # fmt: skip
if table_box.open:
    with table_box:
        st.dataframe(table, hide_index=True, height=360, column_config={
            k: st.column_config.NumberColumn(NAMES[k], format="%.1f" if k == "mean_distance" else "%.3f",
                                             help=DEFINITIONS[k]) for k in [*a.scores, *circuits]})  # fmt: skip
        st.caption("Click a column's name to sort by it.")

with st.expander("How each score is computed"):
    st.markdown(
        "A is a head's matrix of weights (rows: queries i, columns: keys j). Each score is the mean over the "
        "queries that have what it needs, pooled over every text of the input:\n\n"
        + "\n".join(f"- **{NAMES[k]}**: {DEFINITIONS[k]}" for k in [*a.scores, *circuits])
        + "\n\n**Leave the first token out** removes the first token's row and column and divides each row by "
        "what is left, so a head that parks most of its attention on the first token (a sink) is scored on where "
        "the rest goes; the first-token score stays the share it parked."
    )
ui.finish()
