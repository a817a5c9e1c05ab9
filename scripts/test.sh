#!/usr/bin/env bash
# CI's habit: the README's test command (scripts/lab.py test) under its old name. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" scripts/lab.py test "$@"
