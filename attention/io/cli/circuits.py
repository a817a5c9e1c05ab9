"""`python -m attention --model smollm2 --attribution | --composition`: what SmolLM2's heads write.

    python -m attention --model smollm2 --attribution --sentence "The river bank" --target " River" --format json
    python -m attention --model smollm2 --attribution --versus " John"        # logit[target] - logit[versus]
    python -m attention --model smollm2 --composition --format json

--attribution: the direct logit attribution (attention.models.circuits) of --target (default: the top next token)
at the last token of the prompt as the page cuts it (64 tokens). JSON: {"target": {"id", "token"}, "logit",
"components": [{"kind": "embed"|"head"|"mlp", "layer", "head", "value"}]} (and "versus" with --versus: then the
values split logit[target] - logit[versus]); the values sum to "logit".
--composition: Q-, K- and V-composition of all 270 heads. JSON: {"q", "k", "v": [[...]], "heads": [[layer, head],
...]}; q[i][j] is heads[i] (earlier, writing) into heads[j] (later, reading), null when heads[j]'s layer is not
later.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

from ...models import circuits, smollm2
from ...models.circuits import chat


def attribution(model: smollm2.Model, prompt: smollm2.Prompt, target: str | None, versus: str | None) -> dict[str, Any]:
    """The attribution as the command line prints it (ValueError for a --target or --versus of not one token)."""
    t = chat.trace(model, prompt.ids)
    target_id = int(t.logits.argmax()) if target is None else chat.token_id(model, target)
    versus_id = None if versus is None else chat.token_id(model, versus)
    a = chat.attribution(model, t, target_id, versus_id)
    out: dict[str, Any] = {"target": {"id": target_id, "token": smollm2.labels(model, [target_id])[0]},
                           "logit": float(a.logit), "components": circuits.rows(a)}  # fmt: skip
    if versus_id is not None:
        out["versus"] = {"id": versus_id, "token": smollm2.labels(model, [versus_id])[0]}
    return out


def attribution_table(out: dict[str, Any], prompt: smollm2.Prompt, shown: int = 15) -> str:
    """The largest parts first, then what the rest add up to."""
    target = out["target"]["token"]
    what = f"logit[{target!r}]" + (f" - logit[{out['versus']['token']!r}]" if "versus" in out else "")
    rows = sorted(out["components"], key=lambda c: -abs(c["value"]))
    lines = [f"{smollm2.NAME}: direct logit attribution of {what} = {out['logit']:.3f} after "
             f"{len(prompt.ids)} tokens (…{prompt.tokens[-1]!r})", ""]  # fmt: skip
    for c in rows[:shown]:
        name = {"embed": "embedding", "mlp": f"MLP {c['layer']}"}.get(c["kind"], f"L{c['layer']}H{c['head']}")
        lines.append(f"  {name:<10} {c['value']:+9.3f}")
    rest = sum(c["value"] for c in rows[shown:])
    lines.append(f"  {'the rest':<10} {rest:+9.3f}  ({len(rows) - shown} parts)")
    return "\n".join(lines) + "\n"


def composition(model: smollm2.Model) -> dict[str, Any]:
    """The three matrices as lists, null where the reading head is not in a later layer."""
    return composition_json(chat.head_composition(model))


def composition_json(c: circuits.Composition) -> dict[str, Any]:
    """Any model's composition as the command line prints it: {"q", "k", "v": [[...]], "heads": [[layer, head]]}."""

    def matrix(m: torch.Tensor) -> list[list[float | None]]:
        pairs = zip(m.tolist(), c.later.tolist(), strict=True)
        return [[v if ok else None for v, ok in zip(row, oks, strict=True)] for row, oks in pairs]

    return {"q": matrix(c.q), "k": matrix(c.k), "v": matrix(c.v), "heads": [list(h) for h in c.heads]}


def composition_table(model: smollm2.Model, shown: int = 10) -> str:
    """The strongest pairs of each kind."""
    return strongest_pairs(chat.head_composition(model), smollm2.NAME, shown)


def strongest_pairs(c: circuits.Composition, name: str, shown: int = 10) -> str:
    """Any model's strongest pairs of each kind (of the pairs whose reader is in a later layer)."""
    lines = [f"{name}: composition of {len(c.heads)} heads (Elhage et al.), strongest pairs", ""]
    pairs = c.later.nonzero()  # (P, 2): the pairs (i, j) where the scores are defined, in the order of m[c.later]
    for kind in "qkv":
        m = getattr(c, kind)
        top = pairs[m[c.later].argsort(descending=True)[:shown]].tolist()
        names = ", ".join(f"L{c.heads[i][0]}H{c.heads[i][1]}→L{c.heads[j][0]}H{c.heads[j][1]} {float(m[i, j]):.3f}"
                          for i, j in top)  # fmt: skip
        lines.append(f"  {kind.upper()}: {names}")
    return "\n".join(lines) + "\n"


def main(model: smollm2.Model, prompt: smollm2.Prompt, args) -> None:
    """Print --attribution or --composition in args.format (table or json)."""
    if args.composition:
        out = composition(model) if args.format == "json" else composition_table(model)
    else:
        data = attribution(model, prompt, args.target, args.versus)
        out = data if args.format == "json" else attribution_table(data, prompt)
    if isinstance(out, str):
        sys.stdout.write(out)
    else:
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
