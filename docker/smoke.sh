#!/usr/bin/env bash
# Container smoke test for goro-demo, with podman (no Docker engine needed), as root:
#   1. makes the base image debian:bookworm if it is missing (docker/make-base-image.sh),
#   2. builds docker/Dockerfile from the repository root as localhost/goro-demo,
#   3. runs it with port 8080 published on 127.0.0.1 and checks GET /plaintext and
#      GET /healthz answer 200, and that the container got nofile=20000,
#   4. stops and removes the container.
# podman's settings come from docker/containers.conf (runc, cgroupfs, ulimits).
# Not part of .ci/run (building the image takes minutes). Exit status 0 = pass.
#
# Environment: GORO_SMOKE_PORT (default 18080), GORO_SMOKE_NETWORK (bridge|host;
# default: bridge, falling back to host networking where the bridge cannot be set up).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
export CONTAINERS_CONF=$here/containers.conf
image=localhost/goro-demo:latest
port=${GORO_SMOKE_PORT:-18080}
name=goro-smoke-$$

if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
  echo "smoke: installing podman and runc from Debian"
  DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman runc </dev/null
fi
if [ ! -f "$root/examples/demo/CMakeLists.txt" ]; then
  echo "smoke: examples/demo does not exist yet; nothing to put in the image" >&2
  exit 1
fi

start=$SECONDS
"$here/make-base-image.sh"
echo "== podman build -f docker/Dockerfile -t $image $root"
podman build -f "$here/Dockerfile" -t "$image" "$root"
echo "== image built in $((SECONDS - start)) s"
podman image ls "$image"

cleanup() { podman rm -f "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT

run_container() {
  case "$1" in
    bridge) podman run -d --name "$name" -p "127.0.0.1:$port:8080" "$image" ;;
    host) podman run -d --name "$name" --network host "$image" --addr "127.0.0.1:$port" ;;
  esac
}

wait_healthy() {
  for _ in $(seq 1 50); do
    curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null && return 0
    [ "$(podman inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" = true ] || return 1
    sleep 0.2
  done
  return 1
}

network=${GORO_SMOKE_NETWORK:-}
up=0
for net in ${network:-bridge host}; do
  cleanup
  echo "== podman run ($net network), port $port"
  if run_container "$net" && wait_healthy; then
    up=1
    break
  fi
  echo "smoke: container did not come up with $net networking; its log:"
  podman logs "$name" 2>&1 | tail -n 20 || true
done
[ "$up" = 1 ] || { echo "smoke: FAILED: goro-demo never answered /healthz" >&2; exit 1; }

fail=0
for path in /plaintext /healthz; do
  if out=$(curl -fsS --max-time 5 -w ' [%{http_code}]' "http://127.0.0.1:$port$path"); then
    echo "GET $path -> $(printf '%s' "$out" | tr -d '\r' | head -c 200)"
  else
    echo "GET $path FAILED" >&2
    fail=1
  fi
done
nofile=$(podman exec "$name" bash -c 'ulimit -n' 2>/dev/null || echo '?')
echo "container nofile limit: $nofile"
[ "$nofile" = 20000 ] || { echo "smoke: expected nofile 20000 (docker/containers.conf)" >&2; fail=1; }
podman stop -t 5 "$name" >/dev/null
echo "== smoke: $([ "$fail" = 0 ] && echo PASSED || echo FAILED) in $((SECONDS - start)) s"
exit "$fail"
