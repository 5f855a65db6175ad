#!/usr/bin/env bash
# Instructions per request, counted by callgrind: repeatable on a noisy machine, where
# requests per second are not. One server runs under valgrind with 1 P; after start-up
# the counters are zeroed, wrk sends pipelined GET /plaintext (16 per write, 8
# connections) for a few seconds, and the counts of that window are divided by the
# requests wrk saw answered.
#
#   loadtest/http/profile.sh            # goro-demo
#   loadtest/http/profile.sh epoll      # the bare epoll loop, the ceiling
#   loadtest/http/profile.sh asio       # the Asio+llhttp peer, one thread
#   SECONDS_OF_LOAD=4 TOP=25 loadtest/http/profile.sh goro
#   PIPELINE=0 loadtest/http/profile.sh goro   # one request per round trip, 64 connections
#   GORO_DEMO=/tmp/old/goro-demo loadtest/http/profile.sh   # another goro-demo, to compare
#   URL_PATH=/text ACCEPT_ENCODING=gzip loadtest/http/profile.sh   # compress()'s cost:
#                                     # against the same without ACCEPT_ENCODING
#   ROOT=build-bench/loadtest/static URL_PATH=/static/4k.bin PIPELINE=0 \
#     loadtest/http/profile.sh        # the file server (goro-demo --root), static4k's path
#
# Prints the total and the functions with the most instructions of their own; the
# callgrind file is kept (its path is printed) for callgrind_annotate --inclusive=yes.
# Knobs: BUILD_DIR (default build/dev: RelWithDebInfo, so lines and inlined frames
# have names), PORT=18190, SECONDS_OF_LOAD=4, TOP=25, PIPELINE=1, URL_PATH=/plaintext,
# ACCEPT_ENCODING (sent as the Accept-Encoding of every request when set), ROOT (goro-demo's
# --root, the folder /static/ serves), DEMO_ARGS (more goro-demo flags, split on spaces).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
peer="${1:-goro}"
build="${BUILD_DIR:-$root/build/dev}"
port="${PORT:-18190}"
load_s="${SECONDS_OF_LOAD:-4}"
top="${TOP:-25}"
pipeline="${PIPELINE:-1}"
url_path="${URL_PATH:-/plaintext}"
headers=()
[ -n "${ACCEPT_ENCODING:-}" ] && headers=(-H "Accept-Encoding: $ACCEPT_ENCODING")

for tool in valgrind callgrind_control callgrind_annotate wrk curl; do
  command -v "$tool" >/dev/null || { echo "profile.sh: needs $tool" >&2; exit 2; }
done
# shellcheck source=loadtest/http/one_server.sh
source "$here/one_server.sh"
one_server_command profile.sh "$peer" "$build" "$port"

out="$(mktemp -d)"
# No preemption signal: callgrind asserts on signals that land while it switches threads.
GORO_MAXPROCS=1 GORO_ASYNC_PREEMPT=0 valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" \
  "${server[@]}" >"$out/server.log" 2>&1 &
pid=$!
trap 'kill -9 "$pid" 2>/dev/null || true' EXIT
wait_for_server profile.sh "$port" "$out/server.log" 100 0.2  # valgrind starts slowly

callgrind_control -z "$pid" >/dev/null 2>&1
if [ "$pipeline" = 1 ]; then
  load=(-c8 -s "$here/pipeline16.lua"); shape="pipelined x16, 8 connections"
else
  load=(-c64); shape="keep-alive, one request per round trip, 64 connections"
fi
requests=$(wrk -t1 "${load[@]}" "${headers[@]}" -d"${load_s}s" "http://127.0.0.1:$port$url_path" |
  awk '/requests in/ { print $1 }')
callgrind_control -d "$pid" >/dev/null 2>&1
kill -INT "$pid" 2>/dev/null || true
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -9 "$pid" 2>/dev/null || true  # the bare loop has no clean stop
wait "$pid" 2>/dev/null || true
trap - EXIT

# The dump after the zeroing is the one with a part number.
dump=$(ls -t "$out"/callgrind.out.* 2>/dev/null | head -1)
[ -n "$dump" ] || { echo "profile.sh: callgrind wrote no dump; see $out/server.log" >&2; exit 1; }
total=$(callgrind_annotate "$dump" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
echo "$peer: $requests requests, $total instructions: $((total / requests)) per request"
echo "($shape, 1 P, ${load_s} s under callgrind; file: $dump)"
callgrind_annotate "$dump" | awk '/file:function/ { on = 1; getline; next } on && /^-+$/ { exit } on && NF' |
  head -n "$top" | sed -E 's/ \[[^]]*\]$//' | cut -c1-160
