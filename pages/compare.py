"""Placeholder: this page is being written."""

import streamlit as st

import ui

st.title("Coming soon")
st.info("This page is being written.")
ui.finish()
