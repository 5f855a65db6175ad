#!/usr/bin/env bash
# goro-demo against Go net/http and nginx on /plaintext (and /json), keep-alive, 64
# connections, the servers interleaved ROUNDS times: the plaintext-64 and json
# scenarios of the load-test kit, loadtest/run.sh, under this script's old knobs.
#
#   loadtest/http/run.sh                               # ROUNDS=3, the median is reported
#   ROUNDS=3 PATHS="/plaintext /json" loadtest/http/run.sh
#
# Knobs: PATHS (/plaintext, /json), SERVERS="goro go nginx" (the kit's PEERS: add asio
# and epoll for the other peers), ROUNDS=3, DURATION=5s, and the kit's PROCS, WARMUP,
# BUILD_DIR, JOBS, TASKSET. Results, tables and charts go where the kit puts them.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
scenarios=()
for path in ${PATHS:-/plaintext}; do
  case "$path" in
    /plaintext) scenarios+=(plaintext-64) ;;
    /json) scenarios+=(json) ;;
    *)
      echo "run.sh: PATHS takes /plaintext and /json; loadtest/run.sh --list has the rest" >&2
      exit 2
      ;;
  esac
done
duration="${DURATION:-5s}"
PEERS="${SERVERS:-goro go nginx}" ROUNDS="${ROUNDS:-3}" DURATION="${duration%s}" \
  exec "$here/../run.sh" "${scenarios[@]}"
