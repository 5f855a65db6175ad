#!/usr/bin/env python3
"""End-to-end test of goro-service (argv[1]) in front of goro-demo (argv[2]) as its
backend: the routes, the 1 s deadline on the backend call (504), a graceful SIGTERM;
and README.md (argv[3]) shows exactly this program. Standard library only."""
import http.client
import re
import signal
import socket
import subprocess
import sys
import time

service_bin, demo_bin, readme = sys.argv[1:4]
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


def get_full(port, target):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", target)
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return r.status, body, r.headers


def get(port, target):
    status, body, _ = get_full(port, target)
    return status, body


source = open(__file__.replace("service_test.py", "main.cpp")).read()
blocks = re.findall(r"```cpp\n(.*?)```", open(readme).read(), re.S)
check(source in blocks, "README.md shows examples/service/main.cpp exactly")
check(len(source.splitlines()) < 40, "the service is under 40 lines")

backend_port, port = free_port(), free_port()
demo = subprocess.Popen([demo_bin, "--addr", f"127.0.0.1:{backend_port}"],
                        stdout=subprocess.PIPE, text=True)
demo.stdout.readline()
service = subprocess.Popen([service_bin, "--addr", f"127.0.0.1:{port}",
                            "--backend", f"http://127.0.0.1:{backend_port}"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    first = service.stdout.readline()
    check(f"service: serving http://127.0.0.1:{port}" in first, f"startup line: {first!r}")
    check(get(port, "/healthz") == (200, "ok\n"), "GET /healthz")
    status, body, headers = get_full(port, "/no/such/route")
    check(status == 404 and len(headers.get("X-Request-Id", "")) == 16,
          f"an unknown route gets 404 with a request id: {status} {headers}")
    status, body = get(port, "/quote/ana?ms=20")
    check(status == 200 and body == "quote for ana: ok\n", f"quote: {status} {body!r}")
    start = time.monotonic()
    status, body = get(port, "/quote/bob?ms=5000")
    took = time.monotonic() - start
    check(status == 504 and "too slow" in body, f"slow backend: {status} {body!r}")
    check(0.9 <= took < 3, f"the deadline is 1 s; the answer took {took:.2f} s")
    service.send_signal(signal.SIGTERM)
    out, err = service.communicate(timeout=15)
    check(service.returncode == 0, f"exit code after SIGTERM: {service.returncode} {err!r}")
finally:
    for p in (service, demo):
        if p.poll() is None:
            p.kill()
            p.wait()

if failures:
    sys.exit(1)
print("service: ok")
