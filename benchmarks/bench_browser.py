"""What a person waits for in the browser: from a changed sentence to every heatmap drawn, and the browser's memory.

    python -m benchmarks.bench_browser [--tokens 6 64 128 256 512] [--repeats 3] [--json out.json]

Starts `streamlit run dashboard.py` on a free loopback port (harness/live_server.py) and drives Debian's Chromium
(headless) with Playwright. For each sentence length, in a fresh page each repeat: open the self-attention page,
type a sentence of that many tokens into the sidebar and press Ctrl+Enter (what a learner does after pasting),
then time, in the page's own clock, from the key press to the moment every heatmap holds the new numbers (each
heatmap element sets data-drawn after its canvas is painted; a MutationObserver notes the time). Also recorded:
the longest main-thread task in that interval (the Long Tasks API: how long the tab was blocked at a stretch),
and Chromium's memory once drawn: the proportional set size (PSS) of every Chromium process added up, so shared
pages count once. Then the heaviest link (512 tokens, 16 heads, d_model = d_k = d_v = 256) on the self-attention
and multi-head pages: time from navigation to every heatmap drawn, and the same memory figures.

Medians of the repeats are printed; the server runs on the same two cores as the browser.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

import psutil

from harness import live_server  # the tests' way to start the server and find Chromium

ROOT = Path(__file__).resolve().parents[1]

WORDS = (
    "the chef prepared a delicious meal and it was served with wine while life is short so eat dessert first".split()
)
HEAVY = {"heads": "16", "d_model": "256", "d_k": "256", "d_v": "256"}

# Arms the timers before the key press: the press's time, and the first moment every heatmap shows `rows` rows
# with numbers it did not show before.
ARM_JS = """(rows) => {
  const before = new Set([...document.querySelectorAll('.al-heatmap')].map(e => e.dataset.drawn));
  window.__bench = { pressed: null, done: null, long: [] };
  document.addEventListener('keydown', e => {
    if (e.key === 'Enter' && window.__bench.pressed === null) window.__bench.pressed = performance.now();
  }, { capture: true });
  new PerformanceObserver(list => list.getEntries().forEach(e => window.__bench.long.push([e.startTime, e.duration])))
    .observe({ type: 'longtask' });
  const check = () => {
    const maps = [...document.querySelectorAll('.al-heatmap')];
    if (window.__bench.done === null && maps.length > 0 && maps.every(
        e => e.dataset.rows === String(rows) && e.dataset.drawn && !before.has(e.dataset.drawn))) {
      window.__bench.done = performance.now();
    }
  };
  new MutationObserver(check).observe(document.body, { subtree: true, childList: true, attributes: true });
}"""

RESULT_JS = """() => {
  const b = window.__bench;
  const blocked = b.long.filter(([start, d]) => start + d >= b.pressed && start <= b.done).map(([s, d]) => d);
  const own = performance.getEntriesByType('measure').filter(m => m.name.startsWith('al-heatmap')
    && m.startTime >= b.pressed).map(m => m.duration);
  return { ms: b.done - b.pressed, longest: blocked.length ? Math.max(...blocked) : 0,
           heatmaps: document.querySelectorAll('.al-heatmap').length, draw_ms: own,
           tasks: blocked };
}"""


def sentence(tokens: int) -> str:
    return " ".join(WORDS[k % len(WORDS)] for k in range(tokens))


def chromium_mib() -> float:
    """Chromium's memory: the PSS of every Chromium process under this one, added up (MiB)."""
    total = 0
    for proc in psutil.Process().children(recursive=True):
        try:
            if "chrom" in proc.name().lower():
                total += proc.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total / 2**20


def settle(page, timeout: float = 120_000) -> None:
    app = '[data-testid="stApp"]'
    page.wait_for_selector(f'{app}[data-test-connection-state="CONNECTED"]', timeout=timeout)
    page.wait_for_timeout(150)
    page.wait_for_selector(f'{app}[data-test-script-state="notRunning"]', timeout=timeout)


def type_sentence(browser, base: str, tokens: int) -> dict:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        page.goto(base + "/self_attention")
        settle(page)
        page.wait_for_function("document.querySelectorAll('.al-heatmap[data-drawn]').length === 4")
        box = page.get_by_role("textbox", name="Sentence")
        box.fill(sentence(tokens))
        page.evaluate(ARM_JS, tokens)
        box.press("Control+Enter")
        page.wait_for_function("window.__bench.done !== null", timeout=300_000, polling=100)
        out = page.evaluate(RESULT_JS)
        out["chromium_mib"] = chromium_mib()
        return out
    finally:
        page.close()


def open_link(browser, base: str, path: str, query: dict) -> dict:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        t0 = time.perf_counter()
        page.goto(f"{base}/{path}?{urllib.parse.urlencode(query)}")
        settle(page, timeout=300_000)
        page.wait_for_function(
            "() => { const m = [...document.querySelectorAll('.al-heatmap')];"
            " return m.length > 0 && m.every(e => e.dataset.drawn); }",
            timeout=300_000,
            polling=100,
        )
        seconds = time.perf_counter() - t0
        count = page.locator(".al-heatmap").count()
        return {"s": seconds, "heatmaps": count, "chromium_mib": chromium_mib()}
    finally:
        page.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[6, 64, 128, 256, 512])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    chromium = live_server.find_chromium()[0]
    if chromium is None:
        sys.exit("no Chromium: apt-get install -y chromium, or set CHROMIUM_PATH")
    port = live_server.free_port()
    proc = live_server.start(port, ROOT / "artifacts" / "bench_browser_server.log")
    base = f"http://{live_server.LOOPBACK}:{port}"
    figures: dict = {"typed": {}, "links": {}}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=live_server.CHROMIUM_ARGS)
            type_sentence(browser, base, 6)  # warm-up: the server's first run imports torch and friends
            print("sentence typed on the self-attention page: key press to every heatmap drawn (median)")
            print(f"{'tokens':>6} {'drawn in':>9} {'longest task':>13} {'Chromium':>9}")
            for tokens in args.tokens:
                runs = [type_sentence(browser, base, tokens) for _ in range(args.repeats)]
                row = {
                    "ms": statistics.median(r["ms"] for r in runs),
                    "longest_task_ms": statistics.median(r["longest"] for r in runs),
                    "chromium_mib": statistics.median(r["chromium_mib"] for r in runs),
                    "runs": runs,
                }
                figures["typed"][tokens] = row
                print(f"{tokens:>6} {row['ms']:>6.0f} ms {row['longest_task_ms']:>10.0f} ms "
                      f"{row['chromium_mib']:>5.0f} MiB", flush=True)  # fmt: skip
            heavy = {"sentence": sentence(512), **HEAVY}
            print("\nthe heaviest link (512 tokens, 16 heads, d_model = d_k = d_v = 256): navigation to every heatmap")
            for path in ("", "multi_head"):
                runs = [open_link(browser, base, path, heavy) for _ in range(args.repeats)]
                row = {
                    "s": statistics.median(r["s"] for r in runs),
                    "heatmaps": runs[0]["heatmaps"],
                    "chromium_mib": max(r["chromium_mib"] for r in runs),
                    "runs": runs,
                }
                figures["links"][path or "self_attention"] = row
                print(f"/{path:<11} {row['s']:>5.1f} s, {row['heatmaps']} heatmaps, Chromium at most "
                      f"{row['chromium_mib']:.0f} MiB", flush=True)  # fmt: skip
            browser.close()
    finally:
        live_server.stop(proc)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
