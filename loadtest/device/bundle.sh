#!/usr/bin/env bash
# Builds the programs of the device run (loadtest/device/run.sh) and puts them, with
# every shared library they need beyond glibc, in one folder that can be copied to a
# bare machine with none of the kit's packages:
#
#   bash loadtest/device/bundle.sh          -> build/device-bundle/
#
#   bin/            goro-demo, loadtest_peer_asio, loadtest_peer_epoll, hello (Go's
#                   net/http peer), wrk, nginx, time (GNU time, for the peak RSS of the
#                   scheduler runs)
#   bin/sched/      bench_sched_<case> (goro) and go/<case> (the Go twins): the layout
#                   loadtest/sched/run.sh takes with BIN_DIR
#   lib/            the libraries `ldd` lists for those programs, less glibc's own
#   nginx/          ngx_http_echo_module.so and nginx.conf.in, the kit's configuration
#                   with @PLACEHOLDERS@ that run.sh fills in
#   lua/report.lua  the wrk script that prints the kit's RESULT line
#   VERSIONS.txt    the commit, the tools' versions, every file's size and sha256
#
# Knobs (environment): BUILD_DIR=build/bench (a Release build folder configured with
# GORO_BUILD_LOADTESTS=ON and GORO_BUILD_EXAMPLES=ON), BUNDLE_DIR=build/device-bundle,
# JOBS=1, GO=go, CASES (the scheduler cases, default all eight).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(realpath -m "${BUILD_DIR:-$root/build/bench}")" # absolute: GOPATH needs it
dest="$(realpath -m "${BUNDLE_DIR:-$root/build/device-bundle}")"
jobs="${JOBS:-1}"
go_bin="${GO:-go}"
cases="${CASES:-spawn pingpong skynet rss_parked yield blocking_getpid handoff timers}"

log() { printf '%s\n' "$*" >&2; }
die() {
  log "bundle.sh: $*"
  exit 1
}

for tool in cmake "$go_bin" wrk ldd strip sha256sum; do
  command -v "$tool" >/dev/null || die "'$tool' is required (scripts/deps.sh loadtest)"
done
wrk_bin="$(command -v wrk)"
nginx_bin="$(command -v nginx || true)"
[ -x /usr/sbin/nginx ] && nginx_bin=/usr/sbin/nginx
[ -n "$nginx_bin" ] || die "nginx is required (scripts/deps.sh loadtest)"
echo_module=""
for m in /usr/share/nginx/modules/ngx_http_echo_module.so /usr/lib/nginx/modules/ngx_http_echo_module.so; do
  [ -f "$m" ] && echo_module=$m && break
done
time_bin=/usr/bin/time
[ -x "$time_bin" ] || die "GNU time (/usr/bin/time) is required"

# --- build -------------------------------------------------------------------------
if [ ! -f "$build/CMakeCache.txt" ]; then
  log "== configuring $build (Release, with the load tests)"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGORO_BUILD_TESTS=OFF \
    -DGORO_BUILD_EXAMPLES=ON -DGORO_BUILD_LOADTESTS=ON >/dev/null || die "cmake failed"
fi
targets=(goro-demo loadtest_peer_asio loadtest_peer_epoll)
for c in $cases; do targets+=("bench_sched_$c"); done
log "== building ${targets[*]} in $build (-j$jobs)"
cmake --build "$build" -j"$jobs" --target "${targets[@]}" >"$build/device-bundle-build.log" 2>&1 ||
  die "the build failed (log: $build/device-bundle-build.log)"

rm -rf "$dest"
mkdir -p "$dest/bin/sched/go" "$dest/lib" "$dest/nginx" "$dest/lua"

# The Go programs as run.sh and sched/run.sh build them (standard library only, GOPATH
# mode, no network), without symbol tables.
go_build() {  # output source-file
  (cd "$(dirname "$2")" && GOCACHE="$build/go-cache" GOPATH="$build/go-path" GO111MODULE=off \
    GOFLAGS="" "$go_bin" build -ldflags='-s -w' -o "$1" "$(basename "$2")")
}
log "== building the Go programs with $("$go_bin" version)"
go_build "$dest/bin/hello" "$root/loadtest/http/hello.go" || die "hello.go did not build"
for c in $cases; do
  go_build "$dest/bin/sched/go/$c" "$root/loadtest/sched/go/$c.go" || die "sched/go/$c.go did not build"
done

# --- copy ----------------------------------------------------------------------------
# Our programs lose their symbols; the Debian ones come stripped already.
strip_copy() {  # source destination
  cp -L "$1" "$2" && strip --strip-unneeded "$2" 2>/dev/null
  chmod 755 "$2"
}
strip_copy "$build/examples/demo/goro-demo" "$dest/bin/goro-demo" || die "no goro-demo"
for p in asio epoll; do
  strip_copy "$build/loadtest/http/loadtest_peer_$p" "$dest/bin/loadtest_peer_$p" ||
    die "no loadtest_peer_$p"
done
for c in $cases; do
  strip_copy "$build/loadtest/sched/bench_sched_$c" "$dest/bin/sched/bench_sched_$c" ||
    die "no bench_sched_$c"
done
for t in "$wrk_bin" "$nginx_bin" "$time_bin"; do
  cp -L "$t" "$dest/bin/" || die "copying $t failed"
done
cp "$root/loadtest/http/report.lua" "$dest/lua/report.lua" || die "no report.lua"
[ -n "$echo_module" ] && cp -L "$echo_module" "$dest/nginx/ngx_http_echo_module.so"

# The kit's nginx configuration (loadtest/run.sh, write_nginx_conf) for plain HTTP:
# answers from memory, access log off, unlimited keep-alive, backlog 4096, every path
# nginx would write under the run's own folder. run.sh replaces @DIR@, @PORT@,
# @PROCS@, @MASTER@ (on when PROCS > 1), @USER@ ("user root;" as root with workers) and
# @LOAD_MODULE@ (the echo module's load_module line, or nothing).
cat >"$dest/nginx/nginx.conf.in" <<'EOF'
daemon off;
master_process @MASTER@;
@USER@
worker_processes @PROCS@;
worker_rlimit_nofile 16384;
pid @DIR@/nginx.pid;
lock_file @DIR@/nginx.lock;
error_log @DIR@/error.log warn;
@LOAD_MODULE@
events { worker_connections 16384; }
http {
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 120s;
  client_body_buffer_size 64k;
  client_body_temp_path @DIR@/tmp;
  proxy_temp_path @DIR@/tmp;
  fastcgi_temp_path @DIR@/tmp;
  uwsgi_temp_path @DIR@/tmp;
  scgi_temp_path @DIR@/tmp;
  charset utf-8;
  charset_types text/plain;
  server {
    listen 127.0.0.1:@PORT@ backlog=4096;
    location = / { default_type text/plain; return 200 "Hello, World!"; }
    location = /plaintext { default_type text/plain; return 200 "Hello, World!"; }
    location = /json { default_type application/json; return 200 '{"message":"Hello, World!"}'; }
    location = /healthz { default_type text/plain; return 200 "ok"; }
  }
}
EOF

# Every library the programs (and the echo module) load, found by ldd on this machine,
# except glibc's own, which the device has in a newer version: a library copied from
# here would not match its libc.
glibc='^(libc\.so|libm\.so|libmvec\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so|libanl\.so|ld-linux)'
mapfile -t elves < <(find "$dest/bin" "$dest/nginx" -type f \( -perm -u+x -o -name '*.so' \))
missing=0
while read -r name path; do
  [[ "$name" =~ $glibc ]] && continue
  if [ ! -f "$path" ]; then
    log "bundle.sh: $name not found here"
    missing=1
    continue
  fi
  [ -f "$dest/lib/$name" ] && continue
  cp -L "$path" "$dest/lib/$name" || die "copying $path failed"
  # Stripped only where that makes it smaller (Debian's libraries mostly are already).
  cp "$dest/lib/$name" "$dest/lib/$name.stripped" &&
    strip --strip-unneeded "$dest/lib/$name.stripped" 2>/dev/null &&
    [ "$(stat -c %s "$dest/lib/$name.stripped")" -lt "$(stat -c %s "$dest/lib/$name")" ] &&
    mv "$dest/lib/$name.stripped" "$dest/lib/$name"
  rm -f "$dest/lib/$name.stripped"
done < <(for f in "${elves[@]}"; do
  ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 } $2 == "=>" && $3 == "not" { print $1, "-" }'
done | sort -u)
[ "$missing" = 0 ] || die "some libraries were not found (above)"

# Nothing left unresolved with the bundle's lib/ and the system's glibc alone: every
# "=> /..." must point into lib/ or be one of glibc's.
bad=0
for f in "${elves[@]}"; do
  while read -r name path; do
    if [ "$path" = - ] || { [[ "$path" != "$dest/lib/"* ]] && ! [[ "$name" =~ $glibc ]]; }; then
      log "bundle.sh: ${f#"$dest"/}: $name => $path outside the bundle"
      bad=1
    fi
  done < <(env -i LD_LIBRARY_PATH="$dest/lib" ldd "$f" 2>/dev/null |
    awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 } $2 == "=>" && $3 == "not" { print $1, "-" }')
done
[ "$bad" = 0 ] || die "the bundle is not self-contained (above)"

# --- manifest ------------------------------------------------------------------------
{
  echo "bundle made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
  echo "commit $(git -C "$root" rev-parse HEAD 2>/dev/null) $(git -C "$root" diff --quiet HEAD 2>/dev/null || echo '(with uncommitted changes)')"
  echo "compiler $(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' "$build/CMakeCache.txt") $(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")"
  "$go_bin" version
  "$wrk_bin" -v 2>&1 | head -1
  "$nginx_bin" -v 2>&1
  echo "echo module: ${echo_module:-none}"
  echo "glibc here: $(ldd --version | head -1)"
  echo
  (cd "$dest" && find . -type f ! -name VERSIONS.txt | sort | while read -r f; do
    printf '%10s  %s  %s\n' "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)" "${f#./}"
  done)
} >"$dest/VERSIONS.txt"

size=$(du -sb "$dest" | cut -f1)
log "== bundle: $dest, $(find "$dest" -type f | wc -l) files, $((size / 1024)) KiB ($(du -sh "$dest" | cut -f1))"
echo "$dest"
