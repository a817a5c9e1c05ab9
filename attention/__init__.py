"""Attention, one step at a time: every intermediate of self-, masked, multi-head and cross-attention.

from attention import Config, compute, presets
result = compute(Config())             # the Raschka tutorial's setting
result.weights[0]                      # (T_q, T_k) softmax weights of head 0

The names below are imported at their first use (PEP 562), so that a module of the package that needs no torch
(`attention.basics.params`, the parameters' declarations) imports without it: the course map's first screen, drawn
while a fresh server still imports torch (dashboard.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the module that defines it (a module's own name: the module)
_EXPORTS = {
    "Batch": ".basics.core",
    "Config": ".basics.config",
    "Result": ".basics.core",
    "compute": ".basics.core",
    "compute_batch": ".basics.core",
    "masks": ".basics.masks",
    "presets": ".basics.presets",
    "tokenize": ".basics.config",
}

__all__ = ["Batch", "Config", "Result", "compute", "compute_batch", "masks", "presets", "tokenize"]

if TYPE_CHECKING:  # what the names are, for readers and tools that follow imports (a test keeps _EXPORTS to it)
    from .basics import masks, presets
    from .basics.config import Config, tokenize
    from .basics.core import Batch, Result, compute, compute_batch


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(_EXPORTS[name], __name__)
    return module if module.__name__.endswith("." + name) else getattr(module, name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
