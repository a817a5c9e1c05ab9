"""Models whose attention the dashboard shows: each one's forward pass is ours, so every intermediate is ours to show.

Importing this package loads nothing: a model's weights are read on first use, once per process.
"""
