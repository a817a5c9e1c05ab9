"""`python -m attention --model tiny ...`: what the heads of the tiny model trained live write
(attention.models.circuits.trained): the same views and JSON as `--model smollm2 --attribution | --composition`, and
a head's OV and QK circuits.

    python -m attention --model tiny --attribution --sentence "abcdeabcd" --target e --format json
    python -m attention --model tiny --composition --seed 3 --steps 800 --format json
    python -m attention --model tiny --ov --layer 1 --head 0            # what the head writes for each token read
    python -m attention --model tiny --qk --layer 1 --head 0            # the last query's scores split by the key
    python -m attention --model tiny --load run.json --attribution      # a run saved by --train ... --save

The model is trained first, on the flags of `tiny.Settings` (as `--train`: `--task`, `--layers`, `--heads`,
`--steps`, `--seed`, ...; defaults: the induction task, 2 layers of 2 heads, 1,000 steps), or read with --load from a
run saved by `--train ... --save`; the views read its last snapshot. Its tokens are letters, one a character: a-z,
A-F, and | the separator; --sentence (white space ignored, up to 65 tokens) defaults to the probe sequence of the
task's run length, as Watch it learn shows it.

--attribution: {"target": {"id", "token"}, "logit", "components": [{"kind": "embed"|"position"|"head", "layer",
"head", "value"}]} at the last token (and "versus" with --versus); the model has no norm and no MLP, so the parts
are the token's embedding, its position's and every head's output, and they sum to the logit exactly.
--composition: {"q", "k", "v": [[...]], "heads": [[layer, head], ...]}, null where the reading head is not in a later
layer (`--model smollm2 --composition`'s contract). --ov: the head's copying score and, for each distinct token of
the sentence, the 5 tokens it writes most. --qk: the last query's score on every key, split by what the key's
residual stream holds (its token, its position, each earlier head's output). Bad values exit 2 with one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import torch

from ...basics.params import flag
from ...models import circuits, tiny
from ...models.circuits import trained
from .circuits import composition_json, strongest_pairs
from .common import Parser, UsageError, fail, parse, printable

NAME = "the tiny model"
VIEWS = ("attribution", "composition", "ov", "qk")
TOP = 5  # tokens shown a source token by --ov
ALPHABET = "a-z, A-F and | (the separator)"


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m attention --model tiny",
        description="Train the tiny attention-only transformer (or --load a saved run), then print what its heads "
        "write: the direct logit attribution, the composition of its heads, a head's OV or QK circuit.",
        allow_abbrev=False,
    )
    p.add_argument("--model", choices=("tiny",), required=True, help="the tiny model trained live (Watch it learn)")
    p.add_argument("--attribution", action="store_true", help="direct logit attribution at the sentence's last "
                   "token: its embedding, its position's, each head's (JSON: target, logit, components)")  # fmt: skip
    p.add_argument("--composition", action="store_true", help="Q-, K- and V-composition of every earlier head into "
                   "every later head (JSON: q, k, v, heads)")  # fmt: skip
    p.add_argument("--ov", action="store_true", help="--layer/--head's OV circuit: its copying score and the tokens "
                   "it writes most for each token of the sentence")  # fmt: skip
    p.add_argument("--qk", action="store_true", help="--layer/--head's scores from the last token, each split by what "
                   "the key carries (its token, its position, earlier heads)")  # fmt: skip
    p.add_argument("--sentence", metavar="TOKENS", help=f"the tokens, one a character: {ALPHABET}; white space is "
                   "ignored (default: the probe sequence of the task's run length)")  # fmt: skip
    p.add_argument("--target", metavar="TOKEN", help="with --attribution: one token (default: the top next token)")
    p.add_argument("--versus", metavar="TOKEN", help="with --attribution: split logit[target] - logit[TOKEN]")
    p.add_argument("--layer", type=int, default=None, metavar="N", help="with --ov or --qk: the layer, from 0 "
                   "(default: the last)")  # fmt: skip
    p.add_argument("--head", type=int, default=0, metavar="N", help="with --ov or --qk: the head, from 0 (default 0)")
    p.add_argument("--load", metavar="FILE", help="read a run saved by `--train ... --save FILE` instead of training")
    p.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    for name, s in tiny.SETTINGS.items():
        text = f"{s.help} Default {s.default}; {s.bounds()}.".replace("%", "%%")
        if s.kind == "bool":
            p.add_argument(flag(name), action=argparse.BooleanOptionalAction, default=s.default, help=text)
        elif s.kind == "choice":
            p.add_argument(flag(name), choices=s.choices, default=s.default, help=text)
        else:
            kind = int if s.kind == "int" else float
            p.add_argument(flag(name), type=kind, default=s.default, metavar=s.metavar or "X", help=text)
    return p


def token_id(text: str, what: str = "--target") -> int:
    """The id of one token of the tiny model given by its name ('a' .. 'F', '|'); ValueError otherwise."""
    if text in tiny.NAMES:
        return tiny.NAMES.index(text)
    raise ValueError(f"{what} {printable(text)!r} is not one token of {NAME}: give exactly one of {ALPHABET}")


def sentence_ids(text: str) -> torch.Tensor:
    """The tokens of a sentence, one a character, white space ignored; ValueError for a character that is no
    token, an empty sentence, or one longer than the position table."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        raise ValueError(f"the sentence has no tokens: give one or more of {ALPHABET}")
    bad = sorted({c for c in chars if c not in tiny.NAMES})
    if bad:
        shown = ", ".join(repr(printable(c)) for c in bad[:5])
        raise ValueError(f"the sentence holds characters that are no token of {NAME} ({shown}): use {ALPHABET}")
    if len(chars) > tiny.MAX_POSITIONS:
        raise ValueError(f"the sentence has {len(chars)} tokens and {NAME} has {tiny.MAX_POSITIONS} positions: "
                         "shorten it")  # fmt: skip
    return torch.tensor([tiny.NAMES.index(c) for c in chars])


def _checked(args: argparse.Namespace) -> list[str]:
    views = [v for v in VIEWS if getattr(args, v)]
    if len(views) != 1:
        raise UsageError("choose one of --attribution, --composition, --ov and --qk")
    if (args.target is not None or args.versus is not None) and not args.attribution:
        raise UsageError("--target and --versus go with --attribution")
    return views


def run_of(args: argparse.Namespace, settings: tiny.Settings | None) -> tiny.Run:
    """The run: read from --load, else trained on the settings' flags (ValueError for a bad file)."""
    if settings is None:
        try:
            with open(args.load, encoding="utf-8") as f:
                run = tiny.Run.from_dict(json.load(f))
        except OSError as exc:
            raise ValueError(f"cannot read {args.load}: {exc.strerror}") from None
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{args.load} is not a run saved by --train ... --save ({type(exc).__name__})") from None
    else:
        run = tiny.train(settings)
    if not run.snapshots:
        raise ValueError("the run has no snapshot")
    return run


def attribution(w: tiny.Weights, heads: int, ids: torch.Tensor, target: str | None, versus: str | None):
    """The attribution at the last token as the command line prints it (ValueError for a token that is not one)."""
    t = trained.trace(w, ids, heads)
    target_id = int(t.logits[-1].argmax()) if target is None else token_id(target)
    versus_id = None if versus is None else token_id(versus, "--versus")
    a = trained.attribution(w, t, target_id, versus_id)
    out: dict[str, Any] = {"target": {"id": target_id, "token": tiny.NAMES[target_id]}, "logit": float(a.logit),
                           "components": circuits.rows(a)}  # fmt: skip
    if versus_id is not None:
        out["versus"] = {"id": versus_id, "token": tiny.NAMES[versus_id]}
    return out


def _head(args: argparse.Namespace, s: tiny.Settings) -> tuple[int, int]:
    layer = s.layers - 1 if args.layer is None else args.layer
    if not 0 <= layer < s.layers:
        raise ValueError(f"--layer must be between 0 and {s.layers - 1} (the run has {s.layers} layers), got {layer}")
    if not 0 <= args.head < s.heads:
        raise ValueError(f"--head must be between 0 and {s.heads - 1} (the run has {s.heads} heads), got {args.head}")
    return layer, args.head


def ov(w: tiny.Weights, s: tiny.Settings, layer: int, head: int, ids: torch.Tensor) -> dict[str, Any]:
    """The head's copying score and the tokens it writes most per distinct token of the sentence."""
    sources = list(dict.fromkeys(ids.tolist()))
    o = trained.head_ov_tokens(w, s.heads, layer, head, sources, k=TOP)
    rows = [
        {"token": tiny.NAMES[src], "self_rank": int(rank),
         "top": [{"token": tiny.NAMES[int(i)], "logit": float(v)} for i, v in zip(ids_, values, strict=True)]}
        for src, rank, ids_, values in zip(sources, o.self_rank, o.top_ids, o.top_values, strict=True)
    ]  # fmt: skip
    return {"layer": layer, "head": head, "copying": float(trained.copying_scores(w, s.heads)[layer, head]),
            "sources": rows}  # fmt: skip


def qk(w: tiny.Weights, s: tiny.Settings, layer: int, head: int, ids: torch.Tensor) -> dict[str, Any]:
    """The last query's score on every key (causal: all of them), each split by the parts of the key's stream."""
    t = trained.trace(w, ids, s.heads)
    last = len(ids) - 1
    keys = []
    for key in range(last + 1):
        split = trained.qk(w, t, layer, head, last, key)
        keys.append({"key": key, "token": tiny.NAMES[int(ids[key])], "score": float(split.score),
                     "parts": dict(zip(split.names, split.parts.tolist(), strict=True))})  # fmt: skip
    return {"layer": layer, "head": head, "query": last, "keys": keys}


def _labels(ids: torch.Tensor) -> str:
    return "".join(tiny.labels(ids.tolist()))


def attribution_table(out: dict[str, Any], ids: torch.Tensor) -> str:
    target = out["target"]["token"]
    what = f"logit[{target!r}]" + (f" - logit[{out['versus']['token']!r}]" if "versus" in out else "")
    lines = [f"{NAME}: direct logit attribution of {what} = {out['logit']:.3f} after {_labels(ids)!r}", ""]
    for c in sorted(out["components"], key=lambda c: -abs(c["value"])):
        name = {"embed": "token", "position": "position"}.get(c["kind"], f"L{c['layer']}H{c['head']}")
        lines.append(f"  {name:<10} {c['value']:+9.3f}")
    return "\n".join(lines) + "\n"


def ov_table(out: dict[str, Any]) -> str:
    lines = [f"{NAME}: L{out['layer']}H{out['head']}'s OV circuit, copying score {out['copying']:+.3f}", ""]
    for row in out["sources"]:
        top = ", ".join(f"{t['token']} {t['logit']:+.2f}" for t in row["top"])
        lines.append(f"  reads {row['token']}: writes {top} (itself ranks {row['self_rank'] + 1})")
    return "\n".join(lines) + "\n"


def qk_table(out: dict[str, Any]) -> str:
    lines = [f"{NAME}: L{out['layer']}H{out['head']}'s scores from token {out['query']}, split by the key", ""]
    for k in out["keys"]:
        parts = ", ".join(f"{name} {v:+.2f}" for name, v in k["parts"].items())
        lines.append(f"  key {k['key']:>2} {k['token']}: {k['score']:+7.3f} = {parts}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    """Run `--model tiny`; 0, or 2 with one line for bad input."""
    args = parse(parser(), argv)
    if isinstance(args, int):
        return args
    try:
        (view,) = _checked(args)
        if args.target is not None:  # a bad token is said before a training run, not after it
            token_id(args.target)
        if args.versus is not None:
            token_id(args.versus, "--versus")
        ids = None if args.sentence is None else sentence_ids(args.sentence)
        settings = None if args.load else tiny.Settings(**{name: getattr(args, name) for name in tiny.SETTINGS})
        if settings is not None and view in ("ov", "qk"):
            _head(args, settings)  # a head the model has not: said before training it
        run = run_of(args, settings)
        s, w = run.settings, run.snapshots[-1].weights
        ids = tiny.probe(s).ids[0] if ids is None else ids
        if view == "composition":
            c = trained.head_composition(w, s.heads)
            out: Any = composition_json(c) if args.format == "json" else strongest_pairs(c, NAME)
        elif view == "attribution":
            out = attribution(w, s.heads, ids, args.target, args.versus)
            out = out if args.format == "json" else attribution_table(out, ids)
        else:
            layer, head = _head(args, s)
            out = (ov if view == "ov" else qk)(w, s, layer, head, ids)
            out = out if args.format == "json" else (ov_table if view == "ov" else qk_table)(out)
    except (UsageError, ValueError) as exc:
        return fail(str(exc))
    if isinstance(out, str):
        sys.stdout.write(out)
    else:
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
    return 0
