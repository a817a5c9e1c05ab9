"""Watch it learn's settings, registered with `ui.state` when `ui` is imported.

They are the tiny model's training settings (attention/models/tiny/settings.py) under the train_ prefix: its heads,
seed and d_model are not the attention Config's. Apart from ui/views/watch_it_learn.py, which imports pandas.
"""

from __future__ import annotations

from attention.models import tiny

from .. import state

PREFIX = "train_"  # the page's parameters in the URL: train_layers, train_seed, ...

state.register("watch_it_learn", tiny.SETTINGS, prefix=PREFIX)
