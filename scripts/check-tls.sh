#!/usr/bin/env bash
# Audits goro's TLS server with testssl.sh: builds goro-demo, serves HTTPS on a
# loopback port with a throw-away self-signed certificate, runs `testssl --fast`
# against it (about a minute) and fails if testssl finds an offered protocol older
# than TLS 1.2, an obsolete cipher, a missing forward secrecy or a vulnerability.
#
#   ./scripts/check-tls.sh            # the report goes to <build>/tls/testssl.txt
#
# The self-signed certificate's own findings ("chain of trust NOT ok", no OCSP) are
# expected and ignored. Not part of CI: testssl is slow and is a tool, not a test.
# Environment: GORO_BUILD_ROOT (default <repo>/build), GORO_JOBS, GORO_SKIP_DEPS=1.
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ "${GORO_SKIP_DEPS:-0}" != 1 ]; then
  goro_section "deps: Debian packages"
  goro_install_deps loadtest
fi
command -v testssl >/dev/null 2>&1 || { echo "check-tls: needs testssl (scripts/deps.sh loadtest)" >&2; exit 1; }

dir=$GORO_BUILD_ROOT/tls
goro_section "build: goro-demo (g++, RelWithDebInfo) in $dir"
goro_configure "$dir" "$GORO_ROOT" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ -DGORO_WERROR=ON \
  -DGORO_BUILD_TESTS=OFF -DGORO_BUILD_EXAMPLES=ON -DGORO_BUILD_LOADTESTS=OFF
goro_build "$dir" goro-demo
bin=$(find "$dir" -type f -name goro-demo -perm -u+x -print -quit)

work=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
addr=127.0.0.1:$((20000 + RANDOM % 20000))
"$bin" --addr "$addr" --tls-cert "$work/cert.pem" --tls-key "$work/key.pem" 2>"$work/demo.log" &
pid=$!
for _ in $(seq 1 50); do
  curl -fsk -o /dev/null "https://$addr/healthz" 2>/dev/null && break
  sleep 0.1
done

report=$dir/testssl.txt
goro_section "testssl --fast $addr (report: $report)"
testssl --quiet --color 0 --warnings off --fast "$addr" >"$report" 2>&1 || true
grep -E "^ (SSLv2|SSLv3|TLS 1|TLS 1.1|TLS 1.2|TLS 1.3) |ciphers|PFS|VULNERABLE|not vulnerable" "$report" || true

# Findings that are the server's fault, not the throw-away certificate's.
# (testssl 3.0 says "No ciphers supporting Forward Secrecy offered" when there is none,
# and "not offered" is good news on every other line.)
bad=$({
  grep -E "^ (SSLv2|SSLv3|TLS 1|TLS 1.1) +offered|^ (NULL|Anonymous|Export|LOW|Triple DES|Obsolete CBC).* offered( |$)|VULNERABLE" "$report" |
    grep -v "not offered"
  grep -E "No ciphers supporting Forward Secrecy|PFS is not offered" "$report"
  # Every TLS 1.2 suite the server accepts must have ECDHE key exchange (the cipher
  # table: hexcode, OpenSSL name, key exchange, ...; TLS 1.3 suites start with TLS_).
  awk '/^ x[0-9a-f]+ / && $2 !~ /^TLS_/ && $3 != "ECDH" { print "no forward secrecy: " $2 }' "$report"
} || true)
if [ -n "$bad" ] || ! grep -q "TLS 1.3    offered" "$report"; then
  echo "check-tls: findings:" >&2
  printf '%s\n' "$bad" >&2
  exit 1
fi
echo "check-tls: ok"
