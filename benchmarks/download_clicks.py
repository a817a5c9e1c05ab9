"""Download clicks in Chromium while other sessions rerun: every click must give its file.

    python -m benchmarks.download_clicks [--clicks 100] [--loaders 3] [--keep-s S]

Starts `streamlit run dashboard.py` on a free loopback port (with $ATTENTION_LAB_DOWNLOAD_KEEP_S=S when --keep-s
is given: 0 is Streamlit's own rule, which drops a served file once two script runs of any session have ended),
starts --loaders websocket sessions that rerun the self-attention page back to back, and clicks the page's
result.json and CSV download buttons in turn, --clicks times, in headless Chromium. A click fails when its
download ends in a failure ("canceled": the file was gone) or its file is empty. Exit 0 when none failed.
tests/browser/test_download_clicks.py runs a small version.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time
from pathlib import Path

from harness import live_server

ROOT = Path(__file__).resolve().parents[1]

BUTTONS = (re.compile(r"^result\.json"), re.compile(r"\.csv$"))


def load(base: str, stop: threading.Event, reruns: list[int]) -> None:
    """One session rerunning the default page until `stop`: each end of a run is when Streamlit cleans its store."""
    from benchmarks import load_test

    client = load_test.WsClient(base=base, query="seed=3")
    try:
        while not stop.is_set():
            client.rerun()
            reruns.append(1)
    finally:
        client.ws.close()


def clicks(browser, base: str, n: int, loaders: int = 3) -> dict:
    """n download clicks on the self-attention page while `loaders` sessions rerun: what came of each."""
    stop, reruns = threading.Event(), []
    threads = [threading.Thread(target=load, args=(base, stop, reruns), daemon=True) for _ in range(loaders)]
    failures: list[str] = []
    seconds: list[float] = []
    context = browser.new_context(viewport={"width": 1024, "height": 768}, accept_downloads=True)
    try:
        page = context.new_page()
        page.goto(f"{base}/self_attention?seed=5")
        page.get_by_role("button", name=BUTTONS[0]).wait_for(timeout=120_000)
        for t in threads:
            t.start()
        while len(reruns) < 3 * loaders:  # the loaders are rerunning
            time.sleep(0.1)
        for i in range(n):
            button = page.get_by_role("button", name=BUTTONS[i % 2])
            t0 = time.monotonic()
            try:
                with page.expect_download(timeout=60_000) as info:
                    button.click()
                download = info.value
                failure = download.failure()
                size = 0 if failure else Path(download.path()).stat().st_size
            except Exception as exc:  # noqa: BLE001  a click without a download is a failure too
                failure, size = f"{type(exc).__name__}: {str(exc)[:80]}", 0
            seconds.append(time.monotonic() - t0)
            if failure or size == 0:
                failures.append(f"click {i + 1}: {failure or 'empty file'}")
    finally:
        context.close()
        stop.set()
        for t in threads:
            t.join(timeout=60)
    return {"clicks": n, "failures": failures, "reruns_meanwhile": len(reruns), "seconds": sorted(seconds)}


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cli.add_argument("--clicks", type=int, default=100)
    cli.add_argument("--loaders", type=int, default=3)
    cli.add_argument("--keep-s", type=float, help="$ATTENTION_LAB_DOWNLOAD_KEEP_S for the server (0: Streamlit's rule)")
    args = cli.parse_args()
    if args.keep_s is not None:
        os.environ["ATTENTION_LAB_DOWNLOAD_KEEP_S"] = str(args.keep_s)
    from playwright.sync_api import sync_playwright

    port = live_server.free_port()
    server = live_server.start(port, Path("/tmp/download_clicks.log"))
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=live_server.require_chromium(), args=live_server.CHROMIUM_ARGS)
            r = clicks(browser, f"http://{live_server.LOOPBACK}:{port}", args.clicks, args.loaders)
            browser.close()
    finally:
        live_server.stop(server)
    s, failed = r["seconds"], len(r["failures"])
    print(f"{r['clicks']} clicks, {failed} failed, while {args.loaders} sessions reran {r['reruns_meanwhile']} "
          f"times; click to file: median {s[len(s) // 2]:.2f} s, max {s[-1]:.2f} s")  # fmt: skip
    for f in r["failures"][:20]:
        print("  " + f)
    return 0 if not r["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
