#!/usr/bin/env bash
# Overload, one command (issue #33):
#
#   loadtest/overload/run.sh            # about 3 min
#   loadtest/overload/run.sh --quick    # 2 s steps, under 2 min: checks the script
#
# A handler that spends CPU_MS of CPU (GET /cpu?ms=CPU_MS), one server core, driven at
# LOAD_FACTOR times what it can serve. The peers, one at a time, each pinned to CPU 0:
#   goro-shed  goro-demo --shed: an adaptive concurrency limit with queue-delay shedding,
#              503 + Retry-After (http/include/goro/http/overload.hpp); SHED_FLAGS adds
#              flags (--max-connections=N)
#   goro       goro-demo without it: what happens with no protection
#   go         loadtest/http/hello.go, Go net/http, which has no limiter
#   nginx      nginx (worker_processes 1) as a reverse proxy in front of the Go peer, both
#              on CPU 0, with limit_conn: at most NGINX_LIMIT requests in flight to the
#              backend, the rest answered 503 + Retry-After at once. Like goro's
#              limiter, it needs only a concurrency and sheds the rest when it arrives.
#   nginx-req  the same with limit_req instead: a token bucket of NGINX_RATE_SHARE × the
#              capacity (what the operator must know and write in the configuration as a
#              rate), burst NGINX_BURST, nodelay (past the burst: 503 + Retry-After at
#              once, rather than queued). Its capacity step runs with no limit; nginx is
#              then started again with the rate taken from it (the backend stays up).
# For each peer, three steps, the clients (wrk, overload_openloop) on CPU 1:
#   capacity   closed loop, wrk -t1 -cCAP_CONNS on /cpu?ms=CPU_MS: its 2xx answers per
#              second are the capacity C, in one run (stepping an open loop would take
#              several, and a rule for where "keeping up" ends). With 2 connections one
#              request is served while the next waits, so the core never idles as long
#              as a round trip takes far less than CPU_MS. More would let the limiters
#              shed during the measure, and a closed loop sends a shed request again at
#              once: the core would spend time shedding, and the capacity of exactly the
#              protected peers would come out low (with 8, nginx's was by a fifth). The
#              non-2xx answers of this step are in results.csv.
#   unloaded   open loop (overload_openloop) at UNLOADED_SHARE of C on UNLOADED_CONNS
#              connections: the served p99 without load, p99_0
#   overload   open loop at LOAD_FACTOR × C on CONNS keep-alive connections: goodput, the
#              served and the shed latencies, timeouts (TIMEOUT s from the due time),
#              socket errors, the server's peak RSS (VmRSS, nginx's and its backend's
#              together, every 0.2 s) and its CPU.
# Each step is WARMUP s not counted and DURATION s measured; after each, the server must
# still answer /healthz, or its remaining steps are skipped and the run exits 1. The
# generator reads the server's RSS itself (--rss-pids): a sampling script's five forks a
# second, on either core, took about 1% of the time, which is where a p99 is read (the
# generator's own send lag had a p99 of 1.4 ms with one, 0.08 ms without).
#
# The goal (the "goal" column): goodput ≥ 90% of C, served p99 ≤ 3 × p99_0, the slowest
# shed answer under 1 ms, no timeout and no socket error. The peak RSS is shown beside
# the RSS before the overload step; whether it is bounded is read there (and across
# DURATIONs), not judged by the script.
#
# Knobs: PEERS="goro-shed goro go nginx nginx-req" DURATION=8 WARMUP=2 (--quick: 2, 1)
#        CONNS=1000 LOAD_FACTOR=10 CPU_MS=1 TIMEOUT=2 CAP_CONNS=2 UNLOADED_SHARE=0.25
#        UNLOADED_CONNS=8 NGINX_LIMIT=4 NGINX_RATE_SHARE=0.95 NGINX_BURST=4 SHED_FLAGS=
#        BUILD_DIR=<repo>/build-bench JOBS=2
#        GORO_DEMO=<a goro-demo to use instead of building one> TASKSET=1 OUT_DIR
# Output: a markdown table on stdout, and loadtest/results/overload-<UTC stamp>/ with it
# (table.md), results.csv, overload.png (gnuplot) and logs/.
set -euo pipefail
# The servers stop on SIGTERM: at once, without goro::App's drain.
export GORO_DRAIN_DELAY=${GORO_DRAIN_DELAY:-0}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(realpath -m "${BUILD_DIR:-$root/build-bench}")"  # absolute: GOPATH needs it
quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "overload: unknown argument $arg (--quick, --help)" >&2; exit 2 ;;
  esac
done
if [ "$quick" = 1 ]; then duration=${DURATION:-2} warmup=${WARMUP:-1}
else duration=${DURATION:-8} warmup=${WARMUP:-2}; fi
peers=${PEERS:-goro-shed goro go nginx nginx-req}
conns=${CONNS:-1000} load_factor=${LOAD_FACTOR:-10} cpu_ms=${CPU_MS:-1} timeout=${TIMEOUT:-2}
cap_conns=${CAP_CONNS:-2} unloaded_share=${UNLOADED_SHARE:-0.25}
unloaded_conns=${UNLOADED_CONNS:-8} nginx_limit=${NGINX_LIMIT:-4} shed_flags=${SHED_FLAGS:-}
nginx_rate_share=${NGINX_RATE_SHARE:-0.95} nginx_burst=${NGINX_BURST:-4}
stamp=$(date -u +%Y-%m-%dT%H-%M-%SZ)
out="${OUT_DIR:-$root/loadtest/results/overload-$stamp}"
mkdir -p "$out/logs"

log() { printf '%s\n' "$*" >&2; }
# Servers start as "${server_cpu[@]}" PROGRAM ... &: taskset execs it, so $! is its pid.
server_cpu=() client_cpu=()
if [ "${TASKSET:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then server_cpu=(taskset -c 0) client_cpu=(taskset -c 1); fi

for tool in wrk curl cmake python3 ss; do
  command -v "$tool" >/dev/null || { log "overload: $tool is not installed (scripts/deps.sh loadtest)"; exit 1; }
done

log "overload: building goro-demo and overload_openloop (Release) in $build"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGORO_BUILD_TESTS=OFF \
    -DGORO_BUILD_LOADTESTS=ON >/dev/null
elif ! grep -q '^GORO_BUILD_LOADTESTS:BOOL=ON' "$build/CMakeCache.txt"; then
  cmake -S "$root" -B "$build" -DGORO_BUILD_LOADTESTS=ON >/dev/null
fi
targets=(overload_openloop)
[ -z "${GORO_DEMO:-}" ] && targets+=(goro-demo)
cmake --build "$build" --target "${targets[@]}" -j "${JOBS:-2}" >/dev/null
goro_bin="${GORO_DEMO:-$build/examples/demo/goro-demo}"
openloop="$build/loadtest/overload/overload_openloop"
go_bin="$build/loadtest/overload/hello-go"
if [[ " $peers " == *" go "* || " $peers " == *" nginx"* ]]; then
  log "overload: building the Go peer (loadtest/http/hello.go)"
  (cd "$root/loadtest/http" && env GO111MODULE=off GOFLAGS="" GOPATH="$build/go-path" \
    GOCACHE="$build/go-cache" go build -o "$go_bin" hello.go)
fi
nginx_bin="$(command -v nginx || true)"
[ -x /usr/sbin/nginx ] && nginx_bin=/usr/sbin/nginx
if [[ " $peers " == *" nginx"* ]] && [ -z "$nginx_bin" ]; then
  log "overload: nginx is not installed (scripts/deps.sh loadtest): left out"
  peers="$(tr ' ' '\n' <<<"$peers" | grep -v '^nginx' | tr '\n' ' ')"
fi

work="$(mktemp -d /tmp/goro-overload-XXXXXX)"
server_pids=()
stop_servers() {
  local p
  for p in "${server_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${server_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  server_pids=()
}
cleanup() {
  stop_servers
  rm -rf "$work"
}
trap cleanup EXIT
trap 'log "overload: interrupted"; exit 130' INT TERM

# A port below the ephemeral range (none of the generator's thousands of client sockets
# can hold it) that no socket uses.
ephemeral_low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range)
free_port() {
  local port
  while :; do
    port=$((ephemeral_low - 12000 + RANDOM % 12000))
    [ -z "$(ss -Htan "sport = :$port")" ] && echo "$port" && return
  done
}

# The server's processes (nginx's and its backend's together): RSS in KiB, CPU ticks.
rss_kib() {
  local p sum=0 v
  for p in "${server_pids[@]}"; do
    v=$(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status" 2>/dev/null || true)
    sum=$((sum + ${v:-0}))
  done
  echo "$sum"
}
cpu_ticks() {
  local p sum=0 v
  for p in "${server_pids[@]}"; do
    v=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{ print $12 + $13 }' || true)
    sum=$((sum + ${v:-0}))
  done
  echo "$sum"
}

# Whether every process of the server runs and it answers /healthz within 15 s (a
# server without protection may take seconds to work through what the load left it);
# sets healthz_s, the seconds the answer took.
alive() {  # port
  local p started
  started=$(date +%s.%N)
  for p in "${server_pids[@]}"; do kill -0 "$p" 2>/dev/null || return 1; done
  for _ in 1 2 3 4 5; do
    if curl -fs -m 3 "http://127.0.0.1:$1/healthz" >/dev/null; then
      healthz_s=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
      return 0
    fi
    for p in "${server_pids[@]}"; do kill -0 "$p" 2>/dev/null || return 1; done
  done
  return 1
}

wait_ready() {  # port
  for _ in $(seq 1 100); do
    curl -fs -m 1 "http://127.0.0.1:$1/healthz" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  return 1
}

# The limit in front of the backend: limit_conn (kind conn), or a limit_req token bucket
# of `rate` requests a second (kind req; rate "none": no limit, for the capacity step).
write_nginx_conf() {  # dir port backend_port kind [rate]
  local dir=$1 nofile=$((conns + 4096)) zone="" limit=""
  case "$4" in
    conn)
      # One key for the whole server: requests in flight to the backend, at most $nginx_limit.
      zone="limit_conn_zone \$server_name zone=inflight:1m;
  limit_conn_status 503;
  limit_conn_log_level info;"
      limit="limit_conn inflight $nginx_limit;" ;;
    req)
      if [ "$5" != none ]; then
        # One bucket for the whole server, refilled at $5 requests a second.
        zone="limit_req_zone \$server_name zone=rate:1m rate=${5}r/s;
  limit_req_status 503;
  limit_req_log_level info;"
        limit="limit_req zone=rate burst=$nginx_burst nodelay;"
      fi ;;
  esac
  mkdir -p "$dir/tmp"
  cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile $nofile;
pid $dir/nginx.pid;
error_log $dir/error.log error;
events { worker_connections $nofile; }
http {
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 120s;
  client_body_temp_path $dir/tmp;
  proxy_temp_path $dir/tmp;
  fastcgi_temp_path $dir/tmp;
  uwsgi_temp_path $dir/tmp;
  scgi_temp_path $dir/tmp;
  upstream backend {
    server 127.0.0.1:$3;
    keepalive 64;
  }
  $zone
  map \$status \$retry_after { 503 1; default ""; }
  server {
    listen 127.0.0.1:$2 backlog=4096;
    server_name overload;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location / {
      $limit
      add_header Retry-After \$retry_after always;
      proxy_pass http://backend;
    }
    location = /healthz { proxy_pass http://backend; }
  }
}
EOF
}

# Starts `peer` on CPU 0; sets server_pids and port.
start_peer() {  # peer
  local peer=$1 logfile="$out/logs/$1-server.log"
  port=$(free_port)
  case "$peer" in
    goro-shed)
      # shellcheck disable=SC2086  # SHED_FLAGS is a list of flags
      "${server_cpu[@]}" env GORO_MAXPROCS=1 "$goro_bin" --addr "127.0.0.1:$port" --shed $shed_flags \
        >"$logfile" 2>&1 &
      server_pids=($!) ;;
    goro)
      "${server_cpu[@]}" env GORO_MAXPROCS=1 "$goro_bin" --addr "127.0.0.1:$port" >"$logfile" 2>&1 &
      server_pids=($!) ;;
    go)
      "${server_cpu[@]}" env GOMAXPROCS=1 "$go_bin" -addr "127.0.0.1:$port" >"$logfile" 2>&1 &
      server_pids=($!) ;;
    nginx | nginx-req)
      local dir="$work/$peer"
      backend_port=$(free_port)
      "${server_cpu[@]}" env GOMAXPROCS=1 "$go_bin" -addr "127.0.0.1:$backend_port" \
        >"$out/logs/$peer-backend.log" 2>&1 &
      server_pids=($!)
      wait_ready "$backend_port" || return 1
      if [ "$peer" = nginx ]; then write_nginx_conf "$dir" "$port" "$backend_port" conn
      else write_nginx_conf "$dir" "$port" "$backend_port" req none; fi
      cp "$dir/nginx.conf" "$out/logs/$peer.conf"
      "${server_cpu[@]}" "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" >"$logfile" 2>&1 &
      server_pids+=($!) ;;
    *) log "overload: unknown peer $peer"; return 1 ;;
  esac
  wait_ready "$port"
}

# The value of `key` in a key=value line.
field() { tr ' ' '\n' <<<"$2" | awk -F= -v k="$1" '$1 == k { print $2 }'; }

openloop() {  # rate conns logfile
  local pids
  pids=$(IFS=,; echo "${server_pids[*]}")
  "${client_cpu[@]}" "$openloop" --url "http://127.0.0.1:$port/cpu?ms=$cpu_ms" --rate "$1" --conns "$2" \
    --duration "$duration" --warmup "$warmup" --timeout "$timeout" --rss-pids "$pids" | tee "$3"
}

csv="$out/results.csv"
echo "peer,capacity_rps,capacity_non2xx,unloaded_rps,unloaded_p50_ms,unloaded_p99_ms,offered_rps,goodput_rps,goodput_pct,served_p50_ms,served_p99_ms,served_p99_ratio,answered_503,answered_429,answered_other,shed_p99_ms,shed_max_ms,timeouts,unsent,errors,rss_before_kib,peak_rss_kib,cpu_pct,send_lag_p99_ms,healthz_s,status" >"$csv"
failed=0
run_peer() {  # peer
  local peer=$1
  log "overload: $peer"
  if ! start_peer "$peer"; then
    log "overload: $peer did not start (logs/$peer-server.log)"
    echo "$peer,,,,,,,,,,,,,,,,,,,,,,,,,did not start" >>"$csv"
    stop_servers; failed=1; return
  fi

  local wrk_out requests seconds non2xx capacity
  wrk_out=$("${client_cpu[@]}" wrk -t1 -c"$cap_conns" -d"${warmup}s" "http://127.0.0.1:$port/cpu?ms=$cpu_ms")
  wrk_out=$("${client_cpu[@]}" wrk -t1 -c"$cap_conns" -d"${duration}s" "http://127.0.0.1:$port/cpu?ms=$cpu_ms")
  printf '%s\n' "$wrk_out" >"$out/logs/$peer-capacity.wrk"
  read -r requests seconds < <(awk '/requests in/ { sub(/s,$/, "", $4); print $1, $4 }' <<<"$wrk_out")
  non2xx=$(awk '/Non-2xx/ { print $NF }' <<<"$wrk_out")
  capacity=$(awk -v n="$requests" -v x="${non2xx:-0}" -v s="$seconds" 'BEGIN { printf "%.0f", (n - x) / s }')
  log "overload: $peer capacity $capacity req/s (2xx; ${non2xx:-0} other answers)"
  if [ "$capacity" -le 0 ] || ! alive "$port"; then
    log "overload: $peer: no capacity or not alive after the capacity step"
    echo "$peer,$capacity,${non2xx:-0},,,,,,,,,,,,,,,,,,,,,,,died or served nothing" >>"$csv"
    stop_servers; failed=1; return
  fi
  if [ "$peer" = nginx-req ]; then
    # The operator's rate: a share of the capacity just measured without a limit.
    local rate dir="$work/$peer"
    rate=$(awk -v c="$capacity" -v s="$nginx_rate_share" 'BEGIN { printf "%.0f", c * s }')
    kill "${server_pids[1]}"; wait "${server_pids[1]}" 2>/dev/null || true
    write_nginx_conf "$dir" "$port" "$backend_port" req "$rate"
    cp "$dir/nginx.conf" "$out/logs/$peer.conf"
    "${server_cpu[@]}" "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" >>"$out/logs/$peer-server.log" 2>&1 &
    server_pids[1]=$!
    log "overload: $peer: limit_req rate=${rate}r/s burst=$nginx_burst nodelay"
    if ! wait_ready "$port"; then
      echo "$peer,$capacity,${non2xx:-0},,,,,,,,,,,,,,,,,,,,,,,did not start with its limit" >>"$csv"
      stop_servers; failed=1; return
    fi
  fi

  local unloaded_rate line p50_0 p99_0
  unloaded_rate=$(awk -v c="$capacity" -v s="$unloaded_share" 'BEGIN { printf "%.0f", c * s }')
  line=$(openloop "$unloaded_rate" "$unloaded_conns" "$out/logs/$peer-unloaded.txt")
  p50_0=$(field ok_p50_ms "$line") p99_0=$(field ok_p99_ms "$line")
  log "overload: $peer unloaded at $unloaded_rate req/s: p50 $p50_0 ms, p99 $p99_0 ms"
  if ! alive "$port"; then
    echo "$peer,$capacity,${non2xx:-0},$unloaded_rate,$p50_0,$p99_0,,,,,,,,,,,,,,,,,,,,died" >>"$csv"
    stop_servers; failed=1; return
  fi

  local offered rss_before t0 t1 started ended
  offered=$(awk -v c="$capacity" -v f="$load_factor" 'BEGIN { printf "%.0f", c * f }')
  rss_before=$(rss_kib)
  t0=$(cpu_ticks) started=$(date +%s.%N)
  line=$(openloop "$offered" "$conns" "$out/logs/$peer-overload.txt")
  t1=$(cpu_ticks) ended=$(date +%s.%N)
  local status=ok healthz_s=""
  alive "$port" || { status="died"; failed=1; }
  local peak cpu goodput pct p50 p99 ratio s503 s429 other shed_p99 shed_max timeouts unsent errors lag
  peak=$(field peak_rss_kib "$line")
  [ "${peak:-0}" -ge "$rss_before" ] || peak=$rss_before
  cpu=$(awk -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v a="$started" -v b="$ended" \
    'BEGIN { printf "%.0f", 100 * t / hz / (b - a) }')
  goodput=$(field goodput "$line") p50=$(field ok_p50_ms "$line") p99=$(field ok_p99_ms "$line")
  pct=$(awk -v g="$goodput" -v c="$capacity" 'BEGIN { printf "%.1f", 100 * g / c }')
  ratio=$(awk -v a="$p99" -v b="$p99_0" 'BEGIN { if (b > 0 && a > 0) printf "%.2f", a / b }')
  s503=$(field answered_503 "$line") s429=$(field answered_429 "$line")
  other=$(field answered_other "$line")
  shed_p99=$(field shed_p99_ms "$line") shed_max=$(field shed_max_ms "$line")
  timeouts=$(field timeouts "$line") unsent=$(field unsent "$line")
  errors=$(($(field errors_connect "$line") + $(field errors_read "$line") + $(field errors_write "$line") +
    $(field errors_reset "$line") + $(field errors_closed "$line") + $(field errors_parse "$line")))
  lag=$(field send_lag_p99_ms "$line")
  echo "$peer,$capacity,${non2xx:-0},$unloaded_rate,$p50_0,$p99_0,$offered,$goodput,$pct,$p50,$p99,$ratio,$s503,$s429,$other,$shed_p99,$shed_max,$timeouts,$unsent,$errors,$rss_before,$peak,$cpu,$lag,$healthz_s,$status" >>"$csv"
  local served="—"
  [ -n "$ratio" ] && served="$p99 ms ($ratio×)"
  log "overload: $peer at $offered req/s: goodput $goodput ($pct%), served p99 $served," \
    "shed $((s503 + s429)) (p99 $shed_p99, max $shed_max ms), timeouts $((timeouts + unsent)), errors $errors," \
    "peak RSS $peak KiB, CPU $cpu%, /healthz after ${healthz_s:-—} s$([ "$status" = ok ] || echo ": $status")"
  stop_servers
}

for peer in $peers; do run_peer "$peer"; done

{
  echo "Overload: GET /cpu?ms=$cpu_ms, 1 server core (CPU 0), clients on CPU 1; $(date -u +%Y-%m-%dT%H:%M:%SZ)," \
    "$(uname -n), $(nproc) CPUs; DURATION=$duration WARMUP=$warmup CONNS=$conns LOAD_FACTOR=$load_factor" \
    "TIMEOUT=$timeout CAP_CONNS=$cap_conns NGINX_LIMIT=$nginx_limit" \
    "NGINX_RATE_SHARE=$nginx_rate_share NGINX_BURST=$nginx_burst${shed_flags:+ SHED_FLAGS=$shed_flags}"
  echo
} >"$out/table.md"
python3 - "$csv" <<'PY' | tee -a "$out/table.md"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
names = {"goro-shed": "goro --shed", "goro": "goro (no limiter)", "go": "Go net/http",
         "nginx": "nginx limit_conn → Go", "nginx-req": "nginx limit_req → Go"}
def num(r, k):
    try:
        return float(r[k])
    except (KeyError, ValueError):
        return None
print("| peer | capacity req/s | unloaded p99 ms | offered req/s | goodput req/s (% of capacity) "
      "| served p50 / p99 ms (p99 × unloaded) | shed | shed p99 / max ms | timeouts | errors "
      "| RSS before → peak MiB | CPU % | /healthz after s | goal |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for r in rows:
    name = names.get(r["peer"], r["peer"])
    if num(r, "goodput_rps") is None:
        print(f"| {name} | {r['capacity_rps'] or '—'} | {r['unloaded_p99_ms'] or '—'} "
              f"| | | | | | | | | | | {r['status']} |")
        continue
    shed = int(num(r, "answered_503") + num(r, "answered_429"))
    waits = int(num(r, "timeouts") + num(r, "unsent"))
    ratio = num(r, "served_p99_ratio")
    misses = []
    if num(r, "goodput_pct") < 90: misses.append("goodput")
    if ratio is None or ratio > 3: misses.append("p99")
    if shed and num(r, "shed_max_ms") >= 1: misses.append("shed time")
    if waits: misses.append("timeouts")
    if num(r, "errors"): misses.append("errors")
    if r["status"] != "ok": misses.append(r["status"])
    goal = "met" if not misses else "missed: " + ", ".join(misses)
    served = (f"{num(r, 'served_p50_ms'):.2f} / {num(r, 'served_p99_ms'):.2f} ({ratio:.1f}×)"
              if num(r, "goodput_rps") and ratio is not None else "—")
    shed_ms = f"{num(r, 'shed_p99_ms'):.3f} / {num(r, 'shed_max_ms'):.3f}" if shed else "—"
    print(f"| {name} | {num(r, 'capacity_rps'):,.0f} | {num(r, 'unloaded_p99_ms'):.2f} "
          f"| {num(r, 'offered_rps'):,.0f} | {num(r, 'goodput_rps'):,.0f} ({num(r, 'goodput_pct'):.0f}%) "
          f"| {served} | {shed:,} | {shed_ms} | {waits:,} | {int(num(r, 'errors')):,} "
          f"| {num(r, 'rss_before_kib') / 1024:.1f} → {num(r, 'peak_rss_kib') / 1024:.1f} "
          f"| {num(r, 'cpu_pct'):.0f} | {r['healthz_s'] or '—'} | {goal} |")
PY

if command -v gnuplot >/dev/null; then
  # A panel per goal, a bar per peer; a peer that served nothing gets a note, not a bar.
  python3 - "$csv" "$out" "$cpu_ms" "$load_factor" "$conns" "$(date -u +%Y-%m-%d), $(uname -n)" <<'PY'
import csv, os, sys
csv_path, folder, cpu_ms, factor, conns, when = sys.argv[1:]
rows = [r for r in csv.DictReader(open(csv_path)) if r["goodput_pct"]]
with open(os.path.join(folder, "overload.dat"), "w") as f:
    f.write('"x" "peer" "goodput, % of capacity" "served p99 / unloaded p99"\n')
    for x, r in enumerate(rows):
        f.write(f'{x} "{r["peer"]}" {r["goodput_pct"]} {r["served_p99_ratio"] or "?"}\n')
xtics = ", ".join(f'"{r["peer"]}" {x}' for x, r in enumerate(rows))
none_served = "\n".join(f'set label "none served" at {x}, first 1 center front'
                         for x, r in enumerate(rows) if not r["served_p99_ratio"])
served = any(r["served_p99_ratio"] for r in rows)
ratio_plot = "'overload.dat' using 1:4 with boxes lc rgb '#ee7733' notitle" if served else "1/0 notitle"
gp = f"""set terminal pngcairo size 1200,500 font 'sans,10'
set output 'overload.png'
set style fill solid 0.85 border -1
set boxwidth 0.6
set datafile missing '?'
set grid ytics
set xrange [-0.5:{len(rows) - 0.5}]
set xtics ({xtics}) noenhanced
set multiplot layout 1,2 title "Overload: /cpu?ms={cpu_ms} at {factor}× capacity, {conns} connections, 1 server core\\n{when}" noenhanced
set title 'Goodput, % of the capacity (goal ≥ 90)'
set yrange [0:110]
set arrow 1 from graph 0, first 90 to graph 1, first 90 nohead dt 2 lw 2 lc rgb '#cc0000'
plot 'overload.dat' using 1:3 with boxes lc rgb '#4477aa' notitle
unset arrow 1
set title 'Served p99 ÷ unloaded p99, log scale (goal ≤ 3)'
set logscale y
set yrange [0.5:{'*' if served else 10}]
set arrow 2 from graph 0, first 3 to graph 1, first 3 nohead dt 2 lw 2 lc rgb '#cc0000'
{none_served}
plot {ratio_plot}
unset multiplot
"""
with open(os.path.join(folder, "overload.gp"), "w") as f:
    f.write(gp)
PY
  (cd "$out" && gnuplot overload.gp 2>/dev/null) || log "overload: gnuplot failed: no chart"
else
  log "overload: gnuplot is not installed: no chart"
fi
log "overload: results in $out"
exit "$failed"
