"""Watch it learn, timed: the default run to the formed head, Play to the first moving curve in Chromium, and another
visitor's rerun while four new trainings run.

    python -m benchmarks.bench_train formed [--seeds 5] [--control]   # tiny.train to the formed head, per seed
    python -m benchmarks.bench_train browser [--runs 3] [--train-in process|thread] [--shots DIR]  # Play -> curve
    python -m benchmarks.bench_train latency [--reruns 15] [--steps 1000]  # another session's rerun: idle, 4 trainings

`formed` trains in this process on one thread (the numbers are the tests'); `--control` adds the 1-layer control's
3,000 steps. `browser` starts `streamlit run dashboard.py` (a fresh server each run; `--train-in` sets
ATTENTION_LAB_TRAIN_IN), opens the page at 1024 x 768 with a seed no run has used, waits 8 s (the page starts and
warms the worker processes on opening; a person reads), clicks Play and counts until the curve has moved: the loss
chart's line holds two points or more (steps 0 and 25) and the page names a snapshot after step 0; then does the same
on a second page for the setting now kept (a class pressing Play on one setting). `latency` keeps one session
rerunning the self-attention page over the
websocket and reports its rerun times with nothing training, then while four other sessions press Play on four new
settings (two train, two queue). A benchmark, not a test: timings vary with the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load() -> str:
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


# --------------------------------------------------------------------------- formed


def bench_formed(seeds: int, control: bool) -> None:
    from attention.models import tiny

    # CPU seconds beside wall seconds: on one thread they are the wall time of a machine with a core to spare, and
    # they hold when the machine is shared (the wall time then grows with the load)
    print(f"| seed | formed at step | wall seconds | CPU seconds | ({load()}) |")
    print("|---|---|---|---|---|")
    took, cpu = [], []
    for seed in range(seeds):
        settings = tiny.Settings(seed=seed)
        t, c = time.perf_counter(), time.process_time()
        run = tiny.train(settings, until=lambda s, settings=settings: tiny.formed(s, settings))
        took.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        print(f"| {seed} | {run.snapshots[-1].step} | {took[-1]:.2f} | {cpu[-1]:.2f} | |", flush=True)
    print(f"median {statistics.median(took):.2f} s wall, {statistics.median(cpu):.2f} CPU s to the formed head; "
          f"max {max(took):.2f} s wall, {max(cpu):.2f} CPU s")  # fmt: skip
    if control:
        settings = tiny.Settings(layers=1, steps=3000, every=250)
        t, c = time.perf_counter(), time.process_time()
        run = tiny.train(settings)
        print(f"1-layer control, 3000 steps: {time.perf_counter() - t:.2f} s wall, {time.process_time() - c:.2f} CPU "
              f"s, formed: {run.formed}, "
              f"best induction score {run.snapshots[-1].score('induction'):.3f}")  # fmt: skip


# --------------------------------------------------------------------------- browser

# the curve has moved: the loss chart's line (Vega's SVG path, "M x,y L x,y ...") holds two points or more (the
# charts are drawn empty before Play), and the page names a snapshot after step 0
MOVED = """() => {
    const line = document.querySelector("[data-testid='stVegaLiteChart'] .mark-line path");
    return (line?.getAttribute("d") || "").split("L").length > 1 && [...document.querySelectorAll(
        "[data-testid=stMarkdownContainer]")].some(e => /Step [1-9][0-9]*: loss/.test(e.innerText));
}"""
WHO = ("first visitor (trains)", "second visitor (the run is kept)")


def bench_browser(runs: int, train_in: str | None, shots: Path | None) -> None:
    from playwright.sync_api import sync_playwright

    from harness import live_server

    if train_in is not None:
        os.environ["ATTENTION_LAB_TRAIN_IN"] = train_in  # the server inherits it
    figures: dict[str, list[float]] = {who: [] for who in WHO}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=live_server.require_chromium(), args=live_server.CHROMIUM_ARGS)
        for run in range(runs):
            port = live_server.free_port()
            server = live_server.start(port, Path("/tmp/bench_train_browser.log"))
            seed = random.randrange(1000, 9999)  # a setting no run on this server has used
            url = f"http://{live_server.LOOPBACK}:{port}/watch_it_learn?train_seed={seed}"
            try:
                for who in WHO:
                    page = browser.new_page(viewport={"width": 1024, "height": 768})  # a context of its own
                    page.goto(url)
                    play = page.get_by_role("button", name="Play")
                    play.wait_for(timeout=120_000)
                    time.sleep(8)  # the workers start when the page opens; a person reads before pressing Play
                    start = time.perf_counter()
                    play.click()
                    page.wait_for_function(MOVED, timeout=300_000, polling=20)
                    figures[who].append(time.perf_counter() - start)
                    print(f"run {run + 1}, Play to the first moving curve, {who}: {1000 * figures[who][-1]:.0f} ms "
                          f"({load()})", flush=True)  # fmt: skip
                    if shots is not None:
                        shots.mkdir(parents=True, exist_ok=True)
                        page.wait_for_selector("text=Trained", timeout=300_000)
                        page.screenshot(path=str(shots / f"watch_it_learn_{run + 1}_{len(figures[who])}.png"),
                                        full_page=True)  # fmt: skip
                    page.close()
            finally:
                live_server.stop(server)
        browser.close()
    mode = os.environ.get("ATTENTION_LAB_TRAIN_IN") or "the server's choice"
    for who, seconds in figures.items():
        ms = sorted(round(1000 * s) for s in seconds)
        print(f"Play to the first moving curve, {who}, training in {mode}: median {statistics.median(ms):.0f} ms "
              f"of {len(ms)} ({', '.join(map(str, ms))})")  # fmt: skip


# --------------------------------------------------------------------------- latency


def press_play(port: int, seed: int, done: dict, steps: int) -> None:
    """One visitor: open the page on a new setting, press Play, then rerun twice a second until trained."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    from benchmarks.load_test import WsClient

    client = WsClient(port, page="watch_it_learn", query=f"train_seed={seed}&train_steps={steps}")
    _, shown = client.rerun()
    play_id = client.buttons["Play"]
    _, shown = client.rerun(states=[WidgetState(id=play_id, trigger_value=True)])
    start = time.perf_counter()
    while True:
        time.sleep(0.5)
        _, shown = client.rerun()
        if any(t.startswith("Trained:") for t in shown["text"]):
            break
    done[seed] = time.perf_counter() - start


def bench_latency(reruns: int, steps: int) -> None:
    from benchmarks import load_test
    from harness import live_server

    _patch_buttons(load_test.WsClient)
    port = live_server.free_port()
    server = live_server.start(port, Path("/tmp/bench_train_latency.log"))
    try:
        observer = load_test.WsClient(port, query="seed=5")
        observer.rerun()
        idle = [observer.rerun()[0] for _ in range(reruns)]
        done: dict[int, float] = {}
        seeds = random.sample(range(1000, 9999), 4)
        threads = [threading.Thread(target=press_play, args=(port, s, done, steps)) for s in seeds]
        for t in threads:
            t.start()
        busy = []
        time.sleep(1.0)
        while any(t.is_alive() for t in threads):
            busy.append(observer.rerun()[0])
            time.sleep(0.2)
        for t in threads:
            t.join()
        after = [observer.rerun()[0] for _ in range(reruns)]
    finally:
        live_server.stop(server)
    med = lambda xs: 1000 * statistics.median(xs)  # noqa: E731
    p90 = lambda xs: 1000 * sorted(xs)[int(0.9 * (len(xs) - 1))]  # noqa: E731
    print(f"another session's rerun (self-attention page), {load()}:")
    print("| while | reruns | median (ms) | p90 (ms) |\n|---|---|---|---|")
    print(f"| nothing trains | {len(idle)} | {med(idle):.0f} | {p90(idle):.0f} |")
    print(f"| 4 new trainings of {steps} steps (2 at a time) | {len(busy)} | {med(busy):.0f} | {p90(busy):.0f} |")
    print(f"| nothing trains (after) | {len(after)} | {med(after):.0f} | {p90(after):.0f} |")
    print("the four trainings, Play to trained: " + ", ".join(f"{s:.1f} s" for s in sorted(done.values())))


def _patch_buttons(cls: type) -> None:
    """WsClient reads sliders and select boxes; the latency benchmark also needs the Play button's widget id."""
    original = cls.rerun

    def rerun(self, widgets=None, states=()):  # noqa: ANN001, ANN202
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        recv = self.ws.recv
        self.buttons = getattr(self, "buttons", {})

        def spy():  # noqa: ANN202
            data = recv()
            if data:
                fwd = ForwardMsg()
                fwd.ParseFromString(data)
                if fwd.WhichOneof("type") == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                    el = fwd.delta.new_element
                    if el.WhichOneof("type") == "button":
                        self.buttons[el.button.label] = el.button.id
            return data

        self.ws.recv = spy
        try:
            return original(self, widgets, states)
        finally:
            self.ws.recv = recv

    cls.rerun = rerun


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("formed", "browser", "latency"))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--control", action="store_true")
    parser.add_argument("--shots", type=Path)
    parser.add_argument("--runs", type=int, default=3, help="browser: fresh servers, one new setting each")
    parser.add_argument("--train-in", choices=("process", "thread"), help="browser: ATTENTION_LAB_TRAIN_IN")
    parser.add_argument("--reruns", type=int, default=15)
    parser.add_argument("--steps", type=int, default=1000, help="latency: each training's steps")
    args = parser.parse_args()
    if args.part == "formed":
        bench_formed(args.seeds, args.control)
    elif args.part == "browser":
        bench_browser(args.runs, args.train_in, args.shots)
    else:
        bench_latency(args.reruns, args.steps)


if __name__ == "__main__":
    main()
