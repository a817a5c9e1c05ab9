"""The Real model page's settings, registered with `ui.state` when `ui` is imported.

Apart from ui/views/model.py, which only the Real model page imports (so that no other page imports the model's
readers): `import ui` reads these declarations.
"""

from __future__ import annotations

from attention.basics.params import Param
from attention.models import interpret

from .. import state

LAYERS, HEADS = 6, 12  # all-MiniLM-L6-v2's

SETTINGS: dict[str, Param] = {
    "layer": Param("int", "Layer", f"Which of the model's {LAYERS} layers.", default=3, lo=0, hi=LAYERS - 1),
    "toy": Param("bool", "Random weights (the toy)", "Swap the selected head's trained weights for random ones of "
                 "the same shape and scale, to see what training changed.", default=False),
    **interpret.SETTINGS,  # the head gallery's, declared with the behaviours it scores
}  # fmt: skip

state.register("model", SETTINGS)
