#!/usr/bin/env bash
# C client libraries on goroutines, one command:
#
#   loadtest/clibs/run.sh
#
# Builds bench_clibs and goro-demo (Release, in build-bench-clibs/), starts a throwaway
# PostgreSQL (max_connections 250) and redis-server (scripts/test-servers.sh) and
# goro-demo as the slow HTTP server (GET /sleep?ms=100), then runs, with GORO_MAXPROCS=1
# and N=200 goroutines at once, each of:
#   pg     SELECT pg_sleep(0.1), each goroutine on its own connection
#   redis  BLPOP on an empty list with a 0.1 s timeout, each on its own connection
#   curl   one transfer of http://127.0.0.1:PORT/sleep?ms=100
# in the three modes of bench_clibs: wait_fd (examples/clients/ over net::FdWatch),
# blocking (the library's blocking call made straight from the goroutine) and handoff
# (that call in goro::blocking_long), and a fourth, hooks: the blocking mode of
# bench_clibs_hooks, the same program with goro::hooks linked, where those blocking calls
# park the goroutine. Prints a markdown table; the numbers are in docs/hooks.md.
#
# Environment knobs:
#   N=200 PROCS=1          goroutines, and GORO_MAXPROCS
#   LIBS="pg redis curl"   MODES="wait_fd blocking handoff hooks"
#   BUILD_DIR=...          build folder (default: <repo>/build-bench-clibs; one that is
#                          configured already is used as it is)
#   JOBS=2                 parallel build jobs
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${BUILD_DIR:-$root/build-bench-clibs}"
n="${N:-200}"
procs="${PROCS:-1}"
libs="${LIBS:-pg redis curl}"
modes="${MODES:-wait_fd blocking handoff hooks}"
servers="$root/scripts/test-servers.sh"

log() { printf '%s\n' "$*" >&2; }
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

log "building bench_clibs and goro-demo in $build"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGORO_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" --target bench_clibs bench_clibs_hooks goro-demo -j "${JOBS:-2}" >/dev/null

pg_dir="$(mktemp -d /tmp/goro-bench-pg-XXXXXX)"
redis_dir="$(mktemp -d /tmp/goro-bench-redis-XXXXXX)"
demo_pid=""
cleanup() {
  if [ -n "$demo_pid" ]; then kill "$demo_pid" 2>/dev/null && wait "$demo_pid" 2>/dev/null; fi
  "$servers" pg stop "$pg_dir" >/dev/null 2>&1 || true
  "$servers" redis stop "$redis_dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT

conninfo="$("$servers" pg start "$pg_dir" $((n + 50)))"
socket="$("$servers" redis start "$redis_dir")"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$build/examples/demo/goro-demo" --addr "127.0.0.1:$port" >/dev/null &
demo_pid=$!
for _ in $(seq 1 100); do
  curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break
  sleep 0.05
done

target() {
  case "$1" in
    pg) printf '%s\n' "$conninfo" ;;
    redis) printf '%s\n' "$socket" ;;
    curl) printf 'http://127.0.0.1:%s/sleep?ms=100\n' "$port" ;;
  esac
}

printf '| library | mode | goroutines | Ps | elapsed (ms) | ok | threads (peak) |\n'
printf '|---|---|---|---|---|---|---|\n'
for lib in $libs; do
  for mode in $modes; do
    bench=bench_clibs bench_mode=$mode
    [ "$mode" = hooks ] && bench=bench_clibs_hooks bench_mode=blocking
    line=$(GORO_MAXPROCS=$procs "$build/loadtest/clibs/$bench" "$lib" "$bench_mode" "$n" "$(target "$lib")" || true)
    log "$line"
    get() { printf '%s\n' "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$lib" "$mode" "$n" "$procs" \
      "$(get elapsed_ms)" "$(get ok)" "$(get threads_peak)"
  done
done
