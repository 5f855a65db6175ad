#!/usr/bin/env bash
# Data access under load, one command:
#
#   loadtest/data/run.sh
#
# An HTTP handler that reads one Redis key per request: goro (bench_redis_get:
# goro::http and goro::redis) against Go (go/redis_get.go: net/http and redigo), each on
# one core, both on pools of POOL connections to the same redis-server (on a Unix socket
# in a temporary folder, scripts/test-servers.sh), KEYS keys of VALUE_BYTES bytes, wrk
# asking for one of them (KEY; no Lua script, which would cost wrk more than the
# servers their work). Servers run one at a time, pinned to CPU 0 (GORO_MAXPROCS=1,
# GOMAXPROCS=1); wrk and redis-server share CPU 1. The peers alternate, ROUNDS times, and
# the table takes each one's median.
#
# Per run: requests/s, p50 and p99 latency, the server's CPU seconds and requests per
# CPU second (less disturbed by what shares the machine than requests/s), and the most
# connections redis-server saw from the server (sampled every 0.2 s, the sampler itself
# not counted), which must stay within POOL. A run counts only if the server is alive
# at its end and wrk saw no socket error and no non-2xx answer; otherwise the script
# says which and exits 1.
#
# Knobs: DURATION=8 WARMUP=2 ROUNDS=3 CONNS=64 POOL=16 KEYS=1000 VALUE_BYTES=100 KEY=42
#        BUILD_DIR=<repo>/build-bench JOBS=2 TASKSET=1
# Output: a markdown table on stdout, and loadtest/results/data-<UTC stamp>/ with it,
# results.csv and the servers' logs.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(realpath -m "${BUILD_DIR:-$root/build-bench}")"
duration=${DURATION:-8} warmup=${WARMUP:-2} rounds=${ROUNDS:-3} conns=${CONNS:-64}
pool=${POOL:-16} keys=${KEYS:-1000} value_bytes=${VALUE_BYTES:-100}
servers="$root/scripts/test-servers.sh"
stamp=$(date -u +%Y%m%d-%H%M%S)
out="${OUT_DIR:-$root/loadtest/results/data-$stamp}"
mkdir -p "$out"

log() { printf '%s\n' "$*" >&2; }
pin() { if [ "${TASKSET:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then taskset -c "$1" "${@:2}"; else "${@:2}"; fi; }

log "data: building bench_redis_get (Release) in $build"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGORO_BUILD_TESTS=OFF \
    -DGORO_BUILD_LOADTESTS=ON >/dev/null
fi
cmake --build "$build" --target bench_redis_get -j "${JOBS:-2}" >/dev/null
goro_bin="$build/loadtest/data/bench_redis_get"
go_bin="$build/loadtest/data/redis_get_go"
log "data: building the Go peer (redigo, GOPATH mode)"
(cd "$here/go" && env GO111MODULE=off GOFLAGS="" GOPATH="$build/go-path:/usr/share/gocode" \
  GOCACHE="$build/go-cache" go build -o "$go_bin" redis_get.go) || {
  log "data: cannot build the Go peer (apt-get install golang-go golang-github-gomodule-redigo-dev)"
  exit 1
}

redis_dir="$(mktemp -d /tmp/goro-data-redis-XXXXXX)"
server_pid="" sampler_pid=""
cleanup() {
  [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null || true
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  "$servers" redis stop "$redis_dir/redis" >/dev/null 2>&1 || true
  rm -rf "$redis_dir"
}
trap cleanup EXIT
socket="$("$servers" redis start "$redis_dir/redis")"
if [ "${TASKSET:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then
  taskset -pc 1 "$(cat "$redis_dir/redis/redis.pid")" >/dev/null
fi
value=$(head -c "$value_bytes" /dev/zero | tr '\0' 'v')
for i in $(seq 0 $((keys - 1))); do printf 'SET key:%d %s\n' "$i" "$value"; done |
  redis-cli -s "$socket" >/dev/null
log "data: redis-server on $socket with $keys keys of $value_bytes bytes"

url_path="/cache/key:${KEY:-42}"

port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# Milliseconds from wrk's latency figure (us, ms or s).
to_ms() { awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /[0-9]s$/) n *= 1000; printf "%.2f", n }'; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

echo "peer,round,requests_per_s,p50_ms,p99_ms,cpu_s,requests_per_cpu_s,max_redis_conns" >"$out/results.csv"
failed=0
run_one() {
  local peer=$1 round=$2 cmd
  if [ "$peer" = goro ]; then
    cmd=(env GORO_MAXPROCS=1 "$goro_bin" --addr "127.0.0.1:$port" --redis "unix:$socket" --pool "$pool")
  else
    cmd=(env GOMAXPROCS=1 "$go_bin" -addr "127.0.0.1:$port" -redis "unix:$socket" -pool "$pool")
  fi
  # taskset and env exec the server: $! is its pid, for its CPU time and its end.
  if [ "${TASKSET:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then cmd=(taskset -c 0 "${cmd[@]}"); fi
  "${cmd[@]}" >"$out/$peer-$round.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.05
  done
  pin 1 wrk -t1 -c"$conns" -d"${warmup}s" "http://127.0.0.1:$port$url_path" >/dev/null
  # The most connections redis-server has, less the sampler's own.
  (most=0; while :; do
     n=$(redis-cli -s "$socket" INFO clients | awk -F: '/^connected_clients/ { print $2 + 0 }')
     [ "$n" -gt "$most" ] && most=$n && echo $((most - 1)) >"$redis_dir/most"
     sleep 0.2
   done) &
  sampler_pid=$!
  local t0 t1 wrk_out
  t0=$(cpu_ticks "$server_pid")
  wrk_out=$(pin 1 wrk -t1 -c"$conns" -d"${duration}s" --latency "http://127.0.0.1:$port$url_path")
  t1=$(cpu_ticks "$server_pid")
  kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null || true
  sampler_pid=""
  printf '%s\n' "$wrk_out" >"$out/$peer-$round.wrk"
  local why=""
  kill -0 "$server_pid" 2>/dev/null || why="the server died"
  grep -q "Socket errors" <<<"$wrk_out" && why="${why:+$why; }wrk saw socket errors"
  grep -q "Non-2xx" <<<"$wrk_out" && why="${why:+$why; }non-2xx answers"
  kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true
  server_pid=""
  local rps p50 p99 cpu per_cpu most
  rps=$(awk '/^Requests\/sec/ { printf "%.0f", $2 }' <<<"$wrk_out")
  p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$wrk_out")")
  p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$wrk_out")")
  cpu=$(awk -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }')
  per_cpu=$(awk -v r="$rps" -v d="$duration" -v c="$cpu" 'BEGIN { printf "%.0f", (c > 0) ? r * d / c : 0 }')
  most=$(cat "$redis_dir/most" 2>/dev/null || echo 0)
  rm -f "$redis_dir/most"
  [ "$most" -le "$pool" ] || why="${why:+$why; }$most connections to Redis, over the pool's $pool"
  echo "$peer,$round,$rps,$p50,$p99,$cpu,$per_cpu,$most" >>"$out/results.csv"
  log "data: $peer round $round: $rps req/s, p50 $p50 ms, p99 $p99 ms, $cpu CPU s, $most Redis connections${why:+ — FAILED: $why}"
  if [ -n "$why" ]; then failed=1; fi
}

for round in $(seq 1 "$rounds"); do
  for peer in goro go; do run_one "$peer" "$round"; done
done

/usr/bin/python3 - "$out/results.csv" "$conns" "$pool" "$url_path" <<'PY' | tee "$out/table.md"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def med(peer, key):
    return statistics.median(float(r[key]) for r in rows if r["peer"] == peer)
print(f"GET {sys.argv[4]} → one Redis GET, {sys.argv[2]} connections, pools of {sys.argv[3]}, "
      f"1 server core, median of {sum(r['peer'] == 'goro' for r in rows)} runs\n")
print("| server | requests/s | p50 ms | p99 ms | requests per CPU-s | most Redis connections |")
print("|---|---:|---:|---:|---:|---:|")
for peer, name in (("goro", "goro (goro::redis)"), ("go", "Go net/http + redigo")):
    most = max(int(r["max_redis_conns"]) for r in rows if r["peer"] == peer)
    print(f"| {name} | {med(peer, 'requests_per_s'):,.0f} | {med(peer, 'p50_ms'):.2f} | "
          f"{med(peer, 'p99_ms'):.2f} | {med(peer, 'requests_per_cpu_s'):,.0f} | {most} |")
print(f"\ngoro / Go: requests/s {med('goro', 'requests_per_s') / med('go', 'requests_per_s'):.2f}×, "
      f"per CPU-s {med('goro', 'requests_per_cpu_s') / med('go', 'requests_per_cpu_s'):.2f}×, "
      f"p99 {med('goro', 'p99_ms') / med('go', 'p99_ms'):.2f}× Go's")
PY
log "data: results in $out"
exit "$failed"
