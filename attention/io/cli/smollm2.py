"""`python -m attention --model smollm2 ...`: one head of SmolLM2-135M-Instruct (attention.models.smollm2), or tokens
generated one at a time with its KV cache.

    python -m attention --model smollm2 --layer 18 --head 0 --sentence "John gave a drink to" --format json
    python -m attention --model smollm2 --layer 3 --head 5 --format table
    python -m attention --model smollm2 --generate 5 --temperature 0      # each step: token, top-5, new attention row
    python -m attention --model smollm2 --attribution --target " Mary" --format json   # what each head writes
    python -m attention --model smollm2 --composition --format json                    # heads reading heads

A head prints the keys of a toy result (`compute` of the head's Config, labelled with the model's tokens); --format
script writes the plain-PyTorch script of that Config. --generate prints, per step, the token chosen, the top-5
candidates with probabilities, the cache's length and bytes, and the new row of attention of --layer/--head
(JSON: {"prompt": [...], "steps": [{"token", "top5", "cache_tokens", "cache_bytes", "weights"}, ...]}).
The flags are smollm2.SETTINGS' (--layer, --head, --temperature, --top-k, --generate) and --sentence for the
prompt; bad values exit with status 2 and one line. --attribution and --composition: `io.cli.circuits`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ...basics.params import flag
from ...models import smollm2
from .. import export, script
from . import circuits
from .common import OUT_OF_MEMORY, Parser, UsageError, fail, parse, render_table

FLAGS = ("layer", "head", "temperature", "top_k", "generate")  # smollm2.SETTINGS offered on the command line


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m attention --model smollm2",
        description=f"One head of {smollm2.NAME} on --sentence (the keys of a toy result), or --generate N tokens one "
        "at a time reading the model's KV cache.",
        allow_abbrev=False,
    )
    p.add_argument("--model", choices=("smollm2",), required=True, help=f"{smollm2.NAME} ({smollm2.INSTALL})")
    p.add_argument(
        "--sentence", metavar="TEXT", default=smollm2.DEFAULT_PROMPT, help="the prompt (default: the page's)"
    )
    p.add_argument("--format", choices=("table", "json", "script"), default="table", help="table (default), json, "
                   "or script (a head only)")  # fmt: skip
    p.add_argument("--attribution", action="store_true", help="direct logit attribution at the prompt's last token: "
                   "the embedding, each head and each MLP (JSON: target, logit, components)")  # fmt: skip
    p.add_argument("--target", metavar="TOKEN", help="with --attribution: the text of exactly one token, leading "
                   "space included (\" River\"); default: the top next token")  # fmt: skip
    p.add_argument("--versus", metavar="TOKEN", help="with --attribution: split logit[target] - logit[TOKEN]")
    p.add_argument("--composition", action="store_true", help="Q-, K- and V-composition of every earlier head "
                   "into every later head (JSON: q, k, v, heads)")  # fmt: skip
    for name in FLAGS:
        s = smollm2.SETTINGS[name]
        text = f"{s.help} Default {s.default}; {s.bounds()}.".replace("%", "%%")
        p.add_argument(flag(name), type=int if s.kind == "int" else float, default=s.default, metavar="N", help=text)
    return p


def _checked(args: argparse.Namespace) -> None:
    for name in FLAGS:
        smollm2.SETTINGS[name].check(flag(name), getattr(args, name))  # ValueError naming the flag and its bounds
    if args.generate and args.format == "script":
        raise UsageError("--generate writes a table or JSON, not a script")
    circuit = [f for f in ("attribution", "composition") if getattr(args, f)]
    if len(circuit) > 1 or circuit and args.generate:
        raise UsageError("choose one of --attribution, --composition and --generate")
    if circuit and args.format == "script":
        raise UsageError(f"--{circuit[0]} writes a table or JSON, not a script")
    if (args.target is not None or args.versus is not None) and not args.attribution:
        raise UsageError("--target and --versus go with --attribution")


def head(model: smollm2.Model, prompt: smollm2.Prompt, layer: int, h: int, fmt: str) -> None:
    run = smollm2.run_ids(model, prompt.ids)
    result = smollm2.head_result(model, run, layer, h, prompt.tokens)
    if fmt == "json":
        export.write_json(result, sys.stdout)
        sys.stdout.write("\n")
    elif fmt == "script":
        sys.stdout.write(script.script(result.config))
    else:
        truncated = f" (the first {smollm2.PAGE_TOKENS} tokens)" if prompt.truncated else ""
        sys.stdout.write(f"{smollm2.NAME}, layer {layer}, head {h} (reads K/V head {h // model.group}){truncated}\n\n")
        sys.stdout.write(render_table(result))


def generate(model: smollm2.Model, prompt: smollm2.Prompt, args: argparse.Namespace) -> None:
    """Each step: the token drawn from the last logits (seeded by the step), then run through the model reading
    the cache; printed as it comes."""
    run = smollm2.run_ids(model, prompt.ids, keep=False)
    steps, tokens = [], list(prompt.tokens)
    if args.format == "table":
        sys.stdout.write(f"{smollm2.NAME}: {args.generate} tokens after {len(prompt.ids)} prompt tokens, "
                         f"attention of layer {args.layer}, head {args.head}\n")  # fmt: skip
    for i in range(args.generate):
        # at temperature 0 (greedy) the top-5 shown are the plain softmax's: one-hot probabilities say nothing
        probabilities = smollm2.next_token_probabilities(run.logits[-1], args.temperature or 1.0, args.top_k)
        top5 = smollm2.top_tokens(model, probabilities, 5)
        token = smollm2.choose(run.logits[-1], args.temperature, args.top_k, seed=i)
        run = smollm2.step(model, run, token)
        row = run.weights[args.layer, args.head, 0]  # (T_k,)
        step = {
            "token": smollm2.labels(model, [token])[0],
            "id": token,
            "top5": [{"token": t, "id": j, "probability": q} for j, t, q in top5],
            "cache_tokens": run.cache.length,
            "cache_bytes": sum(run.cache.layer_bytes()),
            "weights": row.tolist(),
        }
        if args.format == "json":
            steps.append(step)
            continue
        tokens.append(step["token"])
        tops = ", ".join(f"{t!r} {q:.3f}" for _, t, q in top5)
        best = sorted(range(len(row)), key=lambda j: -float(row[j]))[:3]
        sys.stdout.write(
            f"\nstep {i + 1}: {step['token']!r} (top-5: {tops})\n"
            f"  cache: {run.cache.length} tokens, {step['cache_bytes'] / 1024:.0f} KiB\n"
            f"  new row of attention ({len(row)} keys), largest: "
            + ", ".join(f"{j} {tokens[j]!r} {float(row[j]):.3f}" for j in best)
            + "\n"
        )
    if args.format == "json":
        json.dump({"prompt": list(prompt.tokens), "layer": args.layer, "head": args.head, "steps": steps}, sys.stdout)
        sys.stdout.write("\n")


def main(argv: Sequence[str]) -> int:
    """Run `--model smollm2`; 0, or 2 with one line for bad input or a missing model."""
    args = parse(parser(), argv)
    if isinstance(args, int):
        return args
    try:
        _checked(args)
        model = smollm2.load()
        prompt = smollm2.prompt(model, args.sentence, smollm2.PAGE_TOKENS)
        if args.attribution or args.composition:
            circuits.main(model, prompt, args)
        elif args.generate:
            generate(model, prompt, args)
        else:
            head(model, prompt, args.layer, args.head, args.format)
    except (UsageError, ValueError) as exc:  # ModelFileError is a ValueError: it says what to install
        return fail(str(exc))
    except MemoryError:
        return fail(OUT_OF_MEMORY)
    return 0
