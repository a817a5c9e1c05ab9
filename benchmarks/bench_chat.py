"""The chat model's figures: load, a 64-token forward, one cached generation step at 64 tokens, a head switch
without a new forward, and the server's memory with both models loaded and 20 fresh sessions on the page under a
real memory limit.

    python -m benchmarks.bench_chat                      # the timings (one torch thread, as the server runs)
    python -m benchmarks.bench_chat --server --limit-mib 690   # + the server in a cgroup v1 memory group (root)
    python -m benchmarks.bench_chat --no-timings --browser [--root DIR] [--generated 1 16 64] [--repeats 5]

--browser: what a learner waits for on the page after generating: `streamlit run dashboard.py` (from --root, another
checkout such as a `git worktree` of an older commit, for a before/after) in Debian's headless Chromium, the page
opened with chat_generate=N (N tokens generated), then --repeats clicks on the "with RoPE" switch, each timed in
the page's own clock from the click to the rerun's end with every heatmap drawn (the Omega heatmap holding its new
numbers) and every Vega chart on the page; medians are printed, and the single runs.

Timings are medians over --repeats runs, in this process, on one intra-op thread (deploy/replica.sh and the
Dockerfile set OMP_NUM_THREADS=1). The server part starts `streamlit run dashboard.py` inside the cgroup, opens the
Real model page once (MiniLM read) and then 20 fresh websocket sessions on "Inside a chat model": 10 on the
default prompt (one shared run) and 10 each with a prompt of its own (each its own run, in the bounded caches),
sampling the server's resident and anonymous memory after each, and the cgroup's peak usage and failcnt.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

import torch

from attention.models import smollm2

ROOT = Path(__file__).resolve().parents[1]

TEXT = (
    "In 1887, the Transylvanian cartographers' guild re-surveyed every mountain pass twice, because its first "
    "measurements, taken during an unusually foggy autumn, disagreed with the Habsburg military maps by nearly three "
    "kilometres, and the emperor's engineers refused to build a single road until the two surveys agreed."
)


def median_s(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def timings(repeats: int) -> None:
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    model = smollm2.load()
    load_s = time.perf_counter() - t0
    ids = smollm2.encode(model, TEXT, 64)[0]
    assert len(ids) == 64, len(ids)
    forward = median_s(lambda: smollm2.run_ids(model, ids), repeats)
    prefix = smollm2.run_ids(model, ids[:63], keep=False)
    step = median_s(lambda: smollm2.step(model, prefix, ids[63]), repeats)
    run = smollm2.run_ids(model, ids)
    switch = median_s(lambda: smollm2.head_result(model, run, 18, 4), repeats)
    print(f"model: {smollm2.NAME}, weights held {model.weight_bytes() / 1e6:.1f} MB (quantized, memory-mapped)")
    print(f"load (SHA-256 of 98 MB + GGUF read + tokenizer), first use: {load_s:.2f} s")
    print(f"forward over 64 tokens, every intermediate kept (median of {repeats}): {forward * 1000:.0f} ms")
    print(f"one generation step reading a 63-token cache (median of {repeats}): {step * 1000:.0f} ms")
    print(f"head switch, compute() of one head from the kept run (median of {repeats}): {switch * 1000:.1f} ms")


def server(limit_mib: int | None, sessions: int) -> int:
    from benchmarks import load_test
    from benchmarks.mem_real_model import cgroup, memory_mb, start_in
    from harness import live_server

    port = live_server.free_port()
    group = None if limit_mib is None else cgroup(f"bench_chat_{os.getpid()}", limit_mib)
    os.environ["OMP_NUM_THREADS"] = "1"  # as deploy/replica.sh runs a replica
    proc = start_in(group, port)
    peak = (0.0, 0.0)
    failed = []
    try:
        # both models read, as on a used server
        for page, query in (("real_model", "head=1"), ("chat_model", "chat_head=0")):
            client = load_test.WsClient(port, query=query, page=page)
            _, shown = client.rerun()
            client.ws.close()
            assert not shown["exception"], (page, shown)
        warm = memory_mb(proc.pid)
        print(f"both models loaded: {warm[0]:.0f} MB resident, {warm[1]:.0f} MB anonymous")
        t0 = time.monotonic()
        for i in range(sessions):
            own = {"chat_prompt": f"Visitor {i} asks: {TEXT}"}  # its own first 64 tokens: its own run
            query = "chat_head=0" if i < sessions // 2 else urllib.parse.urlencode(own)
            client = load_test.WsClient(port, query=query, page="chat_model")
            seconds, shown = client.rerun()
            client.ws.close()
            if shown["exception"] or "Softmax weights (causal)" not in shown["charts"]:
                failed.append(i)
            now = memory_mb(proc.pid)
            peak = (max(peak[0], now[0]), max(peak[1], now[1]))
            print(f"session {i + 1}: {seconds:.1f} s, {now[0]:.0f} MB resident, {now[1]:.0f} MB anonymous")
        alive = proc.poll() is None
        print(f"{sessions} sessions in {time.monotonic() - t0:.0f} s; peak sampled {peak[0]:.0f} MB resident, "
              f"{peak[1]:.0f} MB anonymous; failed sessions {failed}; server alive: {alive}")  # fmt: skip
        if group is not None:
            usage = int((group / "memory.max_usage_in_bytes").read_text()) / 2**20
            fails = (group / "memory.failcnt").read_text().strip()
            print(f"cgroup: limit {limit_mib} MiB, peak usage {usage:.0f} MiB (page cache included), failcnt {fails}")
        return 0 if alive and not failed else 1
    finally:
        if proc.poll() is None:
            live_server.stop(proc)
        if group is not None:
            group.rmdir()


# Armed before each click: the click's time, then (polled) the moment the rerun is over and every chart is drawn.
CLICK_JS = """() => {
  const omega = [...document.querySelectorAll('.al-heatmap')].find(e => (e.dataset.title || '').startsWith('Omega'));
  window.__chat = { clicked: null, before: omega ? omega.dataset.drawn : null };
  document.addEventListener('click', () => { if (window.__chat.clicked === null)
    window.__chat.clicked = performance.now(); }, { capture: true, once: true });
}"""
READY_JS = """() => document.querySelector('[data-testid="stApp"]').dataset.testScriptState === 'notRunning'
  && [...document.querySelectorAll('.al-heatmap')].filter(e => e.dataset.drawn).length >= 5"""
DRAWN_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  const maps = [...document.querySelectorAll('.al-heatmap')];
  const omega = maps.find(e => (e.dataset.title || '').startsWith('Omega'));
  const vega = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')];
  if (app.dataset.testScriptState !== 'notRunning' || !omega || omega.dataset.drawn === window.__chat.before
      || !maps.every(e => e.dataset.drawn) || !vega.every(e => e.querySelector('canvas, svg'))) return false;
  return performance.now() - window.__chat.clicked;
}"""


def browser(root: Path, port: int, generated: list[int], repeats: int) -> None:
    """Medians of `repeats` reruns (a click on the RoPE switch) after each number of generated tokens."""
    import subprocess

    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    from harness import live_server

    cmd = [sys.executable, "-m", "streamlit", "run", "dashboard.py", "--server.port", str(port),
           "--server.address", live_server.LOOPBACK, "--server.headless", "true", "--server.fileWatcherType", "none",
           "--browser.gatherUsageStats", "false"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    log = open(f"/tmp/bench_chat_{port}.log", "wb")
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://{live_server.LOOPBACK}:{port}"
    try:
        while live_server.health(base) != "ok":
            if proc.poll() is not None:
                raise SystemExit(f"the server exited: see /tmp/bench_chat_{port}.log")
            time.sleep(0.3)
        print(f"server from {root}; Chromium {live_server.find_chromium()[0]}; {repeats} clicks after each")
        with sync_playwright() as playwright:
            chromium = live_server.find_chromium()[0]
            b = playwright.chromium.launch(executable_path=chromium, args=live_server.CHROMIUM_ARGS)
            for n in generated:
                page = b.new_page(viewport={"width": 1400, "height": 1000})
                t0 = time.monotonic()
                page.goto(f"{base}/chat_model?chat_generate={n}")
                app = '[data-testid="stApp"]'
                page.wait_for_selector(f'{app}[data-test-connection-state="CONNECTED"]', timeout=600_000)
                page.wait_for_timeout(300)
                page.wait_for_selector(f'{app}[data-test-script-state="notRunning"]', timeout=600_000)
                # the page's first runs are over: its step is written (or the link refused) and every heatmap drawn
                page.get_by_text(re.compile(f"Step {n}:|reset to defaults")).first.wait_for(timeout=600_000)
                page.wait_for_function(READY_JS, timeout=600_000, polling=100)
                if page.get_by_text(f"Step {n}:").count() == 0:
                    print(f"{n} generated: the page does not offer it (its link was reset); not measured")
                    page.close()
                    continue
                opened = time.monotonic() - t0
                times = []
                while len(times) < repeats:
                    page.evaluate(CLICK_JS)
                    page.get_by_text("with RoPE", exact=True).click()
                    try:
                        ms = page.wait_for_function(DRAWN_JS, timeout=120_000, polling=10).json_value()
                    except PlaywrightTimeout:  # a click that landed while a run was starting: not counted
                        print("  a click changed nothing in 120 s: clicked again")
                        continue
                    times.append(ms / 1000)
                    page.wait_for_timeout(300)
                print(f"{n} generated (page opened in {opened:.1f} s): rerun median {statistics.median(times):.2f} s "
                      f"(runs: {', '.join(f'{t:.2f}' for t in times)})")  # fmt: skip
                page.close()
            b.close()
    finally:
        live_server.stop(proc)


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cli.add_argument("--repeats", type=int, default=5)
    cli.add_argument("--server", action="store_true", help="also measure the server's memory with 20 sessions")
    cli.add_argument("--sessions", type=int, default=20)
    cli.add_argument("--limit-mib", type=int, help="run the server in a cgroup v1 memory group of this many MiB")
    cli.add_argument("--no-timings", action="store_true", help="only the server's memory")
    cli.add_argument("--browser", action="store_true", help="time the page's reruns in headless Chromium")
    cli.add_argument("--root", type=Path, default=ROOT, help="the checkout whose server --browser starts")
    cli.add_argument("--port", type=int, default=8621)
    cli.add_argument("--generated", type=int, nargs="+", default=[1, 16, 64])
    a = cli.parse_args()
    if not a.no_timings:
        timings(a.repeats)
    if a.browser:
        browser(a.root.resolve(), a.port, a.generated, a.repeats)
    sys.exit(server(a.limit_mib, a.sessions) if a.server else 0)
