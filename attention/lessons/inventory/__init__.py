"""The attention inventory: eleven two-tier items, one idea of the course each, drawn as isomorphic twins from a seed,
for a pre-test and a post-test that never show the same twin; and the gain they measure.

    item.py   what an item is (`Item`, its `Draft`, the `Form` a learner sees, `twin(item, seed)`, grading)
    items.py  the eleven items (ITEMS): every right answer computed by the package on the twin's own numbers
    gain.py   scores, Hake's normalised gain for a learner and a room, item difficulty and discrimination

`test(seed, "pre")` and `test(seed, "post")` are the two tests of one seed (a learner's, or a room's).
"""

from __future__ import annotations

from .gain import (
    MIN_PAIRS,
    ItemGain,
    ItemStatistics,
    Misconception,
    Report,
    Response,
    Sheet,
    export,
    marks,
    normalised_gain,
    point_biserial,
    report,
    statistics,
)
from .item import Draft, Form, Graded, Item, Option, twin
from .items import ITEMS

PHASES = ("pre", "post")


def test(seed: int, phase: str) -> tuple[Form, ...]:
    """The forms of one test: every item's twin for this seed and phase. The post-test's twins are drawn from other
    seeds than the pre-test's, and a twin that came out with the same prompt is drawn again."""
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
    forms = []
    for item in ITEMS:
        pre = twin(item, 2 * seed)
        if phase == "pre":
            forms.append(pre)
            continue
        k = 2 * seed + 1
        post = twin(item, k)
        while post.prompt == pre.prompt:
            k += 2 * 10_007  # odd offsets stay clear of every pre-test seed
            post = twin(item, k)
        forms.append(post)
    return tuple(forms)


def by_id(forms: tuple[Form, ...]) -> dict[str, Form]:
    return {f.item: f for f in forms}


__all__ = [
    "ITEMS",
    "MIN_PAIRS",
    "PHASES",
    "Draft",
    "Form",
    "Graded",
    "Item",
    "ItemGain",
    "ItemStatistics",
    "Misconception",
    "Option",
    "Report",
    "Response",
    "Sheet",
    "by_id",
    "export",
    "marks",
    "normalised_gain",
    "point_biserial",
    "report",
    "statistics",
    "test",
    "twin",
]
