"""`python -m attention --train TASK ...`: train the tiny transformer (attention.models.tiny) and print its snapshots.

    python -m attention --train induction --layers 2 --heads 2 --steps 800 --seed 0 --format json
    python -m attention --train induction --layers 1 --steps 3000 --format table
    python -m attention --train induction --fixed --length 8 --save run.json     # the whole run, weights included

One flag a setting of `tiny.Settings` (its declarations: `--d-model` is `d_model`); JSON is
{"settings": {...}, "snapshots": [{"step", "loss", "task_loss", "accuracy", "scores": {"previous_token": [[...]],
"induction": [[...]]}}, ...], "formed": {...} or null, "stopped": null or why}, scores per layer then per head.
Bad values exit with status 2 and one line; a run whose loss becomes NaN prints what it trained, says so, exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from ...basics.params import flag
from ...models import tiny
from .common import Parser, fail, parse


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m attention --train",
        description="Train a tiny attention-only transformer and print its snapshots: loss, loss on the task's "
        "answers, and every head's previous-token and task scores.",
        allow_abbrev=False,
    )
    p.add_argument("--train", dest="task", choices=tiny.TASKS, required=True, help=tiny.SETTINGS["task"].help)
    for name, s in tiny.SETTINGS.items():
        if name == "task":
            continue
        text = f"{s.help} Default {s.default}; {s.bounds()}.".replace("%", "%%")
        if s.kind == "bool":
            p.add_argument(flag(name), action=argparse.BooleanOptionalAction, default=s.default, help=text)
        else:
            kind = int if s.kind == "int" else float
            p.add_argument(flag(name), type=kind, default=s.default, metavar=s.metavar or "X", help=text)
    p.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    p.add_argument("--save", metavar="FILE", help="also write the whole run, weights included, as JSON "
                   "(tiny.Run.from_dict reads it back)")  # fmt: skip
    return p


def summary(run: tiny.Run) -> dict[str, Any]:
    """The run as the command line prints it: settings, each snapshot without its weights, the formed head."""
    formed = run.formed
    return {
        "settings": run.settings.to_dict(),
        "snapshots": [s.to_dict(with_weights=False) for s in run.snapshots],
        "formed": None
        if formed is None
        else {"step": formed.step, "layer": formed.layer, "head": formed.head, "score": formed.score},  # fmt: skip
        "stopped": run.stopped,
    }


def table(run: tiny.Run) -> str:
    """The snapshots as a readable table: one row a snapshot, one column a head's score."""
    s = run.settings
    names = ["previous_token"] + ([s.score_name] if s.score_name != "previous_token" else [])
    heads = [f"L{i}H{j}" for i in range(s.layers) for j in range(s.heads)]
    lengths = (
        f"run length {s.length} (fixed)" if s.fixed else f"run lengths {tiny.TRAIN_LENGTHS[0]}-{tiny.TRAIN_LENGTHS[1]}"
    )
    out = [
        f"{s.task}: {s.layers} layer{'s' * (s.layers != 1)} x {s.heads} head{'s' * (s.heads != 1)}, d_model "
        f"{s.d_model}, AdamW lr {s.lr:g}, batch {s.batch}, {s.steps} steps, seed {s.seed}, {lengths}; "
        f"chance {tiny.CHANCE:.3f} nats",
        "",
        "  ".join(["  step", "  loss", "answers", "right"] + [f"{n[:4]} {h}" for n in names for h in heads]),
    ]
    for snap in run.snapshots:
        scores = [f"{v:9.3f}" for n in names for row in snap.scores[n] for v in row]
        out.append("  ".join([f"{snap.step:6d}", f"{snap.loss:6.3f}", f"{snap.task_loss:7.3f}",
                              f"{snap.accuracy:5.0%}"] + scores))  # fmt: skip
    formed = run.formed
    out.append("")
    if formed is None:
        where = f"a head in layer {s.task_layers.start} or above" if tiny.FIRST_LAYER[s.task] else "a head"
        out.append(f"No head formed ({where} scoring above {tiny.FORMED_SCORE} and the answers' loss below half of "
                   "chance).")  # fmt: skip
    else:
        out.append(f"{formed.name} formed at step {formed.step} ({s.score_name} score {formed.score:.3f}).")
    if run.stopped:
        out.append(f"Stopped: {run.stopped}.")
    return "\n".join(out) + "\n"


def dump_run(run: tiny.Run, f: TextIO) -> None:
    """Write `json.dumps(run.to_dict())` to f a snapshot at a time: the whole run as Python lists of floats is about
    7 times its tensors (a 48 MB run peaked at 899 MiB, issue 38), one snapshot's is 1/500th of that at most."""
    head = {"settings": run.settings.to_dict(), "snapshots": [], "stopped": run.stopped}  # Run.to_dict's order
    text = json.dumps(head)
    before, after = text.split('"snapshots": []', 1)
    f.write(before + '"snapshots": [')
    for i, snapshot in enumerate(run.snapshots):
        f.write(", " if i else "")
        json.dump(snapshot.to_dict(), f)
    f.write("]" + after)


def main(argv: Sequence[str]) -> int:
    args = parse(parser(), argv)
    if isinstance(args, int):
        return args
    values = {name: getattr(args, name) for name in tiny.SETTINGS}
    try:
        settings = tiny.Settings(**values)
    except ValueError as exc:
        return fail(str(exc))
    run = tiny.train(settings)
    if args.save:
        try:
            with open(args.save, "w", encoding="utf-8") as f:
                dump_run(run, f)
        except OSError as exc:
            return fail(f"cannot write {args.save}: {exc.strerror}")
    if args.format == "json":
        json.dump(summary(run), sys.stdout)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(table(run))
    if run.stopped:
        sys.stderr.write(f"{run.stopped}\n")
        return 1
    return 0
