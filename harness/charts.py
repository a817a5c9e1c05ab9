"""AppTest helpers: open a page as a link does, and read the heatmaps a run drew (each is our canvas component,
fed a binary payload: ui.heatmap_payload)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from streamlit.testing.v1 import AppTest

import ui

COMPONENT = "attention_lab.heatmap"
ROOT = Path(__file__).resolve().parents[1]


def open_page(path: str, timeout_s: float = 60, **params: str) -> AppTest:
    """The dashboard opened with these URL parameters, switched to pages/<path>.py and run, with no exception
    (timeout_s: a run's limit; a page whose first run loads a model or scores a corpus needs more)."""
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=timeout_s)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()  # AppTest finds st.navigation's pages only after a first run
    at.switch_page(f"pages/{path}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def ok(at: AppTest) -> None:
    """The run raised nothing and showed no error."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def open_ok(path: str, **params: str) -> AppTest:
    """`open_page`, and the page showed no error either."""
    at = open_page(path, **params)
    ok(at)
    return at


def set_widget(at: AppTest, kind: str, key: str, value: Any) -> AppTest:
    """Set a widget (at.<kind>(key=key)) as a user does, rerun, and check the run raised nothing."""
    getattr(at, kind)(key=key).set_value(value).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _walk(node: Any) -> Iterator[Any]:
    yield node
    for child in (getattr(node, "children", None) or {}).values():
        yield from _walk(child)


def drawn(at: AppTest) -> list[tuple[dict, torch.Tensor, torch.Tensor]]:
    """Every heatmap on the page, in page order (sidebar and main): (header, values, blocked flags)."""
    out = []
    for node in _walk(at._tree):
        proto = getattr(node, "proto", None)
        if getattr(node, "type", None) == "bidi_component" and proto.component_name == COMPONENT:
            out.append(ui.decode_heatmap(proto.bytes))
    return out


def heatmaps(at: AppTest) -> dict[str, tuple[torch.Tensor, list[str], list[str]]]:
    """Each heatmap by title: the matrix it draws (blocked cells 0) and its row and column labels."""
    return {h["title"]: (values, h["rows"], h["cols"]) for h, values, _ in drawn(at)}


def headers(at: AppTest) -> dict[str, dict]:
    """Each heatmap's header by title: kind, labels, colour scale (maxAbs), legend, annotate, selectable."""
    return {h["title"]: h for h, _, _ in drawn(at)}


def frames(at: AppTest) -> dict[str, pd.DataFrame]:
    """Each heatmap by title in long form, one row a cell: i, j, value (blocked cells 0), blocked."""
    out = {}
    for h, values, flags in drawn(at):
        r, c = h["r"], h["c"]
        out[h["title"]] = pd.DataFrame(
            {
                "i": np.repeat(np.arange(r, dtype=np.int32), c),
                "j": np.tile(np.arange(c, dtype=np.int32), r),
                "value": values.reshape(-1).numpy(),
                "blocked": flags.reshape(-1).numpy(),
            }
        )
    return out
