#!/usr/bin/env bash
# The load tests of a borrowed 16-core machine, in one command that needs nothing
# installed there but bash, coreutils and python3: every program and library comes
# from the bundle that loadtest/device/bundle.sh made. From the repository root:
#
#   bash loadtest/device/run.sh build/device-bundle "$OUT"
#
# 1. sanity.txt: the machine (CPUs, kernel, OS, load) and `ldd` of every bundled
#    program with the bundle's lib/, where a "not found" would show.
# 2. HTTP scaling, as loadtest/run.sh's `scaling` scenario: GET /plaintext at
#    SCALE_CONNS connections against goro-demo, Go's net/http (hello.go), nginx, the
#    Asio peer and the bare epoll loop, each given P cores for P in SCALE_PROCS
#    (GORO_MAXPROCS / GOMAXPROCS / worker_processes / threads = P, pinned to CPUs
#    SERVER_CPU0..SERVER_CPU0+P-1) while wrk runs on CLIENT_CPUS with WRK_THREADS
#    threads. The peers take turns within each P. One row per step in scaling.csv.
# 3. The scheduler micro-benchmarks of loadtest/sched (goro against Go) at each of
#    SCHED_PROCS Ps, SCHED_REPS times, with the bundled programs (sched/run.sh's
#    BIN_DIR): raw figures in sched-raw.txt, the stderr of failed runs beside it.
#
# summary.md (the machine, the scaling tables, the scheduler tables) is written again
# after every step, run.log takes every progress line, logs.tar.gz the servers' and
# wrk's output. Every step has a time limit, a step that fails is recorded and the run
# goes on, and the scheduler part is cut at DEADLINE seconds from the start, so the
# whole run ends by then; what was measured until then is in OUT.
#
# Knobs (environment), the defaults for a 16-CPU machine:
#   PARTS="scaling sched"          which parts run (the sanity report always does)
#   SCALE_PEERS="goro go nginx asio epoll"   SCALE_PROCS="1 2 4 8"   SCALE_CONNS=256
#   SCALE_WARMUP=1 SCALE_DURATION=5          seconds of warm-up and measured load per step
#   SERVER_CPU0=0                  the server's first CPU
#   CLIENT_CPUS=8-15 WRK_THREADS=8 wrk's CPUs (a taskset list) and threads
#   SCHED_PROCS="1 2 4 8 16"  SCHED_REPS=3  SCHED_RUN_TIMEOUT=60
#   SCHED_CASES="timers handoff spawn pingpong skynet rss_parked yield blocking_getpid"
#                                  (the order they run in: the ones that matter most first)
#   DEADLINE=540                   seconds from the start by which everything has ended
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [ $# -lt 2 ] || [ ! -d "$1/bin" ]; then
  echo "usage: bash loadtest/device/run.sh <bundle folder> <output folder>" >&2
  exit 2
fi
bundle="$(realpath "$1")"
out="$(realpath -m "$2")"
mkdir -p "$out" || exit 2
bin="$bundle/bin"
lib="$bundle/lib"
# The bundled programs get the bundle's libraries through `env LD_LIBRARY_PATH=...` in
# front of each of them; the system's own tools (grep, python3, tar) keep the system's.
with_libs=(env "LD_LIBRARY_PATH=$lib")

parts="${PARTS:-scaling sched}"
scale_peers="${SCALE_PEERS:-goro go nginx asio epoll}"
scale_procs="${SCALE_PROCS:-1 2 4 8}"
scale_conns="${SCALE_CONNS:-256}"
warmup="${SCALE_WARMUP:-1}"
duration="${SCALE_DURATION:-5}"
server_cpu0="${SERVER_CPU0:-0}"
client_cpus="${CLIENT_CPUS:-8-15}"
wrk_threads="${WRK_THREADS:-8}"
sched_procs="${SCHED_PROCS:-1 2 4 8 16}"
sched_reps="${SCHED_REPS:-3}"
sched_cases="${SCHED_CASES:-timers handoff spawn pingpong skynet rss_parked yield blocking_getpid}"
sched_run_timeout="${SCHED_RUN_TIMEOUT:-60}"
deadline="${DEADLINE:-540}"

work="$(mktemp -d "${TMPDIR:-/tmp}/goro-device.XXXXXX")" # logs, nginx folders
mkdir -p "$work/logs"
runlog="$out/run.log"
csv="$out/scaling.csv"
summary="$out/summary.md"
raw="$out/sched-raw.txt"
SECONDS=0

log() { printf '[%3ds] %s\n' "$SECONDS" "$*" | tee -a "$runlog" >&2; }
wants() { [[ " $parts " == *" $1 "* ]]; }
has() { command -v "$1" >/dev/null 2>&1; }

# --- processes -----------------------------------------------------------------------
# Every server started and not yet reaped; killed with its children on exit.
started=()
descendants() {  # pid -> its children, their children, ... (nginx's workers)
  local c children
  if [ -r "/proc/$1/task/$1/children" ]; then
    children=$(cat /proc/"$1"/task/*/children 2>/dev/null)
  else
    # Kernels without /proc/<pid>/task/<tid>/children: every process's parent.
    children=$(awk -v parent="$1" '{ sub(/.*\) /, ""); if ($2 == parent) print FILENAME }' \
      /proc/[0-9]*/stat 2>/dev/null | cut -d/ -f3)
  fi
  for c in $children; do
    echo "$c"
    descendants "$c"
  done
}
kill_tree() {
  local p
  [ -n "$1" ] || return 0
  for p in $(descendants "$1") "$1"; do kill -KILL "$p" 2>/dev/null; done
  wait "$1" 2>/dev/null
}
finish() {
  local p
  for p in "${started[@]}"; do kill_tree "$p"; done
  timeout 30 tar -czf "$out/logs.tar.gz" -C "$work" logs 2>/dev/null
  rm -rf "$work"
  log "done; results in $out"
}
trap finish EXIT
trap 'log "interrupted"; exit 130' INT TERM

# --- CPUs ------------------------------------------------------------------------------
ncpu="$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
expand_cpus() {  # "8-15,20" -> 8 9 ... 15 20
  local part a b
  for part in ${1//,/ }; do
    a=${part%-*} b=${part#*-}
    seq "$a" "$b"
  done
}
# The knobs count CPUs from 0 among those this process may use (a container's cpuset
# may start elsewhere); real_cpus turns such indexes into the CPUs' own numbers.
mapfile -t cpu_ids < <(expand_cpus "$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status 2>/dev/null)")
[ "${#cpu_ids[@]}" -gt 0 ] || mapfile -t cpu_ids < <(seq 0 $((ncpu - 1)))
ncpu=${#cpu_ids[@]}
real_cpus() {  # "8-15" -> "8,9,...,15" (the 9th to 16th allowed CPUs)
  local i list=""
  for i in $(expand_cpus "$1"); do list+="${list:+,}${cpu_ids[$i]}"; done
  echo "$list"
}
# wrk's CPUs must exist; on a smaller machine wrk takes the upper half of it.
client_note=""
for c in $(expand_cpus "$client_cpus"); do
  if [ "$c" -ge "$ncpu" ]; then
    client_note="CLIENT_CPUS=$client_cpus does not fit $ncpu CPUs: wrk on $((ncpu / 2))-$((ncpu - 1))"
    client_cpus="$((ncpu / 2))-$((ncpu - 1))"
    wrk_threads=$((ncpu - ncpu / 2))
    break
  fi
done
# Pinning with taskset, else with python3's sched_setaffinity, else none.
pinner=none
if has taskset; then
  pinner=taskset
elif has python3; then
  pinner=python3
fi
pin_to() {  # cpus -> PIN, the command prefix that runs a program on those CPUs
  case "$pinner" in
    taskset) PIN=(taskset -c "$1") ;;
    python3) PIN=(python3 -c 'import os, sys
cpus = set()
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    cpus.update(range(int(a), int(b or a) + 1))
os.sched_setaffinity(0, cpus)
os.execvp(sys.argv[2], sys.argv[2:])' "$1") ;;
    *) PIN=() ;;
  esac
}

# --- plan ----------------------------------------------------------------------------
n_scale=0
wants scaling && for p in $scale_procs; do for peer in $scale_peers; do n_scale=$((n_scale + 1)); done; done
n_sched_procs=0
wants sched && for p in $sched_procs; do n_sched_procs=$((n_sched_procs + 1)); done
# Seconds per repetition at one P count, goro and Go together, as measured on a 2-core
# machine (the programs' own work barely depends on the P count).
sched_case_s() {
  case "$1" in
    timers) echo 5.5 ;; handoff) echo 3.1 ;; skynet) echo 2.9 ;; spawn) echo 2.1 ;;
    rss_parked) echo 1.5 ;; blocking_getpid) echo 1.0 ;; pingpong) echo 0.9 ;; *) echo 0.5 ;;
  esac
}
per_rep=0
for c in $sched_cases; do per_rep=$(awk -v a="$per_rep" -v b="$(sched_case_s "$c")" 'BEGIN { print a + b }'); done
est_scale=$((n_scale * (warmup + duration + 2)))
est_sched=$(awk -v a="$per_rep" -v n="$n_sched_procs" -v r="$sched_reps" 'BEGIN { printf "%d", a * n * r }')
est=$((est_scale + est_sched + 10))
[ "$est" -gt "$deadline" ] && est=$deadline
log "goro device run: $ncpu CPUs; parts [$parts]; expected about $((est / 60)) min $((est % 60)) s" \
  "(scaling $n_scale steps ~${est_scale}s, sched ~${est_sched}s), cut at ${deadline}s"

# --- sanity ----------------------------------------------------------------------------
elves=()
for f in "$bin"/* "$bin"/sched/* "$bin"/sched/go/* "$bundle"/nginx/*.so; do
  [ -f "$f" ] && elves+=("$f")
done
not_found=""
{
  echo "# sanity, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "nproc: $ncpu"
  echo "pinning: $pinner${client_note:+; $client_note}; CPU indexes 0.. are CPUs ${cpu_ids[*]}"
  echo "uname: $(uname -a)"
  echo "id: $(id -u 2>/dev/null)   ulimit -n: $(ulimit -n)   ulimit -Hn: $(ulimit -Hn)"
  echo "loadavg: $(cat /proc/loadavg 2>/dev/null)"
  echo "cpu: $(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2-)"
  echo "governor: $(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null || echo n/a)"
  grep -E '^(MemTotal|MemAvailable)' /proc/meminfo 2>/dev/null
  echo "glibc: $(ldd --version 2>/dev/null | head -1)"
  echo "python3: $(python3 --version 2>&1)"
  for t in taskset timeout tar gzip ldd python3 setsid; do
    printf 'tool %-8s %s\n' "$t" "$(command -v "$t" || echo MISSING)"
  done
  echo "online CPUs: $(cat /sys/devices/system/cpu/online 2>/dev/null)"
  echo "allowed CPUs: $(grep Cpus_allowed_list /proc/self/status 2>/dev/null | cut -f2)"
  echo "cgroup cpu.max: $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo n/a)"
  # Which CPUs share a core: servers on 0..7 and wrk on 8..15 share cores where 0 and 8
  # are SMT siblings.
  printf 'SMT siblings:'
  for c in /sys/devices/system/cpu/cpu[0-9]*; do
    printf ' %s:%s' "${c##*cpu}" "$(cat "$c/topology/thread_siblings_list" 2>/dev/null)"
  done
  echo
  echo "ip_local_port_range: $(cat /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)"
  echo "somaxconn: $(cat /proc/sys/net/core/somaxconn 2>/dev/null)"
  echo
  echo "## /etc/os-release"
  cat /etc/os-release 2>/dev/null
  echo
  echo "## bundle ($bundle)"
  cat "$bundle/VERSIONS.txt" 2>/dev/null
  echo
  echo "## ldd with LD_LIBRARY_PATH=$lib"
} >"$out/sanity.txt" 2>&1
for f in "${elves[@]}"; do
  r=$(timeout 10 "${with_libs[@]}" ldd "$f" 2>&1)
  printf '\n### %s\n%s\n' "${f#"$bundle"/}" "$r" >>"$out/sanity.txt"
  grep -qE 'not found|version .* not found' <<<"$r" && not_found+=" ${f#"$bundle"/}"
done
{
  echo
  echo "## unresolved: ${not_found:-none}"
  echo
  echo "## the programs start"
  echo "wrk -v: $(timeout 5 "${with_libs[@]}" "$bin/wrk" -v 2>&1 | head -1)"
  echo "nginx -v: $(timeout 5 "${with_libs[@]}" "$bin/nginx" -v 2>&1)"
  echo "time: $(timeout 5 "$bin/time" -f 'peak %M KiB' true 2>&1)"
} >>"$out/sanity.txt" 2>&1
log "sanity: $ncpu CPUs, pinning with $pinner, unresolved libraries: ${not_found:-none}"
[ -n "$client_note" ] && log "$client_note"

# --- summary ---------------------------------------------------------------------------
# summary.md from scaling.csv and the scheduler table, written whole each time.
sched_table="$work/sched-table.md"
render() {
  timeout 20 python3 - "$csv" "$sched_table" "$ncpu" "$client_cpus" "$wrk_threads" \
    "$scale_conns" "$duration" >"$summary.tmp" 2>>"$runlog" <<'EOF'
import csv, os, platform, sys
path, sched, ncpu, ccpus, wthreads, conns, dur = sys.argv[1:8]
model = ""
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
except OSError:
    pass
print("# goro device run")
print()
print(f"{ncpu} CPUs ({model}), Linux {platform.release()}.")
print()
print(f"## HTTP scaling: GET /plaintext, {conns} connections, {dur} s measured; "
      f"wrk on CPUs {ccpus} ({wthreads} threads), the server on CPUs 0..P-1")
print()
rows = []
if os.path.exists(path):
    with open(path) as f:
        # A skipped or failed step leaves the later columns out: they read as "".
        rows = [{k: v or "" for k, v in r.items() if k} for r in csv.DictReader(f)]
peers, procs = [], []
for r in rows:
    if r["peer"] not in peers:
        peers.append(r["peer"])
    if r["procs"].isdigit() and int(r["procs"]) not in procs:
        procs.append(int(r["procs"]))
rps = {(r["peer"], r["procs"]): r for r in rows}
def num(r):
    try:
        return float(r["requests_per_s"]) if r and r["status"] == "ok" else None
    except ValueError:
        return None
if rows:
    print("Requests/s (goro's over each peer's in parentheses):")
    print()
    print("| P | " + " | ".join(peers) + " |")
    print("|---:|" + "---:|" * len(peers))
    for p in procs:
        g = num(rps.get(("goro", str(p))))
        cells = []
        for peer in peers:
            r = rps.get((peer, str(p)))
            v = num(r)
            if v is None:
                cells.append(r["status"] if r else "")
            elif peer != "goro" and g and v:
                cells.append(f"{v:,.0f} ({g / v:.2f})")
            else:
                cells.append(f"{v:,.0f}")
        print(f"| {p} | " + " | ".join(cells) + " |")
    print()
    base = min(procs) if procs else None
    print(f"Speed-up over P={base} (ideal: P/{base}):")
    print()
    print("| P | " + " | ".join(peers) + " |")
    print("|---:|" + "---:|" * len(peers))
    for p in procs:
        cells = []
        for peer in peers:
            v, b = num(rps.get((peer, str(p)))), num(rps.get((peer, str(base))))
            cells.append(f"{v / b:.2f}" if v and b else "")
        print(f"| {p} | " + " | ".join(cells) + " |")
    print()
    print("Every step:")
    print()
    cols = ["peer", "procs", "status", "requests_per_s", "p50_ms", "p99_ms", "max_ms",
            "socket_errors", "non2xx", "alive_after", "cpu_pct", "others_pct", "rss_kib", "note"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(r.get(c, "") for c in cols) + " |")
else:
    print("(no scaling step ran)")
print()
print("## Scheduler micro-benchmarks (loadtest/sched), goro vs Go")
print()
if os.path.exists(sched) and os.path.getsize(sched):
    print(open(sched).read())
else:
    print("(not run yet)")
EOF
  local rendered=$?
  # A failed rendering leaves the last good summary in place.
  [ "$rendered" = 0 ] && [ -s "$summary.tmp" ] && mv "$summary.tmp" "$summary"
  rm -f "$summary.tmp"
}

# --- HTTP scaling ------------------------------------------------------------------------
echo "peer,procs,status,note,requests_per_s,p50_ms,p99_ms,max_ms,socket_errors,non2xx,error_detail,alive_after,cpu_pct,others_pct,rss_kib,server_cpus,client_cpus,wrk_threads,conns,warmup_s,duration_s,step_s" >"$csv"
csv_row() {
  local f line="" sep=""
  for f in "$@"; do
    [[ "$f" == *[,\"]* ]] && f="\"${f//\"/\"\"}\""
    line+="$sep$f"
    sep=,
  done
  echo "$line" >>"$csv"
}

# A plain HTTP/1.1 request over bash's /dev/tcp: 0 when /healthz answers 200.
# shellcheck disable=SC2016  # the inner bash expands $0, the port
healthz() {  # port
  timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
    printf "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" >&3
    IFS= read -r -t 1 line <&3 && [[ "$line" == "HTTP/1."[01]" 200"* ]]' "$1" 2>/dev/null
}
# shellcheck disable=SC2016
port_in_use() { timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0"' "$1" 2>/dev/null; }
next_port=20000
free_port() {
  for _ in $(seq 50); do
    next_port=$((next_port + 1))
    port_in_use "$next_port" || { echo "$next_port"; return; }
  done
  echo "$next_port"
}

tree_sum() {  # pid awk-program-over-/proc/<pid>/stat-or-status file -> sum over the process tree
  local p sum=0 v
  for p in "$1" $(descendants "$1"); do
    v=$(awk "$2" "/proc/$p/$3" 2>/dev/null)
    sum=$((sum + ${v:-0}))
  done
  echo "$sum"
}
# shellcheck disable=SC2016  # awk programs
cpu_ticks() { tree_sum "$1" '{ sub(/.*\) /, ""); print $12 + $13 }' stat; }
# shellcheck disable=SC2016
rss_kib() { tree_sum "$1" '/^VmRSS:/ { print $2 }' status; }
ctx_switches() {  # pid -> context switches of every thread of the process tree
  local p sum=0 v
  for p in "$1" $(descendants "$1"); do
    v=$(cat /proc/"$p"/task/*/status 2>/dev/null |
      awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ { s += $2 } END { print s + 0 }')
    sum=$((sum + ${v:-0}))
  done
  echo "$sum"
}
# goro's runtime counters from its /metrics: "runs steals handoffs threads".
# shellcheck disable=SC2016  # the inner bash expands $0, the port
goro_counters() {  # port
  timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
    printf "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" >&3
    cat <&3' "$1" 2>/dev/null | awk '
    $1 == "goro_goroutine_runs_total" { r = $2 } $1 == "goro_steals_total" { s = $2 }
    $1 == "goro_handoffs_total" { h = $2 } $1 == "goro_threads" { t = $2 }
    END { printf "%d %d %d %d\n", r, s, h, t }'
}
busy_ticks() {  # cpu-list -> busy ticks (user nice system irq softirq steal) of those CPUs
  awk -v want=" $(expand_cpus "$1" | tr '\n' ' ')" '$1 ~ /^cpu[0-9]+$/ && index(want, " " substr($1, 4) " ") {
    s += $2 + $3 + $4 + $7 + $8 + $9 } END { print s + 0 }' /proc/stat
}

nginx_conf() {  # dir port procs
  local master=off user="" module=""
  [ "$3" -gt 1 ] && master=on && [ "$(id -u)" = 0 ] && user="user root;"
  [ -n "$nginx_module" ] && module="load_module $nginx_module;"
  mkdir -p "$1/tmp"
  sed -e "s|@DIR@|$1|g" -e "s|@PORT@|$2|g" -e "s|@PROCS@|$3|g" -e "s|@MASTER@|$master|g" \
    -e "s|@USER@|$user|" -e "s|@LOAD_MODULE@|$module|" "$bundle/nginx/nginx.conf.in" >"$1/nginx.conf"
}
# The echo module as the kit loads it, where this nginx accepts it (the scaling load
# needs none of its routes).
nginx_module=""
if wants scaling && [[ " $scale_peers " == *" nginx "* ]]; then
  nginx_module="$bundle/nginx/ngx_http_echo_module.so"
  [ -f "$nginx_module" ] || nginx_module=""
  nginx_conf "$work/nginx-test" 1 1
  if ! timeout 10 "${with_libs[@]}" "$bin/nginx" -t -p "$work/nginx-test" -c "$work/nginx-test/nginx.conf" \
    >"$work/logs/nginx-t.log" 2>&1; then
    log "nginx -t failed with the echo module: without it ($(tail -1 "$work/logs/nginx-t.log"))"
    nginx_module=""
  fi
fi

# Starts `peer` with `p` threads pinned to `cpus` on a free port; sets server_pid, port.
start_server() {  # peer p cpus logfile
  local peer=$1 p=$2 cpus=$3 logfile=$4 dir until=$((SECONDS + 8))
  server_pid=""
  port=$(free_port)
  pin_to "$cpus"
  case "$peer" in
    goro)
      "${PIN[@]}" "${with_libs[@]}" GORO_MAXPROCS="$p" "$bin/goro-demo" --addr "127.0.0.1:$port" \
        >"$logfile" 2>&1 &
      ;;
    go)
      "${PIN[@]}" "${with_libs[@]}" GOMAXPROCS="$p" "$bin/hello" -addr "127.0.0.1:$port" >"$logfile" 2>&1 &
      ;;
    nginx)
      dir="$work/logs/nginx-p$p"
      nginx_conf "$dir" "$port" "$p"
      "${PIN[@]}" "${with_libs[@]}" "$bin/nginx" -p "$dir" -c "$dir/nginx.conf" >"$logfile" 2>&1 &
      ;;
    asio)
      "${PIN[@]}" "${with_libs[@]}" "$bin/loadtest_peer_asio" --addr "127.0.0.1:$port" --threads "$p" \
        >"$logfile" 2>&1 &
      ;;
    epoll)
      "${PIN[@]}" "${with_libs[@]}" "$bin/loadtest_peer_epoll" "127.0.0.1:$port" "$p" >"$logfile" 2>&1 &
      ;;
    *)
      echo "unknown peer $peer" >"$logfile"
      return 1
      ;;
  esac
  server_pid=$!
  started+=("$server_pid")
  # Up once /healthz answers 200; at most 8 s.
  while [ "$SECONDS" -lt "$until" ]; do
    kill -0 "$server_pid" 2>/dev/null || return 1
    healthz "$port" && return 0
    sleep 0.05
  done
  return 1
}
stop_server() {
  local keep=() p
  kill_tree "$server_pid"
  for p in "${started[@]}"; do [ "$p" != "$server_pid" ] && keep+=("$p"); done
  started=("${keep[@]}")
}

# wrk with report.lua, whose done() prints one RESULT line; sets w_* from it.
run_wrk() {  # seconds url logfile
  local result kv
  pin_to "$(real_cpus "$client_cpus")"
  echo "== wrk -t$wrk_threads -c$scale_conns -d$1s $2 (CPUs $client_cpus)" >>"$3"
  timeout -k 2 $(($1 + 20)) "${PIN[@]}" "${with_libs[@]}" "$bin/wrk" -t"$wrk_threads" -c"$scale_conns" \
    -d"$1s" --timeout 5s -s "$bundle/lua/report.lua" "$2" >"$3.run" 2>&1
  w_rc=$?
  cat "$3.run" >>"$3"
  result=$(grep '^RESULT ' "$3.run" | tail -1)
  rm -f "$3.run"
  w_requests=0 w_duration_us=0 w_p50_us=0 w_p99_us=0 w_max_us=0
  w_connect=0 w_read=0 w_write=0 w_timeout=0 w_status=0
  for kv in ${result#RESULT }; do
    [[ "$kv" == *=* ]] && printf -v "w_${kv%%=*}" '%s' "${kv#*=}"
  done
  w_ok=0
  [ -n "$result" ] && [ "$w_duration_us" -gt 0 ] && w_ok=1
}
ms() { awk -v u="$1" 'BEGIN { printf "%.3f", u / 1000 }'; }

scaling() {
  local p peer step=0 scpus last label logfile wrk_log t_step
  for p in $scale_procs; do
    last=$((server_cpu0 + p - 1))
    scpus="$server_cpu0-$last"
    # The server's CPUs must exist and stay clear of wrk's.
    local clash=""
    for c in $(expand_cpus "$scpus"); do
      [ "$c" -ge "$ncpu" ] && clash="needs CPU $c; this machine has $ncpu"
      expand_cpus "$client_cpus" | grep -qx "$c" && clash="CPU $c is one of wrk's ($client_cpus)"
    done
    for peer in $scale_peers; do
      step=$((step + 1))
      label=$(printf '[%2d/%d] %-5s P=%-2s' "$step" "$n_scale" "$peer" "$p")
      if [ -n "$clash" ]; then
        log "$label skipped: $clash"
        csv_row "$peer" "$p" skipped "$clash"
        continue
      fi
      if [ $((SECONDS + warmup + duration + 10)) -gt "$deadline" ]; then
        log "$label skipped: past the time budget"
        csv_row "$peer" "$p" skipped "past the time budget"
        continue
      fi
      t_step=$SECONDS
      logfile="$work/logs/scaling-$peer-p$p.log"
      wrk_log="$work/logs/scaling-$peer-p$p.wrk.txt"
      if ! start_server "$peer" "$p" "$(real_cpus "$scpus")" "$logfile"; then
        log "$label did not start: $(tail -2 "$logfile" 2>/dev/null | tr '\n' ' ')"
        csv_row "$peer" "$p" failed "did not start: $(tail -1 "$logfile" 2>/dev/null)"
        stop_server
        render
        continue
      fi
      run_wrk "$warmup" "http://127.0.0.1:$port/plaintext" "$wrk_log"
      local cpu0 busy0 t0 cpu1 busy1 t1 rss alive cpu others rps status note=""
      local sw0 sw1 gc0="" gc1=""
      [ "$peer" = goro ] && gc0=$(goro_counters "$port")
      sw0=$(ctx_switches "$server_pid")
      cpu0=$(cpu_ticks "$server_pid") busy0=$(busy_ticks "$(real_cpus "$scpus")") t0=$EPOCHREALTIME
      run_wrk "$duration" "http://127.0.0.1:$port/plaintext" "$wrk_log"
      t1=$EPOCHREALTIME busy1=$(busy_ticks "$(real_cpus "$scpus")") cpu1=$(cpu_ticks "$server_pid")
      sw1=$(ctx_switches "$server_pid")
      [ "$peer" = goro ] && gc1=$(goro_counters "$port")
      rss=$(rss_kib "$server_pid")
      if ! kill -0 "$server_pid" 2>/dev/null; then
        alive="died"
      elif healthz "$port"; then
        alive="yes"
      else
        alive="no answer"
      fi
      stop_server
      local hz
      hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
      cpu=$(awk -v c=$((cpu1 - cpu0)) -v hz="$hz" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", 100 * c / hz / (b - a) }')
      others=$(awk -v c=$((busy1 - busy0 - cpu1 + cpu0)) -v hz="$hz" -v a="$t0" -v b="$t1" \
        'BEGIN { v = 100 * c / hz / (b - a); printf "%.0f", v < 0 ? 0 : v }')
      status=ok
      if [ "$w_ok" = 1 ]; then
        rps=$(awk -v r="$w_requests" -v d="$w_duration_us" 'BEGIN { printf "%.0f", r / (d / 1e6) }')
      else
        rps=0 status=failed note="wrk printed no result (exit $w_rc; see logs/$(basename "$wrk_log"))"
      fi
      [ "$alive" != yes ] && status=failed note="${note:+$note; }server after the load: $alive"
      # Per request of the measured seconds: the server's context switches (every thread),
      # and for goro its goroutine runs, steals and P hand-offs (the /metrics counters).
      if [ "$w_ok" = 1 ] && [ "${w_requests:-0}" -gt 0 ]; then
        note="${note:+$note; }ctx switches/req $(awk -v d=$((sw1 - sw0)) -v n="$w_requests" 'BEGIN { printf "%.3f", d / n }')"
        if [ -n "$gc0" ] && [ -n "$gc1" ]; then
          note="$note; $(awk -v a="$gc0" -v b="$gc1" -v n="$w_requests" 'BEGIN {
            split(a, x, " "); split(b, y, " ")
            printf "goro runs/req %.3f; steals/req %.4f; handoffs/req %.5f; threads %d",
              (y[1] - x[1]) / n, (y[2] - x[2]) / n, (y[3] - x[3]) / n, y[4] }')"
        fi
      fi
      local sock=$((w_connect + w_read + w_write + w_timeout))
      csv_row "$peer" "$p" "$status" "$note" "$rps" "$(ms "$w_p50_us")" "$(ms "$w_p99_us")" \
        "$(ms "$w_max_us")" "$sock" "$w_status" \
        "connect=$w_connect read=$w_read write=$w_write timeout=$w_timeout" "$alive" "$cpu" \
        "$others" "$rss" "$(real_cpus "$scpus")" "$(real_cpus "$client_cpus")" "$wrk_threads" "$scale_conns" "$warmup" \
        "$duration" $((SECONDS - t_step))
      log "$label $(printf '%8s req/s  p50 %s  p99 %s ms  socket errors %s  non-2xx %s  alive %s  CPU %s%%  others %s%%  %s' \
        "$rps" "$(ms "$w_p50_us")" "$(ms "$w_p99_us")" "$sock" "$w_status" "$alive" "$cpu" "$others" "$note")"
      render
      sleep 0.5
    done
  done
}

if wants scaling; then
  log "== HTTP scaling: peers [$scale_peers], P [$scale_procs], $scale_conns connections," \
    "${warmup}s + ${duration}s, server CPUs from $server_cpu0, wrk on $client_cpus ($wrk_threads threads)"
  ulimit -n "$(ulimit -Hn)" 2>/dev/null
  scaling
  timeout 30 tar -czf "$out/logs.tar.gz" -C "$work" logs 2>/dev/null
fi

# --- scheduler micro-benchmarks ----------------------------------------------------------
if wants sched; then
  left=$((deadline - SECONDS - 20))
  if [ "$left" -lt 30 ]; then
    log "== scheduler benchmarks skipped: ${left}s left of the budget"
  else
    # The goro programs need libstdc++ and libgcc_s, which the system normally has; the
    # bundle's are used only where it has not (sched/run.sh's grep and python3 then see
    # them too).
    sched_env=(env BIN_DIR="$bin/sched" RAW_FILE="$raw" PROCS="$sched_procs" REPS="$sched_reps"
      CASES="$sched_cases" RUN_TIMEOUT="$sched_run_timeout")
    if env -i ldd "$bin/sched/bench_sched_spawn" 2>&1 | grep -q 'not found'; then
      sched_env+=("LD_LIBRARY_PATH=$lib")
      log "the system lacks a library of the goro benchmarks: they run with the bundle's"
    fi
    # GNU time for the peak RSS: the bundle's, else the system's.
    if "$bin/time" -f %M true >/dev/null 2>&1; then
      sched_env+=(TIME_BIN="$bin/time")
    elif [ -x /usr/bin/time ]; then
      sched_env+=(TIME_BIN=/usr/bin/time)
    fi
    log "== scheduler benchmarks: cases [$sched_cases], P [$sched_procs], $sched_reps reps, at most ${left}s"
    timeout -k 5 "$left" "${sched_env[@]}" bash "$root/loadtest/sched/run.sh" \
      >"$work/logs/sched-stdout.txt" 2>>"$runlog"
    rc=$?
    [ "$rc" = 124 ] && log "the scheduler benchmarks were cut at the budget: the table has what ran"
    [ "$rc" != 0 ] && [ "$rc" != 124 ] && log "loadtest/sched/run.sh exited $rc"
    if [ -s "$raw" ]; then
      timeout 30 python3 "$root/loadtest/sched/table.py" "$raw" >"$sched_table" 2>>"$runlog"
    fi
  fi
fi
render
log "summary: $summary"
