#!/usr/bin/env bash
# Echo benchmark: goro against Go and Asio, with a bare epoll loop as the ceiling, one
# command:
#
#   loadtest/net/run.sh
#
# Builds (Release, in build-bench-net/) the goro echo server, the Asio echo server, the
# bare epoll echo server (no runtime: what the kernel allows) and the epoll load client,
# builds the Go echo server (Go from PATH, standard library only, GO111MODULE=off), then
# runs each server in turn pinned to the same SERVER_CPUS with as
# many Ps / threads as it has CPUs there, and the load client pinned to CLIENT_CPUS:
# CONNS connections (128, then 1000), each ping-ponging MSG bytes, for DURATION seconds
# after WARMUP.
# Prints a markdown table of round trips per second and the goro/Go, goro/Asio and
# goro/epoll ratios.
#
# Environment knobs:
#   SERVER_CPUS=0        CPU list for the servers (default: the first half of the CPUs)
#   CLIENT_CPUS=1        CPU list for the client (default: the rest)
#   CONNS="128 1000"     connection counts, one table each
#   MSG=64 DURATION=5 WARMUP=1
#   REPS=1               runs per server, interleaved; the median is reported
#   CLIENT_THREADS=n     client threads (default: number of CLIENT_CPUS)
#   IMPLS="goro go asio epoll" which servers to run
#   BUILD_DIR=...        build folder (default: <repo>/build-bench-net)
#   PORT=19500           first port (each server gets its own)
#   JOBS=2               parallel build jobs
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${BUILD_DIR:-$root/build-bench-net}"
jobs="${JOBS:-2}"
go_bin="${GO:-go}"
impls="${IMPLS:-goro go asio epoll}"
conns_list="${CONNS:-128 1000}"
msg="${MSG:-64}"
duration="${DURATION:-5}"
warmup="${WARMUP:-1}"
port="${PORT:-19500}"
reps="${REPS:-1}"

log() { printf '%s\n' "$*" >&2; }

# 1,000 connections and a few descriptors more: the servers and the client inherit this.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# CPU lists: "0-3" or "0,2" -> count.
cpu_count() {
  local n=0 part a b
  IFS=',' read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    if [[ "$part" == *-* ]]; then a="${part%-*}"; b="${part#*-}"; n=$((n + b - a + 1)); else n=$((n + 1)); fi
  done
  echo "$n"
}
ncpu="$(nproc)"
if [[ -z "${SERVER_CPUS:-}" || -z "${CLIENT_CPUS:-}" ]]; then
  if (( ncpu < 2 )); then
    log "need at least 2 CPUs (one for the server, one for the client)"; exit 1
  fi
  half=$((ncpu / 2))
  SERVER_CPUS="${SERVER_CPUS:-0-$((half - 1))}"
  CLIENT_CPUS="${CLIENT_CPUS:-$half-$((ncpu - 1))}"
fi
server_n="$(cpu_count "$SERVER_CPUS")"
client_threads="${CLIENT_THREADS:-$(cpu_count "$CLIENT_CPUS")}"

wants() { [[ " $impls " == *" $1 "* ]]; }

# --- build ---------------------------------------------------------------------------
log "== configuring goro (Release) in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGORO_BUILD_TESTS=OFF \
  -DGORO_BUILD_EXAMPLES=OFF -DGORO_BUILD_LOADTESTS=ON >/dev/null
targets=(bench_net_client)
wants goro && targets+=(bench_net_echo_goro)
wants asio && targets+=(bench_net_echo_asio)
wants epoll && targets+=(bench_net_echo_epoll)
log "== building ${targets[*]}"
cmake --build "$build" -j"$jobs" --target "${targets[@]}" >/dev/null
bin="$build/loadtest/net"
if wants go; then
  log "== building echo.go with $("$go_bin" version)"
  GOCACHE="$build/go-cache" GOPATH="$build/go-path" GO111MODULE=off GOFLAGS= \
    "$go_bin" build -o "$bin/echo_go" "$here/echo.go"
fi

# --- run -----------------------------------------------------------------------------
results_dir="$build/loadtest/net/results"
mkdir -p "$results_dir"
stamp="$(date +%Y%m%d-%H%M%S)"
errlog="$results_dir/$stamp.stderr.txt"
: >"$errlog"
declare -A rate runs

run_impl() {
  local impl="$1" p="$2" pid out rc=0
  case "$impl" in
    goro) GORO_MAXPROCS="$server_n" taskset -c "$SERVER_CPUS" "$bin/bench_net_echo_goro" "127.0.0.1:$p" 2>>"$errlog" & ;;
    go) GOMAXPROCS="$server_n" taskset -c "$SERVER_CPUS" "$bin/echo_go" "127.0.0.1:$p" 2>>"$errlog" & ;;
    asio) taskset -c "$SERVER_CPUS" "$bin/bench_net_echo_asio" "127.0.0.1:$p" "$server_n" 2>>"$errlog" & ;;
    epoll) taskset -c "$SERVER_CPUS" "$bin/bench_net_echo_epoll" "127.0.0.1:$p" "$server_n" 2>>"$errlog" & ;;
  esac
  pid=$!
  out="$(taskset -c "$CLIENT_CPUS" "$bin/bench_net_client" 127.0.0.1 "$p" "$conns" "$msg" \
           "$duration" "$client_threads" "$warmup" 2>>"$errlog")" || rc=$?
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [[ $rc -ne 0 ]]; then
    log "   $impl: client failed (exit $rc; see $errlog)"
    return
  fi
  local r
  r="$(sed -n 's/^RESULT msgs_per_sec=\([0-9]*\).*/\1/p' <<<"$out")"
  runs[$impl]="${runs[$impl]:-} $r"
  log "   $impl: $r msgs/s"
}

median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

ratio() {
  if [[ -n "${rate[$1]:-}" && -n "${rate[$2]:-}" && "${rate[$2]}" != 0 ]]; then
    awk -v a="${rate[$1]}" -v b="${rate[$2]}" 'BEGIN { printf "%.2f", a / b }'
  else
    printf 'n/a'
  fi
}

log "== server CPUs $SERVER_CPUS ($server_n Ps/threads), client CPUs $CLIENT_CPUS ($client_threads threads)"
i=0
for conns in $conns_list; do
  log "== $conns connections, $msg-byte messages, ${duration}s after ${warmup}s warm-up"
  runs=()
  rate=()
  for rep in $(seq "$reps"); do
    for impl in $impls; do
      run_impl "$impl" $((port + i))
      i=$((i + 1))
    done
  done
  for impl in $impls; do rate[$impl]="$(median "${runs[$impl]:-}")"; done
  {
    echo "| server ($conns connections) | round trips/s (median of $reps) | runs |"
    echo "|---|---:|---|"
    for impl in $impls; do echo "| $impl | ${rate[$impl]:-failed} |${runs[$impl]:-} |"; done
    echo
    echo "goro/Go: $(ratio goro go)   goro/Asio: $(ratio goro asio)   goro/epoll: $(ratio goro epoll)"
    echo "($server_n server CPUs [$SERVER_CPUS], $conns conns x $msg B, ${duration}s, $(uname -m), $(nproc) CPUs)"
    echo
  } | tee -a "$results_dir/$stamp.md"
done
