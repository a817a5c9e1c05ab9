"""The settings the toy attention pages share, registered with `ui.state` when `ui` is imported.

What belongs here: every setting of `attention.Config` declared with `dashboard=...` (attention/basics/config.py),
under its field name; what those pages show of it (the followed token, the head shown, step mode, presenter mode,
the tutorial preset, the per-head view, Compare's matrix and side B, the scaling page's temperature and seeds); and
the names other shared helpers need (`STAGES`, `B_SIDE`, `SPLIT_DERIVED`). A page with a helper in ui/views/
declares its own settings there.
"""

from __future__ import annotations

from attention import presets
from attention.basics.config import MAX_TOKENS, SETTINGS
from attention.basics.params import Param

from . import state
from .keys import PRESENTER_LABEL

STAGES = ("Embeddings", "Queries, keys, values", "Omega", "Scaling", "Mask", "Softmax", "Context")  # step mode
# Left out (None) while the head layout is split: the dashboard's split layout is nn.MultiheadAttention's, which cuts
# d_model into heads (the package also takes a given d_k in the split layout; the sidebar does not offer it).
SPLIT_DERIVED = ("d_k", "d_v")
B_SIDE = ("d_k", "d_v", "heads", "seed", "mask", "padding", "window", "scale", "temperature")  # Compare A/B

# URL keys of links written before the URL used the Config's field names: read, then written under the new name
RENAMED = {"layout": "head_layout", "cross": "cross_sentence", "cmask": "custom_mask"}
# Texts a link leaves out (the longest first) when it would be too long, and their words
LONG = {"sentence": "the sentence", "cross_sentence": "the key/value sentence", "custom_mask": "the custom mask"}

# The dashboard's own settings: what a page shows, not what attention computes.
VIEW: dict[str, Param] = {
    "token": Param("int", "Token followed", "The query whose row the walkthrough writes out with its numbers.",
                   default=1, lo=0, hi=MAX_TOKENS - 1),  # Raschka follows x_2
    "head": Param("int", "Head shown", "Which head's matrices are drawn.", default=0, lo=0, hi=15),
    "step": Param("int", "Stage", "The stage step mode shows.", default=0, lo=0, hi=len(STAGES) - 1),
    "stepmode": Param("bool", "Step-by-step mode", "One stage at a time, with a sentence to say for each.",
                      default=False),
    # Never in a link: presenter mode is the presenter's screen, not the view (a student who opens the presenter's
    # link gets the ordinary page); `?present=true` still opens it.
    "present": Param("bool", PRESENTER_LABEL, "For a projector: hides the controls and enlarges the type. In the "
                     "link as present=true.", default=False),
    "preset": Param("choice", "Tutorial preset", "The tutorial whose setting and printed numbers are shown.",
                    default=next(iter(presets.PRESETS)), choices=tuple(presets.PRESETS)),
    "headview": Param("choice", "Per-head heatmaps show", "The softmax weights or the raw scores of every head.",
                      default="weights", choices=("weights", "omega")),
    "cview": Param("choice", "Matrix compared", "Which matrix Compare A/B draws side by side.", default="weights",
                   choices=("weights", "omega", "context")),
    "temp": Param("float", "Temperature τ: weights = softmax(omega / τ)", "Divide the scores by τ before the "
                  "softmax: the curves show what √d_k does as a temperature.", default=1.0, lo=0.1, hi=20.0),
    "nseeds": Param("int", "Seeds in the band", "How many seeds each band of the sweep is drawn over.", default=32,
                    lo=2, hi=64),
}  # fmt: skip

state.register("attention", {n: p for n, p in SETTINGS.items() if p.dashboard is not None}, renamed=RENAMED,
               long=LONG)  # fmt: skip
state.register("view", VIEW, unlinked=("present",))
# Compare's side B: A's parameters under a b_ prefix, one seed apart so the page opens on a difference
state.register("compare", {
    **{n: state.PARAMS[n] for n in B_SIDE},
    "seed": state.Control("int", 124, 0, 9999, label=state.PARAMS["seed"].label, help=state.PARAMS["seed"].help),
}, prefix="b_")  # fmt: skip
