#!/usr/bin/env bash
# Builds goro's libFuzzer targets (fuzz/: clang 14, ASan + UBSan, GORO_FUZZ=ON) if needed
# and runs each for SECONDS (default 60), starting from its checked-in corpus
# (fuzz/corpus/<target>/). Inputs the fuzzer finds go to a scratch folder, never into
# the tree. A crash, a sanitizer report, a leak, an input slower than 10 s or a property
# a target reports broken fails that target; the input that did it is kept under the
# output folder (add it to fuzz/corpus/<target>/ as regression-<what> once fixed, and
# tests/fuzz replays it in every build).
#
#   scripts/fuzz-smoke.sh [SECONDS] [TARGET...]   (default: every fuzz/corpus/<target>/)
#
# Prints one line of figures per target (executions, rate, coverage, corpus growth,
# peak RSS); the last line is `N passed, N failed`, one test per target. Exits non-zero
# on any failure.
#
# Environment:
#   GORO_FUZZ_BUILD  build folder (default: $GORO_BUILD_ROOT/fuzz)
#   GORO_FUZZ_CXX    C++ compiler (default: clang++-14; the C compiler is the matching clang)
#   GORO_FUZZ_OUT    logs, scratch corpora and failing inputs (default: <build>/fuzz-out)
#   GORO_JOBS        compile jobs, and targets run at once (default: number of cores)
set -uo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SECS=${1:-60}
shift $(($# > 0 ? 1 : 0))
TARGETS=("$@")
if [ "${#TARGETS[@]}" -eq 0 ]; then
  # Every target has a corpus folder of its name.
  for dir in "$GORO_ROOT"/fuzz/corpus/*/; do TARGETS+=("$(basename "$dir")"); done
fi
BUILD=${GORO_FUZZ_BUILD:-$GORO_BUILD_ROOT/fuzz}
CXX_FOR_FUZZ=${GORO_FUZZ_CXX:-clang++-14}
OUT=${GORO_FUZZ_OUT:-$BUILD/fuzz-out}

case "$SECS" in '' | *[!0-9]*)
  echo "usage: scripts/fuzz-smoke.sh [SECONDS] [TARGET...]" >&2
  exit 2
  ;;
esac

goro_section "fuzz: build ($CXX_FOR_FUZZ, GORO_SANITIZE=address, GORO_FUZZ=ON) in $BUILD"
if ! goro_configure "$BUILD" "$GORO_ROOT" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_COMPILER="clang${CXX_FOR_FUZZ#clang++}" -DCMAKE_CXX_COMPILER="$CXX_FOR_FUZZ" \
  -DCMAKE_C_FLAGS_DEBUG="-gline-tables-only -O1" -DCMAKE_CXX_FLAGS_DEBUG="-gline-tables-only -O1" \
  -DGORO_SANITIZE=address -DGORO_FUZZ=ON -DGORO_WERROR=ON \
  -DGORO_BUILD_TESTS=OFF -DGORO_BUILD_EXAMPLES=OFF -DGORO_BUILD_LOADTESTS=OFF; then
  echo "fuzz: CONFIGURE FAILED"
  echo "0 passed, ${#TARGETS[@]} failed"
  exit 1
fi
build_targets=()
for t in "${TARGETS[@]}"; do build_targets+=("${t}_fuzz"); done
GORO_KEEP_GOING=1 goro_build "$BUILD" "${build_targets[@]}"

# As the sanitizer stages of run-tests.sh run them, with libFuzzer's own leak check.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
[ -f "$GORO_ROOT/.ci/lsan.supp" ] && export LSAN_OPTIONS="suppressions=$GORO_ROOT/.ci/lsan.supp"
[ -f "$GORO_ROOT/.ci/ubsan.supp" ] && UBSAN_OPTIONS="$UBSAN_OPTIONS:suppressions=$GORO_ROOT/.ci/ubsan.supp"

mkdir -p "$OUT"

# run_target T: runs target T for SECS and writes its summary line to $OUT/T.result
# ("ok ..." or "FAIL ..."), its fuzzer's figures and any failure's first lines to
# $OUT/T.report.
run_target() {
  local t=$1 exe seeds log work rc runs rate rss cov found figures artifacts
  local -a flags
  exe=$BUILD/fuzz/${t}_fuzz
  seeds=$GORO_ROOT/fuzz/corpus/$t
  log=$OUT/$t.log
  exec >"$OUT/$t.report" 2>&1
  if [ ! -x "$exe" ] || [ ! -d "$seeds" ]; then
    echo "fuzz: $t: $([ -x "$exe" ] && echo "no corpus $seeds" || echo "not built")"
    printf '%-16s FAIL  not built or no corpus\n' "$t" >"$OUT/$t.result"
    return
  fi
  work=$OUT/$t.corpus
  rm -rf "$work" "$OUT/$t-"*
  mkdir -p "$work"
  flags=(-max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
    -artifact_prefix="$OUT/$t-")
  case "$t" in
    http_*) flags+=(-dict="$GORO_ROOT/fuzz/http.dict") ;;
    http2_*) flags+=(-dict="$GORO_ROOT/fuzz/http2.dict") ;;
  esac
  echo "$ ${exe#"$GORO_ROOT"/} ${flags[*]} $work ${seeds#"$GORO_ROOT"/}"
  "$exe" "${flags[@]}" "$work" "$seeds" >"$log" 2>&1
  rc=$?
  grep -E '^#[0-9]+ +(INITED|DONE)|^stat::' "$log"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
  cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1)
  found=$(find "$work" -type f | wc -l)
  figures="${runs:-?} runs, ${rate:-?}/s, ${cov:-cov: ?}, +$found inputs, ${rss:-?} MB"
  artifacts=$(find "$OUT" -maxdepth 1 -name "$t-*" -type f)
  if [ "$rc" -eq 0 ] && [ -z "$artifacts" ]; then
    printf '%-16s ok    %s\n' "$t" "$figures" >"$OUT/$t.result"
  else
    grep -E 'ERROR|property broken|SUMMARY' "$log" | head -n 20
    echo "fuzz: $t FAILED (exit $rc); log $log; input(s): ${artifacts:-none}"
    printf '%-16s FAIL  %s; %s\n' "$t" "$figures" "${artifacts:-exit $rc}" >"$OUT/$t.result"
  fi
}

# GORO_JOBS targets at a time, each on one core (libFuzzer runs one thread).
goro_section "fuzz: ${#TARGETS[@]} targets, ${SECS}s each, $GORO_JOBS at a time"
running=0
for t in "${TARGETS[@]}"; do
  rm -f "$OUT/$t.result"
  if [ "$running" -ge "$GORO_JOBS" ]; then
    wait -n
    running=$((running - 1))
  fi
  run_target "$t" &
  running=$((running + 1))
done
wait

passed=0
failed=0
summary=()
for t in "${TARGETS[@]}"; do
  goro_section "fuzz: $t"
  cat "$OUT/$t.report" 2>/dev/null
  line=$(cat "$OUT/$t.result" 2>/dev/null || printf '%-16s FAIL  no result' "$t")
  summary+=("$line")
  case "$line" in
    *" ok "*) passed=$((passed + 1)) ;;
    *) failed=$((failed + 1)) ;;
  esac
done

goro_section "fuzz: summary (${SECS}s per target)"
printf '%s\n' "${summary[@]}"
echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
