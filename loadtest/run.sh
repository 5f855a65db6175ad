#!/usr/bin/env bash
# goro's HTTP load-test kit: goro-demo against Go net/http, nginx, an Asio + llhttp
# server and a bare epoll loop, over a set of scenarios, with tables and charts; and its
# gRPC scenarios (grpc-unary, grpc-stream, grpc-idle): goro::grpc's greeter against
# grpc-go's and gRPC C++'s (loadtest/grpc/), driven by h2load.
#
#   loadtest/run.sh [--quick] [scenario...]      (no scenario: all of them)
#   loadtest/run.sh --smoke [scenario...]        goro alone, checked after every step
#   loadtest/run.sh --list                       the scenarios and what they measure
#
# Builds what it needs (Release, in build-bench/), then for each scenario starts each
# server alone on 127.0.0.1 with the same cores (GORO_MAXPROCS, GOMAXPROCS, nginx
# worker_processes, Asio and epoll threads = PROCS), pinned with taskset to CPUs
# 0..PROCS-1 and the clients to the next PROCS CPUs (when the machine has them), warms
# it up, measures, kills it and moves on. One progress line per step on stderr. Every
# process it started is killed on exit, Ctrl-C included.
#
# Output: loadtest/results/<UTC date-time>/ with results.csv, results.json, table.md,
# charts (*.png, gnuplot) and the servers' logs; see loadtest/README.md. A full run
# (all scenarios, no --quick) also refreshes loadtest/results/latest/, which the
# READMEs show.
#
# --smoke is the load smoke test of CI: goro-demo alone on 2 Ps, 2 s steps, and after each step
# the checks that a crash or a sanitizer report under load cannot pass: the server is
# still running, answers /healthz, the load saw no socket error and no non-2xx answer,
# SIGTERM stops it with exit status 0 within 20 s, and its log holds no sanitizer report
# or fatal error. Exit status 1 when any step failed. GORO_DEMO=<path> runs that
# goro-demo (a sanitizer build, say) instead of building one.
#
# Knobs (environment):
#   PEERS="goro go nginx nginx-cache asio epoll grpc-go grpc-cpp"   servers to run (goro
#                        is the one the ratios are of: goro-demo in the HTTP scenarios,
#                        goro's greeter in the gRPC ones; grpc-go and grpc-cpp run the gRPC
#                        scenarios only, the others the HTTP ones; nginx-cache is nginx
#                        with open_file_cache, in static4k and static1m only); "base" is a
#                        second goro-demo, BASE_DEMO, to compare two builds or two settings
#   BASE_DEMO=<path>     the goro-demo the "base" peer runs (a build of an earlier commit)
#   BASE_ARGS="..."      more flags for the base peer's goro-demo (split on spaces):
#                        BASE_DEMO=<the same goro-demo> BASE_ARGS=--file-cache=0 puts
#                        goro's file server without its open-file cache beside it
#   PROCS=1              cores per server; the clients get as many (wrk -t PROCS)
#   DURATION=8 WARMUP=2  seconds measured / warmed up per step (--quick: 1 and 1)
#   ROUNDS=1             runs per server and scenario; the table takes the median
#   IDLE_CONNS=10000     connections of the idle and idle-ws scenarios (100000 needs a hard
#                        RLIMIT_NOFILE above it, or CAP_SYS_RESOURCE to raise it)
#   BLOCK_CONNS=32 BLOCK_MS=10   the /block load of the handoff scenario
#   WS_CONNS=64 WS_SIZE=128      connections and message bytes of ws-echo
#   HOGS=4 HOG_MS=3000   the /cpu hogs of the preempt scenario
#   SCALE_PROCS="1 2 4 8" SCALE_CONNS=256   the scaling scenario (needs 2 x max CPUs;
#                        --quick: "1 8")
#   GRPC_CONNS=64 GRPC_STREAMS=16   h2load's connections and concurrent calls per
#                        connection in grpc-unary and grpc-stream
#   GRPC_STREAM_REPLIES=100   replies per call of grpc-stream
#   GRPC_IDLE_CONNS=1000 connections of grpc-idle
#   TASKSET=1            pin servers and clients as above (0: no pinning)
#   BUILD_DIR=<repo>/build-bench   JOBS=2   OUT_DIR=loadtest/results/<stamp>
#   PREBUILT=1           BUILD_DIR is a build of goro's that already holds the programs
#                        (goro-demo, loadtest_idle_client, ...): it is neither configured
#                        nor built, whatever its build type (CI's smoke uses its release
#                        build so)
#   LATEST=auto          1: always refresh results/latest, 0: never, auto: full runs
#   GORO_DEMO=<path>     the goro-demo to run (default: the one built in BUILD_DIR)
set -euo pipefail
# The servers stop on SIGTERM between steps: at once, without goro::App's drain (a
# load balancer's grace, pointless here).
export GORO_DRAIN_DELAY=${GORO_DRAIN_DELAY:-0}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
http_dir="$here/http"

all_scenarios=(plaintext-64 plaintext-1k plaintext-10k pipeline16 json echo4k gzip-text static4k static1m
  sleep handoff preempt https h2 idle idle-ws ws-echo scaling grpc-unary grpc-stream grpc-idle)
grpc_peer_names=" goro grpc-go grpc-cpp "
is_grpc() { [[ "$1" == grpc-* ]]; }

# What each scenario measures, for --list and the report.
describe() {
  case "$1" in
    plaintext-64) echo "GET /plaintext, keep-alive, 64 connections: requests/s" ;;
    plaintext-1k) echo "GET /plaintext, keep-alive, 1,000 connections: requests/s" ;;
    plaintext-10k) echo "GET /plaintext, keep-alive, 10,000 connections: requests/s" ;;
    pipeline16) echo "GET /plaintext pipelined 16 per write (wrk -t1 -c64): requests/s" ;;
    json) echo "GET /json, 64 connections: requests/s" ;;
    echo4k) echo "POST /echo with a 4 KiB body, 64 connections: requests/s" ;;
    gzip-text) echo "GET /text, 12 KiB of JSON gzipped at level 5 (Accept-Encoding: gzip), 64 conns: requests/s" ;;
    static4k) echo "GET /static/4k.bin, a 4 KiB file from the file server (goro-demo: open-file cache on, its default; nginx: sendfile on, no open_file_cache, nginx's default; nginx-cache: open_file_cache as goro's), 64 connections: requests/s" ;;
    static1m) echo "GET /static/1m.bin, a 1 MiB file from the file server, by sendfile(2) (servers as in static4k), 64 connections: requests/s" ;;
    sleep) echo "GET /sleep?ms=10, 1,000 connections (each waits 10 ms): requests/s" ;;
    handoff) echo "GET /plaintext (64 conns) beside ${BLOCK_CONNS:-32} connections of /block?ms=${BLOCK_MS:-10}: plaintext kept" ;;
    preempt) echo "GET /plaintext (64 conns) beside ${HOGS:-4} /cpu?ms=${HOG_MS:-3000} hogs: plaintext p99, max" ;;
    https) echo "GET /plaintext over TLS 1.3 (TLS_AES_128_GCM_SHA256, ECDSA P-256), 64 conns: requests/s" ;;
    h2) echo "GET /plaintext over HTTP/2 and TLS (ALPN h2), h2load -c64 -m16: requests/s" ;;
    idle) echo "${IDLE_CONNS:-10000} idle keep-alive connections: server RSS per connection" ;;
    idle-ws) echo "${IDLE_CONNS:-10000} idle WebSocket connections (/ws/echo): server RSS per connection" ;;
    ws-echo) echo "WebSocket round trips on /ws/echo, ${WS_CONNS:-64} connections, one ${WS_SIZE:-128}-byte binary message in flight on each: messages/s" ;;
    scaling) echo "GET /plaintext, ${SCALE_CONNS:-256} conns, at ${SCALE_PROCS:-1 2 4 8} cores: requests/s" ;;
    grpc-unary) echo "gRPC helloworld.Greeter/SayHello (name \"world\"), h2c, h2load -c${GRPC_CONNS:-64} -m${GRPC_STREAMS:-16}: calls/s, p50, p99" ;;
    grpc-stream) echo "gRPC SayHelloStreamReply, ${GRPC_STREAM_REPLIES:-100} replies per call, h2c, h2load -c${GRPC_CONNS:-64} -m${GRPC_STREAMS:-16}: messages/s" ;;
    grpc-idle) echo "${GRPC_IDLE_CONNS:-1000} idle h2c gRPC connections after one SayHello each: server RSS per connection" ;;
    *) return 1 ;;
  esac
}

# Why `peer` does not run `scenario` (prints nothing when it does).
does_not_apply() {
  local scenario=$1 peer=$2
  case "$peer/$scenario" in
    nginx-cache/static4k | nginx-cache/static1m) ;;
    nginx-cache/*)
      echo "nginx-cache differs from nginx only in /static/ (open_file_cache): static4k and static1m" ;;
    nginx/handoff | nginx/preempt)
      echo "nginx answers from memory; it runs no handler code that could block or spin" ;;
    nginx/echo4k | nginx/sleep)
      [ -n "$nginx_echo_module" ] ||
        echo "needs nginx's echo module (libnginx-mod-http-echo), not installed" ;;
    go/gzip-text | asio/gzip-text | epoll/gzip-text)
      echo "compresses nothing: goro's compress() against nginx's gzip module only" ;;
    epoll/sleep | epoll/handoff | epoll/preempt)
      echo "the bare loop has no runtime: no timers, no blocking calls, no preemption" ;;
    epoll/https) echo "the bare loop speaks no TLS" ;;
    asio/static* | epoll/static*) echo "serves no files" ;;
    asio/h2 | epoll/h2) echo "speaks no HTTP/2" ;;
    go/idle-ws | nginx/idle-ws | asio/idle-ws | epoll/idle-ws | go/ws-echo | nginx/ws-echo | \
      asio/ws-echo | epoll/ws-echo)
      echo "serves no WebSocket" ;;
    asio/* | epoll/*)
      [ -x "$bin/loadtest_peer_$peer" ] || echo "loadtest_peer_$peer was not built" ;;
    base/*)
      [ -x "${BASE_DEMO:-}" ] || echo "BASE_DEMO names no goro-demo" ;;
    goro/grpc-*)
      [ -x "$grpc_bin/loadtest_grpc_goro_greeter" ] || if [ -s "$grpc_bin/loadtest_grpc_goro_greeter.build.log" ]; then
        echo "goro's greeter did not build (log: $grpc_bin/loadtest_grpc_goro_greeter.build.log)"
      else
        echo "goro's greeter was not built (goro::grpc or goro_grpc_generate missing in this tree)"
      fi ;;
    grpc-cpp/grpc-*)
      [ -x "$grpc_bin/loadtest_grpc_cpp_greeter" ] || if [ -s "$grpc_bin/loadtest_grpc_cpp_greeter.build.log" ]; then
        echo "the gRPC C++ greeter did not build (log: $grpc_bin/loadtest_grpc_cpp_greeter.build.log)"
      else
        echo "the gRPC C++ greeter was not built (needs libgrpc++-dev, protobuf-compiler-grpc)"
      fi ;;
    grpc-go/grpc-*)
      [ -x "$grpc_bin/greeter_server" ] || echo "the grpc-go greeter was not built: $grpc_go_note" ;;
  esac
}

# The peers that run `scenario`: gRPC ones for the grpc-* scenarios, the others for the
# rest ("goro" is in both: goro-demo or goro's greeter).
peers_of() {
  local peer out=""
  for peer in $peers; do
    if is_grpc "$1"; then
      [[ "$grpc_peer_names" == *" $peer "* ]] && out+=" $peer"
    else
      [[ "$peer" == grpc-* ]] || out+=" $peer"
    fi
  done
  echo "$out"
}

log() { printf '%s\n' "$*" >&2; }
die() {
  log "run.sh: $*"
  exit 1
}

quick=0
smoke=0
scenarios=()
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --smoke) quick=1 smoke=1 ;;
    --list)
      for s in "${all_scenarios[@]}"; do printf '%-14s %s\n' "$s" "$(describe "$s")"; done
      exit 0
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    -*) die "unknown option $arg (--quick, --smoke, --list, --help)" ;;
    *)
      describe "$arg" >/dev/null || die "unknown scenario '$arg' (--list shows them)"
      scenarios+=("$arg")
      ;;
  esac
done
full_run=0
if [ "${#scenarios[@]}" -eq 0 ]; then
  scenarios=("${all_scenarios[@]}")
  [ "$quick" = 0 ] && full_run=1
  # The smoke checks goro-demo through /healthz; the gRPC greeters have no smoke check.
  [ "$smoke" = 1 ] && for s in "${!scenarios[@]}"; do
    is_grpc "${scenarios[$s]}" && unset 'scenarios[s]'
  done
  scenarios=("${scenarios[@]}")
fi
any_http=0 any_grpc=0
for s in "${scenarios[@]}"; do
  if is_grpc "$s"; then any_grpc=1; else any_http=1; fi
done
[ "$smoke" = 1 ] && [ "$any_grpc" = 1 ] && die "the grpc-* scenarios have no --smoke check"

peers="${PEERS:-goro go nginx nginx-cache asio epoll grpc-go grpc-cpp}"
[ "$smoke" = 1 ] && peers=goro
# The smoke runs the server on 2 Ps: goroutines then change threads, which is where
# the runtime's and the server's races show (a crash of 6001e0d passed at 1 P).
procs="${PROCS:-$([ "$smoke" = 1 ] && echo 2 || echo 1)}"
duration="${DURATION:-$([ "$smoke" = 1 ] && echo 2 || { [ "$quick" = 1 ] && echo 1 || echo 8; })}"
warmup="${WARMUP:-$([ "$quick" = 1 ] && echo 1 || echo 2)}"
settle="$([ "$quick" = 1 ] && echo 0.5 || echo 1)" # seconds for a server to quiet down
rounds="${ROUNDS:-1}"
idle_conns="${IDLE_CONNS:-10000}"
block_conns="${BLOCK_CONNS:-32}"
block_ms="${BLOCK_MS:-10}"
hogs="${HOGS:-4}"
hog_ms="${HOG_MS:-3000}"
# --quick scales at the two ends only, so that it stays under 3 min on 16 CPUs too.
scale_procs="${SCALE_PROCS:-$([ "$quick" = 1 ] && echo 1 8 || echo 1 2 4 8)}"
scale_conns="${SCALE_CONNS:-256}"
grpc_conns="${GRPC_CONNS:-64}"
grpc_streams="${GRPC_STREAMS:-16}"
stream_replies="${GRPC_STREAM_REPLIES:-100}"
grpc_idle_conns="${GRPC_IDLE_CONNS:-1000}"
pin="${TASKSET:-1}"
build="$(realpath -m "${BUILD_DIR:-$root/build-bench}")" # absolute: GOPATH needs it
jobs="${JOBS:-2}"
prebuilt="${PREBUILT:-0}"
latest="${LATEST:-$([ "$smoke" = 1 ] && echo 0 || echo auto)}"
stamp="$(date -u +%Y-%m-%dT%H-%M-%SZ)"
out="${OUT_DIR:-$here/results/$stamp}"
python="${PYTHON:-python3}"

for tool in wrk cmake curl taskset ss openssl "$python"; do
  command -v "$tool" >/dev/null || die "'$tool' is required (scripts/deps.sh loadtest)"
done
if [ "$any_grpc" = 1 ]; then
  for tool in h2load protoc /usr/bin/python3; do
    command -v "$tool" >/dev/null || die "'$tool' is required for the grpc-* scenarios (scripts/deps.sh loadtest)"
  done
fi

# --- build ---------------------------------------------------------------------------
wants() { [[ " $peers " == *" $1 "* ]]; }
if [ "$prebuilt" = 1 ]; then
  log "== the programs of $build (PREBUILT=1: nothing configured or built)"
else
  log "== building in $build (Release)"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGORO_BUILD_TESTS=OFF \
    -DGORO_BUILD_EXAMPLES=ON -DGORO_BUILD_LOADTESTS=ON >/dev/null
  targets=()
  build_targets=$(cmake --build "$build" --target help)
  if [ "$any_http" = 1 ]; then
    targets+=(loadtest_idle_client loadtest_ws_echo_client)
    [ -z "${GORO_DEMO:-}" ] && targets+=(goro-demo)
    wants epoll && targets+=(loadtest_peer_epoll)
    wants asio && grep -q loadtest_peer_asio <<<"$build_targets" && targets+=(loadtest_peer_asio)
  fi
  [ "$any_grpc" = 1 ] && targets+=(loadtest_grpc_idle_client)
  cmake --build "$build" -j"$jobs" --target "${targets[@]}" >/dev/null
  if [ "$any_grpc" = 1 ]; then
    # Each greeter only where its CMake found what it needs, and apart: one that does not
    # build leaves its peer out (does_not_apply says so), not the run.
    for t in loadtest_grpc_goro_greeter loadtest_grpc_cpp_greeter; do
      rm -f "$build/loadtest/grpc/$t.build.log"
      grep -q "$t" <<<"$build_targets" || continue
      if ! cmake --build "$build" -j"$jobs" --target "$t" >"$build/loadtest/grpc/$t.build.log" 2>&1; then
        log "== $t did not build (log: $build/loadtest/grpc/$t.build.log): its peer is left out"
        rm -f "$build/loadtest/grpc/$t"
      fi
    done
  fi
fi
demo="${GORO_DEMO:-$build/examples/demo/goro-demo}"
[ "$any_http" = 1 ] && { [ -x "$demo" ] || die "no goro-demo at $demo"; }
bin="$build/loadtest/http"
grpc_bin="$build/loadtest/grpc"
grpc_dir="$here/grpc"
grpc_go_note=""
if [ "$any_grpc" = 1 ]; then
  # The request h2load sends on every call: the 5-byte gRPC prefix (not compressed,
  # length) and HelloRequest{name: "world"}; and the size of one reply message on the
  # wire, which tells h2load's DATA byte count apart from error answers (no message).
  grpc_body="$grpc_bin/say_hello_world.bin"
  mkdir -p "$grpc_bin"
  printf 'name: "world"' | protoc -I "$grpc_dir" --encode=helloworld.HelloRequest \
    helloworld.proto >"$grpc_body.pb"
  body_len=$(stat -c %s "$grpc_body.pb")
  prefix=$(printf '\\x%02x' 0 $((body_len >> 24 & 255)) $((body_len >> 16 & 255)) \
    $((body_len >> 8 & 255)) $((body_len & 255)))
  # shellcheck disable=SC2059  # the format is the escapes just made
  { printf "$prefix"; cat "$grpc_body.pb"; } >"$grpc_body"
  reply_frame=$(($(printf 'message: "Hello world"' | protoc -I "$grpc_dir" \
    --encode=helloworld.HelloReply helloworld.proto | wc -c) + 5))
  if wants grpc-go; then
    # grpc-go from Debian (golang-google-grpc-dev 1.33), offline in GOPATH mode. Its stubs
    # come from protoc-gen-go 1.3 with plugins=grpc (Debian's protoc-gen-go-1-3), the
    # generator of the protobuf runtime the installed grpc-go builds on; where the
    # protoc-gen-go on PATH is another one, it is built from that runtime's source
    # (golang-github-golang-protobuf-1-3-dev, which golang-google-grpc-dev depends on).
    go_path="$build/go-grpc"
    go_log="$build/go-grpc.log"
    go_env=(env GO111MODULE=off GOFLAGS="" GOPATH="$go_path:/usr/share/gocode"
      GOCACHE="$build/go-cache")
    gen_go="$(command -v protoc-gen-go || true)"
    : >"$go_log"
    if ! command -v go >/dev/null; then
      grpc_go_note="'go' is not installed (scripts/deps.sh loadtest)"
    elif { [ -z "$gen_go" ] || ! dpkg -S "$gen_go" 2>/dev/null | grep -q protoc-gen-go-1-3; } &&
      ! { gen_go="$go_path/bin/protoc-gen-go" && "${go_env[@]}" go build -o "$gen_go" \
        github.com/golang/protobuf/protoc-gen-go >>"$go_log" 2>&1; }; then
      grpc_go_note="protoc-gen-go 1.3 did not build (log: $go_log)"
    else
      mkdir -p "$go_path/src/goro/loadtest/grpc/helloworld"
      if ! protoc -I "$grpc_dir" --plugin=protoc-gen-go="$gen_go" \
        --go_out=plugins=grpc,paths=source_relative:"$go_path/src/goro/loadtest/grpc/helloworld" \
        helloworld.proto >>"$go_log" 2>&1 ||
        ! (cd "$grpc_dir/go" && "${go_env[@]}" go build -o "$grpc_bin/greeter_server" \
          greeter_server.go) >>"$go_log" 2>&1; then
        grpc_go_note="greeter_server.go did not build (log: $go_log)"
        rm -f "$grpc_bin/greeter_server"
      fi
    fi
  fi
fi
if [ "$any_http" = 1 ] && wants go; then
  command -v go >/dev/null || die "'go' is required for the Go peer (or leave go out of PEERS)"
  (cd "$http_dir" && GOCACHE="$build/go-cache" GOPATH="$build/go-path" GO111MODULE=off GOFLAGS="" \
    go build -o "$bin/hello" hello.go)
fi
nginx_bin="$(command -v nginx || true)"
[ -x /usr/sbin/nginx ] && nginx_bin=/usr/sbin/nginx
if { wants nginx || wants nginx-cache; } && [ -z "$nginx_bin" ]; then
  log "== nginx is not installed: left out"
  peers=$(tr ' ' '\n' <<<"$peers" | grep -vx 'nginx\|nginx-cache' | tr '\n' ' ')
fi
nginx_echo_module=""
for m in /usr/share/nginx/modules/ngx_http_echo_module.so /usr/lib/nginx/modules/ngx_http_echo_module.so; do
  [ -f "$m" ] && nginx_echo_module=$m && break
done

# A throwaway certificate shared by every HTTPS server; the clients offer only
# TLS_AES_128_GCM_SHA256 (OPENSSL_CONF), so every server negotiates the same cipher.
tls="$build/loadtest/tls"
mkdir -p "$tls"
if [ ! -s "$tls/cert.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$tls/key.pem" -out "$tls/cert.pem" 2>/dev/null
fi
# The files of the static4k and static1m scenarios, served by every peer that serves
# files (goro-demo --root, Go's http.FileServer, nginx's location with sendfile on).
static_root="$build/loadtest/static"
mkdir -p "$static_root"
[ -s "$static_root/4k.bin" ] || head -c 4096 /dev/urandom >"$static_root/4k.bin"
[ -s "$static_root/1m.bin" ] || head -c 1048576 /dev/urandom >"$static_root/1m.bin"
cat >"$tls/client.cnf" <<'EOF'
openssl_conf = loadtest
[loadtest]
ssl_conf = loadtest_ssl
[loadtest_ssl]
system_default = loadtest_client
[loadtest_client]
MinProtocol = TLSv1.3
Ciphersuites = TLS_AES_128_GCM_SHA256
EOF

# --- machine -------------------------------------------------------------------------
ncpu="$(nproc)"
clk_tck="$(getconf CLK_TCK)"
max_conns=$idle_conns
[ "$max_conns" -lt 10000 ] && max_conns=10000
nofile=$((max_conns + 4096))
hard="$(ulimit -Hn)"
if [ "$hard" != unlimited ] && [ "$hard" -lt "$nofile" ]; then
  ulimit -Hn "$nofile" 2>/dev/null ||
    log "== RLIMIT_NOFILE hard limit $hard < $nofile and not raisable here"
fi
ulimit -n "$(ulimit -Hn)"
idle_note=""
if [ "$(ulimit -n)" != unlimited ] && [ $((idle_conns + 64)) -gt "$(ulimit -n)" ]; then
  idle_note="not available: RLIMIT_NOFILE is $(ulimit -n), too low for $idle_conns connections"
fi

# CPU lists for `p` server cores: the servers on 0..p-1, the clients on p..2p-1 (or
# the rest of the machine when it has fewer). Sets server_pin, client_pin, client_threads.
place() {
  local p=$1
  server_pin=()
  client_pin=()
  client_threads=$p
  server_last_cpu=$((ncpu - 1))
  if [ "$pin" = 1 ] && [ "$ncpu" -gt "$p" ]; then
    server_last_cpu=$((p - 1))
    local last=$((2 * p - 1))
    [ "$last" -ge "$ncpu" ] && last=$((ncpu - 1))
    server_pin=(taskset -c "0-$((p - 1))")
    client_pin=(taskset -c "$p-$last")
    client_threads=$((last - p + 1))
  fi
}

# --- processes -----------------------------------------------------------------------
# Every process started and not yet reaped (a reaped one's pid may be reused: never kill it).
started=()
forget() {
  local p keep=()
  for p in "${started[@]}"; do [ "$p" != "$1" ] && keep+=("$p"); done
  started=("${keep[@]}")
}
cleanup() {
  local p c
  for p in "${started[@]}"; do
    for c in $(pgrep -P "$p" 2>/dev/null); do kill -KILL "$c" 2>/dev/null || true; done
    kill -KILL "$p" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'log "run.sh: interrupted"; exit 130' INT TERM

# The process and its children (nginx's workers).
tree() { echo "$1" $(pgrep -P "$1" 2>/dev/null); }
rss_kib() {
  local p sum=0 v
  for p in $(tree "$1"); do
    v=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
    sum=$((sum + ${v:-0}))
  done
  echo "$sum"
}
cpu_ticks() {
  local p sum=0 v
  for p in $(tree "$1"); do
    v=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}' || true)
    sum=$((sum + ${v:-0}))
  done
  echo "$sum"
}

# A port below the ephemeral range (no client socket can hold it) that no socket uses.
ephemeral_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range)
# Busy ticks (user, nice, system, irq, softirq, steal) of CPUs 0..server_last_cpu: less
# the server's own ticks, what else ran on its cores (0 on a quiet machine).
cores_busy_ticks() {
  awk -v last="$server_last_cpu" '$1 ~ /^cpu[0-9]+$/ && substr($1, 4) + 0 <= last {
    s += $2 + $3 + $4 + $7 + $8 + $9 } END { print s }' /proc/stat
}

# cpu and others (percent of one core) over [t0, t1], from the server's ticks cpu0 ->
# cpu1 and its cores' busy0 -> busy1.
cpu_shares() {
  cpu=$(awk -v c=$((cpu1 - cpu0)) -v hz="$clk_tck" -v a="$t0" -v b="$t1" \
    'BEGIN { printf "%.0f", 100 * c / hz / (b - a) }')
  others=$(awk -v c=$((busy1 - busy0 - cpu1 + cpu0)) -v hz="$clk_tck" -v a="$t0" -v b="$t1" \
    'BEGIN { v = 100 * c / hz / (b - a); printf "%.0f", v < 0 ? 0 : v }')
}

free_port() {
  local port
  while :; do
    port=$((ephemeral_low - 12000 + RANDOM % 12000))
    [ -z "$(ss -Htan "sport = :$port")" ] && echo "$port" && return
  done
}

# nginx answering what it can from memory, all its state in $1. file_cache=1 (the
# nginx-cache peer): /static/ keeps its files open as goro's file server does by default
# (FileServerOptions: cache_files 128, cache_valid 1 s); nginx checks a cached file only
# when open_file_cache_valid has passed, goro at every request (docs/http.md).
write_nginx_conf() {  # dir port procs scheme file_cache
  local dir=$1 port=$2 p=$3 scheme=$4
  mkdir -p "$dir/tmp"
  # /text, the gzip-text scenario's: a file (too long for a `return`), kept open.
  "$demo" --text-body >"$dir/text.json" 2>/dev/null || true
  {
    echo "daemon off;"
    if [ "$p" -gt 1 ]; then
      echo "master_process on;"
      [ "$(id -u)" = 0 ] && echo "user root;"
    else
      echo "master_process off;"
    fi
    echo "worker_processes $p;"
    echo "worker_rlimit_nofile $nofile;"
    echo "pid $dir/nginx.pid;"
    echo "error_log $dir/error.log warn;"
    [ -n "$nginx_echo_module" ] && echo "load_module $nginx_echo_module;"
    cat <<EOF
events { worker_connections $nofile; }
http {
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 120s;
  client_body_buffer_size 64k;
  client_body_temp_path $dir/tmp;
  proxy_temp_path $dir/tmp;
  fastcgi_temp_path $dir/tmp;
  uwsgi_temp_path $dir/tmp;
  scgi_temp_path $dir/tmp;
  charset utf-8;
  charset_types text/plain;
  server {
    listen 127.0.0.1:$port backlog=4096$([ "$scheme" = https ] && echo " ssl")$([ "$h2" = 1 ] && echo " http2");
    ssl_certificate $tls/cert.pem;
    ssl_certificate_key $tls/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;
    location = / { default_type text/plain; return 200 "Hello, World!"; }
    location = /plaintext { default_type text/plain; return 200 "Hello, World!"; }
    location = /json { default_type application/json; return 200 '{"message":"Hello, World!"}'; }
    location = /healthz { default_type text/plain; return 200 "ok"; }
    # goro-demo's /text, gzipped as goro's compress() does it: level 5, 1 KiB minimum.
    location = /text {
      default_type application/json;
      alias $dir/text.json;
      open_file_cache max=16 inactive=600s; open_file_cache_valid 600s;
      gzip on; gzip_comp_level 5; gzip_min_length 1024; gzip_types application/json; gzip_vary on;
    }
    location /static/ {
      alias $static_root/; sendfile on;
$([ "${5:-0}" = 1 ] && echo "      open_file_cache max=128; open_file_cache_valid 1s;")
    }
EOF
    if [ -n "$nginx_echo_module" ]; then
      cat <<'EOF'
    location = /echo { echo_read_request_body; echo_request_body; }
    location = /sleep {
      if ($sleep_seconds = "") { return 400 "query parameter ms must be a non-negative integer\n"; }
      echo_sleep $sleep_seconds;
      echo -n ok;
    }
  }
  # ms -> seconds for echo_sleep: 7 -> 0.007, 10 -> 0.010, 1500 -> 01.500
  map $arg_ms $sleep_seconds {
    default "";
    "~^(\d)$" "0.00$1";
    "~^(\d\d)$" "0.0$1";
    "~^(\d{0,5})(\d\d\d)$" "0$1.$2";
  }
}
EOF
    else
      printf '  }\n}\n'
    fi
  } >"$dir/nginx.conf"
}

# Starts `peer` with `p` cores on a free port; sets server_pid, port, url_base. Tries
# three ports: another user of the machine may take the one chosen meanwhile.
start_server() {  # peer p scheme logfile
  for _ in 1 2 3; do
    start_server_once "$@" && return 0
    stop_server
    grep -qi "in use" "$4" 2>/dev/null || break
  done
  log "run.sh: $1 did not start (log: $4)"
  return 1
}
start_server_once() {
  local peer=$1 p=$2 scheme=$3 logfile=$4 tls_args=()
  port=$(free_port)
  url_base="$scheme://127.0.0.1:$port"
  case "$grpc_step/$peer" in
    1/goro)
      GORO_MAXPROCS=$p "${server_pin[@]}" "$grpc_bin/loadtest_grpc_goro_greeter" \
        --addr "127.0.0.1:$port" --stream-replies "$stream_replies" >"$logfile" 2>&1 &
      ;;
    1/grpc-go)
      GOMAXPROCS=$p "${server_pin[@]}" "$grpc_bin/greeter_server" -addr "127.0.0.1:$port" \
        -stream-replies "$stream_replies" >"$logfile" 2>&1 &
      ;;
    1/grpc-cpp)
      # gRPC C++ sizes its thread pools by itself; taskset gives the process its cores.
      "${server_pin[@]}" "$grpc_bin/loadtest_grpc_cpp_greeter" --addr "127.0.0.1:$port" \
        --stream-replies "$stream_replies" >"$logfile" 2>&1 &
      ;;
    */goro | */base)
      local binary=$demo demo_flags=()
      # shellcheck disable=SC2206  # BASE_ARGS is split on spaces, as documented
      [ "$peer" = base ] && binary=$BASE_DEMO demo_flags=(${BASE_ARGS:-})
      [ "$scheme" = https ] && tls_args=(--tls-cert "$tls/cert.pem" --tls-key "$tls/key.pem")
      GORO_MAXPROCS=$p "${server_pin[@]}" "$binary" --addr "127.0.0.1:$port" "${tls_args[@]}" \
        --root "$static_root" "${demo_flags[@]}" >"$logfile" 2>&1 &
      ;;
    */go)
      [ "$scheme" = https ] && tls_args=(-tls-cert "$tls/cert.pem" -tls-key "$tls/key.pem")
      GOMAXPROCS=$p "${server_pin[@]}" "$bin/hello" -addr "127.0.0.1:$port" "${tls_args[@]}" \
        -root "$static_root" >"$logfile" 2>&1 &
      ;;
    */asio)
      [ "$scheme" = https ] && tls_args=(--tls-cert "$tls/cert.pem" --tls-key "$tls/key.pem")
      "${server_pin[@]}" "$bin/loadtest_peer_asio" --addr "127.0.0.1:$port" --threads "$p" \
        "${tls_args[@]}" >"$logfile" 2>&1 &
      ;;
    */epoll)
      "${server_pin[@]}" "$bin/loadtest_peer_epoll" "127.0.0.1:$port" "$p" >"$logfile" 2>&1 &
      ;;
    */nginx | */nginx-cache)
      local dir="$out/nginx/$peer-$port"
      write_nginx_conf "$dir" "$port" "$p" "$scheme" "$([ "$peer" = nginx-cache ] && echo 1 || echo 0)"
      "${server_pin[@]}" "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" >"$logfile" 2>&1 &
      ;;
  esac
  server_pid=$!
  started+=("$server_pid")
  for _ in $(seq 200); do
    kill -0 "$server_pid" 2>/dev/null || break
    if [ "$grpc_step" = 1 ]; then
      # A gRPC server is up once it accepts; the real client call comes after.
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    else
      curl -fsk --max-time 1 "$url_base/healthz" >/dev/null 2>&1 && return 0
    fi
    sleep 0.05
  done
  return 1
}

stop_server() {
  local c
  for c in $(pgrep -P "$server_pid" 2>/dev/null); do kill -KILL "$c" 2>/dev/null || true; done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  forget "$server_pid"
}

# wrk with report.lua in front of `script`; the RESULT line's fields become w_* vars.
lua_for() {  # script-name-or-empty -> path of the combined script
  local name=${1:-plain} f
  f="$out/lua/${name%.lua}.lua"
  if [ ! -f "$f" ]; then
    mkdir -p "$out/lua"
    cat "$http_dir/report.lua" >"$f"
    [ "$name" != plain ] && cat "$http_dir/$name" >>"$f"
  fi
  echo "$f"
}
# The gzip-text scenario's check: "ok", or what is wrong with url's answer.
check_gzip_text() {  # url
  local head
  head=$(curl -s -o /dev/null -D - -H 'Accept-Encoding: gzip' "$1" | tr -d '\r')
  grep -qi '^content-encoding: gzip' <<<"$head" || { echo "$1 is not gzip-coded"; return; }
  [ "$(curl -s --compressed -H 'Accept-Encoding: gzip' "$1")" = "$("$demo" --text-body)" ] ||
    { echo "$1 decodes to another body than goro-demo --text-body"; return; }
  echo ok
}
run_wrk() {  # conns threads seconds url script timeout_s
  local conns=$1 threads=$2 seconds=$3 url=$4 script=$5 timeout=${6:-5}
  [ "$threads" -gt "$conns" ] && threads=$conns
  echo "== wrk -t$threads -c$conns -d${seconds}s --timeout ${timeout}s $script $url" >>"$wrk_log"
  OPENSSL_CONF="$tls/client.cnf" "${client_pin[@]}" wrk -t"$threads" -c"$conns" \
    -d"${seconds}s" --timeout "${timeout}s" -s "$(lua_for "$script")" "$url" >"$wrk_log.run" 2>&1 || true
  cat "$wrk_log.run" >>"$wrk_log"
  parse_result "$(grep '^RESULT ' "$wrk_log.run" || true)"
  rm -f "$wrk_log.run"
}
parse_result() {
  local kv
  w_requests=0 w_duration_us=1 w_p50_us=0 w_p99_us=0 w_max_us=0
  w_connect=0 w_read=0 w_write=0 w_timeout=0 w_status=0
  for kv in ${1#RESULT }; do
    [[ "$kv" == *=* ]] && printf -v "w_${kv%%=*}" '%s' "${kv#*=}"
  done
  w_rps=$(awk -v r="$w_requests" -v d="$w_duration_us" 'BEGIN { printf "%.0f", r / (d / 1e6) }')
  w_errors=$((w_connect + w_read + w_write + w_timeout + w_status))
  w_error_detail=""
  if [ "$w_errors" -gt 0 ]; then
    w_error_detail="connect=$w_connect read=$w_read write=$w_write timeout=$w_timeout non2xx=$w_status"
  fi
}
ms() { awk -v u="$1" 'BEGIN { printf "%.3f", u / 1000 }'; }

# h2load in wrk's place for the h2 scenario (HTTP/2 over TLS, ALPN h2): sets w_rps and
# the error counts; h2load gives no percentiles, so the latencies stay empty.
run_h2load() {  # conns streams seconds url
  local conns=$1 streams=$2 seconds=$3 url=$4 threads=$client_threads result
  [ "$threads" -gt "$conns" ] && threads=$conns
  echo "== h2load -t$threads -c$conns -m$streams -D $seconds $url" >>"$wrk_log"
  result=$(OPENSSL_CONF="$tls/client.cnf" "${client_pin[@]}" h2load -t"$threads" -c"$conns" \
    -m"$streams" -D "$seconds" "$url" 2>&1 || true)
  printf '%s\n' "$result" >>"$wrk_log"
  parse_result ""
  w_rps=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$result" |
    awk '{ printf "%.0f", $1 }')
  [ -z "$w_rps" ] && w_rps=0
  local failed errored timedout non2xx
  read -r failed errored timedout < <(sed -n \
    's/^requests: .* \([0-9]*\) failed, \([0-9]*\) errored, \([0-9]*\) timeout.*/\1 \2 \3/p' <<<"$result")
  non2xx=$(sed -n 's/^status codes: [0-9]* 2xx, \([0-9]*\) 3xx, \([0-9]*\) 4xx, \([0-9]*\) 5xx.*/\1 \2 \3/p' \
    <<<"$result" | awk '{ print $1 + $2 + $3 }')
  w_errors=$((${failed:-0} + ${errored:-0} + ${timedout:-0}))
  if [ "$w_errors" -gt 0 ] || [ "${non2xx:-0}" -gt 0 ]; then
    w_error_detail="failed=${failed:-?} errored=${errored:-?} timeout=${timedout:-?} non2xx=${non2xx:-?}"
    w_errors=$((w_errors + ${non2xx:-0}))
  fi
}

# h2load as the gRPC client of grpc-unary and grpc-stream: `streams` concurrent calls
# on each of `conns` h2c connections, every call the same request (grpc_body) to
# `method`, for `seconds`. Sets w_rps (calls/s), w_p50_us/w_p99_us/w_max_us (per call,
# from h2load's --log-file), w_errors/w_error_detail, client_cpu (h2load's CPU % of one
# core: near 100 means the client, not the server, set the pace) and msgs_per_s.
# h2load cannot read grpc-status (it is in the trailers), so a call counts as answered
# when its status was 2xx and the DATA bytes received cover one reply message of
# reply_frame bytes per expected reply: an error answer is trailers-only, with no DATA.
run_h2load_grpc() {  # conns streams seconds method replies-per-call
  local conns=$1 streams=$2 seconds=$3 method=$4 replies=$5 threads=$client_threads result
  local calls_log="$out/logs/h2load-calls.tsv" times
  [ "$threads" -gt "$conns" ] && threads=$conns
  echo "== h2load -t$threads -c$conns -m$streams -D $seconds -d $grpc_body $url_base$method" >>"$wrk_log"
  local TIMEFORMAT='%R %U %S'
  times=$( { time "${client_pin[@]}" h2load -t"$threads" -c"$conns" -m"$streams" -D "$seconds" \
    -d "$grpc_body" -H 'content-type: application/grpc' -H 'te: trailers' \
    --log-file="$calls_log" "$url_base$method" >"$wrk_log.run" 2>&1 || true; } 2>&1)
  result=$(cat "$wrk_log.run")
  rm -f "$wrk_log.run"
  printf '%s\n' "$result" >>"$wrk_log"
  client_cpu=$(awk '{ if ($1 > 0) printf "%.0f", 100 * ($2 + $3) / $1 }' <<<"$times")
  parse_result ""
  w_rps=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$result" |
    awk '{ printf "%.0f", $1 }')
  [ -z "$w_rps" ] && w_rps=0
  msgs_per_s=$((w_rps * replies))
  local succeeded failed errored timedout non2xx data short
  read -r succeeded failed errored timedout < <(sed -n \
    's/^requests: .* \([0-9]*\) succeeded, \([0-9]*\) failed, \([0-9]*\) errored, \([0-9]*\) timeout.*/\1 \2 \3 \4/p' \
    <<<"$result")
  non2xx=$(sed -n 's/^status codes: [0-9]* 2xx, \([0-9]*\) 3xx, \([0-9]*\) 4xx, \([0-9]*\) 5xx.*/\1 \2 \3/p' \
    <<<"$result" | awk '{ print $1 + $2 + $3 }')
  data=$(sed -n 's/^traffic: .* (\([0-9]*\)) data.*/\1/p' <<<"$result")
  # Calls short of their replies (at least): the DATA bytes missing over whole calls.
  short=$(awk -v s="${succeeded:-0}" -v d="${data:-0}" -v f="$((reply_frame * replies))" \
    'BEGIN { m = s * f - d; print (m > 0 ? int((m + f - 1) / f) : 0) }')
  w_errors=$((${failed:-0} + ${errored:-0} + ${timedout:-0} + ${non2xx:-0} + short))
  if [ "$w_errors" -gt 0 ] || [ -z "$succeeded" ]; then
    w_error_detail="failed=${failed:-?} errored=${errored:-?} timeout=${timedout:-?} non2xx=${non2xx:-?} without_reply=$short"
  fi
  # The log's third column: microseconds from a call's start to the end of its response.
  read -r w_p50_us w_p99_us w_max_us < <(awk -F'\t' '{ print $3 }' "$calls_log" 2>/dev/null |
    sort -n | awk '{ v[NR] = $1 } END {
      if (NR == 0) { print "0 0 0"; exit }
      p50 = int(0.50 * NR); p99 = int(0.99 * NR); if (p50 < 1) p50 = 1; if (p99 < 1) p99 = 1
      print v[p50], v[p99], v[NR] }')
  rm -f "$calls_log"
}

# A wrk load beside the measured one (handoff's /block, preempt's /cpu), run until
# stop_background; its RESULT becomes bg_rps.
start_background() {  # conns url timeout_s logfile
  OPENSSL_CONF="$tls/client.cnf" "${client_pin[@]}" wrk -t1 -c"$1" -d3600s --timeout "$3s" \
    -s "$(lua_for "")" "$2" >"$4" 2>&1 &
  bg_pid=$!
  started+=("$bg_pid")
}
stop_background() {  # logfile
  kill -INT "$bg_pid" 2>/dev/null || true
  wait "$bg_pid" 2>/dev/null || true
  forget "$bg_pid"
  parse_result "$(grep '^RESULT ' "$1" || true)"
  bg_rps=$(awk -v r="$w_requests" -v d="$w_duration_us" 'BEGIN { printf "%.2f", r / (d / 1e6) }')
  bg_errors=$w_errors bg_error_detail=$w_error_detail
}

# --smoke: what must hold after a step, the server still running. Stops the server
# (SIGTERM, as a container stop does) and appends what failed to smoke_failed.
smoke_failed=()
smoke_steps=0
smoke_check() {  # step-name logfile step-status
  local name=$1 logfile=$2 why=() status
  smoke_steps=$((smoke_steps + 1))
  [ "$3" != ok ] && why+=("the step ended $3${note:+: $note}")
  if ! kill -0 "$server_pid" 2>/dev/null; then
    why+=("the server died")
  elif ! curl -fsk --max-time 5 "$url_base/healthz" >/dev/null 2>&1; then
    why+=("/healthz did not answer 200")
  fi
  [ "${w_errors:-0}" != 0 ] && why+=("the load saw errors: ${w_error_detail:-$w_errors}")
  [ "${bg_errors:-0}" != 0 ] && why+=("the background load saw errors: ${bg_error_detail:-$bg_errors}")
  if kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 200); do
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$server_pid" 2>/dev/null; then
      why+=("still running 20 s after SIGTERM")
    fi
  fi
  status=0
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || status=$?
  forget "$server_pid"
  [ "$status" != 0 ] && why+=("exit status $status")
  if grep -qE 'ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer|runtime error:|goro: fatal error' \
    "$logfile" 2>/dev/null; then
    why+=("its log has a sanitizer report or a fatal error")
  fi
  if [ "${#why[@]}" -gt 0 ]; then
    local IFS=';'
    smoke_failed+=("$name: ${why[*]} (log: $logfile)")
    log "   SMOKE FAILED: ${why[*]}"
  fi
}

# --- plan ----------------------------------------------------------------------------
csv="$out/results.csv"
mkdir -p "$out/logs"
echo "scenario,peer,procs,round,status,note,conns,requests_per_s,p50_ms,p99_ms,max_ms,errors,error_detail,rss_kib,cpu_pct,others_pct,baseline_rps,retained_pct,load_rps,idle_conns,rss_before_kib,rss_after_kib,bytes_per_conn,step_s,bytes_per_conn_1s,messages_per_s,client_cpu_pct,streams,bytes_per_conn_100ms" >"$csv"

csv_row() {  # fields in the header's order
  local f line="" sep=""
  for f in "$@"; do
    [[ "$f" == *[,\"]* ]] && f="\"${f//\"/\"\"}\""
    line+="$sep$f"
    sep=,
  done
  echo "$line" >>"$csv"
}

max_scale=0
for p in $scale_procs; do [ "$p" -gt "$max_scale" ] && max_scale=$p; done
scaling_note=""
if [ $((2 * max_scale)) -gt "$ncpu" ]; then
  scaling_note="not available: needs $((2 * max_scale)) CPUs (servers on ${max_scale}, clients on ${max_scale}); this machine has $ncpu"
fi

# Seconds one step is expected to take (startup and teardown included), for the plan.
step_seconds() {
  case "$1" in
    handoff | preempt) echo $((warmup + 2 * duration + 2)) ;;
    idle | idle-ws | grpc-idle) echo $((warmup + 7)) ;;
    *) echo $((warmup + duration + 1)) ;;
  esac
}
steps=()
planned=0
for s in "${scenarios[@]}"; do
  if { [ "$s" = idle ] || [ "$s" = idle-ws ]; } && [ -n "$idle_note" ]; then
    steps+=("$s skip - - $idle_note")
    continue
  fi
  if [ "$s" = grpc-idle ] && [ "$(ulimit -n)" != unlimited ] &&
    [ $((grpc_idle_conns + 64)) -gt "$(ulimit -n)" ]; then
    steps+=("$s skip - - not available: RLIMIT_NOFILE is $(ulimit -n), too low for $grpc_idle_conns connections")
    continue
  fi
  if [ "$s" = scaling ]; then
    if [ -n "$scaling_note" ]; then
      steps+=("scaling skip - - $scaling_note")
      continue
    fi
    for p in $scale_procs; do
      for r in $(seq "$rounds"); do
        for peer in $(peers_of scaling); do
          steps+=("scaling $peer $p $r")
          planned=$((planned + $(step_seconds scaling)))
        done
      done
    done
    continue
  fi
  for r in $(seq "$rounds"); do
    for peer in $(peers_of "$s"); do
      steps+=("$s $peer $procs $r")
      [ -z "$(does_not_apply "$s" "$peer")" ] && planned=$((planned + $(step_seconds "$s")))
    done
  done
done
log "== ${#steps[@]} steps, about $((planned / 60)) min $((planned % 60)) s; results in $out"

# --- run -----------------------------------------------------------------------------
t_start=$EPOCHREALTIME
step=0
for entry in "${steps[@]}"; do
  read -r scenario peer p round rest <<<"$entry"
  step=$((step + 1))
  elapsed=$(awk -v a="$t_start" -v b="$EPOCHREALTIME" 'BEGIN { s = int(b - a); printf "%d:%02d", s / 60, s % 60 }')
  prefix=$(printf '[%2d/%d %s] %-13s %-5s' "$step" "${#steps[@]}" "$elapsed" "$scenario" "$peer")
  if [ "$peer" = skip ]; then
    log "$prefix skipped: $rest"
    csv_row "$scenario" all "" "" skipped "$rest"
    continue
  fi
  why=$(does_not_apply "$scenario" "$peer")
  if [ -n "$why" ]; then
    log "$prefix skipped: $why"
    [ "$round" = 1 ] &&
      csv_row "$scenario" "$peer" "$p" "" skipped "$why"
    continue
  fi

  place "$p"
  scheme=http path=/plaintext conns=64 script="" timeout=5 h2=0 grpc_step=0 streams=""
  msgs_per_s="" client_cpu=""
  is_grpc "$scenario" && grpc_step=1
  case "$scenario" in
    grpc-unary | grpc-stream) conns=$grpc_conns streams=$grpc_streams ;;
    grpc-idle) conns=$grpc_idle_conns ;;
    plaintext-1k) conns=1000 ;;
    plaintext-10k) conns=10000 timeout=10 ;;
    pipeline16) script=pipeline16.lua client_threads=1 ;;
    json) path=/json ;;
    echo4k) path=/echo script=post4k.lua ;;
    gzip-text) path=/text script=gzip.lua ;;
    static4k) path=/static/4k.bin ;;
    static1m) path=/static/1m.bin ;;
    sleep) path="/sleep?ms=10" conns=1000 ;;
    https) scheme=https ;;
    h2) scheme=https h2=1 ;;
    scaling) conns=$scale_conns ;;
    idle) conns=$idle_conns ;;
    idle-ws) conns=$idle_conns path=/ws/echo ;;
    ws-echo) conns=${WS_CONNS:-64} path=/ws/echo ;;
  esac
  logfile="$out/logs/$scenario-$peer-p$p-r$round.log"
  wrk_log="$out/logs/$scenario-$peer-p$p-r$round.wrk.txt"
  t_step=$EPOCHREALTIME
  if ! start_server "$peer" "$p" "$scheme" "$logfile"; then
    csv_row "$scenario" "$peer" "$p" "$round" failed "did not start (log: $logfile)"
    if [ "$smoke" = 1 ]; then
      smoke_steps=$((smoke_steps + 1))
      smoke_failed+=("$scenario p$p: the server did not start (log: $logfile)")
    fi
    continue
  fi
  note="" baseline="" retained="" bg_rps="" idle_n="" rss_before="" rss_after="" per_conn=""
  per_conn_1s="" per_conn_100ms=""
  if [ "$grpc_step" = 1 ]; then
    # One call of each method with a real client (grpcio), its replies checked, before
    # h2load, which sees HTTP statuses and byte counts only.
    check=$(/usr/bin/python3 "$grpc_dir/check_greeter.py" "127.0.0.1:$port" "$stream_replies" 2>&1 ||
      true)
    echo "$check" >"$out/logs/$scenario-$peer-p$p-r$round.check.txt"
    if [[ "$check" != ok:* ]]; then
      log "$prefix failed: the real client's call: $check"
      stop_server
      csv_row "$scenario" "$peer" "$p" "$round" failed "a real client's call failed: $check"
      continue
    fi
  fi
  if [ "$scenario" = gzip-text ]; then
    # wrk counts bytes only: a real client checks first that the body is gzip-coded and
    # decodes to goro-demo's document, so that both servers do the same work.
    check=$(check_gzip_text "$url_base/text")
    echo "$check" >"$out/logs/$scenario-$peer-p$p-r$round.check.txt"
    if [ "$check" != ok ]; then
      log "$prefix failed: the real client's call: $check"
      stop_server
      csv_row "$scenario" "$peer" "$p" "$round" failed "a real client's call failed: $check"
      [ "$smoke" = 1 ] && smoke_failed+=("$scenario p$p: $check")
      continue
    fi
  fi
  bg_errors=0 bg_error_detail=""
  others=""
  # wrk's clock includes opening the connections: 10,000 of them take a good part of 1 s.
  seconds=$duration
  [ "$conns" -ge 10000 ] && [ "$seconds" -lt 3 ] && seconds=3

  if [ "$scenario" = idle ] || [ "$scenario" = idle-ws ] || [ "$scenario" = grpc-idle ]; then
    idle_log="$out/logs/$scenario-client-$peer-p$p-r$round.log"
    if [ "$scenario" = grpc-idle ]; then
      # Warmed up with the unary load: the server's pools and buffers exist before.
      run_h2load_grpc 64 16 "$warmup" /helloworld.Greeter/SayHello 1
      sleep "$settle"
      rss_before=$(rss_kib "$server_pid")
      "${client_pin[@]}" "$grpc_bin/loadtest_grpc_idle_client" 127.0.0.1 "$port" \
        "$grpc_idle_conns" $((grpc_idle_conns / 20000 + 2)) 120 >"$idle_log" 2>&1 &
    else
      run_wrk 64 "$client_threads" "$warmup" "$url_base/plaintext" "" 5 # warm-up
      sleep "$settle"
      rss_before=$(rss_kib "$server_pid")
      sources=$((idle_conns / 20000 + 2))
      "${client_pin[@]}" "$bin/loadtest_idle_client" 127.0.0.1 "$port" "$idle_conns" "$sources" \
        "$path" 120 >"$idle_log" 2>&1 &
    fi
    idle_pid=$!
    started+=("$idle_pid")
    for _ in $(seq 900); do
      grep -q '^READY' "$idle_log" 2>/dev/null && break
      kill -0 "$idle_pid" 2>/dev/null || break
      sleep 0.1
    done
    # Measured after 1 s and after 3 s without traffic, as the connections of a
    # keep-alive pool sit between requests: a goro connection idle for 30 ms parks without
    # its goroutine and buffers (later where its requests came at a slower pace), and the
    # memory they held goes back 50 ms later (docs/design.md); the other servers keep what
    # they hold. Then (idle only) one more request on every connection at once, and the
    # memory 100 ms after the last answer.
    sleep 1
    rss_1s=$(rss_kib "$server_pid")
    sleep 2
    rss_after=$(rss_kib "$server_pid")
    rss_100ms=""
    if [ "$scenario" = idle ] && kill -USR1 "$idle_pid" 2>/dev/null; then
      for _ in $(seq 300); do
        grep -q '^AGAIN answered' "$idle_log" 2>/dev/null && break
        kill -0 "$idle_pid" 2>/dev/null || break
        sleep 0.02
      done
      if grep -q '^AGAIN answered' "$idle_log" 2>/dev/null; then
        sleep 0.1
        rss_100ms=$(rss_kib "$server_pid")
      fi
    fi
    kill -TERM "$idle_pid" 2>/dev/null || true
    wait "$idle_pid" 2>/dev/null || true
    forget "$idle_pid"
    idle_n=$(sed -n 's/^READY connected=\([0-9]*\).*/\1/p' "$idle_log")
    failed=$(sed -n 's/^READY .*failed=\([0-9]*\).*/\1/p' "$idle_log")
    closed=$(sed -n 's/^DONE closed_by_server=\([0-9]*\).*/\1/p' "$idle_log")
    w_errors=$((${failed:-0} + ${closed:-0}))
    w_error_detail=""
    [ "$w_errors" -gt 0 ] && w_error_detail="failed=${failed:-?} closed_by_server=${closed:-?}"
    if [ -n "$idle_n" ] && [ "$idle_n" -gt 0 ]; then
      per_conn=$(((rss_after - rss_before) * 1024 / idle_n))
      per_conn_1s=$(((rss_1s - rss_before) * 1024 / idle_n))
      [ -n "$rss_100ms" ] && per_conn_100ms=$(((rss_100ms - rss_before) * 1024 / idle_n))
    else
      note="the idle client connected nothing (log: $idle_log)"
    fi
    cpu="" others="" rss="$rss_after"
    w_rps="" p50="" p99="" maxl=""
    status=ok
    [ -z "$per_conn" ] && status=failed
    log "$prefix $(printf '%s %s: RSS %s -> %s KiB = %s B/conn (at 1 s: %s; 100 ms after another request: %s), errors %s' \
      "${idle_n:-0}" "$scenario" "$rss_before" "$rss_after" "${per_conn:-?}" "${per_conn_1s:-?}" \
      "${per_conn_100ms:-n/a}" "$w_errors")"
  elif [ "$scenario" = grpc-unary ] || [ "$scenario" = grpc-stream ]; then
    method=/helloworld.Greeter/SayHello replies=1
    [ "$scenario" = grpc-stream ] && method=/helloworld.Greeter/SayHelloStreamReply \
      replies=$stream_replies
    run_h2load_grpc "$conns" "$streams" "$warmup" "$method" "$replies" # warm-up
    cpu0=$(cpu_ticks "$server_pid")
    busy0=$(cores_busy_ticks)
    t0=$EPOCHREALTIME
    run_h2load_grpc "$conns" "$streams" "$seconds" "$method" "$replies"
    t1=$EPOCHREALTIME
    busy1=$(cores_busy_ticks)
    cpu1=$(cpu_ticks "$server_pid")
    rss=$(rss_kib "$server_pid")
    p50=$(ms "$w_p50_us") p99=$(ms "$w_p99_us") maxl=$(ms "$w_max_us")
    cpu_shares
    note="h2load -c$conns -m$streams; latency per call"
    [ "$scenario" = grpc-stream ] && note="$note ($replies replies)"
    status=ok
    [ "$w_rps" = 0 ] && status=failed note="h2load completed no call (log: $wrk_log)"
    log "$prefix $(printf '%s calls/s  %s msgs/s  p50 %s  p99 %s  max %s ms  errors %s  RSS %s KiB  CPU %s%%  others %s%%  h2load CPU %s%%' \
      "$w_rps" "$msgs_per_s" "$p50" "$p99" "$maxl" "$w_errors" "$rss" "$cpu" "$others" "$client_cpu")"
  elif [ "$scenario" = ws-echo ]; then
    # loadtest_ws_echo_client checks every echo byte for byte; its own warm-up first.
    ws_size=${WS_SIZE:-128} w_error_detail=""
    echo "== loadtest_ws_echo_client $conns connections, $ws_size bytes, ${seconds} s after ${warmup} s" >>"$wrk_log"
    cpu0=$(cpu_ticks "$server_pid")
    busy0=$(cores_busy_ticks)
    t0=$EPOCHREALTIME
    result=$("${client_pin[@]}" "$bin/loadtest_ws_echo_client" 127.0.0.1 "$port" "$conns" \
      "$ws_size" "$seconds" "$warmup" "$path" 2>&1 || true)
    t1=$EPOCHREALTIME
    busy1=$(cores_busy_ticks)
    cpu1=$(cpu_ticks "$server_pid")
    printf '%s\n' "$result" >>"$wrk_log"
    rss=$(rss_kib "$server_pid")
    w_rps=$(sed -n 's/.*per_s=\([0-9]*\).*/\1/p' <<<"$result")
    w_errors=$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' <<<"$result")
    [ -z "$w_rps" ] && w_rps=0
    [ -z "$w_errors" ] && w_errors=1 w_error_detail="no result line (log: $wrk_log)"
    p50="" p99="" maxl="" note="$ws_size-byte binary messages, each echo checked; no percentiles"
    # Over the client's whole run, warm-up included.
    cpu_shares
    status=ok
    [ "$w_rps" = 0 ] && status=failed note="no WebSocket round trip completed (log: $wrk_log)"
    log "$prefix $(printf '%s msgs/s  errors %s  RSS %s KiB  CPU %s%%  others %s%%' \
      "$w_rps" "$w_errors" "$rss" "$cpu" "$others")"
  elif [ "$scenario" = h2 ]; then
    run_h2load "$conns" 16 "$warmup" "$url_base$path" # warm-up
    cpu0=$(cpu_ticks "$server_pid")
    busy0=$(cores_busy_ticks)
    t0=$EPOCHREALTIME
    run_h2load "$conns" 16 "$seconds" "$url_base$path"
    t1=$EPOCHREALTIME
    busy1=$(cores_busy_ticks)
    cpu1=$(cpu_ticks "$server_pid")
    rss=$(rss_kib "$server_pid")
    p50="" p99="" maxl="" note="h2load: no percentiles"
    cpu_shares
    status=ok
    [ "$w_rps" = 0 ] && status=failed note="h2load completed no request (log: $wrk_log)"
    log "$prefix $(printf '%s req/s  errors %s  RSS %s KiB  CPU %s%%  others %s%%' \
      "$w_rps" "$w_errors" "$rss" "$cpu" "$others")"
  else
    run_wrk "$conns" "$client_threads" "$warmup" "$url_base$path" "$script" "$timeout" # warm-up
    if [ "$scenario" = handoff ] || [ "$scenario" = preempt ]; then
      run_wrk "$conns" "$client_threads" "$seconds" "$url_base$path" "$script" "$timeout"
      baseline=$w_rps
      bg_log="$out/logs/$scenario-$peer-p$p-r$round-load.log"
      if [ "$scenario" = handoff ]; then
        start_background "$block_conns" "$url_base/block?ms=$block_ms" 10 "$bg_log"
      else
        start_background "$hogs" "$url_base/cpu?ms=$hog_ms" 60 "$bg_log"
      fi
      sleep "$settle"
      timeout=60
    fi
    cpu0=$(cpu_ticks "$server_pid")
    busy0=$(cores_busy_ticks)
    t0=$EPOCHREALTIME
    run_wrk "$conns" "$client_threads" "$seconds" "$url_base$path" "$script" "$timeout"
    t1=$EPOCHREALTIME
    busy1=$(cores_busy_ticks)
    cpu1=$(cpu_ticks "$server_pid")
    rss=$(rss_kib "$server_pid")
    # The measured run's figures, before stop_background overwrites w_*.
    rps=$w_rps p50=$(ms "$w_p50_us") p99=$(ms "$w_p99_us") maxl=$(ms "$w_max_us")
    errors=$w_errors error_detail=$w_error_detail
    if [ "$scenario" = pipeline16 ]; then
      # wrk 4.1 records one latency per 16 responses, and its coordinated-omission
      # correction then puts samples below the minimum that its percentiles never reach.
      p50="" p99=""
      note="wrk gives no valid percentiles when pipelining; max only"
    fi
    if [ -n "$baseline" ]; then
      stop_background "$bg_log"
      retained=$(awk -v a="$rps" -v b="$baseline" 'BEGIN { if (b > 0) printf "%.1f", 100 * a / b }')
    fi
    w_rps=$rps w_errors=$errors w_error_detail=$error_detail
    cpu_shares
    status=ok
    if [ "$rps" = 0 ] && [ -n "$baseline" ]; then
      status=starved p50="" p99="" maxl=""
      note="no plaintext request was answered in the $seconds s measured"
    elif [ "$rps" = 0 ]; then
      status=failed note="wrk completed no request (log: $wrk_log)"
    fi
    if [ "$scheme" = https ]; then
      note=$(OPENSSL_CONF="$tls/client.cnf" openssl s_client -connect "127.0.0.1:$port" \
        </dev/null 2>/dev/null | sed -n 's/.*Cipher is \(.*\)/\1/p' | head -1)
    fi
    extra=""
    [ -n "$retained" ] && extra=" (unloaded $baseline, kept $retained%, load $bg_rps req/s)"
    log "$prefix $(printf '%s req/s  p50 %s  p99 %s  max %s ms  errors %s  RSS %s KiB  CPU %s%%  others %s%%%s' \
      "$rps" "${p50:--}" "${p99:--}" "${maxl:--}" "$w_errors" "$rss" "$cpu" "$others" "$extra")"
  fi
  if [ "$smoke" = 1 ]; then
    smoke_check "$scenario p$p" "$logfile" "$status"
  else
    stop_server
  fi
  step_s=$(awk -v a="$t_step" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  csv_row "$scenario" "$peer" "$p" "$round" "$status" "$note" "$conns" "$w_rps" "$p50" "$p99" \
    "$maxl" "$w_errors" "$w_error_detail" "$rss" "$cpu" "$others" "$baseline" "$retained" "$bg_rps" \
    "$idle_n" "$rss_before" "$rss_after" "$per_conn" "$step_s" "$per_conn_1s" "$msgs_per_s" \
    "$client_cpu" "$streams" "$per_conn_100ms"
done
total_s=$(awk -v a="$t_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
log "== measured in $((total_s / 60)) min $((total_s % 60)) s"

# --- report --------------------------------------------------------------------------
command_line="loadtest/run.sh${*:+ $*}"
for knob in PEERS PROCS DURATION WARMUP ROUNDS IDLE_CONNS BLOCK_CONNS BLOCK_MS WS_CONNS WS_SIZE HOGS HOG_MS \
  SCALE_PROCS SCALE_CONNS GRPC_CONNS GRPC_STREAMS GRPC_STREAM_REPLIES GRPC_IDLE_CONNS TASKSET; do
  [ -n "${!knob:-}" ] && command_line="$knob=\"${!knob}\" $command_line"
done
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ] && commit="$commit (modified)"
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mem_gib=$(awk '/^MemTotal:/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)
{
  echo "date_utc=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "machine=${cpu_model:-unknown CPU}, $ncpu CPUs, $mem_gib GiB, Linux $(uname -r)"
  echo "command=$command_line"
  echo "commit=$commit"
  echo "quick=$quick"
  echo "smoke=$smoke"
  echo "procs=$procs"
  echo "duration_s=$duration"
  echo "warmup_s=$warmup"
  echo "rounds=$rounds"
  echo "peers=$peers"
  echo "total_s=$total_s"
  place "$procs"
  echo "pinning=${server_pin[*]:-no pinning} for servers, ${client_pin[*]:-no pinning} for clients"
  echo "idle_conns=$idle_conns"
  echo "grpc_idle_conns=$grpc_idle_conns"
  if [ "$any_grpc" = 1 ]; then
    echo "h2load=$(h2load --version 2>&1 | head -1)"
    echo "grpc_versions=goro::grpc (this tree); grpc-go $(dpkg-query -W -f='${Version}' golang-google-grpc-dev 2>/dev/null || echo ?) (Debian); gRPC C++ $(pkg-config --modversion grpc++ 2>/dev/null || echo ?) (Debian), callback API"
  fi
  echo "scaling=${scaling_note:-ran at $scale_procs cores}"
  echo "wrk=$(wrk -v 2>&1 | head -1 | sed 's/ Copyright.*//')"
  echo "go=$(command -v go >/dev/null && go version || echo none)"
  echo "nginx=$([ -n "$nginx_bin" ] && "$nginx_bin" -v 2>&1 | sed 's/.*: //' || echo none)$([ -n "$nginx_echo_module" ] && echo ' + echo module')"
  echo "compiler=$(c++ --version | head -1)"
  echo "openssl=$(openssl version | sed 's/ (Library.*//')"
  for s in "${scenarios[@]}"; do echo "scenario.$s=$(describe "$s")"; done
} >"$out/meta.txt"
"$python" "$here/report.py" "$out"
if [ "$latest" = 1 ] || { [ "$latest" = auto ] && [ "$full_run" = 1 ]; }; then
  # The table, the figures and one chart (the others stay in $out).
  mkdir -p "$here/results/latest"
  rm -f "$here/results/latest/"*
  cp "$out/results.csv" "$here/results/latest/"
  sed '/^Charts: /d' "$out/table.md" >"$here/results/latest/table.md"
  if [ -f "$out/throughput.png" ]; then
    cp "$out/throughput.png" "$here/results/latest/"
    printf '\n![Requests per second](throughput.png)\n' >>"$here/results/latest/table.md"
  fi
  log "== loadtest/results/latest refreshed"
fi
log "== $out/table.md"
cat "$out/table.md"
if [ "$smoke" = 1 ]; then
  # The last line, for CI: one test per step.
  if [ "${#smoke_failed[@]}" -gt 0 ]; then
    log "== load smoke: ${#smoke_failed[@]} step(s) failed, with $demo:"
    for f in "${smoke_failed[@]}"; do log "   $f"; done
  else
    log "== load smoke: every step passed, with $demo"
  fi
  echo "$((smoke_steps - ${#smoke_failed[@]})) passed, ${#smoke_failed[@]} failed"
  [ "${#smoke_failed[@]}" -eq 0 ] || exit 1
fi
