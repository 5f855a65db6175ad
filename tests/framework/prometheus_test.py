#!/usr/bin/env python3
"""A real Prometheus (Debian's package) scrapes goro-demo's /metrics (argv[1] is the
demo binary): both on 127.0.0.1, Prometheus' data in a temporary folder. Passes when
Prometheus reports the target up and answers queries for a runtime gauge and for the
request counter. Skips (exit 77) only when the prometheus binary is absent."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

demo = sys.argv[1]
prometheus = shutil.which("prometheus")
if prometheus is None:
    print("SKIP: no prometheus binary (apt-get install prometheus; scripts/deps.sh test)")
    sys.exit(77)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


work = tempfile.mkdtemp(prefix="goro-prometheus-")
demo_port, prom_port = free_port(), free_port()
with open(os.path.join(work, "prometheus.yml"), "w") as f:
    f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: goro-demo
    static_configs:
      - targets: ["127.0.0.1:{demo_port}"]
""")
server = subprocess.Popen([demo, "--addr", f"127.0.0.1:{demo_port}", "--debug"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
prom = subprocess.Popen([prometheus, f"--config.file={work}/prometheus.yml",
                         f"--storage.tsdb.path={work}/data",
                         f"--web.listen-address=127.0.0.1:{prom_port}"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
failures = []
try:
    server.stdout.readline()
    for _ in range(20):
        get(f"http://127.0.0.1:{demo_port}/plaintext")

    def query(q):
        body = get(f"http://127.0.0.1:{prom_port}/api/v1/query?" +
                   urllib.parse.urlencode({"query": q}))
        return json.loads(body)["data"]["result"]

    deadline = time.monotonic() + 20
    seen = {}
    wanted = {
        "up": 'up{job="goro-demo"}',
        "goroutines": "goro_goroutines",
        "requests": 'http_requests_total{code="200"}',
    }
    while time.monotonic() < deadline and len(seen) < len(wanted):
        for name, q in wanted.items():
            if name in seen:
                continue
            try:
                result = query(q)
            except Exception:  # noqa: BLE001 (Prometheus still starting)
                result = []
            if result and float(result[0]["value"][1]) > 0:
                seen[name] = result[0]["value"][1]
        time.sleep(0.5)
    for name in wanted:
        if name not in seen:
            failures.append(f"Prometheus has no {wanted[name]} > 0 after 20 s")
    if not failures:
        print(f"prometheus: scraped goro-demo: up={seen['up']} goro_goroutines={seen['goroutines']} "
              f"http_requests_total={seen['requests']}")
finally:
    for p in (prom, server):
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(work, ignore_errors=True)

for f in failures:
    print("FAIL:", f, file=sys.stderr)
sys.exit(1 if failures else 0)
