#!/usr/bin/env bash
# Helpers shared by scripts/run-demo.sh and scripts/run-tests.sh. Source it; it sets
# nothing but variables prefixed GORO_ and functions prefixed goro_.
#
# Environment it honours:
#   GORO_BUILD_ROOT  where the build folders go (default: <repo>/build)
#   GORO_JOBS        parallel compile jobs (default: number of cores)
#   GORO_GENERATOR   CMake generator (default: Ninja when installed, else Unix Makefiles)

GORO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GORO_BUILD_ROOT=${GORO_BUILD_ROOT:-$GORO_ROOT/build}
GORO_JOBS=${GORO_JOBS:-$(nproc 2>/dev/null || echo 2)}

# shellcheck source=scripts/deps.sh
. "$GORO_ROOT/scripts/deps.sh"

goro_section() {
  printf '\n==============================================================================\n'
  printf '== %s\n' "$*"
  printf '==============================================================================\n'
}

goro_generator() {
  if [ -n "${GORO_GENERATOR:-}" ]; then
    printf '%s\n' "$GORO_GENERATOR"
  elif command -v ninja >/dev/null 2>&1; then
    printf 'Ninja\n'
  else
    printf 'Unix Makefiles\n'
  fi
}

# goro_configure BUILD_DIR SOURCE_DIR [cmake args...]
# Configures BUILD_DIR; wipes it first when it was configured with another generator
# or another C++ compiler (CMake refuses to switch either in place).
goro_configure() {
  local dir=$1 src=$2
  shift 2
  local gen cache old_gen want_cxx old_cxx arg
  gen=$(goro_generator)
  cache=$dir/CMakeCache.txt
  if [ -f "$cache" ]; then
    old_gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$cache")
    want_cxx=
    for arg in "$@"; do
      case "$arg" in -DCMAKE_CXX_COMPILER=*) want_cxx=${arg#-DCMAKE_CXX_COMPILER=} ;; esac
    done
    old_cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$cache")
    if [ "$old_gen" != "$gen" ] ||
      { [ -n "$want_cxx" ] && [ "$(command -v "$want_cxx" || echo "$want_cxx")" != "$old_cxx" ]; }; then
      echo "configure: $dir was set up with '$old_gen' / '$old_cxx'; starting it afresh"
      rm -rf "$dir"
    fi
  fi
  mkdir -p "$dir"
  cmake -S "$src" -B "$dir" -G "$gen" "$@"
}

# goro_build BUILD_DIR [targets...]
# With GORO_KEEP_GOING=1 the build goes on past a failed target (ninja -k 0, make -k),
# so that everything that can be built is, and its tests can still run.
goro_build() {
  local dir=$1
  shift
  local -a targets=() native=()
  local t
  for t in "$@"; do targets+=(--target "$t"); done
  if [ "${GORO_KEEP_GOING:-0}" = 1 ]; then
    case "$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$dir/CMakeCache.txt" 2>/dev/null)" in
      Ninja*) native=(-- -k 0) ;;
      *Makefiles*) native=(-- -k) ;;
    esac
  fi
  cmake --build "$dir" --parallel "$GORO_JOBS" "${targets[@]}" "${native[@]}"
}

# goro_fmt_secs SECONDS -> "Mm SSs"
goro_fmt_secs() {
  printf '%dm%02ds' $(($1 / 60)) $(($1 % 60))
}
