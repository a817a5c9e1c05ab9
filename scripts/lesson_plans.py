"""Write the course's printable lesson plans, one page a lesson, into docs/course/ from ui/views/course/'s lessons.

    python -m scripts.lesson_plans [--out docs/course]

Each plan has the timing, the question as the course asks it on the default setting, what the lab computes there
(computed now by the package, as the course does at the reveal), what to say at the reveal, a common wrong answer
and why, the wrong answers the grade refuses, and the "now try" change; 50-minutes.md is the short route for a
50-minute class (ui/views/course/outline.py's SHORT_ROUTE). Rerun it after changing a lesson; a test checks the files
are up to date.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attention.lessons.course import inputs_for
from ui.views import course
from ui.views.course.outline import SHORT_ROUTE

ROOT = Path(__file__).resolve().parents[1]


def plan(k: int, lesson: course.Lesson) -> str:
    q = lesson.question
    inputs = inputs_for(q, {})
    truth = q.answer(inputs)
    say, wrong = course.PLANS[lesson.id]
    refused = "".join(f"\n- {name}: {value:,.4g}" if q.kind == "number" else f"\n- {name}: “{q.choices(inputs)[value]}”"
                      for name, value in q.wrong_answers(inputs).items())  # fmt: skip
    try_words, _ = lesson.now_try(inputs)
    kind = {"choice": "a choice", "cell": "a cell of the query's row", "number": "a number"}[q.kind]
    tolerance = f" (right means {q.tolerance_words()})" if q.kind == "number" else ""
    choices = "".join(f"\n   - {c}" for c in q.choices(inputs)) if q.kind != "number" else ""
    setting = ", ".join(f"{n} = {v}" for n, v in inputs.items())
    think = 2
    reveal = lesson.minutes - 1 - think
    return f"""# Lesson {k + 1} of {len(course.LESSONS)}: {lesson.title}

Page: **{lesson.page_title}** (`/{Path(lesson.page).stem}`) · course link: `/?lesson={lesson.id}` · about
{lesson.minutes} minutes. Clicker: PageDown reveals, PageDown again opens the next lesson.

**Why it matters.** {lesson.why}

| minutes | what happens |
| --- | --- |
| 1 | Read the question aloud; show the inputs (the room may suggest its own sentence). |
| {think} | The room predicts: {kind}{tolerance}. Hands up, or the class poll. |
| {reveal} | PageDown: the figure, the lab's answer, what to say; then the "now try" change. |

**The question** (default setting: {setting}):
{q.prompt(inputs)}{choices}

**What the lab computes on the default setting:** {truth.shown}. {truth.why}
(On any other sentence or setting the course computes it afresh; this line is only the default's.)

**Say at the reveal.** {say}

**A common wrong answer, and why.** {wrong}

**Wrong answers the grade refuses** (on the default setting; on any input where one gives the right answer, it is
right there):{refused}

**Now try.** {try_words}: the question is asked again on the new numbers.
"""


def short_route() -> str:
    """The plan for a 50-minute class: the short route's lessons in the course's order, with a clock."""
    route = [(k, lesson) for k, lesson in enumerate(course.LESSONS) if lesson.id in SHORT_ROUTE]
    taught = sum(lesson.minutes for _, lesson in route)
    opening = (50 - taught) // 2
    clock, rows = opening, []
    for k, lesson in route:
        rows.append(f"| {clock}–{clock + lesson.minutes} | {k + 1}. [{lesson.title}]({k + 1:02d}-{lesson.id}.md) | "
                    f"{lesson.page_title} | {lesson.minutes} |")  # fmt: skip
        clock += lesson.minutes
    left = [f"{k + 1}. {lesson.title}" for k, lesson in enumerate(course.LESSONS) if lesson.id not in SHORT_ROUTE]
    return f"""# A 50-minute class: the short route

{len(route)} of the course's {len(course.LESSONS)} lessons, {taught} minutes of teaching, which leaves {opening} minutes
to open and {50 - taught - opening} to close. The course map marks these lessons as the short route; take them in
this order and PageDown past the others. Each lesson's own plan (linked) has its question, what to say at the reveal
and the wrong answers to expect.

| minute | lesson | page | minutes |
| --- | --- | --- | --- |
| 0–{opening} | Open: the course map, the sentence the room picks, the class poll's code | | {opening} |
{chr(10).join(rows)}
| {clock}–50 | Close: the course map's marks, one question from the room | | {50 - clock} |

Before the class: open lesson 11 once on the projector's server, so that SmolLM2 is loaded before the room waits
for it (a fresh server takes about half a minute).

Left out, for a second session or for the learners at home: {", ".join(left)}.
"""


def render() -> dict[str, str]:
    files = {f"{k + 1:02d}-{lesson.id}.md": plan(k, lesson) for k, lesson in enumerate(course.LESSONS)}
    rows = "\n".join(
        f"| {k + 1} | [{lesson.title}]({k + 1:02d}-{lesson.id}.md) | {lesson.page_title} | {lesson.minutes} | "
        f"{'✓' if lesson.id in SHORT_ROUTE else ''} |"
        for k, lesson in enumerate(course.LESSONS)
    )
    total = sum(lesson.minutes for lesson in course.LESSONS)
    short = sum(lesson.minutes for lesson in course.LESSONS if lesson.id in SHORT_ROUTE)
    files["50-minutes.md"] = short_route()
    files["README.md"] = f"""# The course's lesson plans

One printable page a lesson, written by `python -m scripts.lesson_plans` from `ui/views/course/` (do not edit by hand).
The course itself is the lab's front page: each lesson asks one question on the learner's own sentence before it
draws the answer. Run it from a clicker in presenter mode (`/?present=true`): PageDown moves question → reveal →
next lesson.

| # | lesson | page | minutes | short route |
| --- | --- | --- | --- | --- |
{rows}

About {total} minutes in all. A 50-minute class takes the short route (✓, {short} minutes):
[the plan for 50 minutes](50-minutes.md).
"""
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "course")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        (args.out / name).write_text(text)
    print(f"wrote {len(course.LESSONS) + 2} files to {args.out}")


if __name__ == "__main__":
    main()
