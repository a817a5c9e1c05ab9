#!/usr/bin/env bash
# The project's one test command (the README's, and CI's through .ci/run):
#   bash scripts/test.sh [pytest arguments]
# Creates .venv when missing and installs uv.lock's exact set into it, compiled to bytecode (the app's packages, the
# test tools and the oracles, with uv from PyPI; pyproject.toml says why compiled here), then runs ruff (lint and
# format) and pytest over everything: unit, AppTest and real-browser tests.
# Browser screenshots, the Streamlit server's log and junit.xml land in artifacts/ (git-ignored).
# Exits non-zero when the install, ruff or pytest fails, and when pytest collects no tests (its exit code 5).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
UV_VERSION=0.13.9

if [[ ! -x .venv/bin/python ]]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "scripts/test.sh: .venv needs Python 3.11 or newer" >&2; exit 1; }

# Install only when the lock or pyproject.toml changed since the last successful install.
stamp=.venv/.installed-lock
wanted="$(cat uv.lock pyproject.toml | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$wanted" ]]; then
  [[ -x .venv/bin/uv ]] || .venv/bin/python -m pip install --quiet "uv==$UV_VERSION"
  # --inexact keeps pip and uv themselves in .venv; everything else is the lock's.
  if ! .venv/bin/uv sync --locked --inexact --all-groups --compile-bytecode; then
    # Where PyTorch's index cannot be reached (this project's CI machines): everything else from the lock with uv,
    # then torch with pip, which finds the same wheel file through its own configuration (find-links) and installs
    # it only if its SHA-256 is the lock's.
    echo "scripts/test.sh: installing the locked torch with pip instead, checked against uv.lock's hash" >&2
    .venv/bin/uv sync --locked --inexact --all-groups --compile-bytecode --no-install-package torch
    .venv/bin/python -c '
import tomllib
torch = next(p for p in tomllib.load(open("uv.lock", "rb"))["package"] if p["name"] == "torch")
print("torch==" + torch["version"], *("--hash=" + wheel["hash"] for wheel in torch["wheels"]))
' > .venv/torch-locked.txt
    .venv/bin/python -m pip install --retries 1 --timeout 5 --no-deps --require-hashes -r .venv/torch-locked.txt
  fi
  echo "$wanted" > "$stamp"
fi

mkdir -p artifacts
status=0
echo "== ruff check"
.venv/bin/ruff check . || status=1
echo "== ruff format --check"
.venv/bin/ruff format --check . || status=1

echo "== pytest"
set +e
.venv/bin/python -m pytest --junitxml=artifacts/junit.xml "$@"
code=$?
set -e
if [[ $code -eq 5 ]]; then
  echo "scripts/test.sh: pytest collected no tests" >&2
fi
if [[ $code -ne 0 ]]; then
  status=1
fi
exit "$status"
