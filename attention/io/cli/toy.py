"""The toy computation's command line: `python -m attention [--preset NAME] [--FIELD VALUE ...]
[--format table|json|script]`.

Every Config field is a flag (`d_k` is `--d-k`), matrices are JSON files, and flags given override the
preset's values. Bad flags or values exit with status 2 and one line on stderr, never a traceback.

    python -m attention --list-presets
    python -m attention --preset chef-causal --format json
    python -m attention --sentence "the cat sat on the mat" --heads 2 --mask causal
    python -m attention --model minilm --layer 3 --head 1 --sentence "The animal didn't cross the street."
    python -m attention --embeddings batch.json --heads 2 --format json   # a (B, T, d) batch: {"batch": [...]}

With --model, the result is one head of a pretrained model (attention.models.minilm) on the sentence: `compute` of
its `head_config`, the model's subword tokens as labels; --layer and --head pick the head (they are not Config
settings), and --sentence is the only setting it takes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ...basics import presets
from ...basics.config import SETTINGS, Config
from ...basics.core import Result, batch_results, compute
from ...basics.params import flag
from .. import export, script
from .common import OUT_OF_MEMORY, OVERFLOW, PROG, Parser, UsageError, fail, parse, printable, render_table
from .inputs import BATCHABLE, READERS, count_words, is_batch, read_inputs, sentence_reader
from .minilm import MODEL_VIEW, model_result

WEIGHT_FIELDS = tuple(name for name, s in SETTINGS.items() if s.when == ("init", "given"))  # w_* and b_*
# --block-size keeps every tile's state (its scores, m, l and output so far) to show them: at most TILE_BYTES of
# them, and MAX_TILES tiles (each a line of output), with TILE_OVERHEAD bytes of Python objects each.
TILE_BYTES = 256 << 20
MAX_TILES = 1 << 14
TILE_OVERHEAD = 2048


# all-MiniLM-L6-v2 (attention.models.minilm); smollm2: attention.io.cli.smollm2; tiny: attention.io.cli.tiny_circuits
MODELS = ("minilm", "smollm2", "tiny")


def parser() -> argparse.ArgumentParser:
    """The command line, one flag a declared setting (attention.basics.params): its kind gives the type, choices or
    file reader, its help the text, and a setting used only with another's value says that it implies it."""
    p = Parser(
        prog=f"python -m {PROG}",
        description="Attention one step at a time: every intermediate of self-, masked, multi-head and "
        "cross-attention. Flags override the preset's values.",
        allow_abbrev=False,
    )
    p.add_argument("--list-presets", action="store_true", help="list the presets and exit")
    p.add_argument("--preset", metavar="NAME", help="start from a tutorial preset (see --list-presets)")
    p.add_argument(
        "--format", choices=("table", "json", "script"), default="table", help="table (default), json, or script"
    )
    how = p.add_argument_group("how LLMs run it (output modes, not Config settings)").add_argument
    how("--decode", action="store_true", help="generate the tokens one at a time with a KV cache: each step's "
        "one row of weights, its context, the cache size and the work; needs a causal or window mask (implies "
        "--mask causal when no mask is given)")  # fmt: skip
    how("--block-size", type=int, metavar="B", help="FlashAttention's tiled online softmax over blocks of B keys: "
        "every tile's running max m and sum l, and the largest difference from the ordinary softmax")  # fmt: skip
    p.add_argument(
        "--train",
        metavar="TASK",
        help="train a tiny transformer (induction, reverse, sort, previous_token) "
        "and print its snapshots; its own flags: python -m attention --train induction --help",
    )
    real = p.add_argument_group("a pretrained model's head (not Config settings)").add_argument
    real("--model", choices=tuple(MODELS), help="one head of all-MiniLM-L6-v2 on --sentence, instead of a toy; "
         "smollm2: SmolLM2-135M-Instruct; tiny: the tiny model trained live, its circuits (their own flags: "
         "python -m attention --model smollm2 --help, --model tiny --help)")  # fmt: skip
    real("--layer", type=int, metavar="N", help=f"with --model: the layer, from 0 (default {MODEL_VIEW[0]})")
    real("--head", type=int, metavar="N", help=f"with --model: the head, from 0 (default {MODEL_VIEW[1]})")
    add = p.add_argument_group("config (defaults: the Raschka tutorial)").add_argument
    for name, s in SETTINGS.items():
        text = s.help.replace("%", "%%")  # argparse formats help with %
        if s.when is not None:
            text += f" (implies {flag(s.when[0])} {s.when[1]})"
        if name in BATCHABLE:
            text += " A (B, T, d) list of such matrices is a batch: every sequence with the same weights."
        if s.kind == "bool":
            add(flag(name), action=argparse.BooleanOptionalAction, help=text)
        elif s.kind == "choice":
            add(flag(name), choices=s.choices, help=text)
        elif s.kind in ("int", "float"):
            add(flag(name), type=int if s.kind == "int" else float, metavar=s.metavar or "X", help=text)
        else:
            add(flag(name), metavar=s.metavar, help=text)
        if s.kind == "text":
            # a sentence in a file never passes through a shell: the mask editor's command reads them from its mask.json
            where = f'its text, or a .json file\'s string or "{name}" entry'
            add(flag(name) + "-file", dest=name, type=sentence_reader(name), metavar="FILE",
                help=f"{flag(name)} from a file: {where}")  # fmt: skip
    return p


def build_config(args: argparse.Namespace) -> Config:
    """The preset's config (or the defaults) with every flag that was given put over it (`build`)."""
    return build(args)[0]


Batch = tuple[torch.Tensor, torch.Tensor | None]  # (B, T_q, d_model) inputs and (B, T_k, d_kv) key inputs or None


def build(args: argparse.Namespace) -> tuple[Config, Batch | None]:
    """The preset's config (or the defaults) with every flag that was given put over it, and the batch when
    --embeddings (or --cross-embeddings) holds one: the config then has the batch's first sequence.

    A setting used only with another's value (attention.basics.params: `when`) implies that value when it is the only
    one given for it: --temperature implies --scale temperature, --padding --mask padding, --w-query --init given.
    A preset's own matrices give way to flags they no longer fit: a new sentence of another length drops
    the preset's embeddings (keeping their width), new embeddings drop words that no longer label them,
    and an init other than 'given' drops the preset's given weights.
    """
    base = presets.get(args.preset).config if args.preset else Config()
    changes: dict[str, Any] = {}
    for name, s in SETTINGS.items():
        value = getattr(args, name)
        if value is not None:
            reader = read_inputs if name in BATCHABLE else READERS.get(s.kind)
            changes[name] = reader(value, flag(name)) if reader else value
    batch = _batch(changes.get("embeddings"), changes.get("cross_embeddings"))
    if batch is not None:
        changes["embeddings"] = batch[0][0].tolist()
        if batch[1] is not None:
            changes["cross_embeddings"] = batch[1][0].tolist()
    if args.embeddings is not None and args.d_model is None:
        changes["d_model"] = None  # the given embeddings' width
    for matrix, text in (("embeddings", "sentence"), ("cross_embeddings", "cross_sentence")):
        if matrix in changes and text not in changes and count_words(getattr(base, text)) != len(changes[matrix]):
            changes[text] = None  # labelled x1..xT (y1..yT) instead
        rows = getattr(base, matrix)
        if text in changes and matrix not in changes and rows is not None and count_words(changes[text]) != len(rows):
            changes[matrix] = None  # drawn for the new words instead
            if matrix == "embeddings" and args.d_model is None:
                changes["d_model"] = base.width
    if args.custom_mask is not None and args.mask not in (None, "custom"):
        raise UsageError(f"--custom-mask gives a custom mask, but --mask says {args.mask}: leave one out")
    implied: dict[str, set[str]] = {}
    for name in changes:
        when = SETTINGS[name].when
        if when is not None and getattr(args, when[0]) is None:
            implied.setdefault(when[0], set()).add(when[1])
    for name, values in implied.items():
        if len(values) == 1:  # --padding and --window together pick no mask: they contradict each other
            changes[name] = values.pop()
    if changes.get("init", base.init) != "given":
        changes.update({name: None for name in WEIGHT_FIELDS if name not in changes})
    return base.replace(**changes), batch


def _batch(inputs: list | None, key_inputs: list | None) -> Batch | None:
    """The batch the input files hold as tensors, or None when neither is one; a batch of keys needs a batch of
    queries of the same size."""
    if not is_batch(inputs) and not is_batch(key_inputs):
        return None
    if not is_batch(inputs):
        raise UsageError("--cross-embeddings holds a batch (B, T_k, d): give --embeddings a batch of the same B too")
    x = torch.tensor(inputs, dtype=torch.float32)  # (B, T_q, d_model)
    if key_inputs is None:
        return x, None
    if not is_batch(key_inputs) or len(key_inputs) != len(x):
        got = f"{len(key_inputs)} sequences" if is_batch(key_inputs) else "one matrix"
        raise UsageError(f"--embeddings holds a batch of {len(x)}, so --cross-embeddings must too; it holds {got}")
    return x, torch.tensor(key_inputs, dtype=torch.float32)  # (B, T_k, d_kv)


def list_presets() -> str:
    width = max(len(name) for name in presets.PRESETS)
    return "".join(f"{p.name:<{width}}  {p.source.seed_file[:3]}  {p.source.title}\n" for p in presets.PRESETS.values())


# output modes -------------------------------------------------------------------------------------


def _write(write: Callable[[], None]) -> int:
    """Run an output mode: 0, or 2 with one line for what it refuses (a mask that cannot decode, a bad block)."""
    try:
        write()
    except (UsageError, ValueError) as exc:
        return fail(str(exc))
    except MemoryError:
        return fail(OUT_OF_MEMORY)
    return 0


def _rows(t: torch.Tensor) -> list:
    return t.tolist()


def write_decode(result: Result, fmt: str) -> None:
    """--decode: every step of generating the tokens with a KV cache (attention.llm.decoding), as text or JSON."""
    from ...llm import decoding

    steps = decoding.decode_result(result)
    tokens = [printable(t) for t in result.tokens]
    if fmt == "json":
        json.dump({"tokens": list(result.tokens), "kv_heads": steps[0].kv_heads, "steps": [
            {"t": s.t, "token": result.tokens[s.t], "allowed": _rows(s.allowed), "weights": _rows(s.weights),
             "context": _rows(s.context), "products": s.products, "cache_bytes": s.cache_bytes} for s in steps
        ]}, sys.stdout)  # fmt: skip
        sys.stdout.write("\n")
        return
    for s in steps:
        sys.stdout.write(f"step {s.t}: token {tokens[s.t]!s} arrives; the cache holds {s.t + 1} token(s), "
                         f"{s.cache_bytes} bytes; {s.products} q.k products\n")  # fmt: skip
        for h in range(s.heads):
            head = f"  head {h + 1} " if s.heads > 1 else "  "
            sys.stdout.write(head + "weights " + " ".join(f"{w:.4f}" for w in s.weights[h].tolist()) + "\n")


def _tiles(t_q: int, t_k: int, block_size: int) -> int:
    return math.ceil(t_q / block_size) * math.ceil(t_k / block_size)


def tile_bytes(t_q: int, t_k: int, heads: int, d_v: int, block_size: int) -> int:
    """What --block-size keeps of every tile (attention.llm.flash.Tile): the allowed mask, the scores, m, l and the
    output so far, and the Python objects around them."""
    per_tile = 4 * heads * (block_size * block_size + 2 * block_size + block_size * d_v) + block_size**2
    return _tiles(t_q, t_k, block_size) * (per_tile + TILE_OVERHEAD)


def write_tiled(result: Result, block_size: int, fmt: str) -> None:
    """--block-size B: FlashAttention's tiles (attention.llm.flash) over the computed queries, keys and values."""
    from ...llm import flash

    if not 1 <= block_size <= len(result.key_tokens):
        raise UsageError(f"--block-size must be from 1 to the {len(result.key_tokens)} keys, got {block_size}")
    t_q, t_k, d_v = len(result.tokens), len(result.key_tokens), result.values.shape[-1]
    if tile_bytes(t_q, t_k, result.heads, d_v, block_size) > TILE_BYTES or _tiles(t_q, t_k, block_size) > MAX_TILES:
        least = next(b for b in range(block_size, t_k + 1) if tile_bytes(t_q, t_k, result.heads, d_v, b) <= TILE_BYTES
                     and _tiles(t_q, t_k, b) <= MAX_TILES)  # fmt: skip
        raise UsageError(
            f"--block-size {block_size} makes {_tiles(t_q, t_k, block_size):,} tiles of {result.heads} head(s), "
            f"{tile_bytes(t_q, t_k, result.heads, d_v, block_size) / 2**20:,.0f} MiB to keep every tile's state "
            f"(at most {MAX_TILES:,} tiles, {TILE_BYTES >> 20} MiB): give --block-size {least} or more"
        )
    tiled = flash.tiled_attention(result.queries, result.keys, result.values, scale=result.scale, mask=result.mask,
                                  block_size=block_size)  # fmt: skip
    ordinary = flash.ordinary_attention(result.queries, result.keys, result.values, scale=result.scale,
                                        mask=result.mask)  # fmt: skip
    difference = float((tiled.output - ordinary).abs().max())
    memory = flash.memory_numbers(len(result.tokens), len(result.key_tokens), block_size, result.heads)
    if fmt == "json":
        json.dump({"block_size": block_size, "largest_difference": difference, "output": _rows(tiled.output),
                   "memory": memory._asdict(), "tiles": [
            {"query_rows": [t.query_rows.start, t.query_rows.stop], "key_cols": [t.key_cols.start, t.key_cols.stop],
             "skipped": t.skipped, "m": _rows(t.m), "l": _rows(t.l)} for t in tiled.tiles
        ]}, sys.stdout)  # fmt: skip
        sys.stdout.write("\n")
        return
    for t in tiled.tiles:
        where = f"queries {t.query_rows.start + 1}-{t.query_rows.stop}, keys {t.key_cols.start + 1}-{t.key_cols.stop}"
        if t.skipped:
            sys.stdout.write(f"{where}: skipped (the mask blocks the whole tile)\n")
            continue
        m = " ".join(f"{x:.4f}" for x in t.m[0].tolist())
        sum_l = " ".join(f"{x:.4f}" for x in t.l[0].tolist())
        sys.stdout.write(f"{where}: m = {m}; l = {sum_l}\n")
    sys.stdout.write(f"largest difference from the ordinary softmax: {difference:.3g}\n")
    sys.stdout.write(f"scores held: {memory.full_scores} numbers ordinary, {memory.tile_scores} a tile\n")


def write_batch(config: Config, batch: Batch, fmt: str) -> int:
    """A batch: every sequence's result, computed and written one at a time (memory: one result). JSON is
    {"batch": [one object per sequence, as --format json writes it]}; a table gives each sequence in turn."""
    inputs, key_inputs = batch
    if fmt == "json":
        sys.stdout.write('{"batch": [')
    for b, result in enumerate(batch_results(config, inputs, key_inputs)):
        if not _finite(result):
            return fail(f"sequence {b + 1}: {OVERFLOW}")
        if fmt == "json":
            sys.stdout.write(", " if b else "")
            export.write_json(result, sys.stdout)
        else:
            sys.stdout.write(("\n" if b else "") + f"sequence {b + 1} of {len(inputs)}\n")
            sys.stdout.write(render_table(result))
    if fmt == "json":
        sys.stdout.write("]}\n")
    return 0


def _finite(result: Result) -> bool:
    return bool(torch.isfinite(result.output).all() and torch.isfinite(result.weights).all())


def run(argv: Sequence[str]) -> int:
    """The toy computation (or --model minilm's head) on argv: 0, or 2 with one line for bad input."""
    args = parse(parser(), argv)
    if isinstance(args, int):
        return args
    if args.list_presets:
        sys.stdout.write(list_presets())
        return 0
    try:
        if args.model is None and (args.layer is not None or args.head is not None):
            raise UsageError(
                f"{'--layer' if args.layer is not None else '--head'} picks a head of --model: add --model minilm"
            )
        if args.decode and args.block_size is not None:
            raise UsageError("--decode and --block-size show two different things: give one")
        mode = "--decode" if args.decode else "--block-size" if args.block_size is not None else None
        if mode and args.format == "script":  # refused before anything is computed
            raise UsageError(f"{mode} writes a table or JSON, not a script")
        if args.decode and args.mask is None and args.window is None and not args.model:
            args.mask = "causal"  # decoding generates left to right
        config, batch = (None, None) if args.model else build(args)
        if batch is not None:
            if mode or args.format == "script":
                raise UsageError(f"{mode or '--format script'} works on one sequence, but --embeddings holds a batch "
                                 f"of {len(batch[0])}: give one (T, d) matrix")  # fmt: skip
            return write_batch(config, batch, args.format)
        if args.format == "script":  # the script computes it: only its config is needed
            config = model_result(args, script=True) if args.model else config
            sys.stdout.write(script.script(config))
            return 0
        result = model_result(args) if args.model else compute(config)
        config = result.config
        if args.decode:
            return _write(lambda: write_decode(result, args.format))
        if args.block_size is not None:
            return _write(lambda: write_tiled(result, args.block_size, args.format))
    except (UsageError, ValueError, OverflowError) as exc:
        return fail(str(exc))
    except MemoryError:
        return fail(OUT_OF_MEMORY)
    except RuntimeError as exc:  # e.g. sizes too large for this machine's memory
        return fail(OUT_OF_MEMORY if "alloc" in str(exc) else f"cannot compute this config: {exc}")
    if not _finite(result):
        return fail(OVERFLOW)
    try:
        if args.format == "json":
            export.write_json(result, sys.stdout)  # streamed: the text can be gigabytes
            sys.stdout.write("\n")
        elif args.format == "script":
            sys.stdout.write(script.script(config))
        else:
            if args.model:
                sys.stdout.write(f"all-MiniLM-L6-v2, layer {args.layer}, head {args.head}\n\n")
            sys.stdout.write(render_table(result, presets.get(args.preset) if args.preset else None))
    except MemoryError:
        return fail(OUT_OF_MEMORY)
    return 0
