"""What a learner waits for after clicking a head on Inside a chat model's "What each head writes" map: from the
click to every chart of the page drawn again for that head.

    python -m benchmarks.bench_chat_writes [--repeats 3] [--port 8612] [--width 1400] [--json out.json]

Starts `streamlit run dashboard.py` on a loopback port and drives Debian's Chromium (headless) with Playwright. The
chat page opens on its default prompt (SmolLM2's run, the heads' attribution and the first head's copying score
are made once, untimed); then each repeat clicks another cell of the 30 x 9 map and times, in Python's clock, from
the click to the moment the script run is over, nothing is stale, the clicked head's "Where LxHy looks" heatmap is
drawn and every chart of the page has drawn (a heatmap's data-drawn, a Vega chart's svg or canvas). The reference,
in the same run and browser, interleaved: a click on a row of Self-attention's weights (the same heatmap
component, a light page), timed to every chart drawn the same way. Medians of the repeats and their ratio are
printed, with the load average (other processes share the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from harness import live_server

ROOT = Path(__file__).resolve().parents[1]
WRITES = '.al-heatmap[data-title^="Each head\'s direct contribution"]'
WEIGHTS = ".al-heatmap[data-title='Softmax weights']"
HEADS = ((17, 3), (2, 8), (25, 5), (9, 1), (29, 6))  # a different head each click
ROWS = (3, 0, 4, 2, 5)  # Self-attention's six tokens: another row each click (the page opens on row 1)
LOAD_S = 600
DONE_JS = """(looks) => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.dataset.testScriptState !== 'notRunning') return false;
    if (document.querySelectorAll('[data-stale="true"]').length) return false;
    if (looks && !document.querySelector(`.al-heatmap[data-title="${looks}"][data-drawn]`)) return false;
    const charts = [...document.querySelectorAll('.vega-embed, .al-heatmap')];
    return charts.length > 0 && charts.every(c => c.classList.contains('al-heatmap')
        ? c.dataset.drawn !== undefined : c.querySelector('svg, canvas'));
}"""
FOLLOWING_JS = """(n) => [...document.querySelectorAll('[data-testid=stMain] strong')]
    .some(e => e.innerText.startsWith(`Following token ${n}:`))"""


def settle(page) -> None:
    app = '[data-testid="stApp"]'
    page.wait_for_selector(f'{app}[data-test-connection-state="CONNECTED"]', timeout=LOAD_S * 1000)
    page.wait_for_timeout(150)
    page.wait_for_selector(f'{app}[data-test-script-state="notRunning"]', timeout=LOAD_S * 1000)
    page.wait_for_function(DONE_JS, arg=None, timeout=LOAD_S * 1000)


def centre(page, selector: str, i: int, j: int) -> dict:
    layout = page.eval_on_selector(selector, "e => e.alState.layout")
    return {"x": layout["left"] + (j + 0.5) * layout["cellW"], "y": layout["top"] + (i + 0.5) * layout["cellH"]}


def timed_click(page, selector: str, i: int, j: int, done) -> float:
    position = centre(page, selector, i, j)
    start = time.perf_counter()
    page.locator(f"{selector} .al-heatmap-overlay").click(position=position)
    done()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--port", type=int, default=0, help="the server's port (default: a free one)")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    port = args.port or live_server.free_port()
    proc = live_server.start(port, ROOT / "artifacts" / "bench-chat-writes-server.log")
    base = f"http://{live_server.LOOPBACK}:{port}"
    load_before = os.getloadavg()
    chat_s, self_s = [], []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=live_server.require_chromium(), args=live_server.CHROMIUM_ARGS
            )
            viewport = {"width": args.width, "height": 900}
            chat = browser.new_page(viewport=viewport)
            chat.goto(f"{base}/chat_model")
            chat.locator(WRITES).wait_for(timeout=LOAD_S * 1000)
            settle(chat)
            other = browser.new_page(viewport=viewport)
            other.goto(f"{base}/self_attention")
            settle(other)
            for r in range(args.repeats):
                layer, head = HEADS[r % len(HEADS)]
                looks = f"Where L{layer}H{head} looks from the last token"
                done = lambda p=chat, t=looks: p.wait_for_function(DONE_JS, arg=t, timeout=LOAD_S * 1000, polling=10)  # noqa: E731
                chat_s.append(timed_click(chat, WRITES, layer, head, done))
                row = ROWS[r % len(ROWS)]

                def followed(p=other, n=row + 1) -> None:
                    p.wait_for_function(FOLLOWING_JS, arg=n, timeout=120_000, polling=10)
                    p.wait_for_function(DONE_JS, arg=None, timeout=120_000, polling=10)

                self_s.append(timed_click(other, WEIGHTS, row, 0, followed))
                print(f"repeat {r + 1}: chat L{layer}H{head} {chat_s[-1]:.3f} s, self-attention row {row + 1} "
                      f"{self_s[-1]:.3f} s", flush=True)  # fmt: skip
            browser.close()
    finally:
        live_server.stop(proc)
    load_after = os.getloadavg()
    chat_m, self_m = statistics.median(chat_s), statistics.median(self_s)
    runs = lambda xs: ", ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    print(f"click on the writes map to every chart drawn: median {chat_m:.3f} s ({runs(chat_s)})")
    print(f"reference, Self-attention's row click: median {self_m:.3f} s ({runs(self_s)})")
    print(f"ratio {chat_m / self_m:.2f}; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after "
          f"({os.cpu_count()} cores)")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"chat_s": chat_s, "self_attention_s": self_s, "load": [load_before,
                                         load_after], "width": args.width}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
