#!/usr/bin/env bash
# Scheduler micro-benchmarks, goro against Go, side by side. One command:
#
#   loadtest/sched/run.sh
#
# builds goro (Release, in build-bench/) and the Go twins (go build, standard library
# only), runs every case with 1 and 2 Ps, REPS times each, goro and Go interleaved, and
# prints a markdown table of medians with the goro/Go ratio. See README.md here.
#
# Environment knobs:
#   REPS=5            repetitions per case and P count (the median is reported)
#   PROCS="1 2"       P counts (GORO_MAXPROCS for goro, GOMAXPROCS for Go)
#   CASES="..."       subset of: spawn pingpong skynet rss_parked yield blocking_getpid handoff timers
#   BUILD_DIR=...     build folder (default: <repo>/build-bench)
#   RUN_TIMEOUT=120   seconds before one run is killed and counted as failed
#   JOBS=2            parallel build jobs
#   IMPLS="goro go"   which sides to build and run (e.g. IMPLS=go for the Go side alone)
#   BIN_DIR=...       run prebuilt programs instead of building: goro's as
#                     BIN_DIR/bench_sched_<case>, Go's as BIN_DIR/go/<case> (the build
#                     folder's layout; loadtest/device/bundle.sh makes such a folder)
#   RAW_FILE=...      the raw results file (default: BUILD_DIR/loadtest/sched/results/
#                     <time>.txt); the stderr of failed runs goes beside it, .stderr.txt
#   TIME_BIN=/usr/bin/time   the GNU time that reads each run's peak RSS
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${BUILD_DIR:-$root/build-bench}"
reps="${REPS:-5}"
procs_list="${PROCS:-1 2}"
cases="${CASES:-spawn pingpong skynet rss_parked yield blocking_getpid handoff timers}"
run_timeout="${RUN_TIMEOUT:-120}"
jobs="${JOBS:-2}"
go_bin="${GO:-go}"
impls="${IMPLS:-goro go}"
time_bin="${TIME_BIN:-/usr/bin/time}"

# Built here unless BIN_DIR names programs built elsewhere.
prebuilt="${BIN_DIR:+1}"
bin_dir="${BIN_DIR:-$build/loadtest/sched}"
gobuild="$bin_dir/go"
stamp="$(date +%Y%m%d-%H%M%S)"
raw="${RAW_FILE:-$build/loadtest/sched/results/$stamp.txt}"
errlog="${raw%.txt}.stderr.txt"
mkdir -p "$(dirname "$raw")"
[[ -z "$prebuilt" ]] && mkdir -p "$gobuild"
: >"$raw"
: >"$errlog"

log() { printf '%s\n' "$*" >&2; }

wants() { [[ " $impls " == *" $1 "* ]]; }

# --- build -------------------------------------------------------------------------
if [[ -n "$prebuilt" ]]; then
  log "== prebuilt programs from $bin_dir"
elif wants goro; then
  log "== configuring goro (Release) in $build"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGORO_BUILD_TESTS=OFF \
    -DGORO_BUILD_EXAMPLES=OFF -DGORO_BUILD_LOADTESTS=ON >/dev/null
  targets=()
  for c in $cases; do targets+=("bench_sched_$c"); done
  log "== building ${targets[*]}"
  cmake --build "$build" -j"$jobs" --target "${targets[@]}" >/dev/null
fi

if [[ -z "$prebuilt" ]] && wants go; then
  log "== building the Go twins with $("$go_bin" version)"
  for c in $cases; do
    GOCACHE="$build/go-cache" GOPATH="$build/go-path" GO111MODULE=off GOFLAGS= \
      "$go_bin" build -o "$gobuild/$c" "$here/go/$c.go"
  done
fi

# --- run -----------------------------------------------------------------------------
# run_one IMPL CASE PROCS REP: one process; its RESULT lines go to $raw, prefixed with
# impl and rep, plus one "peak_rss" line from /usr/bin/time (whole-process maximum).
run_one() {
  local impl="$1" c="$2" p="$3" rep="$4" bin envvar out rc peak
  if [[ "$impl" == goro ]]; then
    bin="$bin_dir/bench_sched_$c"
    envvar="GORO_MAXPROCS=$p"
  else
    bin="$gobuild/$c"
    envvar="GOMAXPROCS=$p"
  fi
  out="$(mktemp)"
  rc=0
  env "$envvar" timeout --signal=KILL "$run_timeout" \
    "$time_bin" -f 'PEAK_RSS_KIB %M' -o "$out.time" "$bin" >"$out" 2>>"$errlog" || rc=$?
  if [[ $rc -ne 0 ]] || ! grep -q '^RESULT ' "$out"; then
    log "   FAILED: $impl $c procs=$p rep=$rep (exit $rc; stderr in $errlog)"
    printf 'FAILED impl=%s case=%s procs=%s rep=%s rc=%s\n' "$impl" "$c" "$p" "$rep" "$rc" >>"$raw"
    printf '[%s %s procs=%s rep=%s exit=%s] stdout was:\n' "$impl" "$c" "$p" "$rep" "$rc" >>"$errlog"
    cat "$out" >>"$errlog"
  else
    sed -e "s/^RESULT /RESULT impl=$impl rep=$rep /" "$out" | grep '^RESULT ' >>"$raw"
    peak="$(awk '/^PEAK_RSS_KIB/ {print $2}' "$out.time" 2>/dev/null || true)"
    [[ -n "$peak" ]] && printf 'PEAK impl=%s rep=%s name=%s procs=%s value=%s\n' \
      "$impl" "$rep" "$c" "$p" "$peak" >>"$raw"
  fi
  rm -f "$out" "$out.time"
}

log "== running: cases [$cases], procs [$procs_list], $reps reps each"
for c in $cases; do
  for p in $procs_list; do
    log "   $c procs=$p"
    for ((rep = 1; rep <= reps; rep++)); do
      # Alternate which runtime goes first so a slow drift of the machine's load
      # does not favour one side.
      if ((rep % 2)); then order="goro go"; else order="go goro"; fi
      for impl in $order; do
        if wants "$impl"; then run_one "$impl" "$c" "$p" "$rep"; fi
      done
    done
  done
done

log "== raw results: $raw"
echo
/usr/bin/python3 "$here/table.py" "$raw"
