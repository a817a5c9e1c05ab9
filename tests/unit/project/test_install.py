"""The README's two commands per system are scripts/lab.py's, CI runs the same one, and lab.py installs exactly
uv.lock, compiled to bytecode, with one sentence for an unsupported Python or system (no resolver trace)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
SCRIPT = (ROOT / "scripts" / "lab.py").read_text()
LOCK = tomllib.loads((ROOT / "uv.lock").read_text())

spec = importlib.util.spec_from_file_location("lab", ROOT / "scripts" / "lab.py")
lab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lab)

COMMANDS = {
    ("bash", "python3 scripts/lab.py"),
    ("powershell", r"py scripts\lab.py"),
    ("bash", "python3 scripts/lab.py test"),
    ("powershell", r"py scripts\lab.py test"),
}


def fenced(text: str) -> set[tuple[str, str]]:
    """(language, line) for every line of every fenced block."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)
    return {(language, line.strip()) for language, body in blocks for line in body.splitlines() if line.strip()}


def test_the_readme_is_a_learners_page():
    lines = README.splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move reference and figures to docs/, benchmarks/"
    assert "docs/screenshot.png" in README
    for target in ("docs/install.md", "docs/deploy.md", "docs/architecture.md", "docs/reference.md"):
        assert f"({target})" in README, f"the README does not link {target}"
        assert (ROOT / target).exists(), target


def test_the_readme_gives_the_two_commands_for_each_system():
    assert fenced(README) >= COMMANDS, sorted(COMMANDS - fenced(README))


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^timeout \"\$left\" python3 scripts/lab\.py test \"\$@\"", ci, flags=re.M), ci
    assert "scripts/lab.py test" in (ROOT / "scripts" / "test.sh").read_text()


def test_lab_installs_exactly_the_lock_compiled():
    """`uv sync --locked` (the lock, never a new resolution) with --compile-bytecode: a server that cannot write .pyc
    files (PYTHONDONTWRITEBYTECODE, a read-only image) would otherwise compile its packages from source at every
    start. pyproject.toml leaves it out, so Community Cloud's install at every wake compiles nothing ahead."""
    assert '"sync", "--locked", "--inexact", "--compile-bytecode"' in SCRIPT
    assert "compile-bytecode" not in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]
    import pandas
    import streamlit

    for module in (streamlit, pandas):
        assert Path(importlib.util.cache_from_source(module.__file__)).exists(), f"{module.__name__} not compiled"


@pytest.mark.parametrize("system", ["linux", "darwin", "win32"])
def test_the_pip_fallback_pins_the_locked_torch_by_its_digests(system):
    requirement = lab.torch_requirement(LOCK, system)
    version = "2.13.0+cpu" if system == "linux" else "2.13.0"
    assert requirement.startswith(f"torch=={version} --hash=sha256:")
    torch = next(p for p in LOCK["package"] if p["name"] == "torch" and p["version"] == version)
    assert set(re.findall(r"--hash=(\S+)", requirement)) == {w["hash"] for w in torch["wheels"]}


@pytest.mark.parametrize(
    ("version", "implementation", "system", "machine"),
    [
        ((3, 11), "cpython", "linux", "x86_64"),
        ((3, 12), "cpython", "linux", "aarch64"),
        ((3, 13), "cpython", "darwin", "arm64"),
        ((3, 12), "cpython", "win32", "AMD64"),
    ],
)
def test_a_supported_python_is_let_through(version, implementation, system, machine):
    assert lab.unsupported(version, implementation, system, machine) is None


@pytest.mark.parametrize(
    ("version", "implementation", "system", "machine", "named"),
    [
        ((3, 10), "cpython", "linux", "x86_64", "CPython 3.10 on Linux x86-64"),
        ((3, 14), "cpython", "darwin", "arm64", "CPython 3.14 on macOS on Apple silicon"),
        ((3, 12), "cpython", "darwin", "x86_64", "CPython 3.12 on darwin x86_64"),
        ((3, 12), "cpython", "win32", "ARM64", "CPython 3.12 on win32 arm64"),
        ((3, 11), "pypy", "linux", "x86_64", "Pypy 3.11 on Linux x86-64"),
    ],
)
def test_an_unsupported_python_or_system_gets_one_sentence(version, implementation, system, machine, named):
    reason = lab.unsupported(version, implementation, system, machine)
    assert reason is not None and "\n" not in reason
    assert named in reason and "3.11, 3.12 or 3.13" in reason


def test_python_3_10_is_refused_in_one_line_before_anything_is_installed(tmp_path):
    python = sorted(Path("/root/.pyenv/versions").glob("3.10*/bin/python"))
    if not python:
        pytest.skip("no Python 3.10 here (pyenv)")
    done = subprocess.run([python[0], ROOT / "scripts" / "lab.py"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "CPython 3.10" in done.stderr
    assert sys.version_info[:2] in lab.PYTHONS  # and the suite itself runs on a supported one
