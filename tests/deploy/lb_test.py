#!/usr/bin/env python3
"""Rolling restarts behind a real load balancer. Three goro-demo replicas (argv[1]) run
behind nginx (upstream with keep-alive, passive health: max_fails and
proxy_next_upstream) and behind HAProxy (active health checks on /readyz every 200 ms);
while a load runs through the balancer, the replicas are restarted one at a time
(SIGTERM: drain, then graceful shutdown; a new process on the same port). Checked, for
each balancer and each kind of load:

  h1  wrk, keep-alive HTTP/1.1 (count.lua): no non-2xx answer, no socket error, and the
      requests the replicas handled (the "stopped: N requests handled" line of every
      process) equal the responses wrk counted, none cut off;
  h2  h2load over HTTP/2 (cleartext, prior knowledge) to the balancer, and from HAProxy
      to the replicas too (proto h2): every request succeeded, handled = requests sent;
  ws  WebSocket echo clients (Python's websockets): every close the server makes is
      1001 (going away), every client reconnects, every message is echoed exactly once.

Options: --drain DURATION (the replicas' GORO_DRAIN_DELAY, default 1s: the balancers
notice within 0.4 s; 0 shows what the drain buys and only reports), --no-retries
(balancers that send no failed request elsewhere; reports only), --lb nginx,haproxy,
--loads h1,h2,ws, --restarts N (default 3, or GORO_DEPLOY_RESTARTS: CI's ASan stage
runs 1, as each restart takes every path the three do). Prints one line of counts per run, and
what the balancers saw (HAProxy's retries and connection errors per server, nginx's
upstream errors). Skips (exit 77) when nginx, haproxy, wrk or h2load is missing."""
import argparse
import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as dl  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("demo")
parser.add_argument("--drain", default="1s")
parser.add_argument("--lb", default="nginx,haproxy")
parser.add_argument("--loads", default="h1,h2,ws")
parser.add_argument("--restarts", type=int,
                    default=int(os.environ.get("GORO_DEPLOY_RESTARTS", "3")))
parser.add_argument("--no-retries", action="store_true",
                    help="balancers that never send a failed request elsewhere: what the "
                         "drain alone buys (reports only)")
opts = parser.parse_args()
m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s)?", opts.drain)
if not m:
    parser.error(f"--drain {opts.drain}: a duration such as 1s, 500ms or 0")
drain_seconds = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
measure_only = drain_seconds == 0 or opts.no_retries

tools = {"nginx": shutil.which("nginx") or "/usr/sbin/nginx",
         "haproxy": shutil.which("haproxy") or "/usr/sbin/haproxy",
         "wrk": shutil.which("wrk"), "h2load": shutil.which("h2load")}
missing = [t for t, p in tools.items() if not p or not os.path.exists(p)]
if missing:
    print(f"SKIP: {', '.join(missing)} not installed (scripts/deps.sh test)")
    sys.exit(77)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


# ---- the balancers ----------------------------------------------------------------

def nginx_config(d, ports, front, front_h2):
    # Open-source nginx has passive health only: a connection refused or cut goes to the
    # next replica (proxy_next_upstream). max_fails=0: with max_fails=1 fail_timeout=1s,
    # WebSocket clients reconnecting through three restarts 1.2 s apart got 502 "no live
    # upstreams" for seconds, nginx counting every replica out at once.
    servers = "\n".join(f"    server 127.0.0.1:{p} max_fails=0;" for p in ports)
    user = "user root root;\n" if os.geteuid() == 0 else ""
    return f"""{user}daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  upstream app {{
{servers}
    keepalive 64;
  }}
  server {{
    listen 127.0.0.1:{front};
    listen 127.0.0.1:{front_h2} http2;
    keepalive_requests 1000000;  # h2load does not reconnect after nginx's GOAWAY
    location / {{
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_next_upstream {"off" if opts.no_retries else "error timeout http_502 http_503"};
      proxy_connect_timeout 2s;
    }}
    location /ws/ {{
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_next_upstream {"off" if opts.no_retries else "error timeout"};
      proxy_read_timeout 60s;
    }}
  }}
}}
"""


def haproxy_config(d, ports, front, front_h2):
    retry_conf = ("  retries 0" if opts.no_retries else
                  "  retries 3\n  option redispatch 1\n"
                  "  retry-on conn-failure empty-response response-timeout")
    def servers(proto):
        return "\n".join(f"  server r{i} 127.0.0.1:{p} check{proto}" for i, p in enumerate(ports))
    return f"""global
  maxconn 4096
  stats socket {d}/haproxy.sock mode 600 level admin
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout tunnel 60s
  timeout http-keep-alive 30s
{retry_conf}
frontend front
  bind 127.0.0.1:{front}
  default_backend app
frontend front_h2
  bind 127.0.0.1:{front_h2} proto h2
  default_backend app_h2
backend app
  balance roundrobin
  option httpchk
  http-check send meth GET uri /readyz ver HTTP/1.1 hdr host localhost
  http-check expect status 200
  default-server inter 200ms fall 2 rise 1
{servers("")}
backend app_h2
  balance roundrobin
  # Checks go over HTTP/2 too; without a Host they would carry no :authority, which
  # nghttp2 refuses (RST_STREAM PROTOCOL_ERROR).
  option httpchk
  http-check send meth GET uri /readyz ver HTTP/1.1 hdr host localhost
  http-check expect status 200
  default-server inter 200ms fall 2 rise 1
{servers(" proto h2")}
"""


class Balancer:
    def __init__(self, kind, d, ports):
        self.kind, self.d = kind, d
        # How long a restarted replica takes to be back in the balancer's rotation: HAProxy
        # checks every 200 ms (rise 1); nginx sends to it at once.
        self.settle = 0.6
        self.front, self.front_h2 = dl.free_port(), dl.free_port()
        conf = os.path.join(d, f"{kind}.conf")
        with open(conf, "w") as f:
            f.write((nginx_config if kind == "nginx" else haproxy_config)(d, ports, self.front,
                                                                          self.front_h2))
        cmd = ([tools["nginx"], "-p", d, "-c", conf] if kind == "nginx"
               else [tools["haproxy"], "-db", "-f", conf])
        self.log = open(os.path.join(d, f"{kind}.log"), "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        if not dl.wait_listening(self.front, alive=lambda: self.proc.poll() is None):
            raise RuntimeError(f"{kind} did not start: " + open(self.log.name).read()[-2000:])

    def seen(self):
        """What the balancer saw go wrong on its side, as one line."""
        if self.kind == "nginx":
            with open(os.path.join(self.d, "nginx-error.log")) as f:
                text = f.read()
            refused = len(re.findall(r"connect\(\) failed", text))
            closed = len(re.findall(r"upstream prematurely closed|reset by peer", text))
            return f"nginx upstream errors: {refused} refused connects, {closed} cut (retried on another)"
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(os.path.join(self.d, "haproxy.sock"))
            s.sendall(b"show stat\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        rows = [r.split(",") for r in data.decode().splitlines() if r and not r.startswith("#")]
        head = data.decode().splitlines()[0].lstrip("# ").split(",")
        col = {name: i for i, name in enumerate(head)}
        total = {"econ": 0, "eresp": 0, "wretr": 0, "wredis": 0}
        for r in rows:
            if r[col["svname"]] in ("FRONTEND", "BACKEND"):
                continue
            for k in total:
                total[k] += int(r[col[k]] or 0)
        return ("haproxy servers: {econ} connection errors, {eresp} response errors, "
                "{wretr} retries, {wredis} redispatches".format(**total))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM if self.kind == "haproxy" else signal.SIGQUIT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# ---- the loads ----------------------------------------------------------------------

def run_h1(lb, duration, stop_after):
    p = dl.run_wrk(f"http://127.0.0.1:{lb.front}", duration, stop_after)

    def result():
        out = p.communicate(timeout=duration + 60)[0]
        return dl.wrk_counts(out) | {"report": out}
    return result


def run_h2(lb, duration, _stop_after):
    clients, rps = 4, 400
    total = clients * rps * max(1, duration - 2)
    p = subprocess.Popen([tools["h2load"], "-n", str(total), "-c", str(clients), "-m", "8",
                          f"--rps={rps}", f"http://127.0.0.1:{lb.front_h2}/plaintext"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def result():
        out = p.communicate(timeout=duration + 60)[0]
        m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                      r"(\d+) failed, (\d+) errored, (\d+) timeout", out)
        codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
        if not m or not codes:
            return {"counted": None, "report": out}
        return {"counted": int(codes.group(1)), "sent": total, "failed": int(m.group(5)),
                "socket_errors": int(m.group(6)) + int(m.group(7)),
                "non2xx": sum(int(codes.group(i)) for i in (2, 3, 4)), "report": out}
    return result


def run_ws(lb, duration, _stop_after):
    import websockets  # python3-websockets
    stats = {"echoed": 0, "sent": 0, "closes": {}, "reconnects": 0, "connect_failures": 0,
             "duplicates": 0, "missing": 0}

    async def client(k, until):
        seen = set()
        pending = None
        n = 0
        while time.monotonic() < until:
            try:
                async with websockets.connect(f"ws://127.0.0.1:{lb.front}/ws/echo",
                                              open_timeout=5, compression=None) as ws:
                    while time.monotonic() < until:
                        if pending is None:
                            n += 1
                            pending = f"{k}:{n}"
                            stats["sent"] += 1
                        await ws.send(pending)
                        got = await asyncio.wait_for(ws.recv(), 5)
                        if got in seen:
                            stats["duplicates"] += 1
                        seen.add(got)
                        if got == pending:
                            pending = None
                            stats["echoed"] += 1
                        await asyncio.sleep(0.01)
                    await ws.close()
                    return
            except websockets.ConnectionClosed as e:
                code = e.rcvd.code if e.rcvd is not None else 1006
                stats["closes"][code] = stats["closes"].get(code, 0) + 1
                stats["reconnects"] += 1
            except (OSError, asyncio.TimeoutError, websockets.InvalidHandshake) as e:
                stats["connect_failures"] += 1
                print(f"ws client {k}: {type(e).__name__}: {e}", file=sys.stderr)
                await asyncio.sleep(0.05)
        if pending is not None:
            stats["missing"] += 1

    async def main():
        until = time.monotonic() + duration
        await asyncio.gather(*(client(k, until) for k in range(8)))

    t = threading.Thread(target=lambda: asyncio.run(main()))
    t.start()

    def result():
        t.join()
        return stats
    return result


LOADS = {"h1": run_h1, "h2": run_h2, "ws": run_ws}


def one_run(lb_kind, load):
    d = dl.workdir(f"goro-lb-{lb_kind}-{load}-")
    ports = [dl.free_port() for _ in range(3)]
    replicas = [dl.Demo(opts.demo, p, d, f"replica{i}", args=["--h2c", "--shutdown-timeout", "5s"],
                        env={"GORO_DRAIN_DELAY": opts.drain})
                for i, p in enumerate(ports)]
    for r in replicas:
        r.start()
    lb = Balancer(lb_kind, d, ports)
    time.sleep(0.5)  # HAProxy's first checks
    # Each restart: the drain, the shutdown (up to the 0.5 s idle grace), a start, the
    # balancer's settling.
    duration = int(4 + opts.restarts * (2.5 + drain_seconds))
    start = time.monotonic()
    result = LOADS[load](lb, duration, duration - 2)
    time.sleep(1)
    codes = []
    for i in range(opts.restarts):
        codes.append(replicas[i % len(replicas)].restart())
        time.sleep(lb.settle)
    restarted_in = time.monotonic() - start
    got = result()
    for r in replicas:
        codes.append(r.stop(signal.SIGINT))
    seen = lb.seen()
    lb.stop()
    handled = sum(h or 0 for _, h, _ in (e for r in replicas for e in r.exits))
    cut = sum(c or 0 for _, _, c in (e for r in replicas for e in r.exits))
    name = f"{lb_kind}/{load} drain {opts.drain}{' no retries' if opts.no_retries else ''}"
    check(all(c == 0 for c in codes), f"{name}: replica exit codes {codes}")
    check(restarted_in < duration - 2, f"{name}: restarts took {restarted_in:.1f} s")
    if load == "ws":
        closes = got["closes"]
        print(f"{name}: {got['sent']} messages, {got['echoed']} echoed, {got['duplicates']} "
              f"duplicates, {got['missing']} unanswered, closes {closes}, {got['reconnects']} "
              f"reconnects, {got['connect_failures']} failed connects; {seen}")
        if not measure_only:
            check(got["echoed"] == got["sent"] and got["missing"] == 0 and got["duplicates"] == 0,
                  f"{name}: messages sent {got['sent']}, echoed {got['echoed']}")
            check(set(closes) <= {1001} and closes.get(1001, 0) > 0, f"{name}: closes {closes}")
            check(got["connect_failures"] == 0, f"{name}: {got['connect_failures']} failed connects")
        return
    print(f"{name}: handled {handled}, answered {got.get('counted')}, non-2xx "
          f"{got.get('non2xx')}, failed {got.get('failed')}, socket errors "
          f"{got.get('socket_errors')}, cut off {cut}; {seen}")
    if got.get("counted") is None:
        check(False, f"{name}: no counts from the load: {got.get('report', '')[-1500:]}")
        return
    check(handled == got["counted"], f"{name}: replicas handled {handled}, client saw {got['counted']}")
    check(cut == 0, f"{name}: {cut} requests cut off")
    if not measure_only:
        if load == "h2":
            check(got["counted"] == got["sent"], f"{name}: {got['sent']} sent, {got['counted']} answered")
        check(got["non2xx"] == 0 and got["failed"] == 0, f"{name}: {got['non2xx']} non-2xx, "
              f"{got['failed']} failed")
        check(got["socket_errors"] == 0, f"{name}: {got['socket_errors']} socket errors")


for lb_kind in opts.lb.split(","):
    for load in opts.loads.split(","):
        try:
            one_run(lb_kind, load)
        except Exception as e:  # noqa: BLE001
            check(False, f"{lb_kind}/{load}: {type(e).__name__}: {e}")

if failures:
    print(f"lb_test: FAILED ({len(failures)})", file=sys.stderr)
    sys.exit(1)
print("lb_test: PASSED")
