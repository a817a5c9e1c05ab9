"""Streaming on "Inside a chat model", in headless Chromium: "Generate N tokens" clicked, each token written as it
comes, then clicks that change a view after the generation, each from the click to every chart drawn.

    python -m benchmarks.bench_stream [--tokens 64] [--repeats 5] [--port 8661] [--shots DIR]

Starts `streamlit run dashboard.py` (one torch thread, as deployed) on --port, opens the page at 1400 x 1000, sets
"Tokens to generate" to --tokens and clicks "Generate N tokens": reports the time to the first streamed token, to
the last, the page's own per-token median (its caption), and whether the tokens came one by one (the number of
chips seen growing while the script ran). Then --repeats clicks on the "with RoPE" switch and as many layer picks,
each timed in the page's clock from the click to the rerun's end with every heatmap and Vega chart drawn
(bench_chat.py's probes). --shots saves screenshots mid-stream and after. Medians; the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.bench_chat import CLICK_JS, DRAWN_JS, READY_JS

ROOT = Path(__file__).resolve().parents[1]

CHIPS_JS = """() => Math.max(0, ...[...document.querySelectorAll('[data-testid="stHtml"]')]
  .map(e => [...e.querySelectorAll('code')].filter(c => c.style.background.includes('212, 240, 212')
     || c.style.background === 'rgb(212, 240, 212)').length))"""
GENERIC_DRAWN_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  const maps = [...document.querySelectorAll('.al-heatmap')];
  const vega = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')];
  if (app.dataset.testScriptState !== 'notRunning' || window.__chat.clicked === null
      || !maps.every(e => e.dataset.drawn) || !vega.every(e => e.querySelector('canvas, svg'))) return false;
  return performance.now() - window.__chat.clicked;
}"""


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import sync_playwright

    from harness import live_server

    cli = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cli.add_argument("--tokens", type=int, default=64)
    cli.add_argument("--repeats", type=int, default=5)
    cli.add_argument("--port", type=int, default=8661)
    cli.add_argument("--shots", type=Path, default=None)
    a = cli.parse_args(argv)
    cmd = [sys.executable, "-m", "streamlit", "run", "dashboard.py", "--server.port", str(a.port),
           "--server.address", live_server.LOOPBACK, "--server.headless", "true", "--server.fileWatcherType", "none",
           "--browser.gatherUsageStats", "false"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    log_path = f"/tmp/bench_stream_{a.port}.log"
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)
    base = f"http://{live_server.LOOPBACK}:{a.port}"
    load = os.getloadavg()[0]
    try:
        while live_server.health(base) != "ok":
            if proc.poll() is not None:
                raise SystemExit(f"the server exited: see {log_path}")
            time.sleep(0.3)
        with sync_playwright() as playwright:
            b = playwright.chromium.launch(executable_path=live_server.find_chromium()[0],
                                           args=live_server.CHROMIUM_ARGS)  # fmt: skip
            page = b.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{base}/chat_model")
            page.wait_for_function(READY_JS, timeout=600_000, polling=100)
            box = page.get_by_label("Tokens to generate", exact=True)
            box.fill(str(a.tokens))
            box.press("Enter")
            button = page.get_by_role("button", name=f"Generate {a.tokens} tokens")
            button.wait_for(timeout=120_000)
            page.wait_for_function(READY_JS, timeout=600_000, polling=100)
            t0 = time.monotonic()
            button.click()
            seen, first, shot = [], None, False
            while True:  # the chips counted while the script runs: one more a token when they stream
                count = page.evaluate(CHIPS_JS)
                running = page.evaluate("() => document.querySelector('[data-testid=\"stApp\"]')"
                                        ".dataset.testScriptState === 'running'")  # fmt: skip
                if count and first is None:
                    first = time.monotonic() - t0
                if count and (not seen or seen[-1] != count):
                    seen.append(count)
                if a.shots and not shot and count >= a.tokens // 2:
                    a.shots.mkdir(parents=True, exist_ok=True)
                    page.get_by_role("button", name="Stop", exact=True).last.scroll_into_view_if_needed()
                    page.screenshot(path=str(a.shots / "stream-mid.png"), full_page=False)
                    shot = True
                if page.get_by_text(f"Step {a.tokens}:").count() and not running:
                    break
                if time.monotonic() - t0 > 900:
                    raise SystemExit("no end of the generation in 900 s")
                page.wait_for_timeout(50)
            last = time.monotonic() - t0
            page.wait_for_function(READY_JS, timeout=600_000, polling=100)
            caption = page.get_by_text(re.compile("Last generated:")).first.inner_text()
            if a.shots:
                page.get_by_text(re.compile("Last generated:")).first.scroll_into_view_if_needed()
                page.screenshot(path=str(a.shots / "stream-end.png"), full_page=False)
            print(
                f"load average {load:.1f}; {a.tokens} tokens: first shown after {first:.2f} s, last after "
                f"{last:.2f} s; chip counts seen while streaming: {len(seen)} distinct ({seen[:5]}...{seen[-3:]})"
            )
            print(f"the page says: {caption}")
            rope, layers = [], []
            for i in range(a.repeats):
                page.evaluate(CLICK_JS)
                page.get_by_text("with RoPE", exact=True).click()
                rope.append(page.wait_for_function(DRAWN_JS, timeout=120_000, polling=10).json_value() / 1000)
                page.wait_for_timeout(300)
                page.evaluate(CLICK_JS)
                page.get_by_label("Layer", exact=True).click()  # the layer picker: a new row of attention too
                page.keyboard.type(str([4, 12, 20, 25, 29][i % 5]))
                page.keyboard.press("Enter")
                layers.append(page.wait_for_function(GENERIC_DRAWN_JS, timeout=120_000, polling=10).json_value()
                              / 1000)  # fmt: skip
                page.wait_for_timeout(300)
            print(f"after the generation, click to every chart drawn: RoPE switch median {statistics.median(rope):.2f}"
                  f" s ({', '.join(f'{t:.2f}' for t in rope)}); layer pick median {statistics.median(layers):.2f} s "
                  f"({', '.join(f'{t:.2f}' for t in layers)})")  # fmt: skip
            b.close()
    finally:
        live_server.stop(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
