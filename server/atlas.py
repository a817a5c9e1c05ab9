"""The Head atlas's results as every visitor shares them: each atlas pair and SmolLM2's circuit scores on an input,
kept within byte bounds. ui/pages/atlas.py makes and draws them (the numbers are `attention.lessons.atlas`'s: the
corpus's and the probe's are read from the package's shipped atlases, a learner's text is computed).
"""

from __future__ import annotations

from . import budget
from .shared import Shared

# An atlas pair is its scores alone: 2 x 8 scores x 270 heads x 4 bytes, 17 KB. The corpus's and the probe's of
# both models stay (8 pairs), with the last few learners' texts.
ATLASES = Shared(2 * budget.MB, lambda pair: sum(a.nbytes for a in pair))
# SmolLM2's circuit scores on an input (attention.models.circuits): 2 x 270 floats each, a few inputs kept
CIRCUITS = Shared(budget.MB, lambda scores: sum(v.numel() * 4 for v in scores.values()))
