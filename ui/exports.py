"""Downloads and code: the shown matrices as CSV, the whole result as JSON, and the script that reproduces it.

What belongs here: every file the app offers and the bounds that keep making them cheap on a shared server.
A download button keeps only a small recipe of the config; the file is made when it is clicked.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import shlex
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any

import streamlit as st
import torch

from attention import Config, Result, presets
from attention.basics.config import SETTINGS
from attention.io import export, script
from server import media

from .markup import labels
from .results import compute

MATRICES = {
    "embeddings": ("embeddings", "tokens", "dims"),
    "queries": ("queries", "tokens", "dims"),
    "keys": ("keys", "key_tokens", "dims"),
    "values": ("values", "key_tokens", "dims"),
    "omega": ("omega", "tokens", "key_tokens"),
    "scaled": ("scaled", "tokens", "key_tokens"),
    "weights": ("weights", "tokens", "key_tokens"),
    "context": ("context", "tokens", "dims"),
    "output": ("output", "tokens", "dims"),
}


def matrix_of(result: Result, name: str, head: int) -> tuple[torch.Tensor, list[str], list[str]]:
    """A named 2-D matrix of the result, with its row and column labels."""
    field, rows, cols = MATRICES[name]
    m = getattr(result, field)
    if m.dim() == 3:
        m = m[head]
    row_labels = labels(getattr(result, rows))
    col_labels = labels(getattr(result, cols)) if cols != "dims" else [f"d{k + 1}" for k in range(m.shape[1])]
    return m, row_labels, col_labels


# Every export is made when its button is clicked, in the thread Streamlit serves the click from, and the
# buttons keep only a `_Recipe` of the config: the Result is recomputed through the bounded cache, and nothing
# of it stays with the session. Streamlit would drop the file it serves from its media store once two more script
# runs (of any session) have ended, a fraction of a second on a busy server, before a slow click fetches it:
# `server.media.keep_downloads` keeps every downloadable file KEEP_S seconds longer (KEEP_BYTES at most). The bounds
# below keep one export to a couple of seconds of CPU shared with every other session (JSON is written in pieces so
# other reruns go on between them); anything larger is the command line's job, which streams to a file. What they cost
# when measured: benchmarks/results/2026-11-27-design-figures.md, "Exports".
JSON_MAX_BYTES = 20_000_000
JSON_PLAIN_BYTES = 2_000_000  # a bigger JSON comes gzipped (its digits compress to about 40 %)
CSV_MAX_CELLS = 512 * 512
HEAVY_EXPORT_BYTES = 1_000_000  # exports bigger than this are made one at a time per server
KEPT_CONFIG_NUMBERS = 4096  # a config with more numbers in given matrices is not kept for a download
INPUTS_FILE = "attention_inputs.json"
BUSY = "Other large exports kept this server busy for a minute: try again in a moment."


@dataclass(frozen=True)
class _Recipe:
    """What a download button keeps to rebuild its config when clicked: the config's fields, with a custom
    mask (up to 512 x 512 booleans: 2 MB as tuples) as rows of 0/1 text (256 KB at most)."""

    fields: tuple[tuple[str, Any], ...]
    mask: str = ""

    @classmethod
    def of(cls, config: Config) -> _Recipe | None:
        """The recipe of a config, or None when it carries big given matrices (never from the controls)."""
        given = [getattr(config, n) for n in ("embeddings", "cross_embeddings", "w_query", "w_key", "w_value", "w_out")]
        if sum(len(m) * len(m[0]) for m in given if m) > KEPT_CONFIG_NUMBERS:
            return None
        kept = tuple((f.name, getattr(config, f.name)) for f in dataclass_fields(config) if f.name != "custom_mask")
        rows = config.custom_mask or ()
        return cls(kept, ".".join("".join("1" if c else "0" for c in row) for row in rows))

    def config(self) -> Config:
        mask = [[c == "1" for c in row] for row in self.mask.split(".")] if self.mask else None
        return Config(**dict(self.fields), custom_mask=mask)


def json_size(result: Result) -> int:
    """About how many bytes `export.to_json(result)` writes: ~20 a number, ~6 a true/false (measured)."""
    numbers = (result.embeddings, result.key_embeddings, result.w_query, result.w_key, result.w_value,
               result.b_query, result.b_key, result.b_value, result.queries, result.keys, result.values, result.omega,
               result.scaled, result.weights, result.dropped_weights, result.context, result.concat, result.w_out,
               result.b_out, result.output)  # fmt: skip
    flags = result.mask.numel() * result.heads + result.empty_rows.numel()  # the mask is written once a head
    return 20 * sum(t.numel() for t in numbers if t is not None) + 6 * flags


def _gzipped_json(result: Result) -> bytes:
    """`export.to_json(result)` gzipped, written piece by piece: the whole text is never held. Level 1: a
    tenth bigger than level 9 (digits compress to ~40 % either way), at a third of the time."""
    out = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1, mtime=0) as packed,
        io.TextIOWrapper(packed, "ascii") as text,
    ):
        export.write_json(result, text)
    return out.getvalue()


def _busy(what: str) -> str | bytes:
    """What a click gets while another heavy export is being made: the note, in the file's format."""
    if what == "json.gz":
        return gzip.compress(json.dumps({"busy": BUSY}).encode(), mtime=0)
    return json.dumps({"busy": BUSY}) if what in ("json", "inputs") else BUSY + "\n"


def export_file(what: str, recipe: _Recipe, head: int = 0, heavy: bool = False) -> str | bytes:
    """The file a download button asks for, made now: a matrix's CSV (what: its name in MATRICES), "json",
    "json.gz", or "inputs" (the command line's input file). A heavy one waits for the one being made, up to
    EXPORT_WAIT_S (its Result is admitted against the server's budget as every large Result is); only after
    that is it `_busy`."""
    if heavy and not media.EXPORT_LOCK.acquire(timeout=media.EXPORT_WAIT_S):
        return _busy(what)
    try:
        result = compute(recipe.config())
        if what == "json":
            return export.to_json(result)
        if what == "json.gz":
            return _gzipped_json(result)
        if what == "inputs":
            return export.mask_json(result.mask, result.tokens, result.key_tokens, config=result.config)
        m, rows, cols = matrix_of(result, what, head)
        return export.matrix_csv(m, rows, cols)
    finally:
        if heavy:
            media.EXPORT_LOCK.release()


def command_line(config: Config) -> list[str] | None:
    """The command that writes this config's whole result as JSON: a preset by name, else flags plus the
    inputs file (`export_file("inputs", ...)`: the mask and the sentences, which never pass through a shell).
    None when the command line cannot take the config (given matrices)."""
    preset = next((name for name, p in presets.PRESETS.items() if p.config == config), None)
    try:
        args = ["--preset", preset] if preset else export.cli_args(config, INPUTS_FILE)
    except ValueError:
        return None
    return ["python", "-m", "attention", *args, "--format", "json"]


def downloads(result: Result, head: int = 0, key: str = "dl") -> None:
    """Download the shown head's matrices as CSV and the whole result as JSON, each made when clicked.

    The buttons keep a `_Recipe` of the config, the matrix's name and the head, never the Result. An export
    beyond the bounds above is not offered: a note gives the command line that writes it instead.
    """
    media.keep_downloads()
    recipe = _Recipe.of(result.config)
    if recipe is None:
        st.caption("Downloads are not offered for given matrices this large: use the package in Python.")
        return
    c1, c2, c3 = st.columns([2, 1, 1])
    name = c1.selectbox("Matrix to download", list(MATRICES), key=f"{key}:which")
    csv_size = 11 * matrix_of(result, name, head)[0].numel()  # about 11 characters a cell; a view, no copy
    json_bytes = json_size(result)
    too_big, offered = [], []
    if csv_size <= 11 * CSV_MAX_CELLS:
        offered.append(csv_size)
        make = functools.partial(export_file, name, recipe, head, csv_size > HEAVY_EXPORT_BYTES)
        c2.download_button(
            f"{name}.csv", make, file_name=f"{name}.csv", mime="text/csv", key=f"{key}:csv", on_click="ignore"
        )
    else:
        c2.button(f"{name}.csv", disabled=True, key=f"{key}:csv", help="Too big to download here: see below.")
        too_big.append(f"{name}.csv (≈{csv_size / 1e6:.0f} MB)")
    if json_bytes <= JSON_MAX_BYTES:
        offered.append(json_bytes)
        what = "json.gz" if json_bytes > JSON_PLAIN_BYTES else "json"
        c3.download_button(
            f"result.{what}",
            functools.partial(export_file, what, recipe, head, json_bytes > HEAVY_EXPORT_BYTES),
            file_name=f"attention_result.{what}",
            mime="application/gzip" if what == "json.gz" else "application/json",
            key=f"{key}:json",
            on_click="ignore",
        )
    else:
        c3.button("result.json", disabled=True, key=f"{key}:json", help="Too big to download here: see below.")
        too_big.append(f"result.json (≈{json_bytes / 1e6:,.0f} MB)")
    if any(size > HEAVY_EXPORT_BYTES for size in offered):
        st.caption(
            "Large files are made one at a time on this shared server: while another is being made, yours "
            "follows it (a few seconds)."
        )
    if too_big:
        _command_line_note(result, recipe, too_big, key)


def _command_line_note(result: Result, recipe: _Recipe, too_big: list[str], key: str) -> None:
    """Say what is too big to download here, and give the command line that writes it."""
    what = " and ".join(too_big)
    command = command_line(result.config)
    if command is None:
        st.caption(f"{what}: too big to download here. The package writes it in Python: `export.write_json`.")
        return
    needs_inputs = INPUTS_FILE in command
    source = f", from the inputs saved in {INPUTS_FILE}:" if needs_inputs else ":"
    st.caption(f"{what}: too big to download here. Use the command line: it writes every matrix as JSON{source}")
    st.code(shlex.join(command) + " > attention_result.json", language="bash")
    if needs_inputs:
        heavy = 6 * result.mask.numel() > HEAVY_EXPORT_BYTES  # the mask's true/false dominate
        make = functools.partial(export_file, "inputs", recipe, 0, heavy)
        st.download_button(
            INPUTS_FILE, make, file_name=INPUTS_FILE, mime="application/json", key=f"{key}:inputs", on_click="ignore"
        )


def package_call(config: Config) -> str:
    """The same view in Python with the package: `compute(Config(...))` with every setting that differs from the
    defaults (attention/basics/config.py declares them); matrices and masks are named, not written out."""
    args = []
    for name, value in config.changes().items():
        big = SETTINGS[name].kind in ("matrix", "vector", "mask")
        args.append(f"    {name}=...,  # {SETTINGS[name].label}: the script below writes it out" if big else
                    f"    {name}={value!r},")  # fmt: skip
    call = "Config(\n" + "\n".join(args) + "\n)" if args else "Config()"
    return f"from attention import Config, compute\n\nresult = compute({call})\nresult.weights  # (heads, T_q, T_k)\n"


def code(config: Config) -> None:
    """This view in Python: with the package (`package_call`), and as a standalone PyTorch script."""
    with st.expander("Code: reproduce this view in plain PyTorch"):
        st.caption("With this project's package (`pip install -e .` in a checkout):")
        st.code(package_call(config), language="python")
        st.caption("In plain PyTorch, every step written out:")
        st.code(script.script(config), language="python")
