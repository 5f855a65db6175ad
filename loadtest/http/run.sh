#!/usr/bin/env bash
# HTTP load test: goro-demo against Go net/http (hello.go) and nginx, side by side in
# one run.
#
#   loadtest/http/run.sh
#
# Builds goro-demo (Release, in build-bench/) and hello.go (go build, standard library,
# GO111MODULE=off), writes an nginx configuration that answers the same paths from
# memory (`return 200`, access log off, one worker per processor), then for each server
# in turn: start it with the same number of processors (GORO_MAXPROCS / GOMAXPROCS /
# worker_processes), warm up 1 s, run
#   wrk -t1 -c64 -d5s http://127.0.0.1:PORT/plaintext
# ROUNDS times, the servers interleaved, and print requests/s (median), latency and the
# ratio to goro. wrk and the server share the machine: compare ratios, not absolutes.
#
# Environment knobs:
#   PROCS=1          processors for each server
#   ROUNDS=3         wrk runs per server (interleaved); the median is reported
#   DURATION=5s      wrk -d;   CONNS=64  wrk -c;   THREADS=1  wrk -t
#   PATHS=/plaintext space-separated paths to test (e.g. "/plaintext /json")
#   BUILD_DIR=...    build folder (default: <repo>/build-bench)
#   JOBS=2           parallel build jobs
#   TASKSET=1        pin servers to CPU 0 and wrk to CPU 1 when there are 2+ CPUs
#   SERVERS="goro go nginx"   which servers to run (nginx is skipped if not installed)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${BUILD_DIR:-$root/build-bench}"
procs="${PROCS:-1}"
rounds="${ROUNDS:-3}"
duration="${DURATION:-5s}"
conns="${CONNS:-64}"
threads="${THREADS:-1}"
paths="${PATHS:-/plaintext}"
jobs="${JOBS:-2}"
pin="${TASKSET:-1}"
servers="${SERVERS:-goro go nginx}"

log() { printf '%s\n' "$*" >&2; }
need() { command -v "$1" >/dev/null || { log "run.sh: '$1' is required"; exit 1; }; }
need wrk
need go
need cmake

log "== build goro-demo (Release) in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGORO_BUILD_TESTS=OFF \
  -DGORO_BUILD_EXAMPLES=ON >/dev/null
cmake --build "$build" -j"$jobs" --target goro-demo >/dev/null
demo="$(find "$build" -type f -name goro-demo -perm -u+x -print -quit)"
[ -n "$demo" ] || { log "run.sh: goro-demo not built"; exit 1; }

nginx_bin="$(command -v nginx || true)"
[ -x /usr/sbin/nginx ] && nginx_bin=/usr/sbin/nginx
if [[ " $servers " == *" nginx "* && -z "$nginx_bin" ]]; then
  log "run.sh: nginx not installed; skipping it"
  servers="${servers/nginx/}"
fi

log "== build hello.go"
gobin="$build/loadtest/http"
mkdir -p "$gobin"
(cd "$here" && GO111MODULE=off go build -o "$gobin/hello" hello.go)

server_pin=()
wrk_pin=()
if [ "$pin" = 1 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  server_pin=(taskset -c 0)
  wrk_pin=(taskset -c 1)
  [ "$procs" -gt 1 ] && server_pin=()  # more Ps than one pinned CPU would be pointless
fi

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

port_of() { echo $((20000 + RANDOM % 20000)); }

# nginx answering /plaintext and /json as goro-demo and hello.go do, all state in $1.
write_nginx_conf() {  # dir port
  local dir=$1 port=$2
  mkdir -p "$dir/tmp"
  cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process $([ "$procs" -gt 1 ] && echo on || echo off);
worker_processes $procs;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path $dir/tmp;
  proxy_temp_path $dir/tmp;
  fastcgi_temp_path $dir/tmp;
  uwsgi_temp_path $dir/tmp;
  scgi_temp_path $dir/tmp;
  server {
    listen 127.0.0.1:$port;
    location = /plaintext { default_type text/plain; return 200 "Hello, World!"; }
    location = /json { default_type application/json; return 200 '{"message":"Hello, World!"}'; }
  }
}
EOF
}

start_server() {  # name port -> pid on stdout
  local name=$1 port=$2
  case "$name" in
    goro) GORO_MAXPROCS=$procs "${server_pin[@]}" "$demo" --addr "127.0.0.1:$port" >/dev/null 2>&1 & ;;
    go) GOMAXPROCS=$procs "${server_pin[@]}" "$gobin/hello" "127.0.0.1:$port" >/dev/null 2>&1 & ;;
    nginx)
      write_nginx_conf "$build/loadtest/http/nginx" "$port"
      "${server_pin[@]}" "$nginx_bin" -p "$build/loadtest/http/nginx" \
        -c "$build/loadtest/http/nginx/nginx.conf" >/dev/null 2>&1 &
      ;;
  esac
  local pid=$!
  for _ in $(seq 100); do
    if curl -fs "http://127.0.0.1:$port/plaintext" >/dev/null 2>&1; then
      echo "$pid"
      return
    fi
    sleep 0.05
  done
  log "run.sh: $name did not start on port $port"
  exit 1
}

# wrk output -> "requests/s avg-latency p99"
measure() {  # url
  local out
  out=$("${wrk_pin[@]}" wrk -t"$threads" -c"$conns" -d"$duration" --latency "$1")
  local rps lat p99 errors
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  lat=$(awk '$1 == "Latency" {print $2; exit}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  errors=$(awk '/Non-2xx|Socket errors/ {printf "%s ", $0}' <<<"$out")
  [ -n "$errors" ] && log "   wrk: $errors"
  echo "$rps $lat $p99"
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A port pid
for name in $servers; do
  port[$name]=$(port_of)
  pid[$name]=$(start_server "$name" "${port[$name]}")
  pids+=("${pid[$name]}")
done

declare -A label=(
  [goro]="goro-demo (GORO_MAXPROCS=$procs)"
  [go]="Go net/http (GOMAXPROCS=$procs)"
  [nginx]="nginx (worker_processes $procs)"
)
printf '\n| path | server | req/s (median of %s) | avg latency | p99 | goro / this |\n' "$rounds"
printf '|---|---|---|---|---|---|\n'
for path in $paths; do
  declare -A all_rps=() last_lat=() last_p99=() med=()
  for name in $servers; do
    wrk -t1 -c"$conns" -d1s "http://127.0.0.1:${port[$name]}$path" >/dev/null  # warm-up
  done
  for round in $(seq "$rounds"); do
    for name in $servers; do
      read -r rps lat p99 < <(measure "http://127.0.0.1:${port[$name]}$path")
      log "   round $round $name $path: $rps req/s, avg $lat, p99 $p99"
      all_rps[$name]+="$rps "
      last_lat[$name]=$lat
      last_p99[$name]=$p99
    done
  done
  for name in $servers; do
    med[$name]=$(tr ' ' '\n' <<<"${all_rps[$name]}" | grep . | median)
  done
  for name in $servers; do
    ratio=n/a
    if [[ -n "${med[goro]:-}" ]]; then
      ratio=$(awk -v a="${med[goro]}" -v b="${med[$name]}" 'BEGIN { printf "%.2f", a / b }')
    fi
    printf '| %s | %s | %s | %s | %s | %s |\n' "$path" "${label[$name]}" "${med[$name]}" \
      "${last_lat[$name]}" "${last_p99[$name]}" "$ratio"
  done
done
printf '\ncommand: wrk -t%s -c%s -d%s --latency http://127.0.0.1:PORT<path>; %s rounds, interleaved\n' \
  "$threads" "$conns" "$duration" "$rounds"
