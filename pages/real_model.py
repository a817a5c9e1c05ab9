"""Real model: being written."""

import streamlit as st

import ui

st.title("Real model")
ui.show_url_warnings()
st.info("This page is being written.")
ui.finish()
