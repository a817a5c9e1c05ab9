"""Watch it learn with several visitors in Chromium (issue 38): three press Play at once on different large settings,
a fourth queues a run and leaves, and a later visitor at a large setting is told before Play that it cannot be kept.

    python -m benchmarks.kept_runs [--steps 1000] [--every 5] [--batch 4] [--kept-mb MB] [--train-in thread]
                                   [--shots DIR]

Starts `streamlit run dashboard.py` and drives one browser context a visitor (each its own Streamlit session):

1. A, B and C open 3 layers x 4 heads x d_model 64 with seeds 1, 2 and 3 (44 MB kept each at 1000 steps, a snapshot
   every 5) and press Play together; D opens a small setting, presses Play (it queues behind them) and closes its
   tab; after GRACE_S and a sweep, E opens D's setting and reads whether D's run is still there.
2. Once A, B and C are trained, F opens seed 4 at the same size and reads what is said beside Play; A, B and C each
   press Reset and read whether their run is still shown.
3. A closes its tab; F, touching nothing, waits for Play to come back on by itself, presses it, and B and C read
   their runs again.

On a loaded machine the largest runs take long: `--steps 200 --kept-mb 30` plays the same at a fifth of the size
(9.2 MB a run; the server keeps 30 MB, $ATTENTION_LAB_KEPT_MB: three fit, a fourth does not), and `--train-in thread`
trains as the hosted copy does (in the server's process, one run at a time, $ATTENTION_LAB_TRAIN_IN).

What each visitor read is printed as it happens; a run, not a test (the tests are tests/unit/server and
tests/app/test_watch_it_learn_visitors.py). Before issue 38, two of the three runs were deleted as they finished.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LARGE = {"train_layers": 3, "train_heads": 4, "train_d_model": 64}


def text(page) -> str:  # noqa: ANN001
    return page.get_by_test_id("stMain").inner_text()


def status(page) -> str:  # noqa: ANN001
    """The page's first sentence about its run (the status box, or the note beside Play)."""
    for line in text(page).splitlines():
        if line.startswith(("Trained:", "Training:", "Queued:", "Press Play", "This run would keep", "Cancelled:")):
            return line.strip()
    return "(no status)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--kept-mb", type=float, default=None)
    ap.add_argument("--train-in", choices=("process", "thread"), default=None)
    ap.add_argument("--shots", type=Path, default=None)
    args = ap.parse_args()
    if args.kept_mb is not None:  # the server (and this script's reading of KEPT_BYTES) inherit them
        os.environ["ATTENTION_LAB_KEPT_MB"] = str(args.kept_mb)
    if args.train_in is not None:
        os.environ["ATTENTION_LAB_TRAIN_IN"] = args.train_in

    from playwright.sync_api import sync_playwright

    from attention.models import tiny
    from harness import live_server
    from server.training import GRACE_S, KEPT_BYTES, SWEEP_S
    from ui.views.watch_it_learn import ROOM_CHECK_S

    size = {**LARGE, "train_steps": args.steps, "train_every": args.every, "train_batch": args.batch}
    bytes_ = tiny.Settings(**{k[6:]: v for k, v in size.items()}).run_bytes
    print(f"each large run keeps {bytes_ / 2**20:.1f} MB; kept runs may hold {KEPT_BYTES / 2**20:.0f} MB; "
          f"training in {os.environ.get('ATTENTION_LAB_TRAIN_IN') or 'the server-chosen mode'}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)  # fmt: skip
    port = live_server.free_port()
    server = live_server.start(port, Path("/tmp/kept_runs.log"))
    base = f"http://{live_server.LOOPBACK}:{port}/watch_it_learn?"
    t0 = time.perf_counter()

    def say(who: str, what: str) -> None:
        print(f"{time.perf_counter() - t0:6.1f} s  {who}: {what}", flush=True)

    def link(**params: object) -> str:
        return base + "&".join(f"{k}={v}" for k, v in params.items())

    def shot(page, name: str) -> None:  # noqa: ANN001
        if args.shots is not None:
            args.shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.shots / f"{name}.png"), full_page=True)

    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=live_server.require_chromium(), args=live_server.CHROMIUM_ARGS)

            def visit(who: str, **params: object):  # noqa: ANN202
                context = browser.new_context(viewport={"width": 1024, "height": 768})
                context.set_default_timeout(300_000)  # a loaded machine: the 30 s default failed at load 37
                page = context.new_page()
                page.goto(link(**params))
                page.get_by_role("button", name="Play").wait_for(timeout=180_000)
                time.sleep(2)
                say(who, f"opened {params.get('train_seed')}: {status(page)}")
                return context, page

            pages = {who: visit(who, **size, train_seed=seed) for who, seed in (("A", 1), ("B", 2), ("C", 3))}
            for _, page in pages.values():
                page.get_by_role("button", name="Play").click()
            small = {"train_steps": 200, "train_seed": 77}
            d_context, d = visit("D", **small)
            d.get_by_role("button", name="Play").click()
            time.sleep(3)
            for who, (_, page) in pages.items():
                say(who, status(page))
            say("D", status(d))
            d_context.close()
            say("D", "closed the tab")
            time.sleep(GRACE_S + 2 * SWEEP_S + 3)
            e_context, e = visit("E", **small)
            say("E", f"D's setting {'is gone (cancelled)' if 'Press Play' in status(e) else 'is still there'}")
            e_context.close()

            for who, (_, page) in pages.items():
                page.wait_for_function("document.body.innerText.includes('Trained:')", timeout=1_800_000,
                                       polling=1000)  # fmt: skip
                say(who, status(page))
            shot(pages["C"][1], "kept_C_trained_1024")
            f_context, f = visit("F", **size, train_seed=4)
            play_off = f.get_by_role("button", name="Play").is_disabled()
            say("F", f"Play {'off' if play_off else 'on'}; beside it: {status(f)}")
            shot(f, "kept_F_refused_1024")
            f.set_viewport_size({"width": 1400, "height": 900})
            time.sleep(1)
            shot(f, "kept_F_refused_1400")
            for who, (_, page) in pages.items():
                page.get_by_role("button", name="Reset").click()
                time.sleep(2)
                kept = "Trained:" in status(page) and "Step 0" in text(page)
                say(who, f"after Reset: {'its run is there' if kept else 'its run is GONE'} ({status(page)})")

            pages.pop("A")[0].close()
            say("A", "closed the tab")
            left = time.perf_counter()
            play = f.get_by_role("button", name="Play")
            while play.is_disabled() and time.perf_counter() - left < GRACE_S + 2 * SWEEP_S + ROOM_CHECK_S + 30:
                # F does nothing: the page looks again by itself (ui.views.watch_it_learn._wait_for_room)
                time.sleep(0.5)
            play_off = play.is_disabled()
            say("F", f"{time.perf_counter() - left:.0f} s after A left, untouched: Play {'off' if play_off else 'on'}; "
                f"{status(f)}")  # fmt: skip
            if not play_off:
                f.get_by_role("button", name="Play").click()
                time.sleep(3)
                say("F", status(f))
            for who, (_, page) in pages.items():
                page.get_by_role("button", name="Reset").click()
                time.sleep(2)
                kept = "Trained:" in status(page)
                say(who, f"after F's Play: {'its run is there' if kept else 'its run is GONE'} ({status(page)})")
            f_context.close()
            for context, _ in pages.values():
                context.close()
            browser.close()
    finally:
        live_server.stop(server)


if __name__ == "__main__":
    main()
