#!/usr/bin/env bash
# One replica of the room, as deploy/supervisord.conf starts it: `bash deploy/replica.sh N` runs
# `streamlit run dashboard.py` on 127.0.0.1:(LAB_FIRST_PORT + N - 1) in place of this shell (exec), so supervisord
# signals and watches Streamlit itself.
#
# LAB_MEMORY_LIMIT (e.g. 690M, 2G; bytes without a suffix): the replica first moves into a memory cgroup of its
# own with that limit, so the kernel kills that replica alone when it goes over (supervisord then starts it
# again) and the others keep serving. Needs a writable cgroup memory controller (root, or a delegated cgroup
# v2 subtree): v1 at /sys/fs/cgroup/memory, else v2 at /sys/fs/cgroup. When it cannot be set, the replica does
# not start (asked for a limit, it never runs without one).
set -euo pipefail
n="$1"
port=$((LAB_FIRST_PORT + n - 1))
python="${LAB_PYTHON:-python3}"

limit_bytes() {
  local value="${1^^}" number unit
  [[ "$value" =~ ^([0-9]+)([KMG]?)I?B?$ ]] || return 1
  number="${BASH_REMATCH[1]}" unit="${BASH_REMATCH[2]}"
  case "$unit" in
    K) echo $((number << 10)) ;;
    M) echo $((number << 20)) ;;
    G) echo $((number << 30)) ;;
    *) echo "$number" ;;
  esac
}

if [[ -n "${LAB_MEMORY_LIMIT:-}" ]]; then
  bytes="$(limit_bytes "$LAB_MEMORY_LIMIT")" || {
    echo "deploy/replica.sh: LAB_MEMORY_LIMIT=$LAB_MEMORY_LIMIT is not a size (690M, 2G, or bytes)" >&2
    exit 1
  }
  if [[ -w /sys/fs/cgroup/memory ]]; then  # cgroup v1
    group="/sys/fs/cgroup/memory/attention-lab/$port"
    mkdir -p "$group"
    echo "$bytes" > "$group/memory.limit_in_bytes"
  elif [[ -w /sys/fs/cgroup/cgroup.subtree_control ]] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
    mkdir -p /sys/fs/cgroup/attention-lab
    echo +memory > /sys/fs/cgroup/attention-lab/cgroup.subtree_control
    group="/sys/fs/cgroup/attention-lab/$port"
    mkdir -p "$group"
    echo "$bytes" > "$group/memory.max"
  else
    echo "deploy/replica.sh: LAB_MEMORY_LIMIT is set but no writable cgroup memory controller was found" >&2
    exit 1
  fi
  echo $$ > "$group/cgroup.procs"
  echo "deploy/replica.sh: s$n limited to $bytes bytes ($group)"
fi

# The math is small matrices: one thread each keeps N replicas from fighting over N cores. Headless and no
# usage statistics come from .streamlit/config.toml; Streamlit's own settings can be given as STREAMLIT_*.
export OMP_NUM_THREADS=1 PYTHONPATH="$PWD"
exec "$python" -m streamlit run dashboard.py --server.port "$port" --server.address 127.0.0.1 \
  --server.fileWatcherType none
