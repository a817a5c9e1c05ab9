"""What a person waits for on the KV cache page: from clicking "Next token" to the cache heatmaps redrawn.

    python -m benchmarks.bench_kv_page [--root CHECKOUT] [--clicks 9]

Starts `streamlit run dashboard.py` from the checkout (default: this one; another checkout, e.g. a `git worktree`
of an older commit, gives the figure before a change), opens the KV cache page in headless Chromium at 512 tokens,
16 heads and d_k = d_v = 64 on step 300, and clicks "Next token" --clicks times. Each time counts until both cache
heatmaps show the new row (their data-rows is the new step's token count, and they are drawn).
"""

from __future__ import annotations

import argparse
import statistics
import time
import urllib.parse
from pathlib import Path

from playwright.sync_api import sync_playwright

from harness import live_server

QUERY = {"sentence": " ".join(f"w{j}" for j in range(512)), "heads": 16, "d_k": 64, "d_v": 64, "mask": "causal",
         "decode_step": 300}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--clicks", type=int, default=9)
    args = parser.parse_args()
    port = live_server.free_port()
    server = live_server.start(port, Path("/tmp/bench_kv_page.log"), root=args.root)
    times = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=live_server.require_chromium(), args=live_server.CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"http://{live_server.LOOPBACK}:{port}/kv_cache?{urllib.parse.urlencode(QUERY)}")
            page.wait_for_function("document.querySelectorAll('.al-heatmap[data-drawn]').length >= 4", timeout=120_000)
            time.sleep(2)
            for t in range(QUERY["decode_step"], QUERY["decode_step"] + args.clicks):
                start = time.perf_counter()
                page.get_by_role("button", name="Next token ▶").click()
                page.wait_for_function(
                    f"document.querySelectorAll('.al-heatmap[data-rows=\"{t + 2}\"][data-drawn]').length >= 2",
                    timeout=60_000,
                    polling=20,
                )
                times.append(time.perf_counter() - start)
                time.sleep(0.5)
            browser.close()
    finally:
        live_server.stop(server)
    shown = ", ".join(f"{1000 * s:.0f}" for s in times)
    print(f"{args.root}: click to cache redrawn, median {1000 * statistics.median(times):.0f} ms ({shown})")


if __name__ == "__main__":
    main()
