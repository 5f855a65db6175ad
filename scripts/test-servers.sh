#!/usr/bin/env bash
# Throwaway PostgreSQL, Redis and MariaDB servers for the tests and benchmarks that drive
# the real client libraries and goro's own clients (tests/clibs/, tests/hooks/, tests/pg/,
# tests/redis/, examples/pg_api/, examples/notes/, loadtest/clibs/, loadtest/data/).
# Each lives in a folder of its own and listens on a Unix socket in that folder.
#
#   test-servers.sh pg start DIR [MAX_CONNECTIONS] [tls]
#                                                   prints a libpq connection string
#   test-servers.sh pg restart DIR [SECONDS_DOWN]   stops it (fast: sessions end), waits,
#                                                   starts it again on the same data
#   test-servers.sh pg stop DIR                     stops it, removes DIR
#   test-servers.sh redis start DIR                 prints the socket's path
#   test-servers.sh redis stop DIR                  stops it, removes DIR
#   test-servers.sh sentinel start DIR              a Redis master, its replica and a
#                                                   sentinel watching them, on free ports
#                                                   of 127.0.0.1; prints master=, replica=
#                                                   and sentinel= (host:port) and name=
#   test-servers.sh sentinel stop DIR               stops all three, removes DIR
#   test-servers.sh mariadb start DIR [MAX_CONNECTIONS]
#                                                   prints host=, port=, user=, password=
#                                                   and socket= on one line
#   test-servers.sh mariadb stop DIR                stops it, removes DIR
#
# PostgreSQL: Debian's newest /usr/lib/postgresql/*/bin, initdb with trust
# authentication for the user "goro", fsync off, MAX_CONNECTIONS (default 100), the
# settings in its postgresql.conf (so that a restart keeps them). It
# refuses to run as root, so as root it runs as the user postgres (the Debian package
# makes it), which gets DIR. With "tls" it also listens on a free port of 127.0.0.1 with
# ssl=on (a self-signed certificate made with openssl in DIR), and the connection string
# is for that port with sslmode=require. Redis: redis-server without persistence.
# Sentinel: three redis-servers without persistence (the sentinel is redis-server
# --sentinel, as Debian's redis-sentinel is), the sentinel's quorum 1 and its timeouts
# short (down after 1 s, a failover within 5 s), so that SENTINEL FAILOVER goro works
# in a test; it returns once the sentinel has found the replica.
# MariaDB: mariadbd on a data folder that mariadb-install-db makes in DIR, listening on
# a free port of 127.0.0.1 and on a socket in DIR, with MAX_CONNECTIONS (default 100).
# The grant tables are on (not --skip-grant-tables), so a client goes through the
# server's authentication as a real one does: the user "goro" with the password "goro"
# (mysql_native_password), made with the mariadb client once the server is up. As root
# it runs as root (--user=root): the folder mkdtemp makes is private, and the package's
# user mysql could not reach it. Kept small and quick to start (under a second): a 16 MB
# buffer pool, no binary log, no performance schema, no doublewrite, no flush at commit.
# Its listen backlog is above MAX_CONNECTIONS (the default, 50 + MAX_CONNECTIONS / 5, lets
# a burst of connects overflow it and wait on the kernel's SYN retransmits), and a burst
# of failed handshakes never blocks 127.0.0.1 (max_connect_errors).
#
# Exits 77 (CTest's and the tests' "skip") when the server is not installed, with the
# reason on stderr; any other failure exits 1 with the server's log on stderr.
set -euo pipefail

usage() {
  echo "usage: $0 pg|redis|sentinel|mariadb start|restart|stop DIR [MAX_CONNECTIONS]" >&2
  exit 2
}
[ "$#" -ge 3 ] || usage
server=$1 action=$2 dir=$3

pg_bin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] || return 1
  printf '%s\n' "$d"
}

# Runs a command as the user that owns the cluster.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# A TCP port of 127.0.0.1 that nothing listens on now.
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

pg_start() {
  local bin max=${1:-100} tls=${2:-} listen="listen_addresses = ''" port=""
  if ! bin=$(pg_bin); then
    echo "test-servers: PostgreSQL is not installed (apt-get install postgresql)" >&2
    exit 77
  fi
  if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "test-servers: running as root and there is no user postgres to run PostgreSQL" >&2
    exit 77
  fi
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres "$dir"
    if ! runuser -u postgres -- test -w "$dir"; then
      echo "test-servers: the user postgres cannot reach $dir (a folder above it is private)" >&2
      exit 1
    fi
  fi
  if ! as_owner "$bin/initdb" -D "$dir/data" -A trust -U goro -E UTF8 --no-sync \
    >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2
    exit 1
  fi
  if [ "$tls" = tls ]; then
    if ! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -subj /CN=127.0.0.1 -keyout "$dir/data/server.key" -out "$dir/data/server.crt" \
      >"$dir/openssl.log" 2>&1; then
      cat "$dir/openssl.log" >&2
      exit 1
    fi
    chmod 600 "$dir/data/server.key"
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir/data/server.key" "$dir/data/server.crt"
    port=$(free_port)
    listen="listen_addresses = '127.0.0.1'
port = $port
ssl = on"
  fi
  cat >>"$dir/data/postgresql.conf" <<CONF
$listen
unix_socket_directories = '$dir'
max_connections = $max
fsync = off
full_page_writes = off
CONF
  pg_ctl_start "$bin"
  if [ -n "$port" ]; then
    printf 'host=127.0.0.1 port=%s user=goro dbname=postgres sslmode=require\n' "$port"
  else
    printf 'host=%s user=goro dbname=postgres\n' "$dir"
  fi
}

pg_ctl_start() {
  if ! as_owner "$1/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 start >/dev/null; then
    cat "$dir/server.log" >&2 || true
    exit 1
  fi
}

pg_restart() {
  local bin
  bin=$(pg_bin)
  as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null
  sleep "${1:-0}"
  pg_ctl_start "$bin"
}

pg_stop() {
  local bin
  if bin=$(pg_bin) && [ -d "$dir/data" ]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

redis_start() {
  if ! command -v redis-server >/dev/null 2>&1; then
    echo "test-servers: redis-server is not installed (apt-get install redis-server)" >&2
    exit 77
  fi
  mkdir -p "$dir"
  redis-server --port 0 --unixsocket "$dir/redis.sock" --unixsocketperm 700 \
    --save '' --appendonly no --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" \
    --logfile "$dir/redis.log"
  local i
  for i in $(seq 1 200); do
    [ -S "$dir/redis.sock" ] && break
    sleep 0.05
  done
  if [ ! -S "$dir/redis.sock" ]; then
    cat "$dir/redis.log" >&2 || true
    exit 1
  fi
  printf '%s\n' "$dir/redis.sock"
}

redis_stop() {
  local pid
  if [ -f "$dir/redis.pid" ]; then
    pid=$(cat "$dir/redis.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
  fi
  rm -rf "$dir"
}

# redis-server NAME PORT [ARGS...]: one more in DIR, daemonized, its files named NAME.
redis_on_port() {
  local name=$1 port=$2
  shift 2
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    --daemonize yes --pidfile "$dir/$name.pid" --logfile "$dir/$name.log" --shutdown-timeout 0 "$@"
}

# Waits (10 s at most) until redis-cli -p PORT ARGS... prints a line matching PATTERN.
redis_wait_for() {
  local port=$1 pattern=$2
  shift 2
  for _ in $(seq 1 200); do
    redis-cli -p "$port" "$@" 2>/dev/null | grep -q "$pattern" && return 0
    sleep 0.05
  done
  return 1
}

sentinel_start() {
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    echo "test-servers: redis-server is not installed (apt-get install redis-server)" >&2
    exit 77
  fi
  mkdir -p "$dir"
  local master replica sentinel
  master=$(free_port) replica=$(free_port) sentinel=$(free_port)
  redis_on_port master "$master"
  redis_on_port replica "$replica" --replicaof 127.0.0.1 "$master"
  cat >"$dir/sentinel.conf" <<CONF
port $sentinel
bind 127.0.0.1
daemonize yes
pidfile $dir/sentinel.pid
logfile $dir/sentinel.log
dir $dir
sentinel monitor goro 127.0.0.1 $master 1
sentinel down-after-milliseconds goro 1000
sentinel failover-timeout goro 5000
CONF
  redis-server "$dir/sentinel.conf" --sentinel
  if ! redis_wait_for "$replica" 'master_link_status:up' INFO replication ||
    ! redis_wait_for "$sentinel" "^$replica\$" SENTINEL replicas goro; then
    cat "$dir"/*.log >&2 || true
    sentinel_stop
    exit 1
  fi
  printf 'master=127.0.0.1:%s replica=127.0.0.1:%s sentinel=127.0.0.1:%s name=goro\n' \
    "$master" "$replica" "$sentinel"
}

sentinel_stop() {
  local pids=() pid name
  for name in sentinel replica master; do
    [ -f "$dir/$name.pid" ] && pids+=("$(cat "$dir/$name.pid")")
  done
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
  done
  rm -rf "$dir"
}

# The server's settings, for mariadb-install-db's bootstrap and for the server itself.
mariadb_options() {
  local user=()
  [ "$(id -u)" -eq 0 ] && user=(--user=root)
  printf '%s\n' --no-defaults "${user[@]}" --datadir="$dir/data" \
    --innodb-buffer-pool-size=16M --innodb-log-file-size=8M --innodb-doublewrite=0 \
    --innodb-flush-log-at-trx-commit=0 --innodb-use-native-aio=0 --skip-log-bin \
    --performance-schema=OFF --key-buffer-size=1M --skip-name-resolve
}

mariadb_start() {
  local max=${1:-100} port
  if ! command -v mariadb-install-db >/dev/null 2>&1 || ! command -v mariadbd >/dev/null 2>&1; then
    echo "test-servers: MariaDB is not installed (apt-get install mariadb-server)" >&2
    exit 77
  fi
  mkdir -p "$dir"
  local -a options
  mapfile -t options < <(mariadb_options)
  # Each step bounded, so a stuck one fails the caller with its log instead of a hang.
  if ! timeout 60 mariadb-install-db "${options[@]}" --auth-root-authentication-method=normal \
    --skip-test-db >"$dir/install.log" 2>&1; then
    cat "$dir/install.log" >&2
    exit 1
  fi
  port=$(free_port)
  # Its own session, and no descriptor of ours: the caller reads our stdout to its end.
  setsid mariadbd "${options[@]}" --bind-address=127.0.0.1 --port="$port" \
    --socket="$dir/mariadb.sock" --pid-file="$dir/mariadb.pid" --max-connections="$max" \
    --back-log=$((max + 100)) --max-connect-errors=1000000 \
    --log-error="$dir/server.log" </dev/null >/dev/null 2>&1 &
  for _ in $(seq 1 300); do
    grep -q 'ready for connections' "$dir/server.log" 2>/dev/null && break
    kill -0 $! 2>/dev/null || break
    sleep 0.05
  done
  if ! grep -q 'ready for connections' "$dir/server.log" 2>/dev/null; then
    cat "$dir/server.log" >&2 || true
    mariadb_stop
    exit 1
  fi
  # Both hosts: a client on the socket is 'localhost', and an anonymous ''@'localhost'
  # would come before 'goro'@'%' there. (The bootstrap cannot run CREATE USER.)
  if ! timeout 30 mariadb --no-defaults -uroot --socket="$dir/mariadb.sock" >"$dir/users.log" 2>&1 <<'SQL'; then
CREATE USER 'goro'@'%' IDENTIFIED BY 'goro';
CREATE USER 'goro'@'localhost' IDENTIFIED BY 'goro';
GRANT ALL ON *.* TO 'goro'@'%';
GRANT ALL ON *.* TO 'goro'@'localhost';
SQL
    cat "$dir/users.log" >&2
    mariadb_stop
    exit 1
  fi
  printf 'host=127.0.0.1 port=%s user=goro password=goro socket=%s\n' "$port" "$dir/mariadb.sock"
}

mariadb_stop() {
  local pid
  if [ -f "$dir/mariadb.pid" ]; then
    pid=$(cat "$dir/mariadb.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 200); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  fi
  rm -rf "$dir"
}

case "$server:$action" in
  pg:start) pg_start "${4:-}" "${5:-}" ;;
  pg:restart) pg_restart "${4:-}" ;;
  pg:stop) pg_stop ;;
  redis:start) redis_start ;;
  redis:stop) redis_stop ;;
  sentinel:start) sentinel_start ;;
  sentinel:stop) sentinel_stop ;;
  mariadb:start) mariadb_start "${4:-}" ;;
  mariadb:stop) mariadb_stop ;;
  *) usage ;;
esac
