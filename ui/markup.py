"""Words on the page: user text made inert, axis labels, and one-line explanations.

What belongs here: small helpers that turn tokens and sentences into safe text and labels. Nothing here reads
the parameters or draws a figure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import streamlit as st

from attention.io import export

# ">" is not escaped with a backslash: it becomes &gt; below (a backslash would show the entity).
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~$])")
# GFM turns "http://x", "www.x.y" and "a@x.y" into links after escapes are resolved, so no escape stops it;
# an invisible word joiner (U+2060) before "://" and "@" and after "www" does, and the text looks the same.
_AUTOLINK = re.compile(r"(?=://)|(?=@)|(?<=www)(?=\.)", re.IGNORECASE)


def plain(s: str) -> str:
    """User text made inert for st.markdown: no Markdown, HTML, LaTeX or autolink is interpreted."""
    s = _MD_SPECIAL.sub(r"\\\1", _AUTOLINK.sub("\u2060", s))
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def labels(tokens: Sequence[str]) -> list[str]:
    """Distinct axis labels, position then word ('2 is'), so repeated words stay apart."""
    return export.labels(tokens)


def explain(sentence: str) -> None:
    """One sentence of explanation under a panel."""
    st.caption(sentence)


def dim_labels(n: int) -> list[str]:
    """Column labels of a feature axis: d1 .. dn."""
    return [f"d{k + 1}" for k in range(n)]
