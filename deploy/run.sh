#!/usr/bin/env bash
# A room of learners on one machine: several Streamlit replicas behind HAProxy with sticky sessions, kept
# running by supervisord (Debian's `supervisor` package). One command:
#
#   bash deploy/run.sh [processes]        (default: one per core; Ctrl-C stops them all)
#
# Writes HAProxy's server lines for the replicas and runs supervisord (deploy/supervisord.conf) in the
# foreground. supervisord starts `streamlit run dashboard.py` on 127.0.0.1:LAB_FIRST_PORT, LAB_FIRST_PORT+1, ...
# (8511, 8512, ...; deploy/replica.sh) and HAProxy (deploy/haproxy.cfg) on LAB_ADDRESS:LAB_PORT (0.0.0.0:8501:
# every interface, as `streamlit run` itself listens, so learners on the room's network can open it), and starts
# again any of them that exits. HAProxy takes a dead replica out of rotation in about 2 s, a hung one in about
# 7 s, and closes its connections, so its learners' browsers reconnect to a live one (deploy/haproxy.cfg).
#
# Environment: LAB_ADDRESS, LAB_PORT, LAB_FIRST_PORT, LAB_LOG_DIR (the logs, the generated backend and the
# control sockets; default a new temporary folder), LAB_MEMORY_LIMIT (each replica's memory limit, e.g. 690M:
# see deploy/replica.sh), LAB_CONN_PER_ADDRESS and LAB_CONN_RATE_PER_ADDRESS (connections one client address may
# hold at once, 500, and open in 10 s, 1000: deploy/haproxy.cfg says why), LAB_WATCHDOG_S (how long a replica that answered before may give no
# health "ok" before it is killed and started again; default 30: deploy/watchdog.py), PYTHON (default .venv/bin/python, else
# python3), HAPROXY, SUPERVISORD, REDIS_SERVER and LAB_REDIS_PORT (the class poll's Redis, on LAB_FIRST_PORT - 1;
# ATTENTION_LAB_REDIS_URL set: that Redis instead, none started), LAB_REDIS_DIR (its append-only file; default
# LAB_LOG_DIR/redis: give the same folder again and a new run.sh finds every room), ATTENTION_LAB_POLL_SECRET (the
# poll's token secret; default: one made once and kept in that Redis).
# Streamlit's own settings can be given as STREAMLIT_* variables (STREAMLIT_SERVER_MAX_UPLOAD_SIZE=...).
#
# Exit status: 130 after Ctrl-C (SIGINT), 143 after SIGTERM, once everything has stopped; 1 when it could not
# start (with the log that says why); 2 for a bad argument.
set -euo pipefail
cd "$(dirname "$0")/.."

processes="${1:-$(nproc)}"
if ! [[ "$processes" =~ ^[1-9][0-9]?$ ]]; then
  echo "usage: bash deploy/run.sh [processes]   (1 to 99; default: one per core)" >&2
  exit 2
fi
export LAB_ADDRESS="${LAB_ADDRESS:-0.0.0.0}" LAB_PORT="${LAB_PORT:-8501}" LAB_FIRST_PORT="${LAB_FIRST_PORT:-8511}"
export LAB_PROCESSES="$processes"
for limit in LAB_CONN_PER_ADDRESS LAB_CONN_RATE_PER_ADDRESS; do
  if [[ -n "${!limit:-}" ]] && ! [[ "${!limit}" =~ ^[1-9][0-9]{0,6}$ ]]; then
    echo "deploy/run.sh: $limit=${!limit} is not a number of connections (1 or more)" >&2
    exit 2
  fi
done
export LAB_LOG_DIR="${LAB_LOG_DIR:-$(mktemp -d -t attention-lab-deploy.XXXXXX)}"
mkdir -p "$LAB_LOG_DIR"
LAB_LOG_DIR="$(cd "$LAB_LOG_DIR" && pwd)"
python="${PYTHON:-}"
[[ -z "$python" && -x .venv/bin/python ]] && python=.venv/bin/python
python="${python:-python3}"
[[ "$python" == */* && "$python" != /* ]] && python="$PWD/$python"  # supervisord's programs start elsewhere
export LAB_PYTHON="$python"
# Debian installs them in /usr/sbin and /usr/bin; /usr/sbin is not on every user's PATH.
export LAB_HAPROXY="${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}"
supervisord="${SUPERVISORD:-$(command -v supervisord || echo /usr/bin/supervisord)}"
for tool in "$LAB_HAPROXY:haproxy" "$supervisord:supervisor"; do
  if [[ ! -x "${tool%%:*}" ]]; then
    echo "deploy/run.sh: no ${tool##*:} found; install Debian's with \`apt-get install -y haproxy supervisor\`" >&2
    exit 1
  fi
done

# The class poll's rooms (server/poll): Debian's redis-server on loopback, shared by every replica, unless
# ATTENTION_LAB_REDIS_URL already names a Redis. Without redis-server each replica keeps its own rooms (a learner sent
# to another replica than the projector's is told there is no such room), and this says so.
export LAB_REDIS_SERVER="${REDIS_SERVER:-$(command -v redis-server || echo /usr/bin/redis-server)}"
export LAB_REDIS_PORT="${LAB_REDIS_PORT:-$((LAB_FIRST_PORT - 1))}"
export LAB_REDIS_START=false
# Its append-only file: the rooms survive Redis's own restart (supervisord's), and run.sh's too when LAB_REDIS_DIR
# (or LAB_LOG_DIR) names the same folder again.
export LAB_REDIS_DIR="${LAB_REDIS_DIR:-$LAB_LOG_DIR/redis}"
mkdir -p "$LAB_REDIS_DIR"
LAB_REDIS_DIR="$(cd "$LAB_REDIS_DIR" && pwd)"
if [[ -z "${ATTENTION_LAB_REDIS_URL:-}" ]]; then
  if [[ -x "$LAB_REDIS_SERVER" ]]; then
    export LAB_REDIS_START=true ATTENTION_LAB_REDIS_URL="redis://127.0.0.1:$LAB_REDIS_PORT/0"
  else
    echo "deploy/run.sh: no redis-server (apt-get install -y redis-server): each replica keeps its own poll rooms" >&2
  fi
fi

# The backend: one server line a replica (HAProxy cannot count ports), and an admin socket for `show servers`.
servers="$LAB_LOG_DIR/servers.cfg"
{
  echo "global"
  echo "    stats socket $LAB_LOG_DIR/haproxy.sock mode 600 level admin"
  echo "backend streamlit"
  for ((i = 1; i <= processes; i++)); do
    echo "    server s$i 127.0.0.1:$((LAB_FIRST_PORT + i - 1)) cookie s$i"
  done
} > "$servers"
"$LAB_HAPROXY" -c -q -f deploy/haproxy.cfg -f "$servers" || { echo "deploy/run.sh: HAProxy's config is wrong" >&2; exit 1; }

# supervisord does the process management; this script only reports when the room is up and turns Ctrl-C and
# SIGTERM into one exit status: the signal is passed on, supervisord stops everything, then the script exits.
supervisor=""
signalled=""
stop() {
  signalled="$1"
  [[ -n "$supervisor" ]] && kill -TERM "$supervisor" 2>/dev/null
  return 0
}
# bash cannot trap a signal that was ignored when it started (a script's background job ignores SIGINT): started
# so, a SIGINT still stops supervisord, but this script then exits 1 ('supervisord exited'), not 130.
trap 'stop 130' INT
trap 'stop 143' TERM
"$supervisord" -n -c deploy/supervisord.conf > "$LAB_LOG_DIR/run-supervisord.log" 2>&1 &
supervisor=$!
[[ -n "$signalled" ]] && stop "$signalled"

healthy() {
  "$LAB_PYTHON" -c 'import sys, urllib.request as u
sys.exit(u.build_opener(u.ProxyHandler({})).open(sys.argv[1], timeout=2).read() != b"ok")' "$1" 2>/dev/null
}
host="$LAB_ADDRESS"
[[ "$host" == 0.0.0.0 ]] && host=127.0.0.1
urls=("http://$host:$LAB_PORT/_stcore/health")
for ((i = 1; i <= processes; i++)); do
  urls+=("http://127.0.0.1:$((LAB_FIRST_PORT + i - 1))/_stcore/health")
done
deadline=$((SECONDS + 180))  # every replica imports torch and Streamlit at once, on as few as 2 cores
up=0
while [[ -z "$signalled" ]] && kill -0 "$supervisor" 2>/dev/null; do
  up=1
  for url in "${urls[@]}"; do
    healthy "$url" || { up=0; break; }
  done
  ((up)) && break
  if ((SECONDS > deadline)); then
    echo "deploy/run.sh: not every replica answered in 180 s; the logs' ends ($LAB_LOG_DIR):" >&2
    for log in "$LAB_LOG_DIR"/streamlit-*.log "$LAB_LOG_DIR/haproxy.log"; do
      echo "== $log" >&2
      tail -n 15 "$log" >&2 || true
    done
    stop 1
    break
  fi
  sleep 0.5 || true  # killed by Ctrl-C: the trap has run; not `set -e`'s exit before everything has stopped
done
if ((up)) && [[ -z "$signalled" ]]; then
  where="http://$LAB_ADDRESS:$LAB_PORT/"
  [[ "$LAB_ADDRESS" == 0.0.0.0 ]] && where="http://<this machine's address>:$LAB_PORT/ (every interface)"
  echo "Attention Lab: $processes replicas behind $where; logs in $LAB_LOG_DIR; Ctrl-C stops them all"
  echo "  status: supervisorctl -s unix://$LAB_LOG_DIR/supervisor.sock status"
fi

# Until supervisord exits: after a signal (passed on above), or on its own (then its log says why).
status=0
while kill -0 "$supervisor" 2>/dev/null; do
  wait "$supervisor" && status=0 || status=$?
done
if [[ -n "$signalled" ]]; then
  exit "$signalled"
fi
echo "deploy/run.sh: supervisord exited with $status; its log: $LAB_LOG_DIR/supervisord.log" >&2
exit 1
