#!/usr/bin/env bash
# One replica of the room, as deploy/supervisord.conf starts it: `bash deploy/replica.sh N` runs
# `streamlit run dashboard.py` on 127.0.0.1:(LAB_FIRST_PORT + N - 1) in place of this shell (exec), so supervisord
# signals and watches Streamlit itself. LAB_REPLICA_ADDRESS: the address it listens on instead of 127.0.0.1, for a
# replica on a host of its own that the proxy reaches over the network (benchmarks/poll_room.py --netns).
#
# LAB_MEMORY_LIMIT (e.g. 690M, 2G; bytes without a suffix): the replica first moves into a memory cgroup of its
# own with that limit, so the kernel kills that replica alone when it goes over (supervisord then starts it
# again) and the others keep serving. Needs a writable cgroup memory controller (root, or a delegated cgroup
# v2 subtree): v1 at /sys/fs/cgroup/memory, else v2 at /sys/fs/cgroup. When it cannot be set, the replica does
# not start (asked for a limit, it never runs without one). The group is removed once the replica has exited,
# however it ended (`remove_when_gone`).
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

# The group outlives its processes unless removed (a cgroup is a folder; the kernel never removes one), and
# this shell's trap cannot do it: the shell becomes Streamlit (exec, so that supervisord, the watchdog and the
# kernel's OOM killer signal Streamlit itself), and the watchdog ends a hung replica with SIGKILL to its process
# group. So a small process outside both the group and the process group waits for the replica's pid to be gone,
# then removes the group, and its parent when it was the last (rmdir fails on a group still in use: harmless). One
# group a replica's process (its port and pid): a replica started again at once never reuses the one being removed.
remove_when_gone() {
  local pid="$1" group="$2"
  exec </dev/null >/dev/null 2>&1 setsid bash -c 'while kill -0 "$0" 2>/dev/null; do sleep 0.5; done
    for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$1" 2>/dev/null && break; sleep 0.5; done
    rmdir "${1%/*}" 2>/dev/null || true' "$pid" "$group"
}

if [[ -n "${LAB_MEMORY_LIMIT:-}" ]]; then
  bytes="$(limit_bytes "$LAB_MEMORY_LIMIT")" || {
    echo "deploy/replica.sh: LAB_MEMORY_LIMIT=$LAB_MEMORY_LIMIT is not a size (690M, 2G, or bytes)" >&2
    exit 1
  }
  if [[ -w /sys/fs/cgroup/memory ]]; then  # cgroup v1
    group="/sys/fs/cgroup/memory/attention-lab/$port-$$"
    mkdir -p "$group"
    remove_when_gone "$$" "$group" &
    echo "$bytes" > "$group/memory.limit_in_bytes"
  elif [[ -w /sys/fs/cgroup/cgroup.subtree_control ]] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
    mkdir -p /sys/fs/cgroup/attention-lab
    echo +memory > /sys/fs/cgroup/attention-lab/cgroup.subtree_control
    group="/sys/fs/cgroup/attention-lab/$port-$$"
    mkdir -p "$group"
    remove_when_gone "$$" "$group" &
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
exec "$python" -m streamlit run dashboard.py --server.port "$port" --server.address "${LAB_REPLICA_ADDRESS:-127.0.0.1}" \
  --server.fileWatcherType none
