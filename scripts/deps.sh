#!/usr/bin/env bash
# goro's system dependencies: Debian 12 (bookworm) packages, and nothing else.
#
# This is the only place that lists them. Source it and call
#
#   goro_install_deps build      # compilers, CMake, libraries: enough to build everything
#   goro_install_deps test       # build + what the tests and sanitizer builds need
#   goro_install_deps loadtest   # test + the load-test peers and tools (Go, nginx, wrk, ...)
#   goro_install_deps all        # everything above
#
# or run it directly: `scripts/deps.sh [group...]` (default: all).
#
# Only the packages that `dpkg-query` says are missing get installed, so on a prepared
# machine this is a no-op that takes well under a second and never touches the network.
# It needs no TTY and no stdin (CI runs with neither), and runs `apt-get update` only
# when something is missing. As root it calls apt-get directly; otherwise through sudo.

# Compilers, build tools and the libraries CMake finds at configure time.
GORO_DEPS_BUILD=(
  ca-certificates
  cmake
  ninja-build
  pkg-config
  g++
  libasio-dev       # the Asio peer server (loadtest/) and nothing else
  node-llhttp       # HTTP/1.1 parser used by goro::http
  zlib1g-dev        # WebSocket permessage-deflate in goro::http, gzip messages in goro::grpc
  libssl-dev        # TLS in goro::net
  libnghttp2-dev    # HTTP/2 framing and HPACK in goro::http
  libbrotli-dev     # brotli response compression and request decoding in goro::http
  libzstd-dev       # zstd response compression and request decoding in goro::http
  libunwind-dev     # goroutine dumps read parked goroutines' stacks
  nlohmann-json3-dev  # goro::json (optional: without it goro::json is simply not built)
  libgtest-dev
  googletest        # GoogleMock sources, GoogleTest CMake config
  libbenchmark-dev  # micro-benchmarks
  curl              # run-demo.sh --check, docker/smoke.sh
  # gRPC (grpc/): protobuf's C++ runtime and compiler, and libprotoc for protoc-gen-goro.
  # Without them goro builds without goro::grpc.
  libprotobuf-dev
  libprotoc-dev
  protobuf-compiler
)

# Tests: clang 14 + its sanitizer runtimes for the ASan/UBSan and TSan builds, the
# command-line clients some integration tests use, and the container test's tools
# (docker/smoke.sh: podman with runc, a base image made by debootstrap, wrk as the load).
GORO_DEPS_TEST=(
  clang
  libclang-rt-14-dev
  nghttp2-client
  podman
  runc
  catatonit         # the pause process of the pods `podman kube play` makes (tests/deploy/kube_test.sh)
  debootstrap
  wrk
  iproute2          # ss, with which the load smoke (loadtest/run.sh --smoke) finds free ports
  prometheus        # promtool, which checks the /metrics text (tests/http/metrics_test.cpp);
                    # on a systemd host the package also starts a Prometheus on :9090
  python3-websockets  # WebSocket conformance (tests/http/websocket_python_test.py) and the
                      # DevTools client of examples/ws_chat/browser_test.py
  chromium          # the browser examples/ws_chat/browser_test.py drives, headless
  nodejs            # Node's ws against the WebSocket server (tests/http/websocket_node_test.sh);
                    # the test fetches ws with npm (added below)
  # C client libraries on goroutines (tests/clibs/, tests/hooks/, loadtest/clibs), and
  # goro::pg's libpq (pg/, tests/pg/, examples/pg_api, examples/notes): the libraries,
  # and the servers the tests start in a temporary folder
  # (scripts/test-servers.sh). On a systemd host the server packages also start their
  # own PostgreSQL, Redis and MariaDB, which the tests do not use.
  libpq-dev
  postgresql
  libhiredis-dev
  redis-server
  libcurl4-openssl-dev
  libpqxx-dev       # libpqxx, C++ over libpq, under goro::hooks (tests/hooks/hooks_pqxx_test.cpp)
  libmariadb-dev    # MariaDB's Connector/C under goro::hooks (tests/hooks/hooks_mariadb_test.cpp)
  mariadb-server    # its server, with mariadb-install-db and the mariadb client
  # gRPC peers the interop tests (grpc/interop/) and the gRPC tests call goro against:
  # grpc-go, built offline in GOPATH mode, and Python's grpcio with its protoc.
  golang-go
  nginx             # the HTTP/2 client's peer over TLS (tests/http/client_h2_test.cpp), a load
                    # balancer in front of goro-demo replicas (tests/deploy/lb_test.py); also a
                    # load-test peer. On a systemd host the package starts its own on :80.
  haproxy           # the other load balancer of tests/deploy/lb_test.py (health checks on
                    # /readyz). On a systemd host the package starts its own (no frontend).
  golang-google-grpc-dev
  golang-golang-x-net-dev  # golang.org/x/net/http2/h2c: the Go h2c server of
                           # tests/http/client_h2_test.cpp (also a grpc-go dependency)
  python3-grpcio
  python3-grpc-tools
  protoc-gen-go-1-3  # protoc-gen-go v1.3 with plugins=grpc: the Go stubs of the interop protos
                     # (grpc/interop/run_interop.py), for the golang/protobuf 1.3 grpc-go uses
)

# npm, which the Node test fetches ws with: Debian's package where no npm is on PATH
# (NodeSource's nodejs bundles its own, and conflicts with Debian's npm).
command -v npm >/dev/null 2>&1 || GORO_DEPS_TEST+=(npm)

# Load tests: the peers goro is compared with and the tools that drive and plot them.
GORO_DEPS_LOADTEST=(
  golang-go
  libnginx-mod-http-echo  # nginx's /echo and /sleep in loadtest/run.sh
  apache2-utils
  gnuplot-nox
  testssl.sh        # scripts/check-tls.sh
  # The gRPC C++ greeter the grpc-* scenarios compare with (loadtest/grpc/).
  libgrpc++-dev
  protobuf-compiler-grpc
  # The grpc-go greeter (loadtest/grpc/go) needs nothing more: golang-google-grpc-dev and
  # protoc-gen-go-1-3 (plugins=grpc) of the test group, the generator that matches the
  # protobuf runtime (golang-github-golang-protobuf-1-3-dev) Debian's grpc-go 1.33 builds
  # against; protoc-gen-go 1.28 and protoc-gen-go-grpc need google.golang.org/protobuf.
  golang-github-gomodule-redigo-dev  # redigo and pgx v4: the Go peers of goro::redis and
  golang-github-jackc-pgx-v4-dev     # goro::pg (loadtest/data/)
)

# Prints the packages of the given groups (build|test|loadtest|all), one per line.
goro_deps_list() {
  local group
  [ "$#" -gt 0 ] || set -- all
  for group in "$@"; do
    case "$group" in
      build) printf '%s\n' "${GORO_DEPS_BUILD[@]}" ;;
      test) printf '%s\n' "${GORO_DEPS_BUILD[@]}" "${GORO_DEPS_TEST[@]}" ;;
      loadtest | all) printf '%s\n' "${GORO_DEPS_BUILD[@]}" "${GORO_DEPS_TEST[@]}" "${GORO_DEPS_LOADTEST[@]}" ;;
      *)
        echo "goro_deps_list: unknown group '$group' (build|test|loadtest|all)" >&2
        return 2
        ;;
    esac
  done | awk '!seen[$0]++'
}

# Prints the table of groups that docs/building.md shows (scripts/check-deps-doc.sh
# checks that it does): each group's own packages, and the group it adds to.
goro_deps_table() {
  local own
  echo "| group      | packages |"
  echo "|------------|----------|"
  own=$(printf '%s ' "${GORO_DEPS_BUILD[@]}")
  echo "| \`build\`    | ${own% } |"
  # npm joins the test group only where no npm is on PATH: the table says so, the same
  # on every machine.
  own=$(printf '%s\n' "${GORO_DEPS_TEST[@]}" | grep -vx npm | tr '\n' ' ')
  echo "| \`test\`     | build + ${own% } (npm too where none is on PATH) |"
  own=$(printf '%s ' "${GORO_DEPS_LOADTEST[@]}")
  echo "| \`loadtest\` | test + ${own% } |"
}

# Prints the packages of the given groups that are not installed.
goro_deps_missing() {
  local pkgs pkg status
  pkgs=$(goro_deps_list "$@") || return
  for pkg in $pkgs; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    [ "$status" = installed ] || printf '%s\n' "$pkg"
  done
}

# Installs the packages of the given groups that are missing.
goro_install_deps() {
  local missing
  missing=$(goro_deps_missing "$@") || return
  if [ -z "$missing" ]; then
    echo "deps: all goro packages for '${*:-all}' are installed"
    return 0
  fi
  # shellcheck disable=SC2086  # one word per package, on purpose
  echo "deps: installing missing packages:" $missing
  local -a sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo -n)
    else
      echo "deps: not root and no sudo; install these as root: $missing" >&2
      return 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null || return
  # shellcheck disable=SC2086
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    $missing </dev/null || return
  missing=$(goro_deps_missing "$@")
  if [ -n "$missing" ]; then
    echo "deps: still missing after apt-get install: $missing" >&2
    return 1
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case "${1:-}" in
    --list)
      shift
      goro_deps_list "$@"
      ;;
    --missing)
      shift
      goro_deps_missing "$@"
      ;;
    --table) goro_deps_table ;;
    *) goro_install_deps "$@" ;;
  esac
fi
