"""The head atlas's figures: each model's corpus atlas (in this process, and on a fresh server in the browser), the
memory it takes, and what a learner waits for after typing a 64-token text, in the browser.

    python -m benchmarks.bench_atlas                  # in-process: corpus and probe atlases, medians of --repeats
    python -m benchmarks.bench_atlas --browser        # + a fresh `streamlit run dashboard.py` in headless Chromium

In-process: `heads.model_atlases` on one torch thread (as the server runs), medians of --repeats, and the process's
peak resident memory before and after. --browser: a fresh server (OMP_NUM_THREADS=1); for each model the Head atlas
page is opened on its corpus (the first visit makes the corpus atlas: the model's load included), the server's
resident memory read after; then the page on "your own text", and --repeats times a new text (a seeded shuffle of
words, cut by the page at 64 tokens) typed and sent with Ctrl+Enter, timed in the page's own clock from the key to
the scatter's last change once the rerun is over. Medians and the single runs are printed.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from attention.lessons import atlas

ROOT = Path(__file__).resolve().parents[1]

WORDS = ("the cat dog bird sat ran saw on under mat rug tree and then because it was warm cold quickly slowly a big "
         "small red green house river over near happy old young morning night").split()  # fmt: skip


def text(seed: int, words: int = 90) -> str:
    """A text of `words` words (more than 64 tokens for both models), different for each seed."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words)) + "."


def rss_mb(pid: int | str = "self") -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB."""
    fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":" in line)
    return tuple(int(fields[k].split()[0]) / 1000 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def in_process(repeats: int, text_only: bool = False) -> None:
    torch.set_num_threads(1)
    for model in ("minilm", "smollm2"):
        t0 = time.perf_counter()
        atlas.runner(model)
        load = time.perf_counter() - t0
        before = rss_mb()
        for source in () if text_only else ("corpus", "repeated"):
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                atlas.model_atlases(model, source)
                times.append(time.perf_counter() - t0)
            texts = len(atlas.inputs(model, source))
            print(f"{model} {source} ({texts} texts): median {statistics.median(times):.2f} s "
                  f"(runs {', '.join(f'{t:.2f}' for t in times)}); model load {load:.2f} s")  # fmt: skip
        own = text(0)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            atlas.model_atlases(model, "text", own)
            times.append(time.perf_counter() - t0)
        t = atlas.runner(model).encode(own)
        ref = []
        for _ in range(repeats):  # the reference: the model's forward alone on the same tokens, weights kept
            t0 = time.perf_counter()
            atlas.runner(model).weights(t)
            ref.append(time.perf_counter() - t0)
        print(
            f"{model} one {len(t.ids)}-token text: median {statistics.median(times):.2f} s; the forward alone "
            f"{statistics.median(ref):.2f} s (ratio {statistics.median(times) / statistics.median(ref):.2f})"
        )
        after = rss_mb()
        if text_only:
            continue
        peak = max(atlas.runner(model).weights_bytes(len(t.ids)) for t in atlas.inputs(model, "corpus"))
        print(f"{model} memory: RSS {before[0]:.0f} -> {after[0]:.0f} MB, peak (HWM) {after[1]:.0f} MB; "
              f"largest pass admitted against the budget {peak / 1e6:.1f} MB; atlas pair kept "
              f"{sum(a.nbytes for a in atlas.model_atlases(model, 'corpus')) / 1e3:.1f} kB")  # fmt: skip


KEY_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  window.__a = { t0: performance.now(), ran: false, last: 0 };
  new MutationObserver(() => { if (app.dataset.testScriptState === 'running') window.__a.ran = true; })
    .observe(app, { attributes: true, attributeFilter: ['data-test-script-state'] });
  const main = document.querySelector('[data-testid="stMain"]');
  new MutationObserver(ms => { if (ms.some(m => m.target.closest && m.target.closest('.vega-embed')))
    window.__a.last = performance.now(); }).observe(main, { subtree: true, childList: true, attributes: true });
}"""
DONE_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]'), a = window.__a;
  const drawn = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].some(e => e.querySelector('svg'));
  if (!a.ran || app.dataset.testScriptState !== 'notRunning' || !drawn || !a.last) return false;
  if (performance.now() - a.last < 500) return false;  // the scatter still changing
  return a.last - a.t0;
}"""
READY = '[data-testid="stApp"][data-test-script-state="notRunning"]'


def browser(port: int, repeats: int) -> None:
    from playwright.sync_api import sync_playwright

    from harness import live_server

    cmd = [sys.executable, "-m", "streamlit", "run", "dashboard.py", "--server.port", str(port),
           "--server.address", live_server.LOOPBACK, "--server.headless", "true", "--server.fileWatcherType", "none",
           "--browser.gatherUsageStats", "false"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    log = open(f"/tmp/bench_atlas_{port}.log", "wb")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://{live_server.LOOPBACK}:{port}"

    def wait_drawn(page) -> None:
        page.wait_for_selector('[data-testid="stApp"][data-test-connection-state="CONNECTED"]', timeout=600_000)
        page.wait_for_timeout(300)
        page.wait_for_selector(READY, timeout=600_000)
        page.get_by_text("The strongest heads").wait_for(timeout=600_000)
        page.wait_for_selector('[data-testid="stVegaLiteChart"] svg', timeout=600_000)
        page.wait_for_selector(READY, timeout=600_000)

    try:
        while live_server.health(base) != "ok":
            if proc.poll() is not None:
                raise SystemExit(f"the server exited: see /tmp/bench_atlas_{port}.log")
            time.sleep(0.3)
        print(f"fresh server pid {proc.pid}: RSS {rss_mb(proc.pid)[0]:.0f} MB before any visit")
        with sync_playwright() as playwright:
            b = playwright.chromium.launch(executable_path=live_server.find_chromium()[0],
                                           args=live_server.CHROMIUM_ARGS)  # fmt: skip
            for model in ("minilm", "smollm2"):
                page = b.new_page(viewport={"width": 1400, "height": 1000})
                t0 = time.monotonic()
                page.goto(f"{base}/head_atlas?atlas_model={model}")
                wait_drawn(page)
                first = time.monotonic() - t0
                page.close()
                page = b.new_page(viewport={"width": 1400, "height": 1000})
                t0 = time.monotonic()
                page.goto(f"{base}/head_atlas?atlas_model={model}")
                wait_drawn(page)
                again = time.monotonic() - t0
                page.close()
                print(f"{model} corpus atlas, first visit on this server (model load included): {first:.1f} s; "
                      f"next visitor (kept): {again:.1f} s; server RSS now {rss_mb(proc.pid)[0]:.0f} MB")  # fmt: skip
                page = b.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"{base}/head_atlas?atlas_model={model}&atlas_input=text")
                wait_drawn(page)
                times = []
                for i in range(repeats):
                    box = page.get_by_label("Your text")
                    box.fill(text(1000 * (model == "smollm2") + i + 1))
                    page.evaluate(KEY_JS)
                    box.press("Control+Enter")
                    ms = page.wait_for_function(DONE_JS, timeout=120_000, polling=20).json_value()
                    times.append(ms / 1000)
                    page.wait_for_timeout(300)
                print(f"{model} your own 64-token text, key to scatter drawn: median {statistics.median(times):.2f} s "
                      f"(runs {', '.join(f'{t:.2f}' for t in times)})")  # fmt: skip
                page.close()
            b.close()
        print(f"server RSS at the end {rss_mb(proc.pid)[0]:.0f} MB, peak {rss_mb(proc.pid)[1]:.0f} MB")
    finally:
        live_server.stop(proc)


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cli.add_argument("--repeats", type=int, default=5)
    cli.add_argument("--browser", action="store_true")
    cli.add_argument("--no-timings", action="store_true", help="only the browser")
    cli.add_argument("--text-only", action="store_true", help="in-process: only the 64-token text and its reference")
    cli.add_argument("--port", type=int, default=8637)
    a = cli.parse_args()
    if not a.no_timings:
        in_process(a.repeats, a.text_only)
    if a.browser:
        browser(a.port, a.repeats)
