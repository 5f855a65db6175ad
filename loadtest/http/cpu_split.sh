#!/usr/bin/env bash
# User and kernel CPU time per request of one server under pipelined GET /plaintext
# (16 per write, wrk -t1 -c64), from the server's /proc/<pid>/stat over a window of the
# load: shows whether a gap between servers is in their own code or in the kernel.
#
#   loadtest/http/cpu_split.sh goro     # goro-demo, GORO_MAXPROCS=1
#   loadtest/http/cpu_split.sh asio     # the Asio+llhttp peer, one thread
#   loadtest/http/cpu_split.sh epoll    # the bare epoll loop, one thread
#
# Knobs: BUILD_DIR (default build/dev), PORT=18222, SECONDS_OF_LOAD=5 (the window is the
# middle 3 s), and profile.sh's GORO_DEMO, ROOT and DEMO_ARGS for goro-demo. One server at a time on a quiet machine; the rates wrk prints are not
# side by side, so compare them only loosely.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
peer="${1:-goro}"
build="${BUILD_DIR:-$root/build/dev}"
port="${PORT:-18222}"
load_s="${SECONDS_OF_LOAD:-5}"
# shellcheck source=loadtest/http/one_server.sh
source "$here/one_server.sh"
one_server_command cpu_split.sh "$peer" "$build" "$port"
command -v wrk >/dev/null || { echo "cpu_split.sh: needs wrk" >&2; exit 2; }

out="$(mktemp -d)"
GORO_MAXPROCS=1 "${server[@]}" >"$out/server.log" 2>&1 &
pid=$!
# The server is stopped and waited for, so that the port is free for the next run.
trap 'kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$out"' EXIT
wait_for_server cpu_split.sh "$port" "$out/server.log" 50 0.1
ticks() { awk '{print $14, $15}' "/proc/$pid/stat"; }
wrk -t1 -c64 -d"${load_s}s" -s "$here/pipeline16.lua" "http://127.0.0.1:$port/plaintext" >"$out/wrk.txt" 2>&1 &
wrk_pid=$!
sleep 1
read -r u1 s1 < <(ticks)
sleep 3
read -r u2 s2 < <(ticks)
wait "$wrk_pid"
kill -0 "$pid" || { echo "cpu_split.sh: the server died under load" >&2; exit 1; }
rps=$(awk '/Requests\/sec/ {print $2}' "$out/wrk.txt")
errors=$(grep -c "Socket errors" "$out/wrk.txt" || true)
hz=$(getconf CLK_TCK)
awk -v peer="$peer" -v rps="$rps" -v du=$((u2 - u1)) -v ds=$((s2 - s1)) -v hz="$hz" -v e="$errors" 'BEGIN {
  n = rps * 3
  printf "%s: %.0f req/s; per request %.0f ns user, %.0f ns kernel; %.0f%% of a core%s\n",
    peer, rps, du / hz / n * 1e9, ds / hz / n * 1e9, (du + ds) / hz / 3 * 100,
    (e > 0 ? " (wrk saw socket errors)" : "")
}'
