"""The core math of attention: the one Config and its declared settings, the inputs and weights, masks,
positions, `compute` with every intermediate, and what is read off a Result (its size, its shapes, the
tutorials' presets and their printed numbers).

Nothing here imports the other parts of the package; they all stand on this one.
"""
