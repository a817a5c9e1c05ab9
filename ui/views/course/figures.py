"""What answers each lesson's question, drawn with the pages' own helpers from the package's results (the pages'
shared, bounded caches): one function a lesson, given the lesson's inputs.
"""

from __future__ import annotations

from typing import Any

import streamlit as st
import torch

from attention.lessons import course, permutation, soft_lookup
from attention.llm import flash, kv_memory
from attention.models import tiny
from server.warmup import lazy

from ...charts import band_chart, bars, chart, sweep_frame
from ...heatmaps import heatmap
from ...markup import dim_labels, labels, plain
from ...results import compute, scaling_sweep
from .. import watch_it_learn
from . import runs

pd = lazy("pandas")  # at first use (server/warmup.py): `import ui` imports this module for the course map


def toy(inputs: dict[str, Any], **overrides: Any):
    return compute(course.toy_config(inputs, **overrides))  # the pages' shared, bounded cache


def n_tokens(inputs: dict[str, Any]) -> int:
    return len(course.tokenize(str(inputs["sentence"])))


def lookup(i: dict[str, Any]) -> None:
    result = toy(i)
    q = course.query_token(i)
    look = soft_lookup.soft_lookup(result, 0, q)
    keys = labels(result.key_tokens)
    left, right = st.columns(2)
    bars(look.weights, keys, title=f"weights α of query {labels(result.tokens)[q]}", blocked=look.allowed,
         key="co:bars", container=left)  # fmt: skip
    heatmap(look.weighted, keys, dim_labels(result.d_v), title="α · v: each value row times its weight",
            key="co:weighted", container=right, annotate=False)  # fmt: skip


def doubled(i: dict[str, Any]) -> None:
    base = toy(i, mask="none")
    doubled = toy(i, mask="none", scale="temperature", temperature=base.scale / 2)
    q = course.query_token(i)
    keys = labels(base.key_tokens)
    before, after = base.weights[0, q], doubled.weights[0, q]
    top = float(max(before.max(), after.max()))  # one scale for both: the same length is the same weight
    left, right = st.columns(2)
    bars(before, keys, title="softmax(omega / √d_k)", key="co:before", container=left, top=top)
    bars(after, keys, title="softmax(2 · omega / √d_k)", key="co:after", container=right, top=top)


def scaling(i: dict[str, Any]) -> None:
    t = min(max(n_tokens(i), 2), 32)
    sweep = scaling_sweep(t, int(i["seed"]), course.SWEEP_SEEDS)
    band_chart(sweep_frame(sweep, "spread"), title="Score spread over d_k", y_title="std of the scores",
               current=int(i["d_k"]), key="co:spread")  # fmt: skip
    st.caption("The dashed rule is your d_k: unscaled, the spread grows like √d_k; scaled, it stays near 1.")


def masks(i: dict[str, Any]) -> None:
    result = toy(i)
    tok = labels(result.tokens)
    heatmap(result.weights[0], tok, tok, title=f"Softmax weights under the {result.config.mask} mask",
            kind="weights", blocked=result.mask, key="co:masked")  # fmt: skip


def heads(i: dict[str, Any]) -> None:
    result = toy(i)
    tok = labels(result.tokens)
    q = course.query_token(i)
    # one column a head in one heatmap, a row a key: every key labelled, however long the sentence, and one colour
    # scale for all the heads (up to the largest weight: the heads' favourites stand out)
    rows = result.weights[:, q].T
    heatmap(rows, tok, [f"head {h + 1}" for h in range(result.heads)], title=f"Query {tok[q]}: its weights by head",
            kind="weights", key="co:heads", annotate=False, top=float(rows.max()))  # fmt: skip


def position(i: dict[str, Any]) -> None:
    tokens = course.tokenize(str(i["sentence"]))
    perm = permutation.shuffled_order(tokens, seed=0)
    shuffled_tokens = permutation.apply_order(tokens, perm)
    context = toy(i, mask="none").context[0]
    shuffled = toy(i, mask="none", sentence=" ".join(shuffled_tokens)).context[0]
    scale = float(max(context.abs().max(), shuffled.abs().max()))  # one colour scale: the same colour, the same number
    left, right = st.columns(2)
    dims = dim_labels(context.shape[1])
    heatmap(context[perm], labels(shuffled_tokens), dims, title="contexts of the sentence, rows reordered",
            key="co:ctx", container=left, annotate=False, max_abs=scale)  # fmt: skip
    heatmap(shuffled, labels(shuffled_tokens), dims, title="contexts of the shuffled sentence", key="co:shuf",
            container=right, annotate=False, max_abs=scale)  # fmt: skip
    st.caption(f"Shuffled: {plain(' '.join(shuffled_tokens))}")


def cross(i: dict[str, Any]) -> None:
    result = toy(i, cross_sentence=str(i["cross_sentence"]))
    heatmap(result.weights[0], labels(result.tokens), labels(result.key_tokens), title="Cross-attention weights",
            kind="weights", key="co:cross")  # fmt: skip


def cache(i: dict[str, Any]) -> None:
    frame = pd.DataFrame(
        [
            {"model": m.name, "numbers a token": m.cache_bytes(1, bytes_per_number=1), "yours": m.name == i["kv_model"]}
            for m in kv_memory.MODELS.values()
        ]
    )
    spec = {
        "mark": {"type": "bar"},
        "encoding": {
            "y": {"field": "model", "type": "nominal", "sort": None, "title": None},
            "x": {"field": "numbers a token", "type": "quantitative", "title": "numbers a token in the KV cache"},
            "color": {"field": "yours", "type": "nominal", "legend": None},
        },
    }
    chart(frame, spec, height=160, key="co:cache")


def tiles(i: dict[str, Any]) -> None:
    result = toy(i)
    n = len(result.tokens)
    size = min(int(i["block_size"]), n)
    tok = labels(result.tokens)
    allowed = result.mask.clone()
    allowed[:, size:] = False  # the first key block: all the scores a tile holds
    allowed[size:, :] = False
    heatmap(result.masked[0], tok, tok, title=f"One tile of {size} × {size} scores (coloured) of the {n} × {n}",
            blocked=allowed, key="co:tile", annotate=False)  # fmt: skip
    memory = flash.memory_numbers(n, n, size, result.heads)
    c = st.columns(2)
    c[0].metric("Ordinary: the whole S", f"{memory.full_scores:,}")
    c[1].metric("Tiled: one tile + m and l", f"{memory.tile_scores + memory.statistics:,}")


def encoder(i: dict[str, Any]) -> None:
    # Imported here, not with the course: only the Real model page and this lesson load the model's readers (its
    # helper keeps them out of every other page, tests/app/test_real_model.py), not every page that imports `ui`
    from .. import model

    _, reading = model.run(str(i["sentence"]))
    layer, head = int(i["layer"]), int(i["head"])
    result = model.head_result(reading, layer, head)
    tok = labels(reading.tokens)
    heatmap(result.weights[0], tok, tok, title=f"Softmax weights, layer {layer + 1} head {head + 1}", kind="weights",
            key="co:encoder", annotate=False)  # fmt: skip
    st.caption("Rows are queries, columns keys: the [CLS] column (first) and the [SEP] column (last) are the sinks.")


def induction(i: dict[str, Any]) -> None:
    found = course.induction_head(i)
    ids, tok = course.induction_prompt(i)
    weights = runs.smollm2_run(ids).weights[found.layer, found.head]  # the chat page's run, shared server-wide
    heatmap(weights, tok, tok, title=f"Layer {found.layer + 1}, head {found.head + 1}: the strongest induction head",
            kind="weights", key="co:induction", annotate=False)  # fmt: skip
    st.caption(
        f"Rows are queries, columns keys. The stripe {course.INDUCTION_LENGTH - 1} below the diagonal: each token "
        "of the second copy reads the token after its earlier copy (induction). The bright first column: queries "
        "with nothing to read park their weight on token 1 (the sink)."
    )


def fall_so_far(i: dict[str, Any]) -> None:
    """While the lesson's run trains (the prediction is in): the loss so far, as Play draws it, so the wait shows the
    thing the question is about; the step where it falls fastest is marked once the run is done (`fall`)."""
    run = runs.run_so_far(i)
    if run is None:
        return
    settings = run.settings
    spec = watch_it_learn.curve_spec("Loss so far", "nats", "series", rule=tiny.CHANCE,
                               rule_label=f"chance: ln {tiny.VOCAB} = {tiny.CHANCE:.2f}", height=200)  # fmt: skip
    spec["layer"][0]["encoding"]["x"]["scale"] = {"domain": [0, settings.steps]}  # the whole run's width from the start
    watch_it_learn.curve(watch_it_learn.loss_frame(run), spec, key="co:loss-so-far")


def fall(i: dict[str, Any]) -> None:
    run = runs.lesson_run(i)
    fall = course.steepest_fall(run)
    watch_it_learn.curve(watch_it_learn.loss_frame(run), watch_it_learn.curve_spec(
        "Loss", "nats", "series", rule=tiny.CHANCE, rule_label=f"chance: ln {tiny.VOCAB} = {tiny.CHANCE:.2f}",
        mark_step=fall.step, mark_label="falls fastest", height=200,
    ), key="co:loss")  # fmt: skip
    st.caption("The red rule: where the loss on the repeated half falls fastest, between two snapshots.")


def composition(i: dict[str, Any]) -> None:
    """Lesson 13: how the run's induction head reads each head of layer 1 (Q-, K- and V-composition), beside how much
    each of those heads looks at the token just before (its previous-token score); counted from 1."""
    r = course.reading(i)
    heads = [f"head {h + 1}" for h in range(r.k.shape[0])]
    scores = torch.stack([r.q, r.k, r.v], 1)  # (h, 3)
    left, right = st.columns([3, 2])
    kinds = ["Q (queries)", "K (keys)", "V (values)"]
    heatmap(scores, heads, kinds, kind="weights", key="co:composition", container=left,
            title=f"How layer {r.reader[0] + 1}, head {r.reader[1] + 1} reads layer 1's heads",
            top=max(float(scores.max()), 1e-6), annotate=True)  # fmt: skip
    bars(r.previous, heads, title="Layer 1's previous-token scores", key="co:previous", container=right, top=1.0)
    st.caption(
        f"Left: the composition of each head of layer 1 into layer {r.reader[0] + 1}'s induction head, 0 to 1: how "
        "much of what it writes the induction head's queries (Q), keys (K) or values (V) read. Right: the share of "
        "its weight each head of layer 1 puts on the token just before each query."
    )
