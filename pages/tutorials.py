"""Tutorials: pick a preset; its computation, and the numbers the tutorial printed beside the computed ones."""

import pandas as pd
import streamlit as st

import ui
from attention import presets
from attention.basics import views

COLS_MAX = 64  # feature columns drawn for wide matrices (the spelled-out preset is 512 and 1024 wide)
NARROW = 12  # feature matrices print their values up to this many columns
INLINE = 1  # the summary table lists this many numbers of a check (all are in its expander)
OK, BAD = "✅ yes", "❌ no"  # words too, for screens without an emoji font

st.title("Tutorials")
st.caption(
    "Each preset is one step of a published tutorial: the dashboard recomputes it and checks every number "
    "the tutorial printed, at the precision it printed."
)
ui.show_url_warnings()
name = ui.select("preset", container=st, format_func=lambda n: f"{n}: {presets.PRESETS[n].source.title}")
preset = presets.PRESETS[name]
result = ui.compute(preset.config)
outcomes = presets.verify(preset, result)

st.subheader(preset.source.title)
if preset.source.link:
    st.link_button("Open the tutorial", preset.source.link, icon=":material/open_in_new:")
else:
    st.caption("These notes have no public link: the preset was built from their text.")
st.markdown(ui.plain(preset.description))
if preset.corrections:
    st.info(ui.plain(preset.corrections), icon=":material/build:")


def _wide(matrix, rows, title: str, key: str) -> None:
    """A (rows, features) heatmap, its feature columns cut at COLS_MAX so big presets stay quick."""
    ui.heatmap(
        matrix[:, :COLS_MAX],
        rows,
        ui.dim_labels(matrix.shape[1])[:COLS_MAX],
        title=title,
        key=key,
        annotate=matrix.shape[1] <= NARROW,
    )


def _dims_note(width: int) -> str:
    return f" First {COLS_MAX} of {width} columns." if width > COLS_MAX else ""


# The comparison is the page's point, so it comes first and full width (a static table whose text wraps: nothing
# hides behind a scroll bar at a projector's 1024 px); the computation follows in a 2 x 2 grid.
st.markdown("**Printed by the tutorial vs computed here**")
matched = sum(o.ok for o in outcomes)
if matched == len(outcomes):
    verdict = "The check matches" if len(outcomes) == 1 else f"All {len(outcomes)} checks match"
    st.success(f"{verdict} at the tutorial's printed precision.", icon=OK[0])
else:
    st.error(f"{len(outcomes) - matched} of {len(outcomes)} checks do not match.", icon=BAD[0])


def _text(outcome, values, computed: bool) -> str:
    if outcome.check.shape_only:
        shape = outcome.computed if computed else tuple(outcome.check.expected)
        return "shape " + str(tuple(shape))
    shown = [
        views.computed_text(outcome.check, v.computed) if computed else views.printed_text(outcome.check, v.printed)
        for v in values
    ]
    more = f" … ({len(values)})" if len(values) > INLINE else ""
    return ", ".join(shown[:INLINE]) + more


rows = []
details = []
for outcome in outcomes:
    values = views.check_values(outcome)
    details.append((outcome, values))
    rows.append(
        {
            "match": OK if outcome.ok else BAD,
            "printed as": outcome.check.label,
            "printed": _text(outcome, values, computed=False),
            "computed": _text(outcome, values, computed=True),
        }
    )
st.table(pd.DataFrame(rows), hide_index=True)
st.caption("A value matches when it is within half a unit of the last digit the tutorial printed.")
for outcome, values in details:
    if not values:
        continue
    bad = sum(not v.ok for v in values)
    mark = OK[0] if bad == 0 else BAD[0]
    count = f"{len(values)} values" if len(values) > 1 else "1 value"
    with st.expander(f"{mark} {ui.plain(outcome.check.label)}: {count} of {ui.plain(views.where(outcome.check))}"):
        st.dataframe(
            pd.DataFrame(
                {
                    "index": [", ".join(map(str, v.index)) for v in values],
                    "printed": [views.printed_text(outcome.check, v.printed) for v in values],
                    "computed": [views.computed_text(outcome.check, v.computed) for v in values],
                    "|error|": [f"{v.error:.1e}" for v in values],
                    "tolerance": [f"{v.tolerance:.1e}" for v in values],
                    "match": [OK if v.ok else BAD for v in values],
                }
            ),
            hide_index=True,
            width="stretch",
        )

st.markdown("**The computation**")
head = ui.head_picker(result.heads)
tok, keys = ui.labels(result.tokens), ui.labels(result.key_tokens)
top, bottom = st.columns(2, gap="medium"), st.columns(2, gap="medium")
x = result.embeddings
with top[0]:
    _wide(x, tok, "Embeddings x", "tu:x")
    ui.explain(f"The tutorial's inputs, one row per token ({x.shape[0]} × {x.shape[1]})." + _dims_note(x.shape[1]))
with top[1]:
    ui.heatmap(result.omega[head], tok, keys, title="Omega = Q Kᵀ", key="tu:omega")
    ui.explain(
        f"Query · key scores, divided by {result.scale:.4g} before the softmax."
        if result.scale != 1
        else "Query · key scores; this tutorial does not scale them."
    )
with bottom[0]:
    ui.heatmap(
        result.dropped_weights[head],
        tok,
        keys,
        title="Softmax weights",
        kind="weights",
        blocked=result.mask,
        key="tu:w",
    )
    ui.explain("Each row sums to 1 over the keys it may see.")
final, what = (result.output, "Output") if result.w_out is not None else (result.context[head], "Context")
with bottom[1]:
    _wide(final, tok, f"{what} vectors", "tu:out")
    ui.explain(
        ("The concatenated heads after the output projection." if result.w_out is not None else "Weights @ values.")
        + _dims_note(final.shape[1])
    )

st.subheader("Take it with you")
ui.downloads(result, head, key="tu:dl")
ui.code(result.config)
ui.finish()
