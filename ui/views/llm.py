"""The LLM pages' helpers: the KV cache's buttons and bytes chart, FlashAttention's tiles as the pages draw them.

What belongs here: what the KV cache and FlashAttention pages need beyond the shared helpers, that is buttons'
callbacks (here and not in a page: a function defined in a page holds the page's globals for as long as the
session keeps the button), the cached tiled computation with its size limit, and the small reshaping that turns
the package's tiles and steps into the matrices a heatmap draws (the state of every query row after one key block,
a mask with the rows or columns not reached yet blocked). The numbers themselves come from `attention.llm.decoding`
and `attention.llm.flash`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st
import torch

from attention import Result
from attention.llm.flash import Tiled, blocks, tiled_attention
from server import budget, sessions
from server.chat import WRITES

from ..charts import chart
from ..state import get, put

# The teaching implementation keeps every tile's scores and running state (attention.llm.flash.Tile), about
# 1.5 KB of Python objects a tile plus its numbers. At 512 tokens and block size 1 that is 262,144 tiles and
# gigabytes; results are shared by every session of a 690 MB server (ui/results.py), so the tiles of one view
# are held to this many bytes and a smaller block size is explained instead of computed.
TILED_BYTES_MAX = 32 << 20
TILE_OVERHEAD = 1500  # bytes of Python objects a tile (the Tile, its tensors' headers), measured


# --------------------------------------------------------------------------- buttons


def advance(name: str, top: int) -> None:
    """Button callback: one more (a token generated, a key block visited), at most top."""
    put(name, min(int(get(name)) + 1, top))


def choose(name: str, value: Any) -> None:
    """Button callback: set a parameter (e.g. mask to causal, where decoding needs it)."""
    put(name, value)


# --------------------------------------------------------------------------- KV cache


def rows_up_to(mask: torch.Tensor, t: int) -> torch.Tensor:
    """(T_q, T_k) mask with the rows after t blocked too: the queries not generated yet at step t."""
    generated = torch.arange(mask.shape[0]) <= t  # (T_q,)
    return mask & generated[:, None]  # (T_q, T_k)


def padded_row(row: torch.Tensor, allowed: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A step's (t+1,) row and its allowed keys, padded with blocked zeros to n columns, as (1, n) for a heatmap
    under the full matrix (the keys after t do not exist yet)."""
    pad = n - row.shape[0]
    values = torch.cat([row, row.new_zeros(pad)])[None, :]  # (1, n)
    shown = torch.cat([allowed, allowed.new_zeros(pad)])[None, :]  # (1, n)
    return values, shown


def largest_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| of two same-shaped tensors, to show that two ways of computing agree (0 for empty ones)."""
    return float((a - b).abs().max()) if a.numel() else 0.0


def check_mark(ok: bool) -> str:
    """A green tick or a red cross for st.markdown (Material icons: every screen draws them, unlike ✅ emoji)."""
    return ":green[:material/check_circle:]" if ok else ":red[:material/cancel:]"


@functools.lru_cache(maxsize=8)
def _bytes_spec(height: int) -> dict:
    """Vega-Lite spec: cache bytes over tokens in the cache, the current step as a larger orange point."""
    empty = pd.DataFrame({"tokens": [1], "bytes": [0], "now": [False]})
    base = alt.Chart(empty).encode(
        x=alt.X(
            "tokens:Q",
            title="tokens in the cache",
            axis=alt.Axis(tickMinStep=1, format="d"),
            scale=alt.Scale(domainMin=1),
        ),
        y=alt.Y("bytes:Q", title="bytes", scale=alt.Scale(domainMin=0)),
        tooltip=[alt.Tooltip("tokens:Q", title="tokens"), alt.Tooltip("bytes:Q", title="bytes", format=",")],
    )
    line = base.mark_line(color="#0a8494")
    now = base.mark_point(filled=True, size=120, color="#e66100").transform_filter("datum.now")
    spec = alt.layer(line, now).properties(height=height).to_dict()
    spec.pop("datasets", None)
    spec.pop("data", None)
    for layer in spec["layer"]:
        layer.pop("data", None)
    return spec


def cache_bytes_chart(
    tokens: Sequence[int], sizes: Sequence[int], now: int, *, key: str, container: Any = None, height: int = 200
) -> None:
    """A line of the cache's bytes against the tokens it holds (one point a step), the step `now` marked.

    Titled in Markdown above the chart, as the heatmaps are: in a column the Vega title did not show.
    """
    frame = pd.DataFrame({"tokens": list(tokens), "bytes": list(sizes), "now": [n == now for n in tokens]})
    (container or st).markdown("**KV cache size, one layer in float32**")
    chart(frame, dict(_bytes_spec(height)), height=height, key=key, container=container)


# --------------------------------------------------------------------------- FlashAttention


def tiled_bytes(result: Result, block_size: int) -> int:
    """About how many bytes `tiled_attention` holds for this result: every tile's scores, m, l and output."""
    t_q, t_k = len(result.tokens), len(result.key_tokens)
    b = min(block_size, t_q, t_k) if t_q and t_k else 1
    n_tiles = len(blocks(t_q, block_size)) * len(blocks(t_k, block_size))
    return n_tiles * (4 * result.heads * b * (b + 2 + result.d_v) + TILE_OVERHEAD)


def smallest_block(result: Result) -> int:
    """The smallest block size whose tiles fit in TILED_BYTES_MAX."""
    size = 1
    while size < len(result.key_tokens) and tiled_bytes(result, size) > TILED_BYTES_MAX:
        size += 1
    return size


@st.cache_resource(max_entries=2, ttl=600, show_spinner=False)
def _tiled(_result: Result, key: str, block_size: int) -> Tiled:
    r = _result
    return tiled_attention(r.queries, r.keys, r.values, scale=r.scale, mask=r.mask, block_size=block_size)


budget.evictor(_tiled.clear)  # up to two tilings of TILED_BYTES_MAX: made again when the server's memory is short


def tiled(result: Result, block_size: int) -> Tiled:
    """`attention.llm.flash.tiled_attention` of the result's queries, keys, values, scale and mask, cached on the
    config and block size (two at a time: moving the key-block slider replays, it does not recompute)."""
    return _tiled(result, repr(result.config), block_size)


def after_block(tiled_result: Tiled, j: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The running (m, l, O) of every query row after key block j: (h, T_q), (h, T_q), (h, T_q, d_v).

    Each block of query rows keeps its own state (on a GPU they run side by side); this gathers, from every query
    block, its tile at key block j.
    """
    tiles = [t for t in tiled_result.tiles if t.key_cols.start == j * tiled_result.block_size]
    m = torch.cat([t.m for t in tiles], dim=1)  # (h, T_q)
    l = torch.cat([t.l for t in tiles], dim=1)  # noqa: E741 (h, T_q)
    output = torch.cat([t.output for t in tiles], dim=1)  # (h, T_q, d_v)
    return m, l, output


def columns_up_to(mask: torch.Tensor, stop: int) -> torch.Tensor:
    """(T_q, T_k) mask with the columns from `stop` on blocked too: the keys not visited yet."""
    visited = torch.arange(mask.shape[1]) < stop  # (T_k,)
    return mask & visited[None, :]  # (T_q, T_k)


# --------------------------------------------------------------------------- what a head writes (chat page)


def _writes(ids: tuple[int, ...]):
    """The circuits' trace of a prompt (`attention.models.circuits.chat.trace`), admitted for a kept run's peak."""
    from attention.models import smollm2
    from attention.models.circuits import chat

    def make():
        model = smollm2.load()
        return budget.admitted(smollm2.run_bytes(model, len(ids)), lambda: chat.trace(model, ids), held=lambda _: 0)

    return WRITES.get(ids, make, "Splitting the next token's logit over every head…", holder=sessions.current())


@st.cache_resource(max_entries=16, ttl=1800, show_spinner=False)
def _ov(layer: int, head: int, sources: tuple[int, ...]):
    from attention.models import smollm2
    from attention.models.circuits import chat

    return chat.head_ov_tokens(smollm2.load(), layer, head, sources, k=5)


@budget.evictor
def _free_writes() -> None:
    _ov.clear()  # what a head writes for a few tokens: cheap to make again (the traces are WRITES', held)


def writes_or_warn(ids: tuple[int, ...]):
    """The trace the "what each head writes" section reads, or None with a warning when the server's memory cannot
    take the run now (the rest of the page still draws)."""
    try:
        with st.spinner("Splitting the next token's logit over every head…", show_time=True):
            return _writes(ids)
    except budget.Refused as exc:
        st.warning(f"What each head writes cannot be shown right now: {exc}.")
        return None


def ov_frame(labels: Sequence[str], weights: torch.Tensor, positions: Sequence[int], layer: int, head: int,
             ids: Sequence[int], decode) -> pd.DataFrame:  # fmt: skip
    """For the keys a head reads most: the token there (as the heatmaps label it), its weight, the 5 tokens the
    head's OV circuit writes most when it reads that token (W_E W_V W_O W_U's row, gains folded), and where the
    token itself ranks in that row (1: the head copies it most)."""
    sources = tuple(int(ids[j]) for j in positions)
    ov = _ov(layer, head, sources)
    written = [", ".join(repr(t) for t in decode(row)) for row in ov.top_ids.tolist()]
    return pd.DataFrame({
        "reads": [labels[j] for j in positions], "weight": [float(weights[j]) for j in positions],
        "it writes most": written, "own rank": [int(r) + 1 for r in ov.self_rank.tolist()],
    })  # fmt: skip


def qk_frame(split) -> pd.DataFrame:
    """A QK split as a table: one row a part of the key, the score without the rotation, the rotation's part, both."""
    rows = list(split.names) + ["the whole key"]
    content = split.content.tolist() + [float(split.content.sum())]
    rotation = split.rotation.tolist() + [float(split.rotation.sum())]
    total = split.parts.tolist() + [float(split.score)]
    return pd.DataFrame({"part of the key": rows, "q·k without RoPE": content, "RoPE's rotation adds": rotation,
                         "score (÷√64)": total})  # fmt: skip
