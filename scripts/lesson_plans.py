"""Write the course's printable lesson plans, one page a lesson, into docs/course/ from ui/pages/course/'s lessons.

    python scripts/lesson_plans.py [--out docs/course]

Each plan has the timing, the question as the course asks it on the default setting, what the lab computes there
(computed now by the package, as the course does at the reveal), what to say at the reveal, a common wrong answer
and why, and the "now try" change. Rerun it after changing a lesson; a test checks the files are up to date.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention.lessons import course as questions  # noqa: E402
from ui.pages import course  # noqa: E402


def plan(k: int, lesson: course.Lesson) -> str:
    q = lesson.question
    inputs = questions.inputs_for(q, {})
    truth = q.answer(inputs)
    say, wrong = course.PLANS[lesson.id]
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

**Now try.** {try_words}: the question is asked again on the new numbers.
"""


def render() -> dict[str, str]:
    files = {f"{k + 1:02d}-{lesson.id}.md": plan(k, lesson) for k, lesson in enumerate(course.LESSONS)}
    rows = "\n".join(
        f"| {k + 1} | [{lesson.title}]({k + 1:02d}-{lesson.id}.md) | {lesson.page_title} | {lesson.minutes} |"
        for k, lesson in enumerate(course.LESSONS)
    )
    total = sum(lesson.minutes for lesson in course.LESSONS)
    files["README.md"] = f"""# The course's lesson plans

One printable page a lesson, written by `python scripts/lesson_plans.py` from `ui/pages/course/` (do not edit by hand).
The course itself is the lab's front page: each lesson asks one question on the learner's own sentence before it
draws the answer. Run it from a clicker in presenter mode (`/?present=true`): PageDown moves question → reveal →
next lesson.

| # | lesson | page | minutes |
| --- | --- | --- | --- |
{rows}

About {total} minutes in all.
"""
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "course")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        (args.out / name).write_text(text)
    print(f"wrote {len(course.LESSONS) + 1} files to {args.out}")


if __name__ == "__main__":
    main()
