#!/bin/sh
# Runs websocket_node_test.js with Node's `ws` package, installed from the npm registry
# into DIR (kept between runs). Exits 77 (skipped), saying why, when node or npm is
# missing or the install fails (no network).
#
#   websocket_node_test.sh PEER_BINARY DIR
peer=$1
dir=$2
here=$(dirname "$0")
if ! command -v node >/dev/null 2>&1; then
  echo "skipped: node is not installed (scripts/deps.sh test installs nodejs)"
  exit 77
fi
if [ ! -f "$dir/node_modules/ws/package.json" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "skipped: npm is not installed, so the ws package cannot be fetched"
    exit 77
  fi
  mkdir -p "$dir"
  if ! timeout 120 npm install --prefix "$dir" --no-audit --no-fund --silent ws@8 >"$dir/npm.log" 2>&1; then
    echo "skipped: 'npm install ws@8' failed (no access to the npm registry?):"
    tail -n 5 "$dir/npm.log"
    exit 77
  fi
fi
NODE_PATH="$dir/node_modules" exec node "$here/websocket_node_test.js" "$peer"
