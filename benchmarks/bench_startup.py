"""What a person waits for after `streamlit run dashboard.py`: the server answering, then the course map drawn.

    python -m benchmarks.bench_startup [--runs 5] [--open-after S] [--pages] [--importtime] [--json out.json]
                                       [--root DIR ...] [--server-python PY] [--until first-chart URL_PATH]

Each run starts a fresh server (`streamlit run dashboard.py` on a free loopback port, as harness/live_server.py
does) and times, from the moment the command is started: /_stcore/health answering "ok", and the first screen drawn
in headless Chromium at 1024 x 768 on a page opened as soon as the server answers, as `streamlit run` itself opens
the browser: the course map, the dashboard's front door (its title, every lesson's row and the closing caption
shown, the script run over: COURSE_MAP_JS). Chromium is started before the clock, once, with a fresh context for
every run. Also the server's CPU seconds (user + system) at that moment: on a machine busy with other work the wall
times stretch, the CPU seconds much less.

The reference, in the same run, interleaved with the servers: a fresh `python -c "import streamlit, torch"` (the
least any server of this app pays before its first page), timed from its start to its exit, as many times as
servers. The report: medians of both and their ratio (issue 45 asks for the course map within 1.5 x the reference),
with the load average (1 min) at each run.

--until first-chart URL_PATH  wait instead for the first heatmap drawn (the `.al-heatmap[data-drawn]` its canvas
             sets once painted) on the page at URL_PATH (e.g. `self_attention`): the measure before the course map
             became the front door.

--open-after S  open the page S seconds after the server first answers (default 0: at once, as `streamlit run`
             opens a browser itself; a person who copies the printed address takes a few seconds), and report also
             the time from opening the page to the first chart: what the visitor waits.
--pages      after the last run, open every page once, then report the server's resident memory and which
             installed distributions its modules came from (the measure behind tests/unit/project/test_lock.py's list).
--importtime where the seconds of the first session go: `python -X importtime` of what the first page imports,
             the largest top-level packages by cumulative time.
--server-python PY  run the servers with another environment's Python (`uv sync`'s .venv, the app's packages
             only), this one driving Chromium.
--root DIR   time another checkout (e.g. a clone at an older commit) with this one's Python; several roots are
             timed in turn, run by run, so that a machine busy with other work weighs on each alike.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import psutil

from harness import live_server  # the tests' way to find Chromium and a free port

ROOT = Path(__file__).resolve().parents[1]

# `streamlit run`, with the server's module names written to $BENCH_MODULES when it exits (SIGTERM included).
WRAPPER = """
import atexit, json, os, sys
def _dump():
    if os.environ.get("BENCH_MODULES"):
        with open(os.environ["BENCH_MODULES"], "w") as out:
            json.dump(sorted(sys.modules), out)
atexit.register(_dump)
from streamlit.web.cli import main
sys.argv = ["streamlit", "run", *sys.argv[1:]]
main()
"""
FIRST_CHART_JS = "() => document.querySelector('.al-heatmap[data-drawn]') !== null"
# The course map drawn: its title, the last lesson's row and the caption under the rows shown, the run over (the
# rows are `st.container(key="co-map-<lesson>")`, ui/views/course/flow.py's course_map)
COURSE_MAP_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.dataset.testScriptState !== 'notRunning') return false;
  const rows = document.querySelectorAll('[data-testid="stMain"] [class*="st-key-co-map-"]');
  const main = document.querySelector('[data-testid="stMain"]');
  return rows.length > 0 && rows[rows.length - 1].getBoundingClientRect().height > 0
    && main.innerText.includes('Your progress travels in this page');
}"""
REFERENCE = "import streamlit, torch"
UNTIL = [COURSE_MAP_JS, ""]  # what "drawn" means, and the page's URL path (--until)
APP = '[data-testid="stApp"]'


SERVER_PYTHON = [sys.executable]  # --server-python: the servers in another environment (e.g. the lock's app only)


def start(root: Path, port: int, log: Path, modules: Path | None = None) -> subprocess.Popen:
    cmd = [SERVER_PYTHON[0], "-c", WRAPPER, "dashboard.py", "--server.port", str(port)]
    cmd += ["--server.address", live_server.LOOPBACK, "--server.headless", "true"]
    cmd += ["--browser.gatherUsageStats", "false"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    if modules is not None:
        env["BENCH_MODULES"] = str(modules)
    with log.open("wb") as out:
        return subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)


OPEN_AFTER = [0.0]  # --open-after


def one_run(browser, root: Path, log: Path, modules: Path | None = None, pages: list[str] | None = None) -> dict:
    """One fresh server: seconds to healthy and to the first heatmap drawn; with pages, every page opened once."""
    port = live_server.free_port()
    base = f"http://{live_server.LOOPBACK}:{port}"
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    t0 = time.monotonic()
    proc = start(root, port, log, modules)
    out: dict = {}
    try:
        while live_server.health(base) != "ok":
            if proc.poll() is not None or time.monotonic() - t0 > 120:
                raise RuntimeError(f"server did not come up:\n{live_server.log_tail(log)}")
            time.sleep(0.02)
        out["health_s"] = time.monotonic() - t0
        time.sleep(OPEN_AFTER[0])
        opened = time.monotonic()
        page.goto(f"{base}/{UNTIL[1]}", wait_until="commit")
        page.wait_for_function(UNTIL[0], timeout=120_000, polling=20)
        out["first_chart_s"] = time.monotonic() - t0
        out["open_to_chart_s"] = time.monotonic() - opened
        cpu = psutil.Process(proc.pid).cpu_times()
        out["server_cpu_s"] = cpu.user + cpu.system  # what the wait costs on an idle machine, whatever the load
        if pages is not None:
            for path in pages:
                page.goto(f"{base}/{path}")
                page.wait_for_selector(f'{APP}[data-test-connection-state="CONNECTED"]', timeout=120_000)
                page.wait_for_timeout(150)
                page.wait_for_selector(f'{APP}[data-test-script-state="notRunning"]', timeout=120_000)
            time.sleep(1)
            out["rss_mib"] = psutil.Process(proc.pid).memory_info().rss / 2**20
    finally:
        context.close()
        live_server.stop(proc)
    return out


def reference(root: Path) -> float:
    """Seconds of a fresh `python -c "import streamlit, torch"` (the servers' Python), from its start to its exit."""
    t0 = time.monotonic()
    subprocess.run(
        [SERVER_PYTHON[0], "-c", REFERENCE], cwd=root, check=True, env={**os.environ, "PYTHONPATH": str(root)}
    )
    return time.monotonic() - t0


def page_paths(root: Path) -> list[str]:
    """Every page's URL path, from dashboard.py's list (the default page lives at /)."""
    return ["", *re.findall(r'"pages/(\w+)\.py"', (root / "dashboard.py").read_text())]


def distributions_of(modules: list[str]) -> set[str]:
    """The installed distributions (normalized names) that the named top-level modules came from."""
    owners = metadata.packages_distributions()
    found = set()
    for top in {m.split(".")[0] for m in modules}:
        for dist in owners.get(top, []):
            found.add(re.sub(r"[-_.]+", "-", dist).lower())
    return found


def importtime(root: Path, top: int = 12) -> list[tuple[str, float]]:
    """`python -X importtime` of the first session's imports (the dashboard's ui and the math package, after
    Streamlit, which the server has already imported): the top-level packages by cumulative seconds."""
    code = "import streamlit; import ui, attention"
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=root, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(root)}).stderr  # fmt: skip
    rows = []
    for line in err.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2][1:]
        depth = (len(name) - len(name.lstrip())) // 2
        if depth <= 2:
            rows.append((name.strip(), int(parts[1]) / 1e6))
    return sorted(rows, key=lambda r: -r[1])[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--open-after", type=float, default=0.0, help="seconds from healthy to opening the page")
    parser.add_argument("--pages", action="store_true", help="open every page once after the last run")
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--root", type=Path, nargs="+", default=[ROOT])
    parser.add_argument("--server-python", help="the Python that runs the servers (default: this one)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--until", nargs=2, metavar=("first-chart", "URL_PATH"),
                        help="time the first heatmap drawn on that page instead of the course map")  # fmt: skip
    args = parser.parse_args()
    if args.until:
        if args.until[0] != "first-chart":
            parser.error("--until takes first-chart and a page's URL path")
        UNTIL[:] = [FIRST_CHART_JS, args.until[1].strip("/")]
    what = "first chart" if args.until else "course map"
    if args.server_python:
        SERVER_PYTHON[0] = args.server_python
    OPEN_AFTER[0] = args.open_after
    roots = [root.resolve() for root in args.root]

    from playwright.sync_api import sync_playwright

    chromium, looked = live_server.find_chromium()
    if chromium is None:
        sys.exit(f"no Chromium ({looked})")
    report: dict = {str(root): {"runs": []} for root in roots}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=live_server.CHROMIUM_ARGS)
        refs: list[float] = []
        for k in range(args.runs):
            refs.append(reference(roots[0]))
            print(f"reference run {k + 1}: python -c {REFERENCE!r} {refs[-1]:.2f} s "
                  f"(load average {os.getloadavg()[0]:.2f})", flush=True)  # fmt: skip
            for root in roots:
                run = one_run(browser, root, Path(tmp) / f"server{k}.log")
                run["load"] = os.getloadavg()[0]
                report[str(root)]["runs"].append(run)
                print(f"{root} run {k + 1}: healthy {run['health_s']:.2f} s, {what} {run['first_chart_s']:.2f} s "
                      f"({run['open_to_chart_s']:.2f} s after the page opened; server CPU {run['server_cpu_s']:.2f} s; "
                      f"load average {run['load']:.2f})", flush=True)  # fmt: skip
        ref = statistics.median(refs)
        report["reference"] = {"code": REFERENCE, "runs_s": refs, "median_s": ref}
        print(f"reference: python -c {REFERENCE!r}, median of {args.runs}: {ref:.2f} s "
              f"({', '.join(f'{r:.2f}' for r in refs)})")  # fmt: skip
        for root in roots:
            mine = report[str(root)]
            for key in ("health_s", "first_chart_s", "open_to_chart_s", "server_cpu_s", "load"):
                mine[f"median_{key}"] = statistics.median(r[key] for r in mine["runs"])
            mine["ratio"] = mine["median_first_chart_s"] / ref
            print(f"{root}: median of {args.runs}: healthy {mine['median_health_s']:.2f} s, "
                  f"{what} {mine['median_first_chart_s']:.2f} s ({mine['median_open_to_chart_s']:.2f} s after the "
                  f"page opened), server CPU {mine['median_server_cpu_s']:.2f} s; {what} / reference "
                  f"{mine['ratio']:.2f} (load average {mine['median_load']:.2f})")  # fmt: skip
        if args.pages:
            for root in roots:
                modules = Path(tmp) / "modules.json"
                run = one_run(browser, root, Path(tmp) / "pages.log", modules, page_paths(root))
                imported = sorted(distributions_of(json.loads(modules.read_text())))
                report[str(root)].update(rss_mib=run["rss_mib"], imported=imported)
                print(f"{root}: every page once: server resident memory {run['rss_mib']:.0f} MiB")
                print(f"{len(imported)} distributions imported by the server: {' '.join(imported)}")
        browser.close()
    if args.importtime:
        for root in roots:
            report[str(root)]["importtime"] = importtime(root)
            print(f"{root}: the first session's imports, cumulative seconds (python -X importtime):")
            for name, seconds in report[str(root)]["importtime"]:
                print(f"  {seconds:6.2f}  {name}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
