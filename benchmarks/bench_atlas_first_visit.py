"""The Head atlas's first visit on a fresh server, in headless Chromium: from navigation to every chart drawn.

    python -m benchmarks.bench_atlas_first_visit                         # this checkout, 3 fresh servers
    python -m benchmarks.bench_atlas_first_visit --root /tmp/before      # another checkout (the same Python)

Each run starts its own `streamlit run dashboard.py` (OMP_NUM_THREADS=1, as bench_atlas.py), waits for its health
check and then for its start-up warm-up to finish (the server's CPU time still for two seconds: `import ui`, torch
and the package, is the course map's cost, measured by bench_startup.py), then opens in a new tab:
1. the Head atlas as a first visitor finds it (its default: SmolLM2 on the corpus), on this fresh server;
2. the same page again (the next visitor: the atlas kept by the server), the reference in the same run;
3. MiniLM's atlas on the corpus, its first visit on this server.
Each is timed in the page's own clock, from navigation start to the last change in the main column once the script
run is over, every head drawn in the scatter and the table's expander "Every score of every head" in place (closed,
as the page opens it since issue 45: its grid is sent once the expander is opened; open, its grid drawn). Medians
over the runs, the single runs, the load.

--breakdown  also print, for each visit, when (ms from navigation start) the page first had: Streamlit's app
             element (its scripts loaded), the websocket connected, the script running, the page's title, the
             sentences under the scatter, the run over, the scatter's element, all its points, the table's element,
             and the last change: where the time goes, browser side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import live_server

ROOT = Path(__file__).resolve().parents[1]
HEADS = {"smollm2": 30 * 9, "minilm": 6 * 12}

# Installed before the page's own scripts: the time of the last change inside the main column
# and, for --breakdown, when each milestone was first seen
WATCH_JS = """
window.__last = 0; window.__marks = {};
const app = () => document.querySelector('[data-testid="stApp"]');
const probes = {
  app: () => app(),
  connected: () => app() && app().dataset.testConnectionState === 'CONNECTED',
  running: () => app() && app().dataset.testScriptState === 'running',
  title: () => [...document.querySelectorAll('[data-testid="stMain"] h1')].some(h => h.innerText.includes('atlas')),
  sentences: () => document.body.innerText.includes('The strongest heads'),
  run_over: () => window.__marks.running && app().dataset.testScriptState === 'notRunning',
  scatter: () => document.querySelector('[data-testid="stVegaLiteChart"]'),
  points: () => document.querySelectorAll('[data-testid="stVegaLiteChart"] .mark-symbol path').length > 0,
  table: () => document.querySelector('[data-testid="stDataFrame"]'),
};
new MutationObserver(ms => {
  const t = performance.now();
  if (ms.some(m => m.target.closest && m.target.closest('[data-testid="stMain"]'))) window.__last = t;
  for (const [k, f] of Object.entries(probes)) {
    if (!(k in window.__marks)) { try { if (f()) window.__marks[k] = Math.round(t); } catch (e) {} }
  }
}).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
"""
DRAWN_JS = """heads => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.dataset.testScriptState !== 'notRunning') return false;
  if (!document.body.innerText.includes('The strongest heads')) return false;
  const points = document.querySelectorAll('[data-testid="stVegaLiteChart"] .mark-symbol path').length;
  const table = document.querySelector('[data-testid="stDataFrame"]');
  const box = [...document.querySelectorAll('[data-testid="stExpander"] details')]
    .find(d => d.innerText.includes('Every score of every head'));
  // the table's expander in place; open, its grid drawn (closed, the page may draw the grid only once it is opened)
  if (points !== heads || !box || (box.open && !(table && table.querySelector('canvas')))) return false;
  if (performance.now() - window.__last < 500) return false;  // still changing
  return window.__last;
}"""


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(root: Path, port: int, log: Path) -> tuple[subprocess.Popen, float, float]:
    """A fresh server in `root`; returns it, the seconds to its health check and to its warm-up's end."""
    cmd = [sys.executable, "-m", "streamlit", "run", "dashboard.py", "--server.port", str(port),
           "--server.address", live_server.LOOPBACK, "--server.headless", "true", "--server.fileWatcherType", "none",
           "--browser.gatherUsageStats", "false"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://{live_server.LOOPBACK}:{port}"
    while live_server.health(base) != "ok":
        if proc.poll() is not None or time.monotonic() - t0 > 180:
            live_server.stop(proc)
            raise SystemExit(f"the server did not start: see {log}")
        time.sleep(0.2)
    healthy = time.monotonic() - t0
    still, before = 0, cpu_seconds(proc.pid)
    while still < 4 and time.monotonic() - t0 < 180:  # four half-seconds in a row with under 5 % of a core
        time.sleep(0.5)
        now = cpu_seconds(proc.pid)
        still, before = (still + 1 if now - before < 0.025 else 0), now
    return proc, healthy, time.monotonic() - t0


BREAKDOWN = [False]  # --breakdown


def visit(browser, url: str, heads: int) -> float:
    """Seconds from navigation start to every chart drawn, in a new tab."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.add_init_script(WATCH_JS)
    page.goto(url, wait_until="commit")
    ms = page.wait_for_function(DRAWN_JS, arg=heads, timeout=600_000, polling=50).json_value()
    if BREAKDOWN[0]:
        marks = sorted(page.evaluate("window.__marks").items(), key=lambda kv: kv[1])
        print(f"  {url.rsplit('/', 1)[1]}: " + ", ".join(f"{k} {v}" for k, v in marks) + f", last change {ms:.0f} ms",
              flush=True)  # fmt: skip
    page.close()
    return ms / 1000


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cli.add_argument("--root", type=Path, default=ROOT, help="the checkout whose server is measured")
    cli.add_argument("--runs", type=int, default=3, help="fresh servers")
    cli.add_argument("--port", type=int, default=8611)
    cli.add_argument("--breakdown", action="store_true", help="when each part of every visit was first seen")
    a = cli.parse_args()
    BREAKDOWN[0] = a.breakdown
    from playwright.sync_api import sync_playwright

    base = f"http://{live_server.LOOPBACK}:{a.port}"
    rows = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=live_server.find_chromium()[0],
                                             args=live_server.CHROMIUM_ARGS)  # fmt: skip
        for run in range(a.runs):
            proc, healthy, warm = start(a.root.resolve(), a.port, Path(f"/tmp/bench_atlas_first_visit_{a.port}.log"))
            try:
                load = os.getloadavg()[0]
                first = visit(browser, f"{base}/head_atlas", HEADS["smollm2"])
                again = visit(browser, f"{base}/head_atlas", HEADS["smollm2"])
                minilm = visit(browser, f"{base}/head_atlas?atlas_model=minilm", HEADS["minilm"])
            finally:
                live_server.stop(proc)
            rows.append((first, again, minilm, load, healthy, warm))
            print(f"run {run + 1}: first visit (SmolLM2, corpus) {first:.2f} s; next visitor {again:.2f} s "
                  f"(ratio {first / again:.2f}); MiniLM's first {minilm:.2f} s; load {load:.2f}; server healthy "
                  f"{healthy:.1f} s, warm {warm:.1f} s after start", flush=True)  # fmt: skip
        browser.close()
    med = [statistics.median(r[i] for r in rows) for i in range(4)]
    print(f"median of {len(rows)}: first visit {med[0]:.2f} s, next visitor {med[1]:.2f} s (ratio "
          f"{med[0] / med[1]:.2f}), MiniLM's first {med[2]:.2f} s; load average (1 min) {med[3]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
