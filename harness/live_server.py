"""One way to start the real server and find the browser, shared by the browser tests, the reliability
tests and the load test: `streamlit run dashboard.py` on a free loopback port, and Debian's Chromium; and
deploy/run.sh (several replicas behind HAProxy, kept running by supervisord) on free loopback ports, for the proxy
tests and the load test, with a look at what supervisord and HAProxy see (each replica's pid, each server's state).

Playwright cannot download its own browsers here, so the system Chromium is used: $CHROMIUM_PATH, else
/usr/bin/chromium, else `chromium` on PATH.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def start(
    port: int, log: Path, append: bool = False, options: Sequence[str] = (), root: Path = ROOT
) -> subprocess.Popen:
    """`streamlit run dashboard.py` on loopback, its output in `log`; returns once /_stcore/health says ok.

    options: further `streamlit run` flags, e.g. ("--server.disconnectedSessionTTL", "10").
    root: the checkout whose dashboard runs (another one, e.g. a `git worktree` of an older commit, for a before).

    Raises RuntimeError (with the log's tail) when the server exits or does not answer in time.
    """
    cmd = [sys.executable, "-m", "streamlit", "run", "dashboard.py", "--server.port", str(port)]
    cmd += ["--server.address", LOOPBACK, "--server.headless", "true", "--server.fileWatcherType", "none"]
    cmd += ["--browser.gatherUsageStats", "false", *options]
    env = {**os.environ, "PYTHONPATH": str(root)}
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab" if append else "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
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


@contextlib.contextmanager
def serving(log: Path, **start_options: Any) -> Iterator[str]:
    """A fresh server on a free port for the block (`start`'s options), stopped after it: yields its base URL."""
    port = free_port()
    proc = start(port, log, **start_options)
    try:
        yield f"http://{LOOPBACK}:{port}"
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# --------------------------------------------------------------------------- several processes behind a proxy

DEPLOY = ROOT / "deploy" / "run.sh"
RECIPE_TIMEOUT_S = 180  # every process imports torch and Streamlit at once, on as few as 2 cores


def find_haproxy() -> str | None:
    """HAProxy's path (Debian puts it in /usr/sbin, not on every PATH), None when not installed."""
    for candidate in (os.environ.get("HAPROXY"), shutil.which("haproxy"), "/usr/sbin/haproxy"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def find_supervisord() -> str | None:
    """supervisord's path (Debian's `supervisor` package), None when not installed."""
    for candidate in (os.environ.get("SUPERVISORD"), shutil.which("supervisord"), "/usr/bin/supervisord"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def require_haproxy() -> str:
    """HAProxy and supervisord, which deploy/run.sh needs, for a test; skips without them, or fails when CI is
    set (as `require_chromium` does). Returns HAProxy's path."""
    import pytest

    path = find_haproxy()
    missing = [name for name, found in (("haproxy", path), ("supervisor", find_supervisord())) if found is None]
    if missing:
        reason = (f"no {' or '.join(missing)} found (looked at $HAPROXY/$SUPERVISORD, PATH, /usr/sbin, /usr/bin): "
                  f"`apt-get install -y {' '.join(missing)}`")  # fmt: skip
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and the proxy tests cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    return path


@dataclass
class Recipe:
    """deploy/run.sh running: the proxy's address and each process's own (s1, s2, ... in order)."""

    proc: subprocess.Popen
    proxy: str
    replicas: list[str]
    log_dir: Path


def free_ports(n: int) -> int:
    """The first of n consecutive free loopback ports (run.sh numbers its processes from one port)."""
    for _ in range(50):
        first = free_port()
        try:
            for port in range(first, first + n):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.bind((LOOPBACK, port))
            return first
        except OSError:
            continue
    raise RuntimeError(f"no {n} consecutive free ports found")


# Runs argv[1:] with SIGINT and SIGQUIT at their defaults, as a terminal's foreground command has them. A test
# process started as a script's background job (a full run, CI) has them ignored and passes that on, and bash cannot
# trap a signal ignored on entry: run.sh's Ctrl-C trap was then silently not set, supervisord (which sets its own
# handler) stopped on the SIGINT, and run.sh exited 1, 'supervisord exited', instead of 130 (issue 32; passed alone).
AS_FROM_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.signal(signal.SIGQUIT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])"
)


def start_recipe(processes: int, log_dir: Path, env: dict[str, str] | None = None) -> Recipe:
    """`bash deploy/run.sh processes` on loopback and free ports (env: more of its settings, e.g.
    LAB_WATCHDOG_S); returns once the proxy and every process answer /_stcore/health. RuntimeError (with the
    logs' tails) when it exits or does not answer in time."""
    proxy_port, first = free_port(), free_ports(processes)
    env = {**os.environ, "LAB_ADDRESS": LOOPBACK, "LAB_PORT": str(proxy_port), "LAB_FIRST_PORT": str(first),
           "LAB_LOG_DIR": str(log_dir), "PYTHON": sys.executable, **(env or {})}  # fmt: skip
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / "run.log").open("wb") as out:
        # Its own process group: a stray child can then be found and stopped by the group's id. Started as from a
        # terminal, with SIGINT and SIGQUIT at their defaults (`AS_FROM_A_TERMINAL`).
        proc = subprocess.Popen([sys.executable, "-c", AS_FROM_A_TERMINAL, "bash", str(DEPLOY), str(processes)],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    recipe = Recipe(proc, f"http://{LOOPBACK}:{proxy_port}",
                    [f"http://{LOOPBACK}:{port}" for port in range(first, first + processes)], log_dir)  # fmt: skip
    deadline = time.monotonic() + RECIPE_TIMEOUT_S
    # Every replica answering, and HAProxy sending learners to each (it needs two good checks in a row).
    while any(health(base) != "ok" for base in (recipe.proxy, *recipe.replicas)) or not all_up(recipe):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_recipe(recipe)
            logs = "\n".join(f"== {f.name}\n{log_tail(f, 15)}" for f in sorted(log_dir.glob("*.log")))
            raise RuntimeError(f"deploy/run.sh did not come up (exit {proc.returncode}):\n{logs}")
        time.sleep(0.5)
    return recipe


def stop_recipe(recipe: Recipe) -> None:
    """SIGTERM to run.sh, which stops its processes; if it has not finished in 30 s, its group is killed."""
    recipe.proc.terminate()
    try:
        recipe.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(recipe.proc.pid, signal.SIGKILL)  # run.sh is still there, so its group id is still its own
        recipe.proc.wait()


def all_up(recipe: Recipe) -> bool:
    """Whether HAProxy says every replica is UP (False while its admin socket is not there yet)."""
    try:
        servers = proxy_servers(recipe)
    except OSError:
        return False
    return len(servers) == len(recipe.replicas) and all(state == "UP" for state in servers.values())


def replica_pid(recipe: Recipe, name: str) -> int | None:
    """The pid supervisord gives for replica `name` (s1, s2, ...), None while it is not running."""
    supervisorctl = shutil.which("supervisorctl") or "/usr/bin/supervisorctl"
    done = subprocess.run([supervisorctl, "-s", f"unix://{recipe.log_dir}/supervisor.sock", "pid", f"replica:{name}"],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    pid = done.stdout.strip()
    return int(pid) if pid.isdigit() and int(pid) > 0 else None


def proxy_command(recipe: Recipe, command: str) -> str:
    """HAProxy's answer to one command on its admin socket (`show stat`, `show table attention_lab`, ...)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(recipe.log_dir / "haproxy.sock"))
        s.sendall(command.encode() + b"\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data.decode()


def proxy_servers(recipe: Recipe) -> dict[str, str]:
    """What HAProxy says of each replica (s1: "UP", "DOWN", "UP 1/2", ...), from its admin socket's `show stat`."""
    lines = proxy_command(recipe, "show stat").splitlines()
    header = lines[0].lstrip("# ").split(",")
    rows = [dict(zip(header, line.split(","), strict=False)) for line in lines[1:] if line]
    return {r["svname"]: r["status"] for r in rows if r["pxname"] == "streamlit" and r["svname"] != "BACKEND"}


def wait_for(what: str, check, timeout: float) -> float:
    """Seconds until check() is true (polled every 0.2 s); TimeoutError naming `what` after `timeout` s."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{what}: not within {timeout:g} s")
        time.sleep(0.2)
    return time.monotonic() - start
