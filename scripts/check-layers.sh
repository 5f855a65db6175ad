#!/usr/bin/env bash
# Checks that goro's layers point down only, and only through the doors each one offers
# (docs/design.md, "Layers and layout"):
#
#   base  <-  scheduler  <-  net, hooks  <-  pg, redis  <-  http  <-  framework, grpc
#
# (pg and redis are clients over net; http may name them, as its pool exporter's
# template does, but they never name http.)
#
#  1. A layer includes no header of a layer above it.
#  2. No code includes another layer's private sources (<layer>/src/...), and no layer
#     includes another's detail/ headers, except the sources of net and hooks, which
#     reach the runtime through its netpoll and wait contract: goro/scheduler/detail/
#     {netpoll,waitq,runtime}.hpp (as Go's internal/poll reaches it through
#     runtime_poll* and semaphores), and nothing else of it.
#  3. No public header of net, http or framework names a detail of another layer
#     (goro::detail::, which is the runtime's).
#
# Prints each breach as file:line: what; exits 1 when there is one.
#
#   scripts/check-layers.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

failed=0
breach() {
  echo "$1: $2"
  failed=1
}

# rank <layer>: its height; a layer may include layers of a lower or equal rank only.
rank() {
  case "$1" in
    base) echo 0 ;;
    scheduler) echo 1 ;;
    net | hooks) echo 2 ;;
    pg | redis) echo 3 ;;
    http | httptest | json) echo 4 ;;
    framework | grpc) echo 5 ;;
    *) echo 99 ;;
  esac
}

# The header folders: goro/<layer>/... is layer's; goro/goro.hpp and goro/app.hpp are
# the framework's.
layer_of_header() {
  case "$1" in
    goro/goro.hpp | goro/app.hpp) echo framework ;;
    goro/*/*) local rest=${1#goro/}; echo "${rest%%/*}" ;;
    *) echo "" ;;
  esac
}

# The layer whose code a file is.
layer_of_file() {
  case "$1" in
    base/*) echo base ;;
    scheduler/*) echo scheduler ;;
    net/*) echo net ;;
    hooks/*) echo hooks ;;
    pg/*) echo pg ;;
    redis/*) echo redis ;;
    http/*) echo http ;;
    framework/*) echo framework ;;
    grpc/*) echo grpc ;;
    *) echo "" ;;
  esac
}

# The contract net and hooks may use of the runtime's internals.
runtime_contract() {
  case "$1" in
    goro/scheduler/detail/netpoll.hpp | goro/scheduler/detail/waitq.hpp | \
      goro/scheduler/detail/runtime.hpp) return 0 ;;
    *) return 1 ;;
  esac
}

files=$(git ls-files --cached --others --exclude-standard -- base scheduler net hooks pg redis http framework grpc |
  grep -E '\.(c|cc|cpp|h|hpp)$' || true)

for f in $files; do
  [ -f "$f" ] || continue
  layer=$(layer_of_file "$f")
  [ -n "$layer" ] || continue
  my_rank=$(rank "$layer")
  # 1 and 2: what it includes.
  while IFS=: read -r line inc; do
    [ -n "$inc" ] || continue
    case "$inc" in
      \<goro/*\>)
        header=${inc#<}
        header=${header%>}
        target=$(layer_of_header "$header")
        [ -n "$target" ] || continue
        target_rank=$(rank "$target")
        if [ "$target_rank" -gt "$my_rank" ]; then
          breach "$f:$line" "$layer includes $header, of $target, a layer above it"
        fi
        if [[ "$header" == goro/*/detail/* ]] && [ "$target" != "$layer" ]; then
          if [[ "$f" != */include/* ]] && { [ "$layer" = net ] || [ "$layer" = hooks ]; } &&
            runtime_contract "$header"; then
            :
          else
            breach "$f:$line" "$layer includes $header, a detail of $target"
          fi
        fi
        ;;
      \"*/src/*\" | \"../*\")
        breach "$f:$line" "includes $inc, another folder's private sources"
        ;;
    esac
  done < <(grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]+[<"]' "$f" |
    sed -E 's/^([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]+([<"][^>"]+[>"]).*/\1:\2/')
  # 3: what a public header names.
  case "$f" in
    net/include/* | pg/include/* | redis/include/* | http/include/* | framework/include/* | grpc/include/*)
      if grep -n -E '(^|[^a-z_:])goro::detail::' "$f" | grep -v -E '^[0-9]+:[[:space:]]*//' >/dev/null; then
        while IFS= read -r hit; do
          breach "$f:${hit%%:*}" "public header names the runtime's goro::detail"
        done < <(grep -n -E '(^|[^a-z_:])goro::detail::' "$f" | grep -v -E '^[0-9]+:[[:space:]]*//')
      fi
      ;;
  esac
done

if [ "$failed" = 0 ]; then
  echo "check-layers: every layer points down, through its doors ($(echo "$files" | wc -w) files)"
fi
exit "$failed"
