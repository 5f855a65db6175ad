#!/usr/bin/env bash
# Installs what is missing, builds the goro demo HTTP server (examples/demo, target
# goro-demo) and runs it in the foreground until Ctrl-C:
#
#   ./scripts/run-demo.sh                         # serves on 127.0.0.1:8080
#   ./scripts/run-demo.sh -- --addr 0.0.0.0:9000  # arguments after -- go to goro-demo
#   ./scripts/run-demo.sh --check                 # start it, curl /plaintext and /healthz, stop
#
# While examples/demo/ does not exist yet it builds and runs examples/hello (goro-hello)
# instead, a goroutine program that prints and exits.
#
# Environment: GORO_BUILD_ROOT (default <repo>/build; the build goes to its demo/
# folder), GORO_JOBS, GORO_DEMO_ADDR (default 127.0.0.1:8080), GORO_SKIP_DEPS=1.
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

check=0
demo_args=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --check) check=1 ;;
    --)
      shift
      demo_args=("$@")
      break
      ;;
    -h | --help)
      sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "run-demo: unknown argument '$1' (see --help)" >&2
      exit 2
      ;;
  esac
  shift
done

if [ -f "$GORO_ROOT/examples/demo/CMakeLists.txt" ]; then
  target=goro-demo
else
  target=goro-hello
fi

if [ "${GORO_SKIP_DEPS:-0}" != 1 ]; then
  goro_section "deps: Debian packages"
  goro_install_deps build
fi

dir=$GORO_BUILD_ROOT/demo
goro_section "build: $target (g++, RelWithDebInfo) in $dir"
goro_configure "$dir" "$GORO_ROOT" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ -DGORO_WERROR=ON \
  -DGORO_BUILD_TESTS=OFF -DGORO_BUILD_EXAMPLES=ON -DGORO_BUILD_LOADTESTS=OFF
goro_build "$dir" "$target"
bin=$(find "$dir" -type f -name "$target" -perm -u+x -print -quit)
if [ -z "$bin" ]; then
  echo "run-demo: built $target but found no executable of that name under $dir" >&2
  exit 1
fi

if [ "$target" = goro-hello ]; then
  goro_section "run: $bin (examples/demo is not there yet: running the hello example)"
  exec "$bin" "${demo_args[@]}"
fi

addr=${GORO_DEMO_ADDR:-127.0.0.1:8080}
[ "${#demo_args[@]}" -gt 0 ] || demo_args=(--addr "$addr")

if [ "$check" = 0 ]; then
  goro_section "run: $bin ${demo_args[*]}"
  echo "try: curl http://$addr/plaintext   (Ctrl-C stops the server)"
  exec "$bin" "${demo_args[@]}"
fi

# --check: start, probe, stop. A port of our own unless the caller chose the arguments.
if [ "${GORO_DEMO_ADDR:-}" = "" ] && [ "${demo_args[*]}" = "--addr $addr" ]; then
  addr=127.0.0.1:$((20000 + RANDOM % 20000))
  demo_args=(--addr "$addr")
fi
goro_section "check: $bin ${demo_args[*]}"
command -v curl >/dev/null 2>&1 || { echo "check: needs curl (scripts/deps.sh build)" >&2; exit 1; }
"$bin" "${demo_args[@]}" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
ok=0
for _ in $(seq 1 50); do
  if curl -fsS -o /dev/null "http://$addr/healthz" 2>/dev/null; then
    ok=1
    break
  fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ "$ok" != 1 ]; then
  echo "check: goro-demo did not answer /healthz on $addr" >&2
  exit 1
fi
fail=0
for path in /plaintext /healthz; do
  if body=$(curl -fsS --max-time 5 "http://$addr$path"); then
    printf 'GET %-11s -> %s\n' "$path" "$(printf '%s' "$body" | head -c 200)"
  else
    echo "GET $path failed" >&2
    fail=1
  fi
done
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
trap - EXIT
[ "$fail" = 0 ] && echo "check: ok"
exit "$fail"
