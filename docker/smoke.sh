#!/usr/bin/env bash
# Container test for goro-demo, with podman (no Docker engine needed), as root. CI runs
# it (the `container` stage of scripts/run-tests.sh); by hand: docker/smoke.sh.
#
#   1. builds docker/Dockerfile as localhost/goro-demo (docker/build-image.sh: the base
#      images made with debootstrap where missing, Docker's format so that HEALTHCHECK
#      stays, layers cached between runs);
#   2. runs it with port 8080 published on 127.0.0.1 and checks: the image's own
#      HEALTHCHECK reports the container healthy, GET /plaintext and /healthz answer 200,
#      the process runs as a user other than root with nofile=20000;
#   3. runs a fresh container under wrk, stops it with `podman stop` in the middle of the
#      load and checks that it exits 0 well inside the grace period, and that every
#      request its handlers took was answered: the count goro-demo prints on the way out
#      equals the responses wrk received, and none was cut off. The container drains for
#      1 s (GORO_DRAIN_DELAY; the image's default is Kubernetes' 5 s) before it stops
#      accepting.
# podman's settings come from docker/containers.conf (runc, cgroupfs, ulimits). Exit
# status 0 = pass; the last line says PASSED or FAILED with the figures.
#
# Environment: GORO_SMOKE_PORT (default 18080), GORO_SMOKE_NETWORK (bridge|host;
# default: bridge, falling back to host networking where the bridge cannot be set up),
# GORO_SMOKE_GRACE (podman stop's grace period in seconds, default 10).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
export CONTAINERS_CONF=$here/containers.conf
image=localhost/goro-demo:latest
port=${GORO_SMOKE_PORT:-18080}
grace=${GORO_SMOKE_GRACE:-10}
name=goro-smoke-$$

for tool in podman runc wrk curl; do
  if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
    echo "smoke: installing the test group of scripts/deps.sh ($tool is missing)"
    bash "$root/scripts/deps.sh" test
    break
  fi
done

start=$SECONDS
GORO_IMAGE=$image "$here/build-image.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/goro-smoke.XXXXXX")
cleanup() {
  podman rm -f "$name" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

fail=0
failed() {
  echo "smoke: FAILED: $*" >&2
  fail=1
}

# run_container NETWORK [podman run options...]
run_container() {
  local net=$1
  shift
  case "$net" in
    bridge) podman run -d --name "$name" "$@" -p "127.0.0.1:$port:8080" "$image" ;;
    # The server listens on $port itself, so the health check must probe that port.
    host)
      podman run -d --name "$name" "$@" --network host \
        --health-cmd "[\"/usr/local/bin/goro-demo\",\"--probe\",\"http://127.0.0.1:$port/healthz\"]" \
        "$image" --addr "127.0.0.1:$port"
      ;;
  esac
}

# Waits until the server accepts a TCP connection (no request is sent: it would count).
wait_listening() {
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    [ "$(podman inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" = true ] || return 1
    sleep 0.1
  done
  return 1
}

health_status() {
  podman inspect -f '{{.State.Health.Status}}' "$name" 2>/dev/null ||
    podman inspect -f '{{.State.Healthcheck.Status}}' "$name"
}

# ---- 2. the container serves, and its HEALTHCHECK says so ----------------------------
network=${GORO_SMOKE_NETWORK:-}
up=""
for net in ${network:-bridge host}; do
  cleanup
  mkdir -p "$tmp"
  echo "== podman run ($net network), port $port"
  if run_container "$net" && wait_listening; then
    up=$net
    break
  fi
  echo "smoke: container did not come up with $net networking; its log:"
  podman logs "$name" 2>&1 | tail -n 20 || true
done
[ -n "$up" ] || {
  echo "smoke: FAILED: goro-demo never accepted a connection" >&2
  exit 1
}

if podman healthcheck run "$name"; then
  echo "HEALTHCHECK: $(health_status)"
else
  failed "the image's HEALTHCHECK failed: $(podman inspect -f '{{json .State.Health}}' "$name" 2>&1)"
fi
[ "$(health_status)" = healthy ] || failed "health status is '$(health_status)', not healthy"
for path in /plaintext /healthz; do
  if out=$(curl -fsS --max-time 5 -w ' [%{http_code}]' "http://127.0.0.1:$port$path"); then
    echo "GET $path -> $(printf '%s' "$out" | tr -d '\r' | head -c 200)"
  else
    failed "GET $path"
  fi
done
if metrics=$(curl -fsS --max-time 5 "http://127.0.0.1:$port/metrics"); then
  echo "GET /metrics -> $(printf '%s\n' "$metrics" | grep -cv '^#') samples, $(printf '%s\n' "$metrics" | grep -E '^goro_goroutines ')"
  printf '%s\n' "$metrics" | grep -q '^goro_goroutines ' || failed "/metrics has no goro_goroutines"
else
  failed "GET /metrics"
fi
user=$(podman exec "$name" id -u 2>/dev/null || echo '?')
echo "container user id: $user"
[ "$user" != 0 ] && [ "$user" != '?' ] || failed "the server runs as root (uid $user)"
nofile=$(podman exec "$name" bash -c 'ulimit -n' 2>/dev/null || echo '?')
echo "container nofile limit: $nofile"
[ "$nofile" = 20000 ] || failed "expected nofile 20000 (docker/containers.conf)"
podman stop -t "$grace" "$name" >/dev/null
code=$(podman inspect -f '{{.State.ExitCode}}' "$name")
[ "$code" = 0 ] || failed "idle container exited $code on podman stop"
podman rm -f "$name" >/dev/null

# ---- 3. podman stop under load: exit 0, nothing accepted left unanswered --------------
echo "== graceful stop under load: wrk -t1 -c32, podman stop -t $grace after 2 s"
run_container "$up" --no-healthcheck -e GORO_DRAIN_DELAY=1s >/dev/null
wait_listening || failed "the second container never accepted a connection"
wrk -t1 -c32 -d8s --timeout 5s "http://127.0.0.1:$port/plaintext" >"$tmp/wrk.txt" 2>&1 &
wrk_pid=$!
sleep 2
stop_start=$(date +%s%N)
podman stop -t "$grace" "$name" >/dev/null
stop_ms=$((($(date +%s%N) - stop_start) / 1000000))
wait "$wrk_pid" || failed "wrk exited $?"
code=$(podman inspect -f '{{.State.ExitCode}}' "$name")
logs=$(podman logs "$name" 2>&1)
sed 's/^/  wrk: /' "$tmp/wrk.txt"
printf '%s\n' "$logs" | sed 's/^/  goro-demo: /'

received=$(awk '$2 == "requests" && $3 == "in" { print $1 }' "$tmp/wrk.txt")
stopped=$(printf '%s\n' "$logs" | grep -E '^goro-demo: stopped: ' | tail -n 1)
handled=$(printf '%s\n' "$stopped" | sed -nE 's/.* ([0-9]+) requests handled.*/\1/p')
cut=$(printf '%s\n' "$stopped" | sed -nE 's/.* ([0-9]+) cut off.*/\1/p')
echo "stop took ${stop_ms} ms (grace ${grace} s), exit code $code;" \
  "handled ${handled:-?}, wrk received ${received:-?}, cut off ${cut:-?}"
[ "$code" = 0 ] || failed "exit code $code after podman stop under load (137: killed at the grace period)"
[ "$stop_ms" -lt $((grace * 1000 / 2)) ] || failed "stop took $stop_ms ms, not well inside $grace s"
[ -n "$handled" ] || failed "goro-demo printed no 'stopped:' line"
[ -n "$received" ] && [ "$received" -gt 0 ] || failed "wrk received no response"
[ "${handled:-x}" = "${received:-y}" ] ||
  failed "goro-demo handled ${handled:-?} requests, wrk received ${received:-?} responses"
[ "${cut:-x}" = 0 ] || failed "${cut:-?} requests were cut off"

# ---- 4. SIGQUIT: every goroutine's stack on stderr, exit 2 (as Go) ---------------------
echo "== goroutine dump: podman kill --signal QUIT"
podman rm -f "$name" >/dev/null 2>&1 || true
run_container "$up" --no-healthcheck >/dev/null
wait_listening || failed "the third container never accepted a connection"
podman kill --signal QUIT "$name" >/dev/null
podman wait "$name" >/dev/null 2>&1 || true
dump_code=$(podman inspect -f '{{.State.ExitCode}}' "$name")
dump=$(podman logs "$name" 2>&1)
printf '%s\n' "$dump" | head -n 12 | sed 's/^/  goro-demo: /'
podman rm -f "$name" >/dev/null
[ "$dump_code" = 2 ] || failed "exit code $dump_code after SIGQUIT, not 2"
printf '%s\n' "$dump" | grep -q '^goroutine 1 ' || failed "no 'goroutine 1' in the dump"
# libunwind8 is in the image and the symbol table kept: frames are named.
printf '%s\n' "$dump" | grep -q '^goro::' || failed "the dump's frames are not named"

echo "== smoke: $([ "$fail" = 0 ] && echo PASSED || echo FAILED) in $((SECONDS - start)) s:" \
  "stop under load ${stop_ms} ms, exit $code, ${handled:-?} requests handled = ${received:-?} received"
exit "$fail"
