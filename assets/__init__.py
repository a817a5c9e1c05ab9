"""The browser's side of the dashboard: the custom components' scripts and styles in this folder, declared to
Streamlit here.

Apart from `ui` (which imports torch), so that dashboard.py can show the heatmap component before `import ui` has
finished on a fresh server: the browser then fetches the component's scripts while torch is imported, not after
the first heatmap arrives (see dashboard.run). `ui.heatmaps` and `ui.walkthroughs` show them.
"""

from pathlib import Path

import streamlit as st

ASSETS = Path(__file__).parent


def _read(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


# fonts.js goes in front of both figure components' scripts: downloaded figures carry the app's font (see there);
# heatmap_keys.js in front of the heatmap's: its keyboard, announcements and table (issue 44)
_FONTS_JS = _read("fonts.js")
# isolate_styles=False: one style sheet, every rule under .al-heatmap; tests and benchmarks read its DOM
HEATMAP = st.components.v2.component(
    "attention_lab.heatmap",
    js=_FONTS_JS + _read("heatmap_keys.js") + _read("heatmap.js"),
    css=_read("heatmap.css"),
    isolate_styles=False,
)
# PNG/SVG buttons on every Vega-Lite chart, and the page's "All figures" archive (the heatmaps have their own buttons)
FIGURES = st.components.v2.component("attention_lab.figures", js=_FONTS_JS + _read("figures.js"), isolate_styles=False)
# step mode's keyboard: a presenter's clicker (PageDown/PageUp) and the arrow keys
STEP_KEYS = st.components.v2.component("attention_lab.step_keys", js=_read("step_keys.js"), isolate_styles=False)
# a link Streamlit drops whole, which only the browser can see (see there and ui.state.dropped_link)
LINK_CHECK = st.components.v2.component("attention_lab.link_check", js=_read("link_check.js"), isolate_styles=False)
# fixes to Streamlit's own markup (its navigation's lists, unnamed icons): dashboard.py shows it on every page
A11Y = st.components.v2.component(
    "attention_lab.a11y", js=_read("a11y.js"), css=_read("a11y.css"), isolate_styles=False
)
