#!/usr/bin/env python3
"""End-to-end test of goro-pg-api (argv[1]) on a throwaway PostgreSQL started with
scripts/test-servers.sh (argv[2]): the notes routes, a slow query cut at its 1 s
deadline (504) and cancelled on the server, 32 slow requests at once on one P served
by a few threads, and a graceful SIGTERM. Exits 77 (skipped) where PostgreSQL
is not installed. Standard library only."""
import concurrent.futures
import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

api_bin, servers = sys.argv[1:3]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def request(port, method, target, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.request(method, target, body=body)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    return r.status, text, r.getheader("Location")


folder = tempfile.mkdtemp(prefix="goro-pg-api-")
started = subprocess.run([servers, "pg", "start", folder, "80"], stdout=subprocess.PIPE, text=True)
if started.returncode == 77:
    os.rmdir(folder)
    print("pg_api: skipped, PostgreSQL is not installed")
    sys.exit(77)
if started.returncode != 0:
    print("pg_api: PostgreSQL did not start", file=sys.stderr)
    subprocess.run([servers, "pg", "stop", folder])
    sys.exit(1)
conninfo = started.stdout.strip()

port = free_port()
api = subprocess.Popen([api_bin, "--addr", f"127.0.0.1:{port}", conninfo],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=dict(os.environ, GORO_MAXPROCS="1"))
try:
    first = api.stdout.readline()
    check(f"serving http://127.0.0.1:{port} on 1 Ps" in first, f"startup line: {first!r}")
    check(request(port, "GET", "/healthz")[:2] == (200, "ok\n"), "GET /healthz")
    ready = request(port, "GET", "/readyz?verbose")[:2]
    check(ready[0] == 200 and "[+]postgres ok" in ready[1], f"GET /readyz?verbose: {ready}")

    status, body, location = request(port, "POST", "/notes", "buy milk")
    check(status == 201 and body.startswith("note "), f"POST /notes: {status} {body!r}")
    check(location is not None and location.startswith("/notes/"), f"Location: {location!r}")
    check(request(port, "GET", location)[:2] == (200, "buy milk\n"), f"GET {location}")
    status, body, _ = request(port, "GET", "/notes")
    check(status == 200 and "\tbuy milk\n" in body, f"GET /notes: {status} {body!r}")
    check(request(port, "GET", "/notes/abc")[0] == 400, "a bad id is refused")
    check(request(port, "DELETE", location)[0] == 204, f"DELETE {location}")
    check(request(port, "GET", location)[0] == 404, "the note is gone")

    # A query past its deadline: 504 after 1 s, not after 5.
    start = time.monotonic()
    status, body, _ = request(port, "GET", "/sleep?s=5")
    took = time.monotonic() - start
    check(status == 504, f"slow query: {status} {body!r}")
    check(0.9 <= took < 3, f"the deadline is 1 s; the answer took {took:.2f} s")

    # 32 requests each keeping the database busy for 0.3 s, at once, on one P: the
    # goroutines wait, not the threads. The pool has 16 connections, so two rounds.
    # Opening a connection has blocking steps (PQconnectStart, PQconnectPoll in
    # goro::blocking) that may each take a thread for a moment, so the pool is opened
    # first, by 16 quick queries at once, and the threads alive then are the baseline.
    def threads_now():
        return int(next(line.split()[1] for line in open(f"/proc/{api.pid}/status")
                        if line.startswith("Threads:")))

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        warm = list(pool.map(lambda _: request(port, "GET", "/sleep?s=0.05")[0], range(16)))
    check(warm == [200] * 16, f"the pool's first 16 queries: {sorted(set(warm))}")
    threads_before = threads_now()
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(lambda _: request(port, "GET", "/sleep?s=0.3")[0], range(32)))
    took = time.monotonic() - start
    check(answers == [200] * 32, f"concurrent slow queries: {sorted(set(answers))}")
    check(took < 1.5, f"32 slow queries took {took:.2f} s")
    threads = threads_now()
    print(f"32 slow queries at once on 1 P: {took:.2f} s, threads {threads_before} before, {threads} after")
    check(threads <= max(8, threads_before),
          f"threads after 32 concurrent queries on 1 P: {threads} ({threads_before} before)")

    api.send_signal(signal.SIGTERM)
    out, err = api.communicate(timeout=15)
    check(api.returncode == 0, f"exit code after SIGTERM: {api.returncode} {err!r}")
finally:
    if api.poll() is None:
        api.kill()
        api.wait()
    subprocess.run([servers, "pg", "stop", folder])

if failures:
    sys.exit(1)
print("pg_api: ok")
