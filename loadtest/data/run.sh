#!/usr/bin/env bash
# Data access under load, one command:
#
#   loadtest/data/run.sh
#
# HTTP handlers that read data, goro (bench_data.cpp: goro::http, goro::redis, goro::pg)
# against Go (go/data.go: net/http, redigo, pgx v4's pgxpool), two scenarios:
#   cache  GET /cache/key:42 — one Redis GET;
#   note   GET /note/42 — one indexed SELECT (a primary key) on PostgreSQL and one Redis
#          GET, answered together.
# Each server on one core, with pools of POOL connections to the same redis-server and
# PostgreSQL (each in a temporary folder on a Unix socket, scripts/test-servers.sh),
# seeded with KEYS keys of VALUE_BYTES bytes and KEYS rows. Servers run one at a time,
# pinned to CPU 0 (GORO_MAXPROCS=1, GOMAXPROCS=1); wrk (no Lua script, which would cost it
# more than the servers their work) runs on CPU 1, redis-server and PostgreSQL on the
# CPUs from 2 on where there are 4 or more, else on CPU 1 beside wrk. The peers
# alternate, ROUNDS times, and the table takes each one's median.
#
# Per run: requests/s, p50 and p99 latency, the server's CPU seconds and requests per
# CPU second (less disturbed by what shares the machine than requests/s), and the most
# connections redis-server and PostgreSQL saw from the server (sampled every 0.2 s, the
# sampler's own not counted), which must stay within POOL, and how many different
# PostgreSQL connections it saw (backend pids), which must too: a pool that closes and
# makes connections under load (it once did) shows there. A run counts only if the
# server is alive at its end and wrk saw no socket error and no non-2xx answer;
# otherwise the script says which and exits 1.
#
# Knobs: SCENARIOS="cache note" DURATION=8 WARMUP=2 ROUNDS=3 CONNS=64 POOL=16 KEYS=1000
#        VALUE_BYTES=100 BUILD_DIR=<repo>/build-bench JOBS=2 TASKSET=1
# Output: a markdown table on stdout, and loadtest/results/data-<UTC stamp>/ with it,
# results.csv and the servers' logs.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(realpath -m "${BUILD_DIR:-$root/build-bench}")"
scenarios=${SCENARIOS:-cache note}
duration=${DURATION:-8} warmup=${WARMUP:-2} rounds=${ROUNDS:-3} conns=${CONNS:-64}
pool=${POOL:-16} keys=${KEYS:-1000} value_bytes=${VALUE_BYTES:-100}
servers="$root/scripts/test-servers.sh"
stamp=$(date -u +%Y%m%d-%H%M%S)
out="${OUT_DIR:-$root/loadtest/results/data-$stamp}"
mkdir -p "$out"

log() { printf '%s\n' "$*" >&2; }
pin() { if [ "${TASKSET:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then taskset -c "$1" "${@:2}"; else "${@:2}"; fi; }
# Where the load and the data servers run: with 4 CPUs or more, wrk on CPU 1 and
# PostgreSQL and Redis on the rest, so that neither bounds what the server on CPU 0 can
# answer; with 2, all three share CPU 1 (and bound it: see docs/data.md).
if [ "$(nproc)" -ge 4 ]; then
  wrk_cpus=1 data_cpus="2-$(($(nproc) - 1))"
else
  wrk_cpus=1 data_cpus=1
fi

log "data: building bench_data (Release) in $build"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGORO_BUILD_TESTS=OFF \
    -DGORO_BUILD_LOADTESTS=ON >/dev/null
fi
cmake --build "$build" --target bench_data -j "${JOBS:-2}" >/dev/null
goro_bin="$build/loadtest/data/bench_data"
go_bin="$build/loadtest/data/data_go"
log "data: building the Go peer (redigo and pgx, GOPATH mode)"
(cd "$here/go" && env GO111MODULE=off GOFLAGS="" GOPATH="$build/go-path:/usr/share/gocode" \
  GOCACHE="$build/go-cache" go build -o "$go_bin" data.go) || {
  log "data: cannot build the Go peer (apt-get install golang-go" \
    "golang-github-gomodule-redigo-dev golang-github-jackc-pgx-v4-dev)"
  exit 1
}

work="$(mktemp -d /tmp/goro-data-XXXXXX)"
chmod 755 "$work"  # as root, PostgreSQL runs as the user postgres
server_pid="" sampler_pid=""
cleanup() {
  [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null || true
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  "$servers" redis stop "$work/redis" >/dev/null 2>&1 || true
  "$servers" pg stop "$work/pg" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
pinned() { [ "${TASKSET:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; }

socket="$("$servers" redis start "$work/redis")"
if pinned; then taskset -pc "$data_cpus" "$(cat "$work/redis/redis.pid")" >/dev/null; fi
value=$(head -c "$value_bytes" /dev/zero | tr '\0' 'v')
for i in $(seq 0 $((keys - 1))); do printf 'SET key:%d %s\nSET views:%d %d\n' "$i" "$value" "$i" "$i"; done |
  redis-cli -s "$socket" >/dev/null
log "data: redis-server on $socket with $keys keys of $value_bytes bytes"

conninfo=""
if [[ " $scenarios " == *" note "* ]]; then
  conninfo="$("$servers" pg start "$work/pg" 100)"
  # Its backends are forked from the postmaster and keep its CPU.
  if pinned; then taskset -a -pc "$data_cpus" "$(head -n 1 "$work/pg/data/postmaster.pid")" >/dev/null; fi
  psql -q "$conninfo" -c "CREATE TABLE notes (id int PRIMARY KEY, title text NOT NULL)" \
    -c "INSERT INTO notes SELECT i, 'note ' || i FROM generate_series(0, $((keys - 1))) AS i" \
    -c "VACUUM ANALYZE notes" >/dev/null
  log "data: PostgreSQL on $conninfo with $keys notes"
fi

port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# Milliseconds from wrk's latency figure (us, ms or s).
to_ms() { awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /[0-9]s$/) n *= 1000; printf "%.2f", n }'; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# The connections redis-server and PostgreSQL have now, the sampler's own not counted.
redis_conns() { redis-cli -s "$socket" INFO clients | awk -F: '/^connected_clients/ { print $2 - 1 }'; }
pg_conns() {
  if [ -z "$conninfo" ]; then echo 0; return; fi
  psql -qtA "$conninfo" -c "SELECT count(*) - 1 FROM pg_stat_activity WHERE backend_type = 'client backend'"
}
# The server's client backends now, one pid a line, the sampler's own not listed.
pg_pids() {
  [ -n "$conninfo" ] || return 0
  psql -qtA "$conninfo" -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
}

echo "scenario,peer,round,requests_per_s,p50_ms,p99_ms,cpu_s,requests_per_cpu_s,max_redis_conns,max_pg_conns,pg_conns_seen" >"$out/results.csv"
failed=0
run_one() {
  local scenario=$1 peer=$2 round=$3 cmd url_path
  if [ "$scenario" = cache ]; then url_path="/cache/key:42"; else url_path="/note/42"; fi
  if [ "$peer" = goro ]; then
    cmd=(env GORO_MAXPROCS=1 "$goro_bin" --addr "127.0.0.1:$port" --redis "unix:$socket"
      --pool "$pool" --pg-pool "$pool")
    [ -n "$conninfo" ] && cmd+=(--pg "$conninfo")
  else
    cmd=(env GOMAXPROCS=1 "$go_bin" -addr "127.0.0.1:$port" -redis "unix:$socket" -pool "$pool"
      -pg-pool "$pool")
    [ -n "$conninfo" ] && cmd+=(-pg "$conninfo")
  fi
  # taskset and env exec the server: $! is its pid, for its CPU time and its end.
  if [ "${TASKSET:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then cmd=(taskset -c 0 "${cmd[@]}"); fi
  "${cmd[@]}" >"$out/$scenario-$peer-$round.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.05
  done
  pin "$wrk_cpus" wrk -t1 -c"$conns" -d"${warmup}s" "http://127.0.0.1:$port$url_path" >/dev/null
  : >"$work/pids"
  (most_redis=0 most_pg=0; while :; do
     n=$(redis_conns) && [ "$n" -gt "$most_redis" ] && most_redis=$n
     n=$(pg_conns) && [ "$n" -gt "$most_pg" ] && most_pg=$n
     pg_pids >>"$work/pids" || true
     echo "$most_redis $most_pg" >"$work/most"
     sleep 0.2
   done) &
  sampler_pid=$!
  local t0 t1 wrk_out
  t0=$(cpu_ticks "$server_pid")
  wrk_out=$(pin "$wrk_cpus" wrk -t1 -c"$conns" -d"${duration}s" --latency "http://127.0.0.1:$port$url_path")
  t1=$(cpu_ticks "$server_pid")
  kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null || true
  sampler_pid=""
  printf '%s\n' "$wrk_out" >"$out/$scenario-$peer-$round.wrk"
  local why=""
  kill -0 "$server_pid" 2>/dev/null || why="the server died"
  grep -q "Socket errors" <<<"$wrk_out" && why="${why:+$why; }wrk saw socket errors"
  grep -q "Non-2xx" <<<"$wrk_out" && why="${why:+$why; }non-2xx answers"
  kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true
  server_pid=""
  local rps p50 p99 cpu per_cpu most_redis most_pg seen
  rps=$(awk '/^Requests\/sec/ { printf "%.0f", $2 }' <<<"$wrk_out")
  p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$wrk_out")")
  p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$wrk_out")")
  cpu=$(awk -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }')
  per_cpu=$(awk -v r="$rps" -v d="$duration" -v c="$cpu" 'BEGIN { printf "%.0f", (c > 0) ? r * d / c : 0 }')
  read -r most_redis most_pg <"$work/most" || { most_redis=0; most_pg=0; }
  seen=$(sort -u "$work/pids" | grep -c . || true)
  rm -f "$work/most" "$work/pids"
  [ "$most_redis" -le "$pool" ] || why="${why:+$why; }$most_redis connections to Redis, over $pool"
  [ "$most_pg" -le "$pool" ] || why="${why:+$why; }$most_pg connections to PostgreSQL, over $pool"
  [ "$seen" -le "$pool" ] || why="${why:+$why; }$seen PostgreSQL connections seen, over $pool: the pool makes them again"
  echo "$scenario,$peer,$round,$rps,$p50,$p99,$cpu,$per_cpu,$most_redis,$most_pg,$seen" >>"$out/results.csv"
  log "data: $scenario $peer round $round: $rps req/s, p50 $p50 ms, p99 $p99 ms, $cpu CPU s," \
    "$most_redis Redis and $most_pg PostgreSQL connections ($seen seen)${why:+ — FAILED: $why}"
  if [ -n "$why" ]; then failed=1; fi
}

for scenario in $scenarios; do
  for round in $(seq 1 "$rounds"); do
    for peer in goro go; do run_one "$scenario" "$peer" "$round"; done
  done
done

/usr/bin/python3 - "$out/results.csv" "$conns" "$pool" <<'PY' | tee "$out/table.md"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
what = {"cache": "GET /cache/key:42 → one Redis GET",
        "note": "GET /note/42 → one indexed SELECT and one Redis GET"}
names = (("goro", "goro (goro::pg, goro::redis)"), ("go", "Go net/http + pgx v4 + redigo"))
for scenario in dict.fromkeys(r["scenario"] for r in rows):
    mine = [r for r in rows if r["scenario"] == scenario]
    def med(peer, key):
        return statistics.median(float(r[key]) for r in mine if r["peer"] == peer)
    def most(peer, key):
        return max(int(r[key]) for r in mine if r["peer"] == peer)
    print(f"{what[scenario]}: {sys.argv[2]} connections, pools of {sys.argv[3]}, 1 server core, "
          f"median of {sum(r['peer'] == 'goro' for r in mine)} runs\n")
    print("| server | requests/s | p50 ms | p99 ms | requests per CPU-s | most Redis / PostgreSQL connections | PostgreSQL connections seen |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for peer, name in names:
        print(f"| {name} | {med(peer, 'requests_per_s'):,.0f} | {med(peer, 'p50_ms'):.2f} | "
              f"{med(peer, 'p99_ms'):.2f} | {med(peer, 'requests_per_cpu_s'):,.0f} | "
              f"{most(peer, 'max_redis_conns')} / {most(peer, 'max_pg_conns')} | "
              f"{most(peer, 'pg_conns_seen')} |")
    print(f"\ngoro / Go: requests/s {med('goro', 'requests_per_s') / med('go', 'requests_per_s'):.2f}×, "
          f"per CPU-s {med('goro', 'requests_per_cpu_s') / med('go', 'requests_per_cpu_s'):.2f}×, "
          f"p99 {med('goro', 'p99_ms') / med('go', 'p99_ms'):.2f}× Go's\n")
PY
log "data: results in $out"
exit "$failed"
