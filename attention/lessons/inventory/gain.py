"""Did the room learn: pre- and post-test scores, Hake's normalised gain, and the items' classical statistics.

A sheet is one browser's responses to one test, {item id: (answer, reason)}, graded against that test's forms
(two-tier: an item counts only when the answer and the reason are both right). Pre and post are paired by the
anonymous token alone; a token with only one of the two tests is counted in that test's item statistics but not in
the gain. Nothing is reported for fewer than MIN_PAIRS pairs (a smaller group's answers could be told apart).

    g for a learner  = (post - pre) / (max - pre)                      undefined when pre is full marks
    ⟨g⟩ for a room   = (⟨post⟩ - ⟨pre⟩) / (max - ⟨pre⟩)                 Hake (1998): over the paired class averages
    difficulty p     = the share of learners right on the item          (a higher p is an easier item)
    discrimination   = the point-biserial correlation of the item (0/1) with the rest of the test's score
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from .item import Form

MIN_PAIRS = 5

Response = tuple[int | None, int | None]  # (answer index, reason index); None: left out
Sheet = Mapping[str, Response]  # item id -> response


class ItemGain(NamedTuple):
    """One item over the paired learners: the share right before and after, and its own normalised gain."""

    item: str
    idea: str
    pre: float
    post: float
    gain: float | None  # None when every learner was right before


class Misconception(NamedTuple):
    """How many paired learners chose a misconception's answer or reason, before and after."""

    item: str
    misconception: str
    pre: int
    post: int


class ItemStatistics(NamedTuple):
    """Classical test statistics of one item on one test."""

    item: str
    learners: int
    difficulty: float  # p, the share right
    discrimination: float | None  # corrected point-biserial; None when the item or the rest does not vary


class Report(NamedTuple):
    """The room's gain over its paired learners (None fields and empty tuples below MIN_PAIRS)."""

    pairs: int
    pre_only: int
    post_only: int
    shown: bool  # pairs >= MIN_PAIRS
    pre_mean: float | None  # share of items right, 0..1
    post_mean: float | None
    gain: float | None  # Hake's ⟨g⟩
    items: tuple[ItemGain, ...]
    misconceptions: tuple[Misconception, ...]
    pre_statistics: tuple[ItemStatistics, ...]
    post_statistics: tuple[ItemStatistics, ...]


def marks(forms: Sequence[Form], sheet: Sheet) -> list[int]:
    """1 or 0 per form: both tiers right."""
    out = []
    for form in forms:
        answer, reason = sheet.get(form.item, (None, None))
        out.append(int(form.grade(answer, reason).right))
    return out


def normalised_gain(pre: float, post: float, top: float = 1.0) -> float | None:
    """(post - pre) / (top - pre); None when pre is already top (no room to gain)."""
    return None if top - pre <= 1e-12 else (post - pre) / (top - pre)


def point_biserial(item: Sequence[int], rest: Sequence[float]) -> float | None:
    """Pearson's correlation of a 0/1 item with a score (the point-biserial); None when either does not vary."""
    n = len(item)
    if n < 2:
        return None
    mi, mr = sum(item) / n, sum(rest) / n
    si = math.sqrt(sum((x - mi) ** 2 for x in item) / n)
    sr = math.sqrt(sum((x - mr) ** 2 for x in rest) / n)
    if si == 0 or sr == 0:
        return None
    return sum((x - mi) * (y - mr) for x, y in zip(item, rest, strict=True)) / (n * si * sr)


def statistics(forms: Sequence[Form], sheets: Sequence[Sheet]) -> tuple[ItemStatistics, ...]:
    """Each item's difficulty and discrimination (against the rest of the test, the item left out) over sheets."""
    scored = [marks(forms, s) for s in sheets]
    out = []
    for k, form in enumerate(forms):
        item = [row[k] for row in scored]
        rest = [sum(row) - row[k] for row in scored]
        p = sum(item) / len(item) if item else 0.0
        out.append(ItemStatistics(form.item, len(item), p, point_biserial(item, rest)))
    return tuple(out)


def report(pre_forms: Sequence[Form], post_forms: Sequence[Form], pre: Mapping[str, Sheet],
           post: Mapping[str, Sheet]) -> Report:  # fmt: skip
    """The room's report from each test's sheets by token; pairs are the tokens that took both."""
    if [f.item for f in pre_forms] != [f.item for f in post_forms]:
        raise ValueError("the pre- and post-test must ask the same items, in the same order")
    paired = sorted(set(pre) & set(post))
    pre_only, post_only = len(set(pre) - set(post)), len(set(post) - set(pre))
    if len(paired) < MIN_PAIRS:
        return Report(len(paired), pre_only, post_only, False, None, None, None, (), (), (), ())
    n_items = len(pre_forms)
    before = [marks(pre_forms, pre[t]) for t in paired]
    after = [marks(post_forms, post[t]) for t in paired]
    pre_mean = sum(map(sum, before)) / (len(paired) * n_items)
    post_mean = sum(map(sum, after)) / (len(paired) * n_items)
    items = []
    for k, form in enumerate(pre_forms):
        a = sum(row[k] for row in before) / len(paired)
        b = sum(row[k] for row in after) / len(paired)
        items.append(ItemGain(form.item, form.idea, a, b, normalised_gain(a, b)))
    fell = []
    for f_pre, f_post in zip(pre_forms, post_forms, strict=True):
        names = sorted({*f_pre.answer_misconceptions.values(), *f_pre.reason_misconceptions.values()})
        for name in names:
            count_pre = sum(name in f_pre.grade(*pre[t].get(f_pre.item, (None, None))).misconceptions for t in paired)
            count_post = sum(
                name in f_post.grade(*post[t].get(f_post.item, (None, None))).misconceptions for t in paired
            )
            fell.append(Misconception(f_pre.item, name, count_pre, count_post))
    return Report(len(paired), pre_only, post_only, True, pre_mean, post_mean, normalised_gain(pre_mean, post_mean),
                  tuple(items), tuple(fell), statistics(pre_forms, list(pre.values())),
                  statistics(post_forms, list(post.values())))  # fmt: skip


def export(result: Report, fmt: str = "json") -> str:
    """The report as JSON or CSV: counts, shares and statistics only (no tokens, no responses)."""
    if fmt == "json":
        return json.dumps(
            {
                "pairs": result.pairs,
                "pre_only": result.pre_only,
                "post_only": result.post_only,
                "shown": result.shown,
                "pre_mean": result.pre_mean,
                "post_mean": result.post_mean,
                "gain": result.gain,
                "items": [i._asdict() for i in result.items],
                "misconceptions": [m._asdict() for m in result.misconceptions],
                "pre_statistics": [s._asdict() for s in result.pre_statistics],
                "post_statistics": [s._asdict() for s in result.post_statistics],
            },
            indent=2,
        )
    if fmt != "csv":
        raise ValueError(f"unknown format {fmt!r}: json or csv")
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["item", "idea", "pre_right", "post_right", "gain", "pre_difficulty", "pre_discrimination",
                "post_difficulty", "post_discrimination"])  # fmt: skip
    stats = {s.item: s for s in result.pre_statistics}, {s.item: s for s in result.post_statistics}
    for i in result.items:
        a, b = stats[0].get(i.item), stats[1].get(i.item)
        w.writerow([i.item, i.idea, f"{i.pre:.3f}", f"{i.post:.3f}", "" if i.gain is None else f"{i.gain:.3f}",
                    *(("", "") if a is None else (f"{a.difficulty:.3f}", _num(a.discrimination))),
                    *(("", "") if b is None else (f"{b.difficulty:.3f}", _num(b.discrimination)))])  # fmt: skip
    w.writerow(["room", f"{result.pairs} pairs", _num(result.pre_mean), _num(result.post_mean), _num(result.gain)])
    return out.getvalue()


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"
