"""The class poll, a learner's view: the instructor's current question, answered from a phone (?room=CODE)."""

import streamlit as st

import ui
from ui.views import poll

st.title("Class poll")
ui.show_url_warnings()
poll.learner()
ui.finish(figures=False)
