# shellcheck shell=bash
# Sourced by profile.sh and cpu_split.sh, which measure one server at a time: the
# command line of each peer they know, and the wait for it to answer.

# one_server_command SCRIPT PEER BUILD PORT: sets the array `server` to PEER's command
# line on 127.0.0.1:PORT, one thread (goro-demo's Ps come from GORO_MAXPROCS, which the
# caller sets). goro-demo is GORO_DEMO if set, with --root ROOT and DEMO_ARGS (split on
# spaces) when given. Exits 2 for a peer it does not know or one not built.
one_server_command() {
  local script=$1 peer=$2 build=$3 port=$4
  case "$peer" in
    goro)
      server=("${GORO_DEMO:-$build/examples/demo/goro-demo}" --addr "127.0.0.1:$port")
      if [ -n "${ROOT:-}" ]; then server+=(--root "$ROOT"); fi
      # shellcheck disable=SC2206 # flags split on spaces, as documented
      if [ -n "${DEMO_ARGS:-}" ]; then server+=(${DEMO_ARGS}); fi
      ;;
    epoll) server=("$build/loadtest/http/loadtest_peer_epoll" "127.0.0.1:$port" 1) ;;
    asio) server=("$build/loadtest/http/loadtest_peer_asio" --addr "127.0.0.1:$port" --threads 1) ;;
    *) echo "$script: peer is goro, epoll or asio, not '$peer'" >&2; exit 2 ;;
  esac
  [ -x "${server[0]}" ] || { echo "$script: ${server[0]} is not built (BUILD_DIR=$build)" >&2; exit 2; }
}

# wait_for_server SCRIPT PORT LOG TRIES PAUSE: polls GET /plaintext up to TRIES times,
# PAUSE seconds apart; exits 1, showing LOG, if the server never answers.
wait_for_server() {
  local script=$1 port=$2 log=$3 tries=$4 pause=$5
  for _ in $(seq "$tries"); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/plaintext" && return 0
    sleep "$pause"
  done
  echo "$script: the server did not answer on $port; its log ($log):" >&2
  cat "$log" >&2
  exit 1
}
