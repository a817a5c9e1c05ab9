"""Fetch, with pip, every PyPI-hosted file the app's install takes on macOS (arm64) and Windows (amd64), for CPython
3.11, 3.12 and 3.13, each checked against its locked digest: the proof that requirements.txt (uv.lock's export)
installs there without a source build. pip evaluates environment markers against the machine it runs on, not
--platform, so each target's requirements are selected here first (packaging's markers), then

    pip download --only-binary :all: --no-deps --require-hashes --platform P --python-version V -r <target's lines>

Run with the project's .venv (it needs `packaging`): .venv/bin/python -m benchmarks.pip_download_check [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from packaging.markers import Marker

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {
    "macosx_14_0_arm64": {"sys_platform": "darwin", "platform_system": "Darwin", "platform_machine": "arm64",
                          "os_name": "posix"},
    "win_amd64": {"sys_platform": "win32", "platform_system": "Windows", "platform_machine": "AMD64",
                  "os_name": "nt"},
}  # fmt: skip


def requirements_for(text: str, env: dict[str, str]) -> list[str]:
    """The export's requirement entries (pin, markers, hashes) whose markers hold in `env`, markers dropped."""
    entries: list[list[str]] = []
    for line in text.splitlines():
        if re.match(r"[A-Za-z0-9]", line):
            entries.append([])
        if entries and line.strip() and not line.lstrip().startswith("#"):
            entries[-1].append(line.strip().removesuffix("\\").strip())
    kept = []
    for head, *rest in entries:
        pin, _, marker = head.partition(";")
        if marker.strip() and not Marker(marker.strip()).evaluate(env):
            continue
        kept.append(" ".join([pin.strip(), *(part for part in rest if part.startswith("--hash="))]))
    return kept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="append a Markdown table here")
    args = parser.parse_args()
    text = (ROOT / "requirements.txt").read_text()
    rows, failed = [], 0
    # pip's own configuration on the machine (a constraints file, find-links) must not take part: PyPI alone.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    for platform, markers in TARGETS.items():
        for python in ("3.11", "3.12", "3.13"):
            lines = requirements_for(text, {**markers, "python_version": python, "python_full_version": f"{python}.0",
                                            "implementation_name": "cpython",
                                            "platform_python_implementation": "CPython", "extra": ""})  # fmt: skip
            with tempfile.TemporaryDirectory() as folder:
                (Path(folder) / "req.txt").write_text("\n".join(lines) + "\n")
                start = time.monotonic()
                done = subprocess.run(
                    [sys.executable, "-m", "pip", "download", "--isolated", "--disable-pip-version-check",
                     "--index-url", "https://pypi.org/simple", "--only-binary", ":all:", "--no-deps",
                     "--require-hashes", "--platform", platform, "--python-version", python,
                     "--implementation", "cp", "-d", folder, "-r", str(Path(folder) / "req.txt")],
                    capture_output=True, text=True, env=env,
                )  # fmt: skip
                files = sorted(p.name for p in Path(folder).iterdir() if p.suffix == ".whl")
                size = sum((Path(folder) / name).stat().st_size for name in files) / 2**20
            torch = next((name for name in files if name.startswith("torch-")), "none")
            ok = done.returncode == 0 and len(files) == len(lines)
            failed += not ok
            rows.append(f"| {platform} | {python} | {'ok' if ok else 'FAILED'} | {len(lines)} | {len(files)} | "
                        f"{size:,.0f} MiB | {torch} | {time.monotonic() - start:.0f} s |")  # fmt: skip
            print(rows[-1], flush=True)
            if not ok:
                print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
    table = ["| platform | Python | pip download | requirements | wheels fetched | size | torch | time |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |", *rows]  # fmt: skip
    if args.out:
        with args.out.open("a") as out:
            out.write("\n".join(table) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
