"""The experiments the dashboard's lessons draw, one module a lesson: pure functions over Configs, Results
and tensors, on top of `attention.basics` (no Streamlit).
"""
