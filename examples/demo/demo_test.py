#!/usr/bin/env python3
"""End-to-end test of goro-demo: starts the binary given as argv[1] on a free port with a
static folder, and asks every route what a user (or wrk, or curl) would. Exits non-zero
with the reason on the first failure. Standard library only."""
import hashlib
import gzip
import http.client
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

binary = sys.argv[1]
root = tempfile.mkdtemp(prefix="goro-demo-test-")
with open(os.path.join(root, "hello.txt"), "w") as f:
    f.write("static hello\n")
os.mkdir(os.path.join(root, "sub"))
with open(os.path.join(root, "sub", "index.html"), "w") as f:
    f.write("<p>sub</p>")

server = subprocess.Popen([binary, "--addr", "127.0.0.1:0", "--root", root],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, GORO_MAXPROCS="2"))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


try:
    first = server.stdout.readline()  # "goro-demo: serving http://127.0.0.1:PORT on N Ps"
    match = re.search(r"http://127\.0\.0\.1:(\d+)", first)
    assert match, f"no address in {first!r}"
    port = int(match.group(1))

    def request(method, target, body=None, headers=None, conn=None, chunked=False):
        c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request(method, target, body=body, headers=headers or {}, encode_chunked=chunked)
        r = c.getresponse()
        data = r.read()
        if conn is None:
            c.close()
        return r, data

    # One keep-alive connection for the plain routes, as wrk uses them.
    keep = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for target in ("/", "/plaintext"):
        r, data = request("GET", target, conn=keep)
        check(r.status == 200 and data == b"Hello, World!", f"GET {target}: {r.status} {data!r}")
        check(r.getheader("Content-Type", "").startswith("text/plain"), f"GET {target} type")
        check(r.getheader("Date") and r.getheader("Server"), f"GET {target}: Date and Server")
    r, data = request("GET", "/json", conn=keep)
    check(r.status == 200 and data == b'{"message":"Hello, World!"}', f"GET /json: {data!r}")
    check(r.getheader("Content-Type") == "application/json", "GET /json type")
    r, data = request("GET", "/healthz", conn=keep)
    check(r.status == 200, f"GET /healthz: {r.status}")
    r, data = request("HEAD", "/plaintext", conn=keep)
    check(r.status == 200 and data == b"" and r.getheader("Content-Length") == "13", "HEAD /plaintext")
    keep.close()

    # POST /upload streams each file part through SHA-256.
    payload = bytes(range(256)) * 4000
    body = (b"--b0undary\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n"
            b"--b0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"d.bin\"\r\n"
            b"Content-Type: application/octet-stream\r\n\r\n" + payload + b"\r\n--b0undary--\r\n")
    r, data = request("POST", "/upload", body=body,
                      headers={"Content-Type": "multipart/form-data; boundary=b0undary"})
    want = f"{hashlib.sha256(payload).hexdigest()}  d.bin  {len(payload)}\n".encode()
    check(r.status == 200 and data == want, f"POST /upload: {r.status} {data!r}")
    r, data = request("POST", "/upload", body=b"x", headers={"Content-Type": "multipart/form-data"})
    check(r.status == 400 and b"no boundary parameter" in data, f"POST /upload, no boundary: {data!r}")

    # POST /echo keeps the body and its type, with a length and chunked.
    r, data = request("POST", "/echo", body=b"ping \x00 pong", headers={"Content-Type": "application/x-test"})
    check(r.status == 200 and data == b"ping \x00 pong", f"POST /echo: {r.status} {data!r}")
    check(r.getheader("Content-Type") == "application/x-test", "POST /echo type")
    r, data = request("POST", "/echo", body=iter([b"in ", b"three ", b"chunks"]), chunked=True)
    check(r.status == 200 and data == b"in three chunks", f"POST /echo chunked: {data!r}")

    # /sleep parks, /block blocks a thread inside goro::blocking, /cpu spins: each takes
    # its time, and while /cpu spins on one P the server still answers on the other.
    for route in ("sleep", "block", "cpu"):
        t0 = time.monotonic()
        r, data = request("GET", f"/{route}?ms=150")
        took = time.monotonic() - t0
        check(r.status == 200, f"GET /{route}: {r.status} {data!r}")
        check(0.14 <= took < 3, f"GET /{route}?ms=150 took {took:.3f} s")
    blockers = [threading.Thread(target=request, args=("GET", "/block?ms=500")) for _ in range(16)]
    t0 = time.monotonic()
    for t in blockers:
        t.start()
    time.sleep(0.1)
    t1 = time.monotonic()
    r, _ = request("GET", "/plaintext")
    check(r.status == 200 and time.monotonic() - t1 < 0.4, "plaintext while 16 /block calls hold threads")
    for t in blockers:
        t.join()
    check(time.monotonic() - t0 < 3, f"16 overlapping /block?ms=500 took {time.monotonic() - t0:.2f} s")

    # /stream: n chunks, flushed one by one (chunked framing).
    r, data = request("GET", "/stream?n=4")
    check(r.status == 200 and r.getheader("Transfer-Encoding") == "chunked", "GET /stream chunked")
    check(data == b"".join(b"chunk %d\n" % i for i in range(4)), f"GET /stream body {data!r}")
    # /text: compress() answers gzip with the document --text-body prints, plain without.
    document = subprocess.run([binary, "--text-body"], capture_output=True, check=True).stdout
    r, data = request("GET", "/text", headers={"Accept-Encoding": "gzip"})
    check(r.status == 200 and r.getheader("Content-Encoding") == "gzip", "GET /text gzip-coded")
    check(gzip.decompress(data) == document, "GET /text decodes to --text-body")
    r, data = request("GET", "/text")
    check(r.getheader("Content-Encoding") is None and data == document, "GET /text plain")

    # Bad parameters: a 400 that names the parameter.
    for target in ("/sleep?ms=abc", "/sleep?ms=-5", "/sleep?ms=%2B5", "/stream?n=1x", "/cpu?ms="):
        r, data = request("GET", target)
        check(r.status == 400 and b"must be a non-negative integer" in data, f"GET {target}: {r.status} {data!r}")

    # The file server under /static/.
    r, data = request("GET", "/static/hello.txt")
    check(r.status == 200 and data == b"static hello\n", f"GET /static/hello.txt: {r.status} {data!r}")
    check(r.getheader("Content-Type", "").startswith("text/plain"), "static type")
    lm = r.getheader("Last-Modified")
    r, data = request("GET", "/static/hello.txt", headers={"If-Modified-Since": lm})
    check(r.status == 304 and data == b"", f"If-Modified-Since: {r.status}")
    r, data = request("GET", "/static/hello.txt", headers={"Range": "bytes=7-11"})
    check(r.status == 206 and data == b"hello", f"Range: {r.status} {data!r}")
    r, data = request("GET", "/static/sub")
    check(r.status == 301 and r.getheader("Location") == "./sub/", f"folder redirect: {r.status}")
    r, data = request("GET", "/static/sub/")
    check(r.status == 200 and data == b"<p>sub</p>", f"folder index: {r.status}")
    for target in ("/static/../demo_test.py", "/static/%2e%2e/x", "/static/nope.txt"):
        r, data = request("GET", target)
        check(r.status in (400, 404), f"GET {target}: {r.status}")

    # Routing errors: 404 for an unknown path, 405 with Allow for a known one.
    r, data = request("GET", "/nope")
    check(r.status == 404, f"GET /nope: {r.status}")
    r, data = request("DELETE", "/json")
    check(r.status == 405 and "GET" in r.getheader("Allow", ""), f"DELETE /json: {r.status}")

    # A malformed request gets a 400 and a closed connection; the server goes on.
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n")
    reply = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        reply += chunk
    s.close()
    check(reply.startswith(b"HTTP/1.1 400") and b"Connection: close" in reply, f"bad Host: {reply[:80]!r}")
    r, _ = request("GET", "/healthz")
    check(r.status == 200, "still serving after a bad request")

    # /ws/echo: a WebSocket handshake, one masked text frame echoed, a close echoed; a
    # plain GET is told to upgrade.
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /ws/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
              b"Sec-WebSocket-Version: 13\r\n\r\n")
    mask = b"\x01\x02\x03\x04"
    masked = lambda data: bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    s.sendall(b"\x81\x85" + mask + masked(b"hello") + b"\x88\x82" + mask + masked(b"\x03\xe8"))
    reply = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        reply += chunk
    s.close()
    head, _, frames = reply.partition(b"\r\n\r\n")
    check(head.startswith(b"HTTP/1.1 101") and b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head,
          f"/ws/echo handshake: {head[:80]!r}")
    check(frames == b"\x81\x05hello\x88\x02\x03\xe8", f"/ws/echo frames: {frames!r}")
    r, data = request("GET", "/ws/echo")
    check(r.status == 426 and r.getheader("Upgrade") == "websocket", f"GET /ws/echo: {r.status}")

    # --probe, the container's health check: exit 0 only on a 200, else 1 and the reason.
    def probe(url):
        p = subprocess.run([binary, "--probe", url], capture_output=True, text=True, timeout=10)
        return p.returncode, p.stderr
    code, err = probe(f"http://127.0.0.1:{port}/healthz")
    check(code == 0 and err == "", f"probe /healthz: exit {code}, {err!r}")
    code, err = probe(f"http://127.0.0.1:{port}/no-such-route")
    check(code == 1 and "status 404" in err, f"probe of a 404: exit {code}, {err!r}")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    code, err = probe(f"http://127.0.0.1:{closed.getsockname()[1]}/healthz")
    closed.close()
    check(code == 1 and "refused" in err, f"probe of a closed port: exit {code}, {err!r}")

    # SIGTERM: a clean exit, and the count of requests taken, none cut off.
    server.terminate()
    out, _ = server.communicate(timeout=10)
    check(server.returncode == 0, f"exit code after SIGTERM: {server.returncode}")
    stopped = re.search(r"stopped: (\d+) requests handled, (\d+) cut off", out)
    check(stopped is not None and int(stopped.group(1)) > 0 and stopped.group(2) == "0",
          f"the line printed on the way out: {out!r}")
finally:
    if server.poll() is None:
        server.kill()
        server.wait()
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames:
            os.unlink(os.path.join(dirpath, name))
        for name in dirnames:
            os.rmdir(os.path.join(dirpath, name))
    os.rmdir(root)

if failures:
    sys.exit(f"{len(failures)} check(s) failed")
print("goro-demo: every route answered as expected")
