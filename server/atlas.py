"""The Head atlas's results as every visitor shares them: each atlas pair and SmolLM2's circuit scores on an input,
kept within byte bounds. ui/views/atlas.py makes and draws them (the numbers are `attention.lessons.atlas`'s: the
corpus's and the probe's are read from the package's shipped atlases, a learner's text is computed).
"""

from __future__ import annotations

from . import budget, warmup
from .shared import Shared

# An atlas pair is its scores alone: 2 x 8 scores x 270 heads x 4 bytes, 17 KB. The corpus's and the probe's of
# both models stay (8 pairs), with the last few learners' texts.
ATLASES = Shared(2 * budget.MB, lambda pair: sum(a.nbytes for a in pair))
# SmolLM2's circuit scores on an input (attention.models.circuits): 2 x 270 floats each, a few inputs kept
CIRCUITS = Shared(budget.MB, lambda scores: sum(v.numel() * 4 for v in scores.values()))


@warmup.after_warm
def check_models() -> None:
    """The installed models' files checked against the SHA-256 the shipped atlases are keyed by (about 0.1 s a
    model: SmolLM2's GGUF is 98 MB), once a process, in the warm-up thread: the Head atlas's first visitor finds
    them checked (`attention.lessons.atlas.shipped.verify_installed` remembers a check that passed). A model that
    is missing or altered is left for the page to say."""
    from attention.lessons.atlas import MODELS, shipped
    from attention.models.package import ModelFileError

    for model in MODELS:
        try:
            shipped.verify_installed(model)
        except ModelFileError:
            pass
