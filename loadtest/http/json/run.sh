#!/usr/bin/env bash
# JSON per request, goro against Go: goro-json-users (examples/json_users: goro::json,
# i.e. nlohmann/json) and users.go (the same API on net/http with encoding/json), with
# the constant /json of goro-demo and hello.go beside them for what HTTP alone costs.
#
#   loadtest/http/json/run.sh
#
# Scenarios, each wrk -t1 -c64 (keep-alive), every server alone on 127.0.0.1:
#   const  GET /json of goro-demo and ../hello.go: a constant string, no JSON library
#   get    GET /users/1: the stored User serialised per request
#   put    PUT /users/1 with {"name":"Ann","email":"ann@example.com"} (put_user.lua):
#          Content-Type checked, body parsed into a User, stored, serialised back
# Both servers run with one core (GORO_MAXPROCS=1, GOMAXPROCS=1) pinned to CPU 0 with
# taskset and wrk to CPU 1, as loadtest/run.sh pins them; goro and Go alternate, ROUNDS
# times. One line per round on stderr, with the server's CPU and what else ran on CPU 0
# ("others": a round with more than a few % was disturbed); then a table of each one's
# median and goro's figure divided by Go's. Nothing is written to disk but the build.
#
# Knobs: SCENARIOS="const get put", ROUNDS=3, DURATION=8 and WARMUP=2 (seconds),
# CONNS=64, BUILD_DIR=<repo>/build-bench (configured Release, as loadtest/run.sh does,
# when it has no CMakeCache.txt yet; otherwise built as it is configured), JOBS=2,
# TASKSET=1 (0: no pinning).
set -euo pipefail
# The servers stop on SIGTERM: at once, without goro::App's drain.
export GORO_DRAIN_DELAY=${GORO_DRAIN_DELAY:-0}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
scenarios="${SCENARIOS:-const get put}"
rounds="${ROUNDS:-3}"
duration="${DURATION:-8}"
warmup="${WARMUP:-2}"
conns="${CONNS:-64}"
build="${BUILD_DIR:-$root/build-bench}"
[[ "$build" = /* ]] || build="$PWD/$build"
jobs="${JOBS:-2}"
pin="${TASKSET:-1}"

log() { printf '%s\n' "$*" >&2; }
for s in $scenarios; do
  case "$s" in
    const | get | put) ;;
    *) log "run.sh: unknown scenario '$s' (const, get, put)"; exit 2 ;;
  esac
done
for tool in wrk cmake curl go taskset; do
  command -v "$tool" >/dev/null || { log "run.sh: '$tool' is required (scripts/deps.sh loadtest)"; exit 1; }
done

# --- build ---------------------------------------------------------------------------
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGORO_BUILD_TESTS=OFF \
    -DGORO_BUILD_EXAMPLES=ON -DGORO_BUILD_LOADTESTS=ON >/dev/null
fi
cmake --build "$build" -j"$jobs" --target goro-demo goro-json-users >/dev/null ||
  { log "run.sh: goro-json-users needs goro::json (apt-get install nlohmann-json3-dev)"; exit 1; }
bin="$build/loadtest/http/json"
mkdir -p "$bin"
for peer in "$here/users.go" "$here/../hello.go"; do
  (cd "$(dirname "$peer")" && GOCACHE="$build/go-cache" GOPATH="$build/go-path" GO111MODULE=off \
    GOFLAGS="" go build -o "$bin/$(basename "$peer" .go)" "$(basename "$peer")")
done
log "== $(grep -E '^CMAKE_BUILD_TYPE:' "$build/CMakeCache.txt" | cut -d= -f2) build in $build; $(go version)"

server_pin=() client_pin=()
if [ "$pin" = 1 ] && [ "$(nproc)" -ge 2 ]; then
  server_pin=(taskset -c 0)
  client_pin=(taskset -c 1)
fi

# --- servers -------------------------------------------------------------------------
server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
trap stop_server EXIT
trap 'exit 130' INT TERM

port=$((20000 + RANDOM % 10000))
# start SERVER SCENARIO: starts it on a fresh port, waits until it answers, and for the
# users API stores user 1.
start() {
  port=$((port + 1))
  local url="http://127.0.0.1:$port"
  local cmd
  case "$1/$2" in
    goro/const) cmd=(env GORO_MAXPROCS=1 "$build/examples/demo/goro-demo" --addr "127.0.0.1:$port") ;;
    go/const) cmd=(env GOMAXPROCS=1 "$bin/hello" -addr "127.0.0.1:$port") ;;
    goro/*) cmd=(env GORO_MAXPROCS=1 "$build/examples/json_users/goro-json-users" --addr "127.0.0.1:$port") ;;
    go/*) cmd=(env GOMAXPROCS=1 "$bin/users" -addr "127.0.0.1:$port") ;;
  esac
  "${server_pin[@]}" "${cmd[@]}" >/dev/null 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    if [ "$2" = const ]; then
      curl -fs "$url/json" >/dev/null 2>&1 && return 0
    else
      curl -fs -X PUT --json '{"name":"Ann","email":"ann@example.com"}' "$url/users/1" \
        >/dev/null 2>&1 && return 0
    fi
    sleep 0.05
  done
  log "run.sh: $1 did not start for $2"
  exit 1
}

# wrk SCENARIO SECONDS: prints requests/s; fails on any error or non-2xx answer.
load() {
  local path=/users/1 script=() out
  case "$1" in
    const) path=/json ;;
    put) script=(-s "$here/put_user.lua") ;;
  esac
  out=$("${client_pin[@]}" wrk -t1 -c"$conns" -d"${2}s" "${script[@]}" "http://127.0.0.1:$port$path")
  if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
    log "$out"
    log "run.sh: errors during $1"
    exit 1
  fi
  awk '/^Requests\/sec:/ { printf "%.0f\n", $2 }' <<<"$out"
}

# CPU time (ticks) of the server, and of everything on CPU 0 (user, nice, system, irq,
# softirq, steal): what else ran on the server's core meanwhile ("others", 0 on a quiet
# machine) tells a disturbed round.
server_ticks() { sed 's/.*) //' "/proc/$server_pid/stat" | awk '{ print $12 + $13 }'; }
core_ticks() { awk '$1 == "cpu0" { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
hz=$(getconf CLK_TCK)

# --- run -----------------------------------------------------------------------------
declare -A results
for scenario in $scenarios; do
  for round in $(seq "$rounds"); do
    for server in goro go; do
      start "$server" "$scenario"
      load "$scenario" "$warmup" >/dev/null
      s0=$(server_ticks) c0=$(core_ticks) t0=$EPOCHREALTIME
      rps=$(load "$scenario" "$duration")
      s1=$(server_ticks) c1=$(core_ticks) t1=$EPOCHREALTIME
      stop_server
      results[$scenario/$server]+="$rps "
      log "$(printf '%-5s round %d  %-4s %8s req/s   server CPU %3.0f%%  others %3.0f%%' \
        "$scenario" "$round" "$server" "$rps" \
        "$(awk -v t=$((s1 - s0)) -v hz="$hz" -v a="$t0" -v b="$t1" 'BEGIN { print 100 * t / hz / (b - a) }')" \
        "$(awk -v t=$((c1 - c0 - s1 + s0)) -v hz="$hz" -v a="$t0" -v b="$t1" 'BEGIN { v = 100 * t / hz / (b - a); print v < 0 ? 0 : v }')")"
    done
  done
done

median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf '%-44s %10s %10s %8s\n' scenario "goro req/s" "go req/s" "goro/go"
for scenario in $scenarios; do
  case "$scenario" in
    const) what="GET /json, constant body (no JSON library)" ;;
    get) what="GET /users/1, a User serialised" ;;
    put) what="PUT /users/1, a User parsed and serialised" ;;
  esac
  g=$(median "${results[$scenario/goro]}")
  o=$(median "${results[$scenario/go]}")
  printf '%-44s %10s %10s %8s\n' "$what" "$g" "$o" "$(awk -v a="$g" -v b="$o" 'BEGIN { printf "%.2f", a / b }')"
done
printf '(median of %s rounds of %s s, wrk -t1 -c%s)\n' "$rounds" "$duration" "$conns"
for s in $scenarios; do
  printf '  %-5s goro: %s  go: %s\n' "$s" "${results[$s/goro]% }" "${results[$s/go]% }"
done
