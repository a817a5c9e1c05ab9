#!/usr/bin/env bash
# A room of learners: several Streamlit processes behind HAProxy with sticky sessions, one command.
#
#   bash deploy/run.sh [processes]        (default: one per core; Ctrl-C stops them all)
#
# Starts `streamlit run dashboard.py` on 127.0.0.1:LAB_FIRST_PORT, LAB_FIRST_PORT+1, ... (8511, 8512, ...),
# waits until each answers /_stcore/health, then HAProxy (deploy/haproxy.cfg) on LAB_ADDRESS:LAB_PORT
# (0.0.0.0:8501: every interface, as `streamlit run` itself listens, so learners on the room's network can
# open it). When any of them exits, or on Ctrl-C or SIGTERM, it stops the others.
#
# Environment: LAB_ADDRESS, LAB_PORT, LAB_FIRST_PORT, LAB_LOG_DIR (the processes' logs and the generated
# backend, default a new temporary folder), PYTHON (default .venv/bin/python, else python3), HAPROXY.
# Streamlit's own settings can be given as STREAMLIT_* variables (STREAMLIT_SERVER_MAX_UPLOAD_SIZE=...).
set -euo pipefail
cd "$(dirname "$0")/.."

processes="${1:-$(nproc)}"
if ! [[ "$processes" =~ ^[1-9][0-9]?$ ]]; then
  echo "usage: bash deploy/run.sh [processes]   (1 to 99; default: one per core)" >&2
  exit 2
fi
export LAB_ADDRESS="${LAB_ADDRESS:-0.0.0.0}" LAB_PORT="${LAB_PORT:-8501}"
first_port="${LAB_FIRST_PORT:-8511}"
log_dir="${LAB_LOG_DIR:-$(mktemp -d -t attention-lab-deploy.XXXXXX)}"
mkdir -p "$log_dir"
python="${PYTHON:-}"
[[ -z "$python" && -x .venv/bin/python ]] && python=.venv/bin/python
python="${python:-python3}"
# Debian installs it in /usr/sbin, which is not on every user's PATH.
haproxy="${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}"
if [[ ! -x "$haproxy" ]]; then
  echo "deploy/run.sh: no haproxy found; install Debian's with \`apt-get install -y haproxy\` or set HAPROXY" >&2
  exit 1
fi

pids=()
stop_all() {
  trap - EXIT INT TERM
  if ((${#pids[@]})); then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
}
trap stop_all EXIT
# Background children of a script ignore Ctrl-C, so the EXIT trap is what stops them.
trap 'exit 130' INT
trap 'exit 143' TERM

healthy() {
  "$python" -c 'import sys, urllib.request as u
sys.exit(u.build_opener(u.ProxyHandler({})).open(sys.argv[1], timeout=2).read() != b"ok")' "$1" 2>/dev/null
}

servers="$log_dir/servers.cfg"
echo "backend streamlit" > "$servers"
for ((i = 1; i <= processes; i++)); do
  port=$((first_port + i - 1))
  # The math is small matrices: one thread each keeps N processes from fighting over N cores. Headless and
  # no usage statistics come from .streamlit/config.toml.
  OMP_NUM_THREADS=1 PYTHONPATH="$PWD" "$python" -m streamlit run dashboard.py --server.port "$port" \
    --server.address 127.0.0.1 --server.fileWatcherType none > "$log_dir/streamlit-$i.log" 2>&1 &
  pids+=($!)
  echo "    server s$i 127.0.0.1:$port cookie s$i" >> "$servers"
done

deadline=$((SECONDS + 120))
# wait_up URL PID WHAT LOG: until URL answers healthy; exits with WHAT's log when PID dies or the deadline passes
wait_up() {
  until healthy "$1"; do
    if ! kill -0 "$2" 2>/dev/null || ((SECONDS > deadline)); then
      echo "deploy/run.sh: $3 did not start; its log ($4):" >&2
      tail -n 20 "$4" >&2
      exit 1
    fi
    sleep 0.3
  done
}
for ((i = 1; i <= processes; i++)); do
  port=$((first_port + i - 1))
  wait_up "http://127.0.0.1:$port/_stcore/health" "${pids[i - 1]}" "streamlit on port $port" \
    "$log_dir/streamlit-$i.log"
done

"$haproxy" -db -f deploy/haproxy.cfg -f "$servers" > "$log_dir/haproxy.log" 2>&1 &
pids+=($!)
host="$LAB_ADDRESS"
[[ "$host" == 0.0.0.0 ]] && host=127.0.0.1
wait_up "http://$host:$LAB_PORT/_stcore/health" "${pids[-1]}" haproxy "$log_dir/haproxy.log"
where="http://$LAB_ADDRESS:$LAB_PORT/"
[[ "$LAB_ADDRESS" == 0.0.0.0 ]] && where="http://<this machine's address>:$LAB_PORT/ (every interface)"
echo "Attention Lab: $processes processes behind $where; logs in $log_dir; Ctrl-C stops them all"

# Until any of them exits (then the EXIT trap stops the rest) or a signal arrives.
wait -n "${pids[@]}" || true
echo "deploy/run.sh: a process exited; stopping the others (logs in $log_dir)" >&2
exit 1
