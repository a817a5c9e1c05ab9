#!/usr/bin/env bash
# A developer's habit: the fast tier (ruff, unit and AppTest tests); --all runs every tier, as CI and the README's
# test command (python3 scripts/lab.py test) do. Other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
fast=--fast
for arg in "$@"; do
  if [[ $arg == --all ]]; then fast=; else args+=("$arg"); fi
done
exec "${PYTHON:-python3}" scripts/lab.py test $fast "${args[@]}"
