"""What runs where (tests/conftest.py): a bare `pytest` runs the fast tier (tests/unit and tests/app, less the thorough
group); `pytest --all`, any run with CI set, and so .ci/run's `python3 scripts/lab.py test`, run every tier."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("tiers_conftest", ROOT / "tests" / "conftest.py")
tiers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tiers)


def config(source: str = "TESTPATHS", all_tiers: bool = False, markexpr: str = "") -> SimpleNamespace:
    options = {"all_tiers": all_tiers, "markexpr": markexpr}
    return SimpleNamespace(args_source=getattr(pytest.Config.ArgsSource, source), getoption=options.__getitem__)


def test_only_a_bare_run_outside_ci_is_the_fast_tier(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert tiers.fast_tier(config())
    assert not tiers.fast_tier(config(all_tiers=True))
    assert not tiers.fast_tier(config(source="ARGS"))  # paths named: exactly those
    assert not tiers.fast_tier(config(markexpr="browser"))
    for value, fast in (("1", False), ("true", False), ("0", True), ("", True), ("false", True)):
        monkeypatch.setenv("CI", value)
        assert tiers.fast_tier(config()) is fast, value


def test_the_fast_tier_leaves_out_the_browser_and_system_folders(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    tests = ROOT / "tests"
    ignored = {p.name for p in tests.iterdir() if p.is_dir() and tiers.pytest_ignore_collect(p, config())}
    assert {"browser", "system"} <= ignored and not ignored & {"unit", "app"}
    assert not any(tiers.pytest_ignore_collect(p, config(all_tiers=True)) for p in tests.iterdir())


def test_ci_runs_every_tier():
    """.ci/run runs lab.py's test command, which runs pytest with --all (and CI set): never the fast tier."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^export CI=", ci, flags=re.M) and re.search(r"python3 scripts/lab\.py test ", ci)
    lab = (ROOT / "scripts" / "lab.py").read_text()
    assert '*(FAST_MARK if fast else ["--all"])' in lab


def collected(*args: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600).stdout  # fmt: skip
    last = out.strip().splitlines()[-1]
    match = re.match(r"(\d+)(?:/(\d+))? tests? collected", last)
    assert match, out[-3000:]
    return int(match.group(1)), out


@pytest.mark.thorough  # collects the whole suite twice: --all, not the fast tier
def test_a_bare_pytest_collects_the_fast_tier_and_all_collects_every_tier():
    fast, fast_ids = collected()
    every, every_ids = collected("--all")
    assert 0 < fast < every
    assert "tests/unit/" in fast_ids and "tests/app/" in fast_ids
    assert "tests/browser/" not in fast_ids and "tests/system/" not in fast_ids
    assert "tests/browser/" in every_ids and "tests/system/" in every_ids
    thorough = "tests/unit/project/test_tiers.py::test_a_bare_pytest_collects_the_fast_tier_and_all_collects_every_tier"
    assert thorough in every_ids and thorough not in fast_ids
