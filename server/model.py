"""The Real model page's runs as every visitor shares them: MiniLM's Readings of a sentence and its heads' Results,
kept within byte bounds. ui/views/model.py makes and draws them (the numbers are `attention.models.minilm`'s).
"""

from __future__ import annotations

from attention.basics.sizes import held_bytes

from . import budget
from .shared import Shared

# What the page draws of the model on a sentence is a `minilm.Reading`: the hidden states, the rollout, the
# head scores (and every weight up to ui/views/model.py's MODEL_VIEW_MAX tokens), 0.25 MB at 16 tokens, 11 MB at
# 512; every head's matrices are computed from it. One Reading per sentence is made at a time across the server,
# shared by every session that asks for it while it is made or kept: the last CACHE_BYTES of them stay for the next
# visitor.
# Making one is admitted against the server's budget (server.budget), its bytes held there while anything holds it.
CACHE_BYTES = 48 * budget.MB
HEAD_CACHE_BYTES = 24 * budget.MB  # the heads' Results (7 MB at 512 tokens), most recent first
READINGS = Shared(CACHE_BYTES, lambda r: r.nbytes)
HEADS = Shared(HEAD_CACHE_BYTES, held_bytes)
