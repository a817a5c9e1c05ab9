"""The Head atlas page's settings, registered with `ui.state` when `ui` is imported.

They are declared with the atlas's scores (attention/lessons/atlas/scores.py) and travel under the atlas_ prefix.
Importing server.atlas here registers its models' check with the server's warm-up (done once the server is idle or
the first page drawn), so the Head atlas's first visitor does not wait for a 98 MB SHA-256.
"""

from __future__ import annotations

import server.atlas  # noqa: F401  (registers `server.atlas.check_models` with the warm-up)
from attention.lessons import atlas

from .. import state

PREFIX = "atlas_"  # the page's parameters in the URL: atlas_model, atlas_x, ...

state.register("atlas", atlas.SETTINGS, prefix=PREFIX, long={"text": "the atlas's text"})
