"""One way to start the real server and find the browser, shared by the browser tests, the reliability
tests and the load test: `streamlit run dashboard.py` on a free loopback port, and Debian's Chromium.

Playwright cannot download its own browsers here, so the system Chromium is used: $CHROMIUM_PATH, else
/usr/bin/chromium, else `chromium` on PATH.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = "127.0.0.1"
HEALTH_TIMEOUT_S = 90

# Headless, and nothing that reaches for Google's hosts: this machine's network is closed, and Chromium's
# background connections would otherwise be refused many at a time.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def find_chromium() -> tuple[str | None, str]:
    """The Chromium to drive, and where it was looked for (for a skip or failure message)."""
    env = os.environ.get("CHROMIUM_PATH")
    if env:
        found = env if os.access(env, os.X_OK) else None
        return found, f"CHROMIUM_PATH={env}"
    for candidate in ("/usr/bin/chromium", shutil.which("chromium")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate, candidate
    return None, "$CHROMIUM_PATH, /usr/bin/chromium and `chromium` on PATH"


def require_chromium() -> str:
    """The Chromium for a test; without one the test skips with the reason, or fails when CI is set (so a CI
    run can never pass by skipping the browser tests)."""
    import pytest

    path, looked = find_chromium()
    if path is None:
        reason = (
            f"no Chromium found (looked at {looked}); install Debian's with "
            "`apt-get install -y chromium` or set CHROMIUM_PATH"
        )
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and the browser tests cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def health(base: str) -> str | None:
    """The body of base/_stcore/health ("ok" when the server is up), None when it does not answer."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy
    try:
        with opener.open(f"{base}/_stcore/health", timeout=2) as response:
            return response.read().decode(errors="replace").strip()
    except (urllib.error.URLError, OSError):
        return None


def log_tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start(port: int, log: Path, append: bool = False) -> subprocess.Popen:
    """`streamlit run dashboard.py` on loopback, its output in `log`; returns once /_stcore/health says ok.

    Raises RuntimeError (with the log's tail) when the server exits or does not answer in time.
    """
    cmd = [sys.executable, "-m", "streamlit", "run", "dashboard.py", "--server.port", str(port)]
    cmd += ["--server.address", LOOPBACK, "--server.headless", "true", "--server.fileWatcherType", "none"]
    cmd += ["--browser.gatherUsageStats", "false"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab" if append else "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://{LOOPBACK}:{port}"
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    while health(base) != "ok":
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode} before answering:\n{log_tail(log)}")
        if time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(f"streamlit did not answer /_stcore/health in {HEALTH_TIMEOUT_S} s:\n{log_tail(log)}")
        time.sleep(0.2)
    return proc


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
