"""The class poll, the projector's view: open a room, show its code and link, ask, watch the split, reveal."""

import streamlit as st

import ui
from ui.views import poll

st.title("Class poll: the projector")
ui.show_url_warnings()
poll.projector()
ui.finish(figures=False)
