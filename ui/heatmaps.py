"""Heatmaps: every matrix of the app, drawn by our own canvas component (assets/heatmap.js).

What belongs here: the payload the component draws (`heatmap_payload`, and `decode_heatmap` for tests), its
colour scale and size, and `heatmap`, which pages call. Vega-Lite charts are in `ui.charts`.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from assets import FIGURES, HEATMAP

from .keys import ignore_event
from .state import url_before_figure

ANNOTATE_MAX = 16  # matrices up to 16 x 16 print their values in the cells

# Heatmaps are drawn by our own canvas component (assets/heatmap.js), not Vega-Lite: a Vega rect mark is one
# scene-graph item and one SVG path per cell, which at 512 tokens (262,144 cells a chart) took minutes and
# gigabytes in the browser. The component draws the cells as one image at any size and does the labels,
# legend, hover readout and row clicks itself. Each run sends a compact binary payload (`heatmap_payload`).
# (the components themselves are declared in assets/__init__.py, apart from torch: see there)
HEATMAP_KINDS = ("diverging", "weights", "mask")


def largest_abs(matrix: torch.Tensor, blocked: torch.Tensor | None = None) -> float:
    """The largest finite |value| shown (1 when there is none), for a symmetric colour scale."""
    m = matrix.detach().float()
    keep = torch.isfinite(m) if blocked is None else torch.isfinite(m) & blocked
    top = float(m[keep].abs().max()) if bool(keep.any()) else 0.0
    return top if top > 0 else 1.0


def plot_height(rows: int) -> int:
    """The height of a heatmap's cells in pixels: 24 a row, between 100 and 520 (titles and labels come on top)."""
    return int(min(max(24 * rows, 100), 520))


def heatmap_payload(
    matrix: torch.Tensor,
    rows: Sequence[str],
    cols: Sequence[str],
    *,
    title: str,
    kind: str = "diverging",
    blocked: torch.Tensor | None = None,
    annotate: bool = False,
    selectable: bool | str = False,
    legend: bool = True,
    max_abs: float | None = None,
    top: float = 1.0,
    row_labels: bool = True,
    max_height: int | None = None,
    picked: int | None = None,
    blank: bool = False,
) -> bytes:
    """The bytes the heatmap component draws: a uint32 header length, a JSON header (title, labels, colour scale),
    the (rows, cols) values as little-endian float32 row by row, then one byte a cell (1 = blocked) if any is.

    blocked: True where a query may attend (the mask's convention); other cells and non-finite values (−∞ scores)
    are sent as 0 and flagged, and drawn grey. About 5 bytes a cell: 1.3 MB at 512 × 512.
    """
    if kind not in HEATMAP_KINDS:
        raise ValueError(f"kind must be one of {HEATMAP_KINDS}, not {kind!r}")
    m = matrix.detach().to(torch.float32).numpy()
    r, c = m.shape
    if len(rows) != r or len(cols) != c:
        raise ValueError(f"{len(rows)} row and {len(cols)} column labels for a {r} x {c} matrix")
    flagged = ~np.isfinite(m)
    if blocked is not None:
        flagged |= ~blocked.numpy()
    values = np.where(flagged, np.float32(0), m).astype("<f4")
    header = {
        "title": title,
        "kind": kind,
        "r": r,
        "c": c,
        "rows": list(rows),
        "cols": list(cols),
        "maxAbs": largest_abs(matrix, blocked) if max_abs is None else float(max_abs),
        "top": float(top),
        "rowLabels": row_labels,  # weights: the colour scale runs from 0 to this (1 unless small multiples share less)
        "annotate": annotate,
        "selectable": selectable,  # True: a click picks a row; "cell": a cell (sent as row * cols + col)
        "picked": picked,  # the cell framed as picked ("cell" only), None for none
        "blank": blank,  # a question's grid: the cells drawn blank, nothing of any value shown (`pick_cell`)
        "legend": legend,
        "plotHeight": plot_height(r) if max_height is None else min(plot_height(r), max_height),
        "blocked": bool(flagged.any()),
    }
    body = values.tobytes() + (flagged.astype(np.uint8).tobytes() if header["blocked"] else b"")
    header["id"] = hashlib.blake2b(json.dumps(header).encode() + body, digest_size=8).hexdigest()
    text = json.dumps(header, ensure_ascii=False).encode("utf-8")
    text += b" " * (-(4 + len(text)) % 4)  # the float32 numbers start 4-byte aligned
    return struct.pack("<I", len(text)) + text + body


def figures_archive() -> None:
    """One button that downloads every figure of the page (heatmaps and charts) as PNG (2x) and SVG in a .zip,
    built in the browser (assets/figures.js); it also gives each Vega-Lite chart its own PNG and SVG buttons."""
    FIGURES(key="al:figures", data={"page": "figures"}, height="content")


def decode_heatmap(payload: bytes) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """A payload back as (header, values, blocked): what the browser draws (tests read charts with it)."""
    (n,) = struct.unpack_from("<I", payload)
    header = json.loads(payload[4 : 4 + n])
    r, c = header["r"], header["c"]
    values = torch.from_numpy(np.frombuffer(payload, dtype="<f4", count=r * c, offset=4 + n).copy()).reshape(r, c)
    flags = np.zeros(r * c, dtype=bool)
    if header["blocked"]:
        flags = np.frombuffer(payload, dtype=np.uint8, count=r * c, offset=4 + n + 4 * r * c).astype(bool)
    return header, values, torch.from_numpy(flags.copy()).reshape(r, c)


def pick_cell(
    rows: Sequence[str], cols: Sequence[str], *, title: str, key: str, picked: int | None = None
) -> int | None:
    """A question's grid, to be answered with a click: the cells are blank (weights of 0, outlined, no number and no
    value in the hover readout, so nothing of the answer shows), and a click picks one. Returns the cell just clicked
    as row * len(cols) + col, or None; `picked` frames the learner's current pick (made here or another way)."""
    r, c = len(rows), len(cols)
    payload = heatmap_payload(torch.zeros(r, c), rows, cols, title=title, kind="weights", selectable="cell",
                              legend=False, picked=picked, blank=True)  # fmt: skip
    url_before_figure()
    event = HEATMAP(key=key, data=payload, on_pick_change=ignore_event)
    if event is not None and event.get("pick") is not None and 0 <= int(event["pick"]) < r * c:
        return int(event["pick"])
    return None


def heatmap(
    matrix: torch.Tensor,
    rows: Sequence[str],
    cols: Sequence[str],
    *,
    title: str,
    kind: str = "diverging",
    blocked: torch.Tensor | None = None,
    key: str | None = None,
    selectable: bool | str = False,
    container: Any = None,
    annotate: bool | None = None,
    legend: bool = True,
    max_abs: float | None = None,
    top: float = 1.0,
    row_labels: bool = True,
    max_height: int | None = None,
    picked: int | None = None,
) -> int | None:
    """A labelled heatmap of a (rows, cols) matrix; returns the row just clicked when selectable (else None), or
    with selectable="cell" the cell just clicked as row * cols + col (its values drawn, cells outlined).

    kind: 'diverging' (centred on zero: scores, embeddings, context), 'weights' (0 to 1),
    or 'mask' (booleans). blocked: a (rows, cols) bool tensor, True where a query may
    attend; the other cells show grey with −∞. Matrices up to 16 x 16 print their values
    unless annotate is False (small multiples, narrow columns: the values stay in the hover readout).
    Small multiples share one colour scale: max_abs sets the diverging scale's ends (±max_abs), top the weights
    scale's (0 to top, so near-uniform weights are not one flat block), for all of them, and legend=False leaves
    the colour bar to one caption beside them; row_labels=False leaves the row labels to the first of a row of
    small multiples (the hover readout still names the rows); a downloaded figure has both (assets/heatmap.js).
    max_height caps the cells' height in pixels (step mode: a stage fits a projector's window); picked frames a
    cell (selectable="cell": row * cols + col).
    """
    r, c = matrix.shape
    annotate = r <= ANNOTATE_MAX and c <= ANNOTATE_MAX and annotate is not False
    payload = heatmap_payload(
        matrix.float() if kind == "mask" else matrix, rows, cols, title=title, kind=kind, blocked=blocked,
        annotate=annotate, selectable=selectable, legend=legend, max_abs=max_abs, top=top, row_labels=row_labels,
        max_height=max_height, picked=picked,
    )  # fmt: skip
    url_before_figure()
    key = key or f"heatmap:{title}"
    if container is None:
        event = HEATMAP(key=key, data=payload, on_pick_change=ignore_event)
    else:
        with container:
            event = HEATMAP(key=key, data=payload, on_pick_change=ignore_event)
    if selectable and event is not None and event.get("pick") is not None:
        return int(event["pick"])
    return None
