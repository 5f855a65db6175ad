#!/usr/bin/env bash
# Cross-builds goro for AArch64 on an x86-64 Debian machine and runs the AArch64 smoke
# test (tests/arch/aarch64_smoke.cpp) under qemu-user with GORO_MAXPROCS=1, 2 and 4.
# Not part of CI: it checks the code that only an AArch64 build compiles and runs
# (scheduler/src/switch_aarch64.S, the AArch64 parts of scheduler/src/machine_context.hpp and
# net/src/sys.hpp, ...).
#
#   scripts/check-aarch64.sh [BUILD_DIR]     (default: build-aarch64 in the repository)
#
# Installs g++-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user with apt-get
# when they are missing (as root, or through sudo).
#
# GoogleTest and OpenSSL are not installed for arm64, so the main CMake project (whose
# goro_net requires OpenSSL) is not used. A small CMake project written into BUILD_DIR
# builds the real goro_scheduler target (scheduler/CMakeLists.txt), goro_net's sources
# without tls*.cpp (the only files that use OpenSSL), and the smoke program, all with
# the project's warnings-as-errors flags.
#
# Environment: GORO_JOBS (compile jobs, default 2), GORO_SMOKE_TIMEOUT (seconds per
# run, default 600). Exits non-zero if the build or any run fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(realpath -m "${1:-$ROOT/build-aarch64}")
JOBS=${GORO_JOBS:-2}
TIMEOUT=${GORO_SMOKE_TIMEOUT:-600}
SYSROOT=/usr/aarch64-linux-gnu

missing=()
command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || missing+=(g++-aarch64-linux-gnu)
[ -f "$SYSROOT/include/stdio.h" ] || missing+=(libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null 2>&1 || missing+=(qemu-user)
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing ${missing[*]}"
  sudo=
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi

mkdir -p "$BUILD/project"
cat >"$BUILD/toolchain-aarch64.cmake" <<'EOF'
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_ASM_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
EOF
cat >"$BUILD/project/CMakeLists.txt" <<'EOF'
# Written by scripts/check-aarch64.sh: the scheduler, the net layer without TLS, and
# the AArch64 smoke program.
cmake_minimum_required(VERSION 3.25)
project(goro_aarch64_check LANGUAGES C CXX ASM)
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
include(GNUInstallDirs)
include(${GORO_ROOT}/cmake/GoroWarnings.cmake)
find_package(Threads REQUIRED)

add_subdirectory(${GORO_ROOT}/scheduler scheduler)

file(GLOB net_sources ${GORO_ROOT}/net/src/*.cpp)
list(FILTER net_sources EXCLUDE REGEX "/tls[^/]*\\.cpp$")
add_library(goro_net_without_tls STATIC ${net_sources})
target_include_directories(goro_net_without_tls PUBLIC ${GORO_ROOT}/net/include)
target_link_libraries(goro_net_without_tls PUBLIC goro_scheduler)
goro_warnings(goro_net_without_tls)

add_executable(aarch64_smoke ${GORO_ROOT}/tests/arch/aarch64_smoke.cpp)
target_link_libraries(aarch64_smoke PRIVATE goro_net_without_tls)
goro_warnings(aarch64_smoke)
EOF

echo "== configuring $BUILD"
cmake -S "$BUILD/project" -B "$BUILD" -G "Unix Makefiles" \
  -DCMAKE_TOOLCHAIN_FILE="$BUILD/toolchain-aarch64.cmake" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGORO_WERROR=ON -DGORO_ROOT="$ROOT" >/dev/null
echo "== building (-j$JOBS)"
cmake --build "$BUILD" -j"$JOBS"

status=0
for procs in 1 2 4; do
  echo "== qemu-aarch64, GORO_MAXPROCS=$procs"
  if ! GORO_MAXPROCS=$procs timeout "$TIMEOUT" qemu-aarch64 -L "$SYSROOT" "$BUILD/aarch64_smoke"; then
    echo "== FAILED with GORO_MAXPROCS=$procs"
    status=1
  fi
done
echo "== qemu-aarch64, stack overflow on a goroutine (must abort with a report)"
overflow_log=$BUILD/stack-overflow.log
# The subshell keeps bash's "Aborted" job message out of the output; $? is the status.
code=$( (GORO_MAXPROCS=2 timeout "$TIMEOUT" qemu-aarch64 -L "$SYSROOT" "$BUILD/aarch64_smoke" \
  stack-overflow >"$overflow_log" 2>&1; echo $?) 2>/dev/null)
report=$(grep -E '^goroutine [0-9]+: stack overflow$' "$overflow_log" || true)
if [ "$code" -ne 0 ] && [ "$code" -ne 124 ] && [ -n "$report" ]; then
  echo "PASS stack_overflow: exit status $code, \"$report\""
else
  echo "FAIL stack_overflow: exit status $code; output was:"
  cat "$overflow_log"
  status=1
fi

if [ $status -eq 0 ]; then echo "== AArch64 smoke test passed (1, 2 and 4 Ps, stack overflow)"; fi
exit $status
