"""The installed environment is the one requirements.txt promises: torch 2.13.0's CPU build, no CUDA wheels,
and the Streamlit settings that keep tracebacks and usage statistics away from users."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _requirements(name: str) -> list[str]:
    lines = (ROOT / name).read_text().splitlines()
    return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]


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


def test_requirements_pin_torch_and_add_the_cpu_index():
    lines = _requirements("requirements.txt")
    assert "torch==2.13.0" in lines, lines
    index_lines = [line for line in lines if line.startswith(("--extra-index-url", "--index-url"))]
    assert index_lines == [f"--extra-index-url {CPU_INDEX}"], index_lines
    pins = {m.group(1).lower(): m.group(2) for line in lines if (m := re.fullmatch(r"([\w.-]+)==([\w.+]+)", line))}
    for name in ("streamlit", "altair", "pandas", "torch"):
        assert name in pins, f"{name} is not pinned in requirements.txt"
    for name in ("streamlit", "altair", "pandas"):
        assert metadata.version(name) == pins[name], f"{name}: installed {metadata.version(name)}, pinned {pins[name]}"
    assert not {"pytest", "playwright", "hypothesis", "ruff"} & set(pins), "test tools belong in requirements-dev.txt"


def test_dev_requirements_build_on_the_app_requirements():
    lines = _requirements("requirements-dev.txt")
    assert lines[0] == "-r requirements.txt"
    names = {re.split(r"[=<>!~\[ ]", line, maxsplit=1)[0].lower() for line in lines[1:]}
    assert {"pytest", "pytest-timeout", "hypothesis", "playwright", "ruff", "psutil"} <= names, names


def test_streamlit_config_hides_errors_and_sends_no_statistics():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["client"]["showErrorDetails"] == "none", config["client"]
    assert config["browser"]["gatherUsageStats"] is False
    assert config["server"]["headless"] is True
    theme = config.get("theme", {})
    fonts = [v for k, v in theme.items() if "font" in k.lower()]
    assert not any("http" in str(v) for v in fonts), "a font fetched from the internet at run time"
