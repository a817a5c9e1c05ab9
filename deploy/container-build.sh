#!/usr/bin/env bash
# Builds the room's three images with podman on a machine that cannot fetch base images (this project's CI):
#
#   bash deploy/container-build.sh
#
# 1. The base, debian:bookworm-slim, when podman has none: a minimal root file system made from Debian's own
#    packages (debootstrap, from the machine's Debian mirror) and imported. Where base images can be pulled,
#    this step finds the pulled one and does nothing.
# 2. localhost/attention-lab (Dockerfile), localhost/attention-lab-haproxy (deploy/haproxy.Dockerfile) and
#    localhost/attention-lab-redis (deploy/redis.Dockerfile: the class poll's rooms), the images compose.yaml runs. PIP_FIND_LINKS and PIP_CERT, when they name local files (a wheelhouse, a CA
#    bundle), are mounted read-only into the build and passed to pip.
#
# Needs root and Debian's podman, runc and debootstrap (`apt-get install -y podman podman-compose runc
# debootstrap`). podman runs with deploy/containers.conf unless CONTAINERS_CONF names another: runc and cgroupfs
# (this machine's cgroups are v1 and v2 mixed, which crun refuses) and file limits within the machine's own;
# use the same CONTAINERS_CONF with podman-compose (tests/system/test_proxy.py does).
set -euo pipefail
cd "$(dirname "$0")/.."

export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/deploy/containers.conf}"
base="${BASE:-debian:bookworm-slim}"

if ! podman image exists "$base"; then
  echo "== $base: a root file system from Debian's packages (debootstrap), imported"
  rootfs="$(mktemp -d -t attention-lab-rootfs.XXXXXX)"
  trap 'rm -rf "$rootfs"' EXIT
  debootstrap --variant=minbase bookworm "$rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" > "$rootfs.log" 2>&1 \
    || { tail -n 20 "$rootfs.log" >&2; exit 1; }
  tar -C "$rootfs" -c . | podman import - "docker.io/library/$base"
fi

build=(podman build --format docker --pull=never --network host --build-arg "BASE=$base")
# pip's settings that name local files (a wheelhouse, a CA bundle): mounted into the build under /run/pip-host/
# (never over the image's own files: a host CA bundle at /etc/ssl/certs/ca-certificates.crt mounted in place made
# the image's `apt-get install ca-certificates` fail, "Device or resource busy") and passed on.
for var in PIP_FIND_LINKS PIP_CERT; do
  value="${!var:-}"
  if [[ -n "$value" && -e "$value" ]]; then
    inside="/run/pip-host/$var"
    build+=(-v "$value:$inside:ro" --build-arg "$var=$inside")
  fi
done

echo "== localhost/attention-lab (Dockerfile)"
"${build[@]}" -t localhost/attention-lab:latest .
echo "== localhost/attention-lab-haproxy (deploy/haproxy.Dockerfile)"
"${build[@]}" -f deploy/haproxy.Dockerfile -t localhost/attention-lab-haproxy:latest .
echo "== localhost/attention-lab-redis (deploy/redis.Dockerfile)"
"${build[@]}" -f deploy/redis.Dockerfile -t localhost/attention-lab-redis:latest .
echo "built; run them with: CONTAINERS_CONF=$CONTAINERS_CONF podman-compose up -d"
