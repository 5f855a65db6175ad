#!/usr/bin/env bash
# Installs what is missing, builds goro and runs every test. This is what CI runs
# (.ci/run calls it). A check of the docs, then five stages, each a build of its own
# under $GORO_BUILD_ROOT:
#
#   docs      every relative link in the Markdown files resolves (check-doc-links.sh),
#             the layers point down only, through their doors (check-layers.sh), and
#             docs/building.md lists the packages deps.sh installs (check-deps-doc.sh)
#   release   g++, RelWithDebInfo, GORO_WERROR=ON, everything (examples, load-test
#             programs; the tests with line tables only, GORO_TEST_LINE_TABLES); all tests
#   readme    the install recipe of README.md exactly as written (Release, the system's
#             c++, GORO_WERROR left off as a user has it), run in a fresh copy of the
#             tree; a compiler warning in its output fails the stage; all tests; the
#             recipe's `cmake --install ... --prefix /opt/goro` goes under DESTDIR
#   asan      clang++-14, GORO_SANITIZE=address (ASan + UBSan + LeakSanitizer), the
#             examples too; all tests (load-test programs are not built: no test runs them)
#   tsan      clang++-14, GORO_SANITIZE=thread (TSan)                          all tests
#             (both: Debug -O1, line tables only)
#   load      loadtest/run.sh --smoke: goro-demo of the release and of the asan stage (the
#             kit builds nothing), under every scenario of the load kit for a few seconds
#             each; after each, the server must be alive, answer /healthz, stop on
#             SIGTERM with exit 0, and have logged no sanitizer report, and the load
#             must have seen no socket error or non-2xx answer (one test per step)
#   fuzz      scripts/fuzz-smoke.sh: clang++-14, GORO_FUZZ=ON (libFuzzer, ASan + UBSan);
#             each fuzz target runs GORO_FUZZ_SECONDS from its corpus (one test each)
#   consumer  builds tests/consumer with find_package(goro) against the readme stage's
#             install (or, when that stage did not run, an install of the release
#             build), and with it examples/pg_api and examples/notes; checks that no
#             installed target carries -Werror, runs their tests
#   container docker/smoke.sh: builds the Docker image with podman, checks its
#             HEALTHCHECK, serves, and `podman stop` under wrk load: exit 0, every
#             request taken answered; tests/deploy/kube_test.sh: the Kubernetes
#             manifests of deploy/k8s under `podman kube play` on that image, and the
#             Ps under `podman run --cpus` (two tests)
#
# The last line printed is `N passed, N failed` (`, N skipped` follows when GTEST_SKIP
# skipped some), summed over every ctest run. A build that fails goes on with what it
# can build, runs those tests, and counts at least one failed test (a test binary that
# did not build is a failed <name>_NOT_BUILT test). Exits non-zero on any failure.
#
# Environment:
#   GORO_CI_STAGES   stages to run, space-separated
#                    (default: "docs release readme asan tsan load fuzz consumer container")
#   GORO_BUILD_ROOT  where the build folders go (default: <repo>/build)
#   GORO_JOBS        compile jobs (default: number of cores)
#   GORO_CTEST_JOBS  ctest -j for the release and readme stages (default 2; sanitizer
#                    stages use 1)
#   GORO_TSAN_CXX / GORO_ASAN_CXX   C++ compiler of those stages (default clang++-14;
#                    the fuzz stage uses GORO_ASAN_CXX)
#   GORO_FUZZ_SECONDS  how long the fuzz stage runs each target (default 15; GORO_JOBS
#                    targets at a time)
#   GORO_SKIP_DEPS=1 do not check/install the Debian packages
set -uo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STAGES=${GORO_CI_STAGES:-docs release readme asan tsan load fuzz consumer container}
CTEST_JOBS=${GORO_CTEST_JOBS:-2}
ASAN_CXX=${GORO_ASAN_CXX:-clang++-14}
TSAN_CXX=${GORO_TSAN_CXX:-clang++-14}

total_passed=0
total_failed=0
total_skipped=0
declare -a report=()
# What failed, with the lines that say why, repeated in the summary: CI shows the end of
# the output only.
declare -a failures=()
overall_start=$SECONDS

c_compiler_for() {
  case "$1" in
    clang++*) printf '%s\n' "clang${1#clang++}" ;;
    g++*) printf '%s\n' "gcc${1#g++}" ;;
    *) printf '%s\n' cc ;;
  esac
}

# record STAGE STATUS PASSED FAILED SKIPPED STAGE_SECONDS [TEST_SECONDS]
record() {
  total_passed=$((total_passed + $3))
  total_failed=$((total_failed + $4))
  total_skipped=$((total_skipped + $5))
  local times
  times="$(goro_fmt_secs "$6") in all"
  [ -n "${7:-}" ] && times="$times, build $(goro_fmt_secs $(($6 - $7))), tests $(goro_fmt_secs "$7")"
  report+=("$(printf '%-9s %-5s %4d passed %4d failed %3d skipped   %s' "$1" "$2" "$3" "$4" "$5" "$times")")
}

# note_failed_tests STAGE LOG: adds ctest's "The following tests FAILED:" entries of LOG
# to the summary, and the first lines of LOG that say why (gtest failures, sanitizer
# reports, timeouts).
note_failed_tests() {
  local stage=$1 log=$2 names why
  names=$(awk '/^The following tests FAILED:/ { s = 1; next }
    s && /^[[:space:]]+[0-9]+ - / { print; next } { s = 0 }' "$log")
  [ -n "$names" ] || return 0
  failures+=("$stage: failed tests:" "$names")
  why=$(grep -E -m 20 '(: Failure$|^Expected|^  Actual|Which is:|actual:|^==[0-9]+==ERROR|^SUMMARY: |runtime error:|WARNING: ThreadSanitizer|\*\*\*Timeout)' \
    "$log")
  [ -n "$why" ] && failures+=("$stage: why (first lines):" "$why")
  # A timed-out test says nothing about why: the last lines it printed show where it was.
  why=$(awk 'function flush(   i, from) {
      if (!name) return
      print name ": its last lines:"
      from = n > 12 ? n - 12 : 0
      for (i = from; i < n; i++) print "    " tail[i % 12]
      name = ""
    }
    /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: / || /tests passed, [0-9]+ tests failed/ { flush() }
    /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: .*\*\*\*Timeout/ { name = $4; n = 0; next }
    name { tail[n % 12] = $0; n++ }
    END { flush() }' "$log")
  [ -n "$why" ] && failures+=("$stage: timed out:" "$why")
  return 0
}

# run_ctest STAGE BUILD_DIR LOG [ctest args...]: runs ctest (under the command in
# CTEST_WRAPPER, if any) and sets ctest_passed / ctest_failed / ctest_skipped from its
# closing lines ("X tests failed out of Y", and the "(Skipped)" entries of "The following
# tests did not run:"; skipped tests are not counted as passed).
CTEST_WRAPPER=()
run_ctest() {
  local stage=$1 dir=$2 log=$3
  shift 3
  local rc line total tstart=$SECONDS
  (cd "$dir" && "${CTEST_WRAPPER[@]}" ctest --output-on-failure --no-tests=error "$@") 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  ctest_secs=$((SECONDS - tstart))
  line=$(grep -Eo '[0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)
  ctest_skipped=$(awk '/^The following tests did not run:/ { s = 1; next }
    s && /^[[:space:]]*$/ { s = 0 } s && /\(Skipped\)$/ { n++ } END { print n + 0 }' "$log")
  note_failed_tests "$stage" "$log"
  if [ -n "$line" ]; then
    ctest_failed=$(printf '%s\n' "$line" | awk '{print $1}')
    total=$(printf '%s\n' "$line" | awk '{print $NF}')
    ctest_passed=$((total - ctest_failed - ctest_skipped))
    if [ "$rc" -ne 0 ] && [ "$ctest_failed" -eq 0 ]; then
      echo "$stage: ctest exited $rc with no failed test; counting one failure"
      ctest_failed=1
    fi
  else
    echo "$stage: ctest ran no test (exit $rc); counting one failure"
    ctest_passed=0
    ctest_failed=1
    ctest_skipped=0
  fi
}

# build_and_test STAGE DIR "TARGETS" CTEST_ARGS...: builds DIR (configured already),
# going on past failures, then runs ctest on whatever was built (test_and_record). Sets
# stage_build_ok.
build_and_test() {
  local stage=$1 dir=$2 build_targets=$3
  shift 3
  stage_build_ok=1
  # shellcheck disable=SC2086  # build_targets: a space-separated list, possibly empty
  if ! GORO_KEEP_GOING=1 goro_build "$dir" $build_targets; then
    stage_build_ok=0
    echo "$stage: BUILD FAILED; running the tests that did build"
  fi
  test_and_record "$stage" "$dir" "$([ "$stage_build_ok" = 1 ] || echo BUILD)" "$@"
}

# test_and_record STAGE DIR BUILD_FAILURE CTEST_ARGS...: runs ctest in DIR and records
# the stage. BUILD_FAILURE is empty when the build went well, else the status to record
# (BUILD, WARN), and makes at least one failed test (a test binary that did not build is
# a failed <name>_NOT_BUILT test in ctest already; a library or example that did not
# build adds one).
test_and_record() {
  local stage=$1 dir=$2 build_failure=$3
  shift 3
  goro_section "$stage: ctest $*"
  run_ctest "$stage" "$dir" "$dir/ctest.log" "$@"
  local status=ctest
  if [ -n "$build_failure" ]; then
    status=$build_failure
    [ "$ctest_failed" -gt 0 ] || ctest_failed=1
  fi
  record "$stage" "$status" "$ctest_passed" "$ctest_failed" "$ctest_skipped" \
    $((SECONDS - stage_start)) "$ctest_secs"
}

stage_docs() {
  local passed=0 failed=0
  stage_start=$SECONDS
  goro_section "docs: relative links in the Markdown files; the layers' includes; the deps table"
  if "$GORO_ROOT/scripts/check-doc-links.sh"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  if "$GORO_ROOT/scripts/check-layers.sh"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  if "$GORO_ROOT/scripts/check-deps-doc.sh"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  record docs "$([ "$failed" = 0 ] && echo ok || echo FAIL)" "$passed" "$failed" 0 \
    $((SECONDS - stage_start))
}

stage_release() {
  local dir=$GORO_BUILD_ROOT/ci-release
  stage_start=$SECONDS
  release_built=0
  goro_section "release: g++ RelWithDebInfo, GORO_WERROR=ON, all targets, all tests"
  if ! goro_configure "$dir" "$GORO_ROOT" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ -DGORO_WERROR=ON \
    -DGORO_BUILD_TESTS=ON -DGORO_TEST_LINE_TABLES=ON -DGORO_BUILD_EXAMPLES=ON \
    -DGORO_BUILD_LOADTESTS=ON; then
    echo "release: CONFIGURE FAILED"
    record release CONF 0 1 0 $((SECONDS - stage_start))
    return
  fi
  build_and_test release "$dir" "" -j"$CTEST_JOBS"
  release_built=$stage_build_ok
}

sanitizer_env() {
  local supp=$GORO_ROOT/.ci
  ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:strict_init_order=1:check_initialization_order=1"
  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
  LSAN_OPTIONS=""
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  [ -f "$supp/lsan.supp" ] && LSAN_OPTIONS="suppressions=$supp/lsan.supp"
  [ -f "$supp/ubsan.supp" ] && UBSAN_OPTIONS="$UBSAN_OPTIONS:suppressions=$supp/ubsan.supp"
  [ -f "$supp/tsan.supp" ] && TSAN_OPTIONS="$TSAN_OPTIONS suppressions=$supp/tsan.supp"
  # Deadline tests allow a deadline to fire this late (median; 5 ms otherwise): the
  # sanitizers slow every wake-up, not only goro's.
  GORO_TEST_SLACK_MS=${GORO_TEST_SLACK_MS:-20}
  export ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS GORO_TEST_SLACK_MS
  echo "ASAN_OPTIONS=$ASAN_OPTIONS"
  echo "UBSAN_OPTIONS=$UBSAN_OPTIONS"
  echo "LSAN_OPTIONS=$LSAN_OPTIONS"
  echo "GORO_TEST_SLACK_MS=$GORO_TEST_SLACK_MS"
  echo "TSAN_OPTIONS=$TSAN_OPTIONS"
}

# The sanitizer builds' flags: -O1, and line tables for debug information, which is all a
# sanitizer report's stack needs (file:line for every frame); full -g doubles the time
# clang takes to compile a test with ASan.
SANITIZER_FLAGS="-gline-tables-only -O1"

# sanitizer_stage NAME CXX SANITIZER TITLE [EXAMPLES]: a Debug -O1 build with
# GORO_SANITIZE and every test, ctest -j1 (sanitizers make timing tests sensitive to
# neighbours). EXAMPLES=ON builds the examples too (and runs their tests).
sanitizer_stage() {
  local name=$1 cxx=$2 sanitizer=$3 title=$4 examples=${5:-OFF}
  local dir=$GORO_BUILD_ROOT/ci-$name
  stage_start=$SECONDS
  goro_section "$name: $cxx GORO_SANITIZE=$sanitizer ($title), all tests"
  sanitizer_env
  if ! goro_configure "$dir" "$GORO_ROOT" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_COMPILER="$(c_compiler_for "$cxx")" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_C_FLAGS_DEBUG="$SANITIZER_FLAGS" -DCMAKE_CXX_FLAGS_DEBUG="$SANITIZER_FLAGS" \
    -DGORO_SANITIZE="$sanitizer" -DGORO_WERROR=ON \
    -DGORO_BUILD_TESTS=ON -DGORO_BUILD_EXAMPLES="$examples" -DGORO_BUILD_LOADTESTS=OFF; then
    echo "$name: CONFIGURE FAILED"
    record "$name" CONF 0 1 0 $((SECONDS - stage_start))
    return
  fi
  build_and_test "$name" "$dir" "" -j1
}

# The examples too: the load stage runs this build's goro-demo.
# One rolling restart per balancer and load instead of three: the release stage runs the
# three, and under ASan a repeat takes no new path (it saves 40 s of a 2-core CI).
stage_asan() {
  GORO_DEPLOY_RESTARTS=1 sanitizer_stage asan "$ASAN_CXX" address "ASan+UBSan+LSan" ON
}

stage_tsan() {
  # TSan of LLVM 14 aborts with "unexpected memory mapping" on kernels that randomize
  # mmap with more bits than it knows; running without ASLR avoids that, and setarch's
  # personality is inherited by ctest's children.
  if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
    CTEST_WRAPPER=(setarch "$(uname -m)" -R)
  fi
  sanitizer_stage tsan "$TSAN_CXX" thread "TSan"
  CTEST_WRAPPER=()
}

# record_counted STAGE LOG RC: records a stage whose script ends with `N passed, N
# failed` (the fuzz and load smokes); no such line, or a failure exit with none failed,
# counts one failure.
record_counted() {
  local stage=$1 log=$2 rc=$3 line passed failed
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
  if [ -z "$line" ]; then
    echo "$stage: no result line (exit $rc); counting one failure"
    record "$stage" ERROR 0 1 0 $((SECONDS - stage_start))
    return
  fi
  passed=$(printf '%s\n' "$line" | awk '{print $1}')
  failed=$(printf '%s\n' "$line" | awk '{print $3}')
  if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    echo "$stage: exit $rc with nothing failed; counting one failure"
    failed=1
  fi
  record "$stage" "$([ "$failed" -eq 0 ] && echo ok || echo FAIL)" "$passed" "$failed" 0 \
    $((SECONDS - stage_start))
}

# The load smoke: goro-demo in Release and with ASan, each under every scenario of
# loadtest/run.sh --smoke. The release and asan stages' builds provide them (the kit then
# builds nothing); a stage that did not run is made up for by a build of the kit's own
# (ci-load, Release) or of goro-demo alone (ci-asan).
stage_load() {
  local rel=$GORO_BUILD_ROOT/ci-release asan=$GORO_BUILD_ROOT/ci-asan
  local log=$GORO_BUILD_ROOT/ci-load.log rc=0 demo
  local -a kit=(BUILD_DIR="$rel" PREBUILT=1)
  stage_start=$SECONDS
  mkdir -p "$GORO_BUILD_ROOT"
  : >"$log"
  if [ ! -x "$rel/examples/demo/goro-demo" ] || [ ! -x "$rel/loadtest/http/loadtest_idle_client" ]; then
    kit=(BUILD_DIR="$GORO_BUILD_ROOT/ci-load")
  fi
  demo=$asan/examples/demo/goro-demo
  if [ ! -x "$demo" ]; then
    goro_section "load: goro-demo ($ASAN_CXX, GORO_SANITIZE=address) for the smoke"
    if ! goro_configure "$asan" "$GORO_ROOT" -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_C_COMPILER="$(c_compiler_for "$ASAN_CXX")" -DCMAKE_CXX_COMPILER="$ASAN_CXX" \
      -DCMAKE_C_FLAGS_DEBUG="$SANITIZER_FLAGS" -DCMAKE_CXX_FLAGS_DEBUG="$SANITIZER_FLAGS" \
      -DGORO_SANITIZE=address -DGORO_WERROR=ON \
      -DGORO_BUILD_TESTS=ON -DGORO_BUILD_EXAMPLES=ON -DGORO_BUILD_LOADTESTS=OFF ||
      ! goro_build "$asan" goro-demo; then
      echo "load: the ASan goro-demo did not build" | tee -a "$log"
      demo=""
    fi
  fi
  goro_section "load: loadtest/run.sh --smoke, goro-demo in Release"
  env "${kit[@]}" JOBS="$GORO_JOBS" OUT_DIR="$GORO_BUILD_ROOT/ci-load-results/release" \
    bash "$GORO_ROOT/loadtest/run.sh" --smoke 2>&1 | tee -a "$log"
  [ "${PIPESTATUS[0]}" -ne 0 ] && rc=1
  if [ -n "$demo" ]; then
    goro_section "load: loadtest/run.sh --smoke, goro-demo with ASan + UBSan + LSan"
    (
      sanitizer_env
      env "${kit[@]}" GORO_DEMO="$demo" JOBS="$GORO_JOBS" \
        OUT_DIR="$GORO_BUILD_ROOT/ci-load-results/asan" bash "$GORO_ROOT/loadtest/run.sh" --smoke
    ) 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -ne 0 ] && rc=1
  else
    echo "0 passed, 1 failed" >>"$log"
    rc=1
  fi
  # Both runs' counts, summed into one line for record_counted.
  awk '/^[0-9]+ passed, [0-9]+ failed$/ { p += $1; f += $3; n++ }
    END { if (n) printf "%d passed, %d failed\n", p, f }' "$log" >"$log.sum"
  record_counted load "$log.sum" "$rc"
}

# The fuzz smoke: counts its own tests (one per target) on its last line.
stage_fuzz() {
  local log=$GORO_BUILD_ROOT/ci-fuzz.log
  stage_start=$SECONDS
  goro_section "fuzz: scripts/fuzz-smoke.sh ${GORO_FUZZ_SECONDS:-15} (each target, from its corpus)"
  mkdir -p "$GORO_BUILD_ROOT"
  GORO_FUZZ_BUILD=$GORO_BUILD_ROOT/ci-fuzz GORO_FUZZ_CXX=$ASAN_CXX \
    bash "$GORO_ROOT/scripts/fuzz-smoke.sh" "${GORO_FUZZ_SECONDS:-15}" 2>&1 | tee "$log"
  record_counted fuzz "$log" "${PIPESTATUS[0]}"
}

# The install recipe of README.md: the first ```sh block that runs `cmake --install`.
readme_recipe() {
  awk '/^```sh$/ { inside = 1; block = ""; next }
    inside && /^```$/ { inside = 0; if (block ~ /cmake --install/) { printf "%s", block; exit } }
    inside { block = block $0 "\n" }' "$GORO_ROOT/README.md"
}

# copy_tree DEST: the repository's files as a fresh clone has them (tracked and
# untracked files, less what .gitignore ignores); outside a git checkout, all but build*.
copy_tree() {
  local dest=$1 f
  mkdir -p "$dest"
  if git -C "$GORO_ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$GORO_ROOT" && git ls-files -z --cached --others --exclude-standard |
      while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
      tar --null -T - -cf -) | tar -xf - -C "$dest"
  else
    (cd "$GORO_ROOT" && tar --exclude='./build*' -cf - .) | tar -xf - -C "$dest"
  fi
}

stage_readme() {
  local root=$GORO_BUILD_ROOT/ci-readme
  local src=$root/goro log=$root/recipe.log recipe prefix rc warnings
  local dir=$src/build/release
  stage_start=$SECONDS
  readme_prefix=
  goro_section "readme: README.md's install recipe as written, in a fresh copy of the tree"
  recipe=$(readme_recipe)
  prefix=$(printf '%s\n' "$recipe" | sed -n 's/^cmake --install .* --prefix \([^ ]*\).*$/\1/p')
  if [ -z "$recipe" ] || [ -z "$prefix" ]; then
    echo "readme: README.md has no sh block with a cmake --install ... --prefix line"
    record readme ERROR 0 1 0 $((SECONDS - stage_start))
    return
  fi
  rm -rf "$root"
  copy_tree "$src"
  echo "in $src, with DESTDIR=$root/destdir and CMAKE_BUILD_PARALLEL_LEVEL=$GORO_JOBS:"
  printf '%s\n' "$recipe" | sed 's/^/  $ /'
  # As a user runs it: no CC/CXX of ours, so CMake picks the system's c++.
  (cd "$src" && env -u CC -u CXX DESTDIR="$root/destdir" CMAKE_BUILD_PARALLEL_LEVEL="$GORO_JOBS" \
    bash -euo pipefail -c "$recipe") 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  echo "readme: compiler $(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt" 2>/dev/null)"
  # GORO_WERROR is off in the recipe, as a user has it; the warnings are still errors here.
  warnings=$(grep -c 'warning:' "$log")
  # The recipe builds the libraries only: the stage is one test, that they build without
  # a warning and install (the consumer stage then builds against them).
  if [ "$rc" -ne 0 ]; then
    echo "readme: THE RECIPE FAILED (exit $rc)"
    record readme BUILD 0 1 0 $((SECONDS - stage_start))
  elif [ "$warnings" -gt 0 ]; then
    echo "readme: the build printed $warnings compiler warning(s):"
    grep 'warning:' "$log"
    record readme WARN 0 1 0 $((SECONDS - stage_start))
  else
    readme_prefix=$root/destdir$prefix
    echo "readme: the recipe built and installed $(find "$readme_prefix" -type f | wc -l) files in $(goro_fmt_secs $((SECONDS - stage_start)))"
    record readme ok 1 0 0 $((SECONDS - stage_start))
  fi
}

stage_consumer() {
  local rel=$GORO_BUILD_ROOT/ci-release prefix
  local dir=$GORO_BUILD_ROOT/ci-consumer
  stage_start=$SECONDS
  rm -rf "$dir"
  if [ -n "${readme_prefix:-}" ]; then
    prefix=$readme_prefix
    goro_section "consumer: find_package(goro) from tests/consumer, in the readme stage's install"
  elif [ "${release_built:-0}" = 1 ]; then
    prefix=$rel/install
    goro_section "consumer: cmake --install of the release build, find_package(goro) from tests/consumer"
    rm -rf "$prefix"
    if ! cmake --install "$rel" --prefix "$prefix" >"$rel/install.log" 2>&1; then
      cat "$rel/install.log"
      echo "consumer: INSTALL FAILED"
      record consumer INST 0 1 0 $((SECONDS - stage_start))
      return
    fi
  else
    goro_section "consumer"
    echo "consumer: neither the readme nor the release stage left an install to use"
    record consumer SKIP 0 1 0 $((SECONDS - stage_start))
    return
  fi
  echo "installed tree $prefix: $(find "$prefix" -type f | wc -l) files"
  # The flags of goro's own builds are PRIVATE: none may reach a consumer's compile line.
  if grep -rl -e '-Werror' "$prefix"/lib*/cmake/goro; then
    echo "consumer: the installed CMake package above carries -Werror"
    record consumer FLAGS 0 1 0 $((SECONDS - stage_start))
    return
  fi
  if ! goro_configure "$dir" "$GORO_ROOT/tests/consumer" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ -DCMAKE_PREFIX_PATH="$prefix"; then
    echo "consumer: CONFIGURE FAILED (find_package(goro))"
    record consumer CONF 0 1 0 $((SECONDS - stage_start))
    return
  fi
  build_and_test consumer "$dir" "" -j1
}

stage_container() {
  local passed=0 failed=0
  stage_start=$SECONDS
  goro_section "container: docker/smoke.sh (podman build, HEALTHCHECK, stop under load)"
  if bash "$GORO_ROOT/docker/smoke.sh"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  goro_section "container: tests/deploy/kube_test.sh (deploy/k8s under podman kube play, --cpus)"
  if bash "$GORO_ROOT/tests/deploy/kube_test.sh"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  record container "$([ "$failed" = 0 ] && echo ok || echo FAIL)" "$passed" "$failed" 0 \
    $((SECONDS - stage_start))
}

main() {
  goro_section "goro: build and test ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, stages: $STAGES)"
  if [ "${GORO_SKIP_DEPS:-0}" != 1 ]; then
    local dstart=$SECONDS
    if ! goro_install_deps test; then
      echo "deps: installing the Debian packages failed"
      echo "0 passed, 1 failed"
      exit 1
    fi
    echo "deps: $(goro_fmt_secs $((SECONDS - dstart)))"
  fi
  echo "cmake: $(cmake --version | head -n 1); generator: $(goro_generator); jobs: $GORO_JOBS"
  local stage
  for stage in $STAGES; do
    case "$stage" in
      docs | release | readme | asan | tsan | load | fuzz | consumer | container) "stage_$stage" ;;
      *)
        echo "unknown stage '$stage' (docs release readme asan tsan load fuzz consumer container)"
        record "$stage" ERROR 0 1 0 0
        ;;
    esac
  done
  goro_section "summary ($(goro_fmt_secs $((SECONDS - overall_start))) in all)"
  printf '%s\n' "${report[@]}"
  echo
  if [ "${#failures[@]}" -gt 0 ]; then
    printf '%s\n' "${failures[@]}"
    echo
  fi
  if [ "$total_skipped" -gt 0 ]; then
    echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
  else
    echo "$total_passed passed, $total_failed failed"
  fi
  [ "$total_failed" -eq 0 ]
}

main "$@"
