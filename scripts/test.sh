#!/usr/bin/env bash
# The project's one test command (the README's, and CI's through .ci/run):
#   bash scripts/test.sh [pytest arguments]
# Creates .venv when missing, installs the test requirements and the package (editable), then runs
# ruff (lint and format) and pytest over everything: unit, AppTest and real-browser tests.
# Browser screenshots, the Streamlit server's log and junit.xml land in artifacts/ (git-ignored).
# Exits non-zero when ruff or pytest fails, and when pytest collects no tests (its exit code 5).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
# PyTorch's CPU index (in requirements.txt) is unreachable on some networks; pip's default 5 retries
# with back-off then cost minutes per install. One quick retry and a 5 s timeout keep that to seconds.
PIP_OPTS=(--retries 1 --timeout 5)

if [[ ! -x .venv/bin/python ]]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "scripts/test.sh: .venv needs Python 3.11 or newer" >&2; exit 1; }

# Install only when the requirements or pyproject.toml changed since the last successful install.
stamp=.venv/.installed-requirements
wanted="$(cat requirements.txt requirements-dev.txt pyproject.toml | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$wanted" ]]; then
  .venv/bin/pip install "${PIP_OPTS[@]}" -r requirements-dev.txt -e .
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
