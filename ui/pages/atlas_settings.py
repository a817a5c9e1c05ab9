"""The Head atlas page's settings, registered with `ui.state` when `ui` is imported.

They are declared with the atlas's scores (attention/lessons/atlas/scores.py) and travel under the atlas_ prefix.
"""

from __future__ import annotations

from attention.lessons import atlas

from .. import state

PREFIX = "atlas_"  # the page's parameters in the URL: atlas_model, atlas_x, ...

state.register("atlas", atlas.SETTINGS, prefix=PREFIX, long={"text": "the atlas's text"})
