"""Given numbers as a Config holds them: matrices as tuples of tuples and vectors as tuples (hashable, so a
Config can be cached), checked rectangular, finite and within bounds on the way in.

A list, tuple, tensor or array is accepted; every error is a ValueError that names the setting.
"""

from __future__ import annotations

import math
from typing import Any

Matrix = tuple[tuple[float, ...], ...]
BoolMatrix = tuple[tuple[bool, ...], ...]
Vector = tuple[float, ...]

# Bounds that keep every intermediate finite in float32 (|omega| < 1e35 even at the largest sizes)
MAX_ABS = 1e6


def as_matrix(value: Any, name: str, *, kind: type = float, blocking: bool = False) -> tuple | None:
    """Turn a list, tuple, tensor or array into a rectangular tuple of tuples.

    blocking: a bias on the scores, where -inf blocks a key and any large negative number nearly does
    (Hugging Face fills blocked cells with the float's lowest value).
    """
    if value is None:
        return None
    if hasattr(value, "tolist"):
        value = value.tolist()
    try:
        rows = tuple(tuple(kind(x) for x in row) for row in value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{name} must be a matrix (a list of rows of numbers): {exc}") from None
    if not rows or not rows[0]:
        raise ValueError(f"{name} is empty: give at least one row with one number")
    width = len(rows[0])
    for i, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(f"{name} is not rectangular: row 0 has {width} entries, row {i} has {len(row)}")
    if blocking:
        if any(math.isnan(x) or x > MAX_ABS for row in rows for x in row):
            raise ValueError(f"{name} holds NaN or numbers above {MAX_ABS:g}: only -inf or large negatives block")
        return rows
    if kind is float and not all(math.isfinite(x) for row in rows for x in row):
        raise ValueError(f"{name} contains NaN or infinite entries")
    if kind is float and any(abs(x) > MAX_ABS for row in rows for x in row):
        raise ValueError(f"{name} has entries beyond ±{MAX_ABS:g}; keep numbers within that range")
    return rows


def as_vector(value: Any, name: str) -> tuple[float, ...] | None:
    """Turn a list, tuple, tensor or array of numbers into a tuple of finite floats."""
    if value is None:
        return None
    if hasattr(value, "tolist"):
        value = value.tolist()
    try:
        numbers = tuple(float(x) for x in value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{name} must be a list of numbers: {exc}") from None
    if not numbers:
        raise ValueError(f"{name} is empty: give at least one number")
    if not all(math.isfinite(x) and abs(x) <= MAX_ABS for x in numbers):
        raise ValueError(f"{name} must hold finite numbers within ±{MAX_ABS:g}")
    return numbers


def strict_bool(x: Any) -> bool:
    """A mask cell: true/false, or 1/0 as JSON writers give them; anything else is refused."""
    if isinstance(x, bool):
        return x
    if isinstance(x, (int, float)) and x in (0, 1):
        return bool(x)
    raise ValueError(f"{x!r} is not true/false or 1/0")
