"""Attention Lab: the frame. Page config, navigation over pages/, nothing else."""

import streamlit as st

import ui

PAGES = {
    "Attention": [
        ("pages/self_attention.py", "Self-attention", ":material/visibility:", "self-attention"),
        ("pages/masks.py", "Masks and dropout", ":material/grid_on:", "masks"),
        ("pages/multi_head.py", "Multi-head", ":material/view_column:", "multi-head"),
        ("pages/cross_attention.py", "Cross-attention", ":material/compare_arrows:", "cross-attention"),
        ("pages/tutorials.py", "Tutorials", ":material/menu_book:", "tutorials"),
    ],
    "Experiments": [
        ("pages/compare.py", "Compare A/B", ":material/difference:", "compare"),
        ("pages/scaling.py", "Why divide by √d_k", ":material/show_chart:", "scaling"),
        ("pages/pitfalls.py", "Pitfalls", ":material/report:", "pitfalls"),
        ("pages/mask_editor.py", "Mask editor", ":material/edit_square:", "mask-editor"),
        ("pages/soft_lookup.py", "Soft lookup", ":material/bar_chart:", "soft-lookup"),
    ],
}


def run() -> None:
    # An emoji favicon is drawn in the browser; a :material/...: one is fetched from fonts.gstatic.com,
    # and the app must start with no network at all.
    st.set_page_config(page_title="Attention Lab", page_icon="🔎", layout="wide")
    ui.init_state()
    first = PAGES["Attention"][0][0]
    nav = {
        section: [
            st.Page(path, title=title, icon=icon, url_path=url, default=path == first)
            for path, title, icon, url in pages
        ]
        for section, pages in PAGES.items()
    }
    st.navigation(nav).run()


if __name__ == "__main__":
    run()
