"""What a learner waits for at each reveal of the course: from PageDown on a lesson's question to its figure drawn.

    python -m benchmarks.bench_course [--repeats 5] [--json out.json]

Starts `streamlit run dashboard.py` on a free loopback port and drives Debian's Chromium (headless, 1024 x 768, as
a projector) with Playwright. For each lesson, in a fresh page each repeat: open the lesson's link
(`/?lesson=<id>`), wait for its question, press PageDown and time, in the page's own clock, from the key press to
the moment every chart in the main area is drawn (a heatmap's data-drawn, a Vega chart's svg or canvas). The
reference, in the same page: the next PageDown, to the next lesson's question (a rerun that draws no figure), so
the ratio says what the figure costs on top of a rerun. Medians of the repeats are printed.

`--lessons chat_model,watch_it_learn` times only those. Lesson 12 (watch_it_learn) is timed twice: with a seed
nobody has trained each repeat (`train_seed=100+k`: the reveal starts the pool's run and waits for it) and on the
default seed (its run kept by the pool after the first repeat).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from harness import live_server
from ui.views import course

ROOT = Path(__file__).resolve().parents[1]

APP = '[data-testid="stApp"]'
# the figures; a cell question's blank grid (drawn before the reveal, gone after it) is not one
CHARTS = '[data-testid="stMain"] .vega-embed, [data-testid="stMain"] .al-heatmap:not([data-pick="cell"])'
KEYS_JS = "() => window.alStepKeys !== undefined && document.querySelector('.al-step-keys') !== null"
DRAWN_JS = """(sel) => {
    const charts = [...document.querySelectorAll(sel)];
    return charts.length > 0 && charts.every(c => c.classList.contains('al-heatmap')
        ? c.dataset.drawn !== undefined : c.querySelector('svg, canvas'));
}"""


def settle(page) -> None:
    page.wait_for_selector(f'{APP}[data-test-connection-state="CONNECTED"]', timeout=120_000)
    page.wait_for_timeout(150)
    page.wait_for_selector(f'{APP}[data-test-script-state="notRunning"]', timeout=120_000)


def one(
    browser, base: str, lesson: course.Lesson, following: course.Lesson | None, query: str = ""
) -> tuple[float, float | None]:
    page = browser.new_page(viewport={"width": 1024, "height": 768})
    try:
        page.goto(f"{base}/?lesson={lesson.id}{query}")
        page.get_by_text("Commit and see").first.wait_for(timeout=120_000)
        settle(page)
        page.wait_for_function(KEYS_JS, timeout=60_000)  # the clicker's listener is in place
        start = time.perf_counter()
        page.keyboard.press("PageDown")
        page.wait_for_function(DRAWN_JS, arg=CHARTS, timeout=600_000, polling=10)
        reveal = time.perf_counter() - start
        settle(page)
        if following is None:
            return reveal, None
        start = time.perf_counter()
        page.keyboard.press("PageDown")
        page.get_by_role("heading", name=following.title).first.wait_for(timeout=120_000)
        page.get_by_text("Commit and see").first.wait_for(timeout=120_000)
        return reveal, time.perf_counter() - start
    finally:
        page.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--lessons", help="comma-separated lesson ids (default: every lesson)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    port = live_server.free_port()
    proc = live_server.start(port, ROOT / "artifacts" / "bench-course-server.log")
    base = f"http://{live_server.LOOPBACK}:{port}"
    rows = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=live_server.require_chromium(), args=live_server.CHROMIUM_ARGS
            )
            one(browser, base, course.LESSONS[0], None)  # warm: the server's first imports and caches
            lessons = course.LESSONS
            if args.lessons:
                lessons = tuple(course.BY_ID[name] for name in args.lessons.split(","))
            for lesson in lessons:
                k = course.LESSONS.index(lesson)
                following = course.LESSONS[k + 1] if k + 1 < len(course.LESSONS) else None
                timed = [("", lambda r: "")]
                if lesson.id == "watch_it_learn":  # a run nobody trained each repeat, then the kept one
                    timed = [(" (new seed)", lambda r: f"&train_seed={100 + r}"), (" (kept run)", lambda r: "")]
                for label, query in timed:
                    runs = [one(browser, base, lesson, following, query(r)) for r in range(args.repeats)]
                    reveal = statistics.median(r for r, _ in runs)
                    nxt = statistics.median(n for _, n in runs) if following else None
                    rows.append({"lesson": lesson.id + label, "reveal_s": reveal, "next_question_s": nxt,
                                 "reveals": [r for r, _ in runs]})  # fmt: skip
                    ratio = f"{reveal / nxt:.2f}" if nxt else "-"
                    nxt_s = f"{nxt:.3f}" if nxt else "-"
                    every = " ".join(f"{r:.2f}" for r, _ in runs)
                    print(f"{lesson.id + label:28} reveal {reveal:.3f} s ({every})  next question {nxt_s} s  ratio "
                          f"{ratio}", flush=True)  # fmt: skip
            browser.close()
    finally:
        live_server.stop(proc)
    print(f"median reveal over the lessons: {statistics.median(r['reveal_s'] for r in rows):.3f} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
