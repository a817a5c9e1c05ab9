#!/usr/bin/env python3
r"""Install Attention Lab's locked packages into .venv, then start the app or run the tests.

    python3 scripts/lab.py                 (Windows PowerShell: py scripts\lab.py)
        installs uv.lock's app packages into .venv and runs `streamlit run dashboard.py` (http://localhost:8501);
        arguments after `run` go to streamlit: python3 scripts/lab.py run --server.port 8600
    python3 scripts/lab.py test [--fast] [pytest arguments]
        installs the test tools and oracles too, then runs ruff (lint, format) and pytest: every tier (unit, app,
        browser, system; what CI runs), or with --fast the fast tier a developer runs every few minutes: unit and
        app side by side, less the thorough group (transformers' oracles, exhaustive inputs; pytest -m thorough)
    python3 scripts/lab.py install [--test]
        installs only

Standard library only: it runs before anything is installed, on macOS, Windows and Linux. uv (pinned, from pip's
own index) installs exactly uv.lock, compiled to bytecode. Where PyTorch's CPU index cannot be reached (a classroom
offline with a mirror or a wheelhouse, a company proxy), everything else still comes from the lock with uv and
torch with pip, from pip's own sources (its index, mirror or find-links), and only if its SHA-256 is the lock's.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UV_VERSION = "0.13.9"
# The twelve targets of uv.lock (pyproject.toml's [tool.uv] environments): these Pythons on these systems.
PYTHONS = ((3, 11), (3, 12), (3, 13))
SYSTEMS = {
    ("linux", "x86_64"): "Linux x86-64",
    ("linux", "aarch64"): "Linux aarch64",
    ("darwin", "arm64"): "macOS on Apple silicon",
    ("win32", "amd64"): "Windows x86-64",
}
SUPPORTED = "CPython 3.11, 3.12 or 3.13 on Linux (x86-64, aarch64), macOS (Apple silicon) or Windows (x86-64)"


def unsupported(version: tuple[int, int], implementation: str, system: str, machine: str) -> str | None:
    """One sentence saying why this interpreter cannot run the lab, or None when it can."""
    machine = {"arm64": "arm64", "aarch64": "aarch64", "amd64": "amd64", "x86_64": "x86_64"}.get(
        machine.lower(), machine
    )
    if system == "linux" and machine == "arm64":
        machine = "aarch64"
    if system == "win32" and machine == "x86_64":
        machine = "amd64"
    found = f"{implementation.capitalize() if implementation != 'cpython' else 'CPython'} {version[0]}.{version[1]}"
    where = SYSTEMS.get((system, machine), f"{system} {machine}")
    if implementation != "cpython" or version not in PYTHONS or (system, machine) not in SYSTEMS:
        return (
            f"Attention Lab installs on {SUPPORTED}; this is {found} on {where}: "
            "run this script with a supported Python (from python.org, or `uv python install 3.12`)."
        )
    return None


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def venv_tool(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / (name + (".exe" if os.name == "nt" else ""))


def torch_requirement(lock: dict, system: str) -> str:
    """The pip requirement of the torch uv.lock installs on `system`: its version and its wheels' digests."""
    linux = system == "linux"
    for package in lock["package"]:
        if package["name"] == "torch" and package["version"].endswith("+cpu") == linux:
            hashes = " ".join(f"--hash={wheel['hash']}" for wheel in package["wheels"])
            return f"torch=={package['version']} {hashes}\n"
    raise SystemExit(f"lab.py: uv.lock holds no torch for {system}")


def run(command: list[str | Path], **kw) -> int:
    return subprocess.run([str(part) for part in command], cwd=ROOT, **kw).returncode


def install(venv: Path, test: bool) -> None:
    """uv.lock's packages into `venv` (with the test groups when `test`), skipped when nothing changed since."""
    python = venv_python(venv)
    if not python.exists():
        print(f"== creating {venv.name} with Python {sys.version.split()[0]}", flush=True)
        if run([sys.executable, "-m", "venv", venv]):
            raise SystemExit("lab.py: could not create .venv")
    stamp = venv / (".installed-test" if test else ".installed-app")
    wanted = hashlib.sha256((ROOT / "uv.lock").read_bytes() + (ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return
    if not venv_tool(venv, "uv").exists():
        print(f"== installing uv {UV_VERSION}", flush=True)
        if run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"uv=={UV_VERSION}"]):
            raise SystemExit("lab.py: pip could not install uv (is PyPI, or a mirror of it, reachable?)")
    # --inexact keeps pip and uv themselves in .venv; everything else is the lock's.
    sync = [venv_tool(venv, "uv"), "sync", "--locked", "--inexact", "--compile-bytecode"]
    sync += ["--all-groups"] if test else []
    # uv installs into the project's .venv; point it at ours in case another environment is active.
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv), "UV_HTTP_RETRIES": "0"}
    print("== installing uv.lock" + (" with the test groups" if test else ""), flush=True)
    if run(sync, env=env):
        # PyTorch's index unreachable: everything else with uv, then torch with pip from its own sources, taken
        # only if its SHA-256 is one of the lock's.
        print("lab.py: installing the locked torch with pip instead, checked against uv.lock's digests", flush=True)
        if run([*sync, "--no-install-package", "torch"], env=env):
            raise SystemExit("lab.py: uv could not install the lock (is PyPI, or a mirror of it, reachable?)")
        import tomllib  # here, not at the top: an unsupported Python (3.10) must reach the one-sentence check

        requirement = venv / "torch-locked.txt"
        requirement.write_text(torch_requirement(tomllib.loads((ROOT / "uv.lock").read_text()), sys.platform))
        pip = [python, "-m", "pip", "install", "--disable-pip-version-check", "--retries", "1", "--timeout", "5"]
        if run([*pip, "--no-deps", "--require-hashes", "-r", requirement]):
            raise SystemExit("lab.py: pip found no torch file with the lock's digest (see docs/install.md)")
    stamp.write_text(wanted)
    if test:  # a test install holds the app's packages too
        (venv / ".installed-app").write_text(wanted)


# The fast tier: the unit and app tiers less the thorough group (transformers' own models as oracles, every bad value
# of every control), in two processes at once, one a tier (a machine has two cores at least). Every tier, the thorough
# group included, runs without --fast (CI, the README's test command: pytest --all). A bare `pytest` runs the fast tier
# in one process (tests/conftest.py).
FAST_SHARDS = ("tests/unit", "tests/app")
FAST_MARK = ["-m", "not thorough"]


def test(venv: Path, args: list[str]) -> int:
    """ruff (lint, format) and pytest, every tier or with --fast the fast one; non-zero when any fails or pytest
    collects nothing."""
    fast = "--fast" in args
    args = [arg for arg in args if arg != "--fast"]
    (ROOT / "artifacts").mkdir(exist_ok=True)
    status = 0
    print("== ruff check", flush=True)
    status |= run([venv_tool(venv, "ruff"), "check", "."]) != 0
    print("== ruff format --check", flush=True)
    status |= run([venv_tool(venv, "ruff"), "format", "--check", "."]) != 0
    pytest = [venv_python(venv), "-m", "pytest"]
    named = [arg for arg in args if not arg.startswith("-") and (ROOT / arg.split("::")[0]).exists()]
    if fast and not named:  # the two tiers side by side, each with its log; then the logs, one after the other
        print(f"== pytest, the fast tier: {' and '.join(FAST_SHARDS)} at once", flush=True)
        procs = []
        for shard in FAST_SHARDS:
            name = shard.rsplit("/", 1)[-1]
            log = (ROOT / "artifacts" / f"pytest-{name}.log").open("w")
            cmd = [*pytest, f"--junitxml=artifacts/junit-{name}.xml", *FAST_MARK, shard, *args]
            procs.append((shard, log, subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)))
        codes = []
        for shard, log, proc in procs:
            codes.append(proc.wait())
            log.close()
            print(f"== {shard}", flush=True)
            print(Path(log.name).read_text(), end="", flush=True)
        if all(code == 5 for code in codes):
            print("lab.py: pytest collected no tests", file=sys.stderr)
        return 1 if status or any(codes) else 0
    print("== pytest", flush=True)
    # --all: every tier (tests/conftest.py), where a bare pytest runs the fast tier alone
    code = run([*pytest, "--junitxml=artifacts/junit.xml", *(FAST_MARK if fast else ["--all"]), *args])
    if code == 5:
        print("lab.py: pytest collected no tests", file=sys.stderr)
    return 1 if status or code else 0


def main(argv: list[str]) -> int:
    reason = unsupported(sys.version_info[:2], sys.implementation.name, sys.platform, platform.machine())
    if reason:
        print(reason, file=sys.stderr)
        return 2
    command, args = (argv[0], argv[1:]) if argv and argv[0] in ("run", "test", "install") else ("run", argv)
    venv = ROOT / ".venv"
    cfg = venv / "pyvenv.cfg"
    if cfg.exists():
        fields = dict(line.split(" = ", 1) for line in cfg.read_text().splitlines() if " = " in line)
        version = tuple(int(part) for part in fields.get("version_info", fields.get("version", "0.0")).split(".")[:2])
        if version not in PYTHONS:
            print(f".venv holds Python {version[0]}.{version[1]}, and the lab needs {SUPPORTED}: "
                  "delete the .venv folder and run this again.", file=sys.stderr)  # fmt: skip
            return 2
    install(venv, test=command == "test" or "--test" in args)
    args = [arg for arg in args if not (command == "install" and arg == "--test")]
    if command == "install":
        return 0
    if command == "test":
        return test(venv, args)
    return run([venv_python(venv), "-m", "streamlit", "run", "dashboard.py", *args])


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
