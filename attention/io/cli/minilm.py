"""`python -m attention --model minilm ...`: one head of all-MiniLM-L6-v2 (attention.models.minilm) on the
sentence, the toy command line's other flags refused.
"""

from __future__ import annotations

import argparse

from ...basics.config import SETTINGS, Config
from ...basics.core import Result
from ...basics.params import flag
from .common import UsageError

MODEL_VIEW = (3, 1)  # the layer and head --model shows by default: the Real model page's opening view


def model_result(args: argparse.Namespace, script: bool = False) -> Result | Config:
    """--model: compute(head_config(...)) of the chosen layer and head on --sentence, labelled with the model's
    subword tokens (with script, the head's config alone). Another Config flag, --preset, or a layer or head out
    of range is a UsageError. The model reads at most its 512 tokens: only the start of a long text is tokenized,
    and of the run only the hidden states are kept (a `Reading`)."""
    if args.preset:
        raise UsageError("--model runs a pretrained model's head; --preset picks a toy tutorial: leave one out")
    given = [flag(name) for name in SETTINGS if name != "sentence" and getattr(args, name) is not None]
    if given:
        raise UsageError(f"{given[0]} is a toy setting; with --model only --sentence, --layer and --head apply")
    from ...models import minilm  # only here: the other commands never read the model

    layer, head = (
        (MODEL_VIEW[0] if args.layer is None else args.layer),
        (MODEL_VIEW[1] if args.head is None else args.head),
    )
    model = minilm.load()
    if not 0 <= layer < len(model.layers):
        raise UsageError(f"--layer must be a layer of the model, 0 to {len(model.layers) - 1}, got {layer}")
    if not 0 <= head < model.heads:
        raise UsageError(f"--head must be a head of the model, 0 to {model.heads - 1}, got {head}")
    args.layer, args.head = layer, head  # for the table's first line
    run = minilm.read(model, minilm.DEFAULT_SENTENCE if args.sentence is None else args.sentence, 0)
    if script:
        return minilm.head_config(model, run, layer, head)
    return minilm.head_result(model, run, layer, head)
