"""The installed environment is the one uv.lock promises: torch 2.13.0's CPU build, no CUDA wheels, the locked
versions, and the Streamlit settings that keep tracebacks and usage statistics away from users. (What the lock
itself holds is tests/unit/project/test_lock.py's.)"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]


def test_no_nvidia_distribution_is_installed():
    names = sorted({(d.metadata["Name"] or "").lower() for d in metadata.distributions()})
    cuda = [n for n in names if n.startswith("nvidia-") or n.startswith("nvidia_") or n == "triton"]
    assert cuda == [], f"CUDA packages in the environment: {cuda}"


def test_torch_is_the_pinned_cpu_build():
    assert torch.__version__.split("+")[0] == "2.13.0", torch.__version__
    assert torch.version.cuda is None, f"a CUDA build: CUDA {torch.version.cuda}"
    assert not torch.backends.cudnn.is_available()
    local = metadata.version("torch").partition("+")[2]
    assert local in ("", "cpu"), f"torch {metadata.version('torch')}"


def test_installed_versions_are_the_locked_ones():
    """The environment the tests run in is the lock's (scripts/test.sh installs it): every locked package that is
    installed has the locked version, and the app's pins are installed."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    locked: dict[str, set[str]] = {}
    for package in lock["package"]:
        locked.setdefault(package["name"], set()).add(package["version"])
    names = {re.sub(r"[-_.]+", "-", (d.metadata["Name"] or "")).lower(): d.version for d in metadata.distributions()}
    moved = {name: (version, locked[name]) for name, version in names.items() if name in locked}
    moved = {name: pair for name, pair in moved.items() if pair[0] not in pair[1]}
    assert not moved, f"installed versions that are not the locked ones (installed, locked): {moved}"
    for name in ("streamlit", "altair", "pandas", "torch", "safetensors", "tokenizers"):
        assert name in names, f"{name} is locked but not installed"


def test_streamlit_config_hides_errors_and_sends_no_statistics():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["client"]["showErrorDetails"] == "none", config["client"]
    assert config["browser"]["gatherUsageStats"] is False
    assert config["server"]["headless"] is True
    # no recursive inotify watch over the app's folder (and the .venv in it): see the comment in config.toml
    assert config["server"]["fileWatcherType"] == "none"
    theme = config.get("theme", {})
    fonts = [v for k, v in theme.items() if "font" in k.lower()]
    assert not any("http" in str(v) for v in fonts), "a font fetched from the internet at run time"
