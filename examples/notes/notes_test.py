#!/usr/bin/env python3
"""End-to-end test of goro-notes (argv[1]) on a throwaway PostgreSQL and Redis started
with scripts/test-servers.sh (argv[2]): the JSON routes and their refusals, the
read-through cache (a miss fills Redis, a hit is served from it, a write drops it),
pages of the list, Redis stopped and started under the service (reads go on from
PostgreSQL, the cache comes back), the pools on /metrics, and a graceful SIGTERM.
Exits 77 (skipped) where PostgreSQL or Redis is not installed. Standard library only,
and redis-cli."""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

notes_bin, servers = sys.argv[1:3]
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


def request(method, target, body=None, content_type="application/json"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    headers = {"Content-Type": content_type} if body is not None else {}
    c.request(method, target, body=body, headers=headers)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    doc = None
    if r.getheader("Content-Type", "").startswith("application/json") and text:
        doc = json.loads(text)
    return r.status, doc, text, r


def start(kind, folder, *extra):
    started = subprocess.run([servers, kind, "start", folder, *extra], stdout=subprocess.PIPE,
                             text=True)
    return started.returncode, started.stdout.strip()


root = tempfile.mkdtemp(prefix="goro-notes-")
os.chmod(root, 0o755)  # as root, PostgreSQL runs as the user postgres
pg_dir, redis_dir = os.path.join(root, "pg"), os.path.join(root, "redis")
code, conninfo = start("pg", pg_dir, "40")
if code == 0:
    code, socket_path = start("redis", redis_dir)
if code != 0:
    subprocess.run([servers, "pg", "stop", pg_dir])
    subprocess.run([servers, "redis", "stop", redis_dir])
    os.rmdir(root)
    if code == 77:
        print("notes: skipped, PostgreSQL or Redis is not installed")
        sys.exit(77)
    print("notes: a server did not start", file=sys.stderr)
    sys.exit(1)


def redis_cli(*args):
    return subprocess.run(["redis-cli", "-s", socket_path, *args], stdout=subprocess.PIPE,
                          text=True).stdout.strip()


port = free_port()
service = subprocess.Popen([notes_bin, "--addr", f"127.0.0.1:{port}", "--pg", conninfo,
                            "--redis", "unix:" + socket_path, "--cache-ttl", "60"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    first = service.stdout.readline()
    check(f"serving http://127.0.0.1:{port}" in first, f"startup line: {first!r}")
    status, _, text, _ = request("GET", "/status")
    check((status, text) == (200, "ok\n"), f"GET /status: {status} {text!r}")
    status, _, text, _ = request("GET", "/readyz")
    check(status == 200, f"GET /readyz: {status} {text!r}")

    # Create, and the refusals.
    status, note, _, r = request("POST", "/notes", json.dumps({"title": "milk", "body": "buy milk"}))
    check(status == 201 and note and note["title"] == "milk" and note["id"] > 0,
          f"POST /notes: {status} {note}")
    nid = note["id"]
    check(r.getheader("Location") == f"/notes/{nid}", f"Location: {r.getheader('Location')}")
    check(note["created_at"].endswith("Z") and "T" in note["created_at"],
          f"created_at in RFC 3339: {note['created_at']}")
    status, doc, _, _ = request("POST", "/notes", '{"title": ')
    check(status == 400 and "malformed JSON" in doc["error"], f"malformed JSON: {status} {doc}")
    status, doc, _, _ = request("POST", "/notes", json.dumps({"title": "", "body": "x"}))
    check(status == 400 and "title" in doc["error"], f"empty title: {status} {doc}")
    status, doc, _, _ = request("POST", "/notes", json.dumps({"body": "x"}))
    check(status == 400, f"no title: {status} {doc}")
    status, _, _, _ = request("POST", "/notes", "title=x", "application/x-www-form-urlencoded")
    check(status == 415, f"a form body: {status}")
    check(request("GET", "/notes/abc")[0] == 400, "a bad id is refused")
    status, doc, _, _ = request("GET", "/notes/999999")
    check(status == 404 and doc["error"] == "no note 999999", f"no such note: {status} {doc}")

    # The read-through cache: a miss fills it, a hit comes from it, a write drops it.
    status, got, _, r = request("GET", f"/notes/{nid}")
    check(status == 200 and got == note and r.getheader("X-Cache") == "miss",
          f"first read: {status} {r.getheader('X-Cache')} {got}")
    cached = redis_cli("GET", f"note:{nid}")
    check(json.loads(cached) == note if cached else False, f"Redis holds the note: {cached!r}")
    ttl = int(redis_cli("TTL", f"note:{nid}") or -1)
    check(0 < ttl <= 60, f"the cached copy expires: TTL {ttl}")
    # Served from Redis: what Redis holds is what comes back.
    planted = dict(note, body="from the cache")
    redis_cli("SET", f"note:{nid}", json.dumps(planted), "EX", "60")
    status, got, _, r = request("GET", f"/notes/{nid}")
    check(got == planted and r.getheader("X-Cache") == "hit", f"second read: {r.getheader('X-Cache')} {got}")
    status, updated, _, _ = request("PUT", f"/notes/{nid}", json.dumps({"title": "milk", "body": "oat milk"}))
    check(status == 200 and updated["body"] == "oat milk" and updated["updated_at"] >= note["updated_at"],
          f"PUT: {status} {updated}")
    check(redis_cli("EXISTS", f"note:{nid}") == "0", "a write drops the cached copy")
    status, got, _, r = request("GET", f"/notes/{nid}")
    check(got == updated and r.getheader("X-Cache") == "miss", f"read after the write: {got}")
    check(request("PUT", "/notes/999999", json.dumps({"title": "t", "body": "b"}))[0] == 404,
          "PUT of no note")

    # Pages, by id.
    ids = [nid] + [request("POST", "/notes", json.dumps({"title": f"n{i}", "body": "b"}))[1]["id"]
                   for i in range(5)]
    status, page, _, _ = request("GET", f"/notes?after={ids[0]}&limit=2")
    check(status == 200 and [n["id"] for n in page] == ids[1:3], f"a page: {page}")
    status, page, _, _ = request("GET", "/notes")
    check([n["id"] for n in page] == ids, f"the whole list: {[n['id'] for n in page]}")
    for bad in ("limit=0", "limit=101", "limit=x", "after=-1"):
        check(request("GET", f"/notes?{bad}")[0] == 400, f"GET /notes?{bad} is refused")

    # Redis away: reads go on from PostgreSQL, health says which server is down.
    subprocess.run([servers, "redis", "stop", redis_dir])
    status, got, _, r = request("GET", f"/notes/{ids[1]}")
    check(status == 200 and got["id"] == ids[1] and r.getheader("X-Cache") == "off",
          f"a read with Redis down: {status} {r.getheader('X-Cache')} {got}")
    status, _, text, _ = request("GET", "/status")
    check(status == 503 and "redis: " in text and "postgres" not in text, f"status: {status} {text!r}")
    status, _, text, _ = request("GET", "/readyz")
    check(status == 200, f"still ready with Redis down: {status} {text!r}")
    status, _, _, _ = request("DELETE", f"/notes/{ids[2]}")
    check(status == 204, f"a delete with Redis down: {status}")
    code, again = start("redis", redis_dir)
    check(code == 0 and again == socket_path, "Redis started again")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and request("GET", f"/notes/{ids[1]}")[3].getheader("X-Cache") != "hit":
        time.sleep(0.05)
    check(request("GET", f"/notes/{ids[1]}")[3].getheader("X-Cache") == "hit",
          "the cache works again once Redis is back")

    # Delete.
    check(request("DELETE", f"/notes/{nid}")[0] == 204, "DELETE")
    check(request("GET", f"/notes/{nid}")[0] == 404, "the note is gone, from the cache too")
    check(request("DELETE", f"/notes/{nid}")[0] == 404, "a second DELETE")

    # Both pools on /metrics.
    status, _, text, _ = request("GET", "/metrics")
    for series in ('pg_pool_open_connections{pool="notes"}', 'pg_pool_connects_total{pool="notes"}',
                   'redis_pool_idle_connections{pool="notes"}',
                   'redis_pool_connect_errors_total{pool="notes"}',
                   'http_requests_total{method="GET",route="GET /notes/{id}",code="200"}'):
        check(f"\n{series} " in text, f"/metrics has {series}")
    errors = [line for line in text.splitlines()
              if line.startswith('redis_pool_connect_errors_total{pool="notes"}')]
    check(errors and float(errors[0].split()[1]) >= 1, f"Redis' outage counted: {errors}")

    service.send_signal(signal.SIGTERM)
    out, err = service.communicate(timeout=15)
    check(service.returncode == 0, f"exit code after SIGTERM: {service.returncode} {err!r}")
finally:
    if service.poll() is None:
        service.kill()
        service.wait()
    subprocess.run([servers, "pg", "stop", pg_dir])
    subprocess.run([servers, "redis", "stop", redis_dir])
    os.rmdir(root)

if failures:
    sys.exit(1)
print("notes: ok")
