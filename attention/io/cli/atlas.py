"""`python -m attention --model smollm2 --atlas ...`: every head of a real model scored (attention.lessons.atlas).

    python -m attention --model smollm2 --atlas --format json                  # over the shipped corpus
    python -m attention --model minilm --atlas --sentence "the cat saw the cat" --format table
    python -m attention --model smollm2 --atlas --input repeated --drop-first

JSON: {"model", "input", "drop_first", "texts", "tokens", "missing": [...], "heads": [{"layer", "head",
"kv_group", "previous_token", "first_token", "duplicate_token", "induction", "entropy", "mean_distance"} (MiniLM's
with "special", "sep" and "punctuation"), ...]}, null for a score no query could be averaged over (no repeated token).
The table: one line a head, then the strongest heads and what the atlas says, in sentences.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ...lessons import atlas
from .common import OUT_OF_MEMORY, Parser, fail, parse, printable


def parser() -> argparse.ArgumentParser:
    s = atlas.SETTINGS
    p = Parser(prog="python -m attention --atlas", allow_abbrev=False,
               description="Every head of a real model scored: previous-token, first-token, duplicate, induction, "
               "entropy, mean distance (MiniLM also [CLS]/[SEP] and punctuation).")  # fmt: skip
    p.add_argument("--atlas", action="store_true", required=True, help="print the head atlas")
    p.add_argument("--model", choices=tuple(atlas.MODELS), required=True, help=s["model"].help)
    p.add_argument("--sentence", metavar="TEXT", help=f"score the heads on this text (its first {atlas.MAX_TOKENS} "
                   "tokens) instead of the shipped corpus")  # fmt: skip
    p.add_argument("--input", choices=("corpus", "repeated"), help="without --sentence: the shipped corpus "
                   "(default) or repeated random tokens")  # fmt: skip
    p.add_argument("--drop-first", action="store_true", help=s["drop_first"].help)
    p.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    return p


def write_table(a: atlas.Atlas) -> None:
    names = list(a.scores)
    head = ["head", "kv"] if a.group > 1 else ["head"]
    out = sys.stdout
    out.write(f"{atlas.MODELS[a.model]} on {atlas.INPUTS[a.source]} ({a.texts} texts, {a.tokens} tokens)"
              + (", first token left out" if a.drop_first else "") + "\n\n")  # fmt: skip
    out.write(" ".join(f"{c:>6}" for c in head) + " " + " ".join(f"{n[:15]:>15}" for n in names) + "\n")
    for row in a.rows():
        cells = [atlas.head_name(row["layer"], row["head"])] + ([str(row["kv_group"])] if a.group > 1 else [])
        values = ["—" if row[n] is None else f"{row[n]:.3f}" for n in names]
        out.write(" ".join(f"{c:>6}" for c in cells) + " " + " ".join(f"{v:>15}" for v in values) + "\n")
    if a.missing():
        out.write(f"\n{a.missing_words()}\n")
    out.write("\n" + "\n".join(atlas.top_sentences(a)) + "\n\n" + "\n".join(atlas.findings(a)) + "\n")


def main(argv: Sequence[str]) -> int:
    """Run `--atlas`: 0, or 2 with one line for bad input or a missing model."""
    args = parse(parser(), argv)
    if isinstance(args, int):
        return args
    if args.sentence is not None and args.input:
        return fail("--input picks the corpus or repeated tokens; --sentence scores a text: give one of them")
    source = "text" if args.sentence is not None else args.input or "corpus"
    try:
        a = atlas.model_atlas(args.model, source, args.sentence, args.drop_first)
    except ValueError as exc:  # an empty text; ModelFileError (a ValueError) says what to install
        return fail(printable(str(exc)))
    except MemoryError:
        return fail(OUT_OF_MEMORY)
    if args.format == "json":
        json.dump({"model": a.model, "input": a.source, "drop_first": a.drop_first, "texts": a.texts,
                   "tokens": a.tokens, "missing": a.missing(), "heads": a.rows()}, sys.stdout)  # fmt: skip
        sys.stdout.write("\n")
    else:
        write_table(a)
    return 0
