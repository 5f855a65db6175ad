#!/usr/bin/env python3
"""End-to-end test of goro::App through app_test_server (argv[1]): where the address
comes from (--addr, GORO_ADDR, PORT), the startup line, a graceful SIGTERM with a
request in flight, the shutdown deadline cancelling a stuck request's context, a
long-lived handler ending at shutdown, and the exit codes for a port in use and a bad
flag. Standard library only; exits non-zero with the reasons."""
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

binary = sys.argv[1]
# Under TSan a signal that the kernel hands to a thread asleep in a raw futex wait (an
# idle runtime's threads) is deferred until that thread makes an intercepted call, which
# an idle process never does: the signal-driven checks would hang, not fail. They run in
# every other build.
tsan = "--tsan" in sys.argv[2:]
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


def start(args=(), env=None):
    # No drain unless a check asks for one: SIGTERM then shuts down at once.
    e = dict(os.environ, GORO_MAXPROCS="2", GORO_DRAIN_DELAY="0")
    for k in ("GORO_ADDR", "PORT", "GORO_SHUTDOWN_TIMEOUT"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.Popen([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=e)
    first = p.stdout.readline()
    return p, first


def get(port, target, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("GET", target)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def get_safe(port, target):
    try:
        return get(port, target)
    except Exception as e:  # noqa: BLE001
        return type(e).__name__


def stop(p, sig=signal.SIGTERM, timeout=15):
    p.send_signal(sig)
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


# 1. --addr, and the startup line: name, scheme, address, Ps, version.
port = free_port()
p, first = start(["--addr", f"127.0.0.1:{port}"])
check(re.match(rf"app-test: serving http://127\.0\.0\.1:{port} on 2 Ps \(goro \d+\.\d+\.\d+\)$",
               first.strip()), f"startup line: {first!r}")
status, data = get(port, "/hello")
check(status == 200 and data == b"hello", f"GET /hello: {status} {data!r}")

if tsan:
    p.kill()
    p.wait()
    print("app: TSan build: the checks that send signals are skipped")
else:
    # 2. SIGTERM with a request in flight: it finishes, then exit 0.
    result = {}


    def slow():
        try:
            result["slow"] = get(port, "/slow?ms=400")
        except Exception as e:  # noqa: BLE001
            result["slow"] = e


    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.15)
    code, out, err = stop(p)
    t.join()
    check(code == 0, f"exit code after SIGTERM: {code} ({err!r})")
    check(result.get("slow") == (200, b"slept"), f"request in flight at SIGTERM: {result.get('slow')!r}")
    check("SIGTERM: shutting down" in out, f"shutdown line: {out!r}")

    # 3. GORO_ADDR, then PORT (":PORT", every interface); a flag beats both.
    port = free_port()
    p, first = start(env={"GORO_ADDR": f"127.0.0.1:{port}", "PORT": "1"})
    check(f"127.0.0.1:{port}" in first, f"GORO_ADDR wins over PORT: {first!r}")
    code, _, _ = stop(p, signal.SIGINT)
    check(code == 0, f"exit code after SIGINT: {code}")
    port = free_port()
    p, first = start(env={"PORT": str(port)})
    check(re.search(rf":{port} on", first) is not None, f"PORT: {first!r}")
    status, _ = get(port, "/hello")
    check(status == 200, "served on PORT")
    stop(p)
    port, other = free_port(), free_port()
    p, first = start(["--addr=127.0.0.1:%d" % port], env={"GORO_ADDR": f"127.0.0.1:{other}"})
    check(f"127.0.0.1:{port}" in first, f"--addr= beats GORO_ADDR: {first!r}")

    # 4. The shutdown deadline: a stuck request's context is cancelled at it, and a
    # long-lived handler sees the shutdown begin at once.
    stop(p)
    port = free_port()
    p, first = start(["--addr", f"127.0.0.1:{port}", "--shutdown-timeout", "0.5"])
    stuck = threading.Thread(target=lambda: result.__setitem__("stuck", get_safe(port, "/slow?ms=60000")))



    stream_conn = socket.create_connection(("127.0.0.1", port))
    stream_conn.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
    stream_conn.recv(4096)
    stuck.start()
    time.sleep(0.2)
    began = time.monotonic()
    code, out, err = stop(p)
    took = time.monotonic() - began
    stuck.join()
    stream_conn.close()
    check(code == 0, f"exit code after a shutdown that hit its deadline: {code}")
    check(0.4 <= took < 5, f"shutdown took {took:.2f} s with a 0.5 s deadline")
    check("slow: context canceled" in out, f"stuck handler's context cancelled at the deadline: {out!r}")
    check("stream: shutdown seen" in out, f"long-lived handler saw the shutdown: {out!r}")
    check("shutdown" in err, f"the cut connections are reported: {err!r}")


# 5. A port already in use: exit 1, naming the address and the reason.
holder = socket.socket()
holder.bind(("127.0.0.1", 0))
holder.listen()
taken = holder.getsockname()[1]
p = subprocess.run([binary, "--addr", f"127.0.0.1:{taken}"], capture_output=True, text=True,
                   timeout=10)
holder.close()
check(p.returncode == 1, f"exit code on a port in use: {p.returncode}")
check(f"cannot listen on 127.0.0.1:{taken}" in p.stderr and "in use" in p.stderr,
      f"message on a port in use: {p.stderr!r}")

# 6. Bad flags: exit 2 with a message.
for args, words in ((["--addr"], "--addr needs a value"),
                    (["--shutdown-timeout", "soon"], "--shutdown-timeout"),
                    (["--tls-cert", "c.pem"], "--tls-key")):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=10)
    check(p.returncode == 2 and words in p.stderr, f"{args}: {p.returncode} {p.stderr!r}")
p = subprocess.run([binary, "--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key",
                    "--addr", "127.0.0.1:0"], capture_output=True, text=True, timeout=10)
check(p.returncode == 1 and "/nonexistent.pem" in p.stderr, f"missing certificate: {p.stderr!r}")

# 7. The flag set: --help lists App's flags and the program's and exits 0; an unknown
# flag is an error; the program's flags are read before the options are final.
p = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10)
check(p.returncode == 0, f"--help exit code: {p.returncode} {p.stderr!r}")
for words in ("--addr HOST:PORT", "--access-log[=FORMAT]", "--access-log-file PATH",
              "--request-ids", "--trace", "--shutdown-timeout duration", "(default 10s)",
              "--greeting string", '(default "hello")', "--max-body BYTES", "--help"):
    check(words in p.stdout, f"--help shows {words!r}: {p.stdout!r}")
for args, words in ((["--bogus"], "unknown flag --bogus"),
                    (["--max-body=lots"], "--max-body takes a whole number, not 'lots'"),
                    (["--access-log=yaml"], "--access-log takes logfmt, json or common")):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=10)
    check(p.returncode == 2 and words in p.stderr and "--help" in p.stderr,
          f"{args}: {p.returncode} {p.stderr!r}")

# 8. Request ids without logging, and the access log into a file, as JSON: every
# request and the server's own replies get an id and a whole line.
port = free_port()
p, first = start(["--addr", f"127.0.0.1:{port}", "--request-ids", "--greeting=hey",
                  "--max-body", "5"])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
c.request("GET", "/hello")
r = c.getresponse()
check(r.status == 200 and r.read() == b"hey", "the program's --greeting")
check(len(r.getheader("X-Request-Id") or "") == 16, f"an id without logging: {r.headers}")
c.request("POST", "/hello", body=b"0123456789")
r = c.getresponse()
r.read()
check(r.status == 413, f"--max-body 5 reached the server's options: {r.status}")
check(len(r.getheader("X-Request-Id") or "") == 16, f"the server's own 413 has an id: {r.headers}")
c.close()
p.kill()
p.communicate()

log_dir = __import__("tempfile").mkdtemp()
log_path = os.path.join(log_dir, "access.log")
port = free_port()
p, first = start(["--addr", f"127.0.0.1:{port}", "--access-log=json", "--access-log-file",
                  log_path, "--max-body=5"])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
for target in ("/hello", "/nope"):
    c.request("GET", target, headers={"X-Request-Id": "client" + target.replace("/", "-")})
    c.getresponse().read()
c.request("POST", "/hello", body=b"0123456789", headers={"X-Request-Id": "client-big"})
r = c.getresponse()
r.read()
check(r.getheader("X-Request-Id") == "client-big", f"the 413 keeps the client's id: {r.headers}")
c.close()
p.kill()
_, err = p.communicate()
lines = open(log_path).read().splitlines()
check(len(lines) == 3, f"three log lines in the file: {lines!r}")
import json  # noqa: E402
entries = [json.loads(line) for line in lines]
check([(e["status"], e["request_id"]) for e in entries] ==
      [(200, "client-hello"), (404, "client-nope"), (413, "client-big")],
      f"the entries: {entries!r}")
check("status" not in err, f"nothing logged on stderr with a file: {err!r}")
os.unlink(log_path)

# --trace: the caller's traceparent is continued, and the access log stamps its ids.
port = free_port()
p, first = start(["--addr", f"127.0.0.1:{port}", "--trace", "--access-log=json",
                  "--access-log-file", log_path])
trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
c.request("GET", "/hello", headers={"traceparent": f"00-{trace_id}-{parent}-01"})
check(c.getresponse().read() == b"hello", "a traced request is served")
c.close()
p.kill()
p.communicate()
entries = [json.loads(line) for line in open(log_path).read().splitlines()]
check(len(entries) == 1 and entries[0].get("trace_id") == trace_id and
      entries[0].get("span_id") not in (None, "", parent),
      f"--trace: the caller's trace id and a span of the server's own: {entries!r}")
os.unlink(log_path)

# 9. Probes and the drain. /healthz and /readyz are App's, ahead of the handler and its
# access log; a readiness check of the program's (--ready-file) holds /readyz at 503
# until it passes, /healthz stays 200.
ready_file = os.path.join(log_dir, "ready")
port = free_port()
p, first = start(["--addr", f"127.0.0.1:{port}", "--ready-file", ready_file,
                  "--access-log=json", "--access-log-file", log_path],
                 env={"GORO_DRAIN_DELAY": "1s"})
check(get(port, "/healthz") == (200, b"ok\n"), "GET /healthz while starting")
status, body = get(port, "/readyz?verbose")
check(status == 503 and b"[-]ready-file failed: " + ready_file.encode() + b" does not exist" in body,
      f"not ready while the check fails: {status} {body!r}")
open(ready_file, "w").close()
check(get(port, "/readyz") == (200, b"ok\n"), "ready once the check passes")
check(get(port, "/hello")[0] == 200, "GET /hello")
if not tsan:
    # SIGTERM: readiness off at once, serving on (new connections too) for the drain
    # delay, then the shutdown, exit 0.
    began = time.monotonic()
    p.send_signal(signal.SIGTERM)
    line = p.stdout.readline()
    check("SIGTERM: draining for 1 s" in line, f"the drain line: {line!r}")
    status, body = get(port, "/readyz?verbose")
    check(status == 503 and b"[-]draining failed" in body, f"/readyz while draining: {status} {body!r}")
    check(get(port, "/hello") == (200, b"hello"), "served while draining")
    check(get(port, "/healthz")[0] == 200, "alive while draining")
    out, err = p.communicate(timeout=15)
    took = time.monotonic() - began
    check(p.returncode == 0, f"exit code after the drain: {p.returncode} ({err!r})")
    check(1.0 <= took < 4, f"SIGTERM to exit took {took:.2f} s with a 1 s drain")
    check("SIGTERM: shutting down" in out, f"shutdown after the drain: {out!r}")
    # The probes leave no access log line; the two GET /hello do.
    logged = [json.loads(line)["path"] for line in open(log_path).read().splitlines()]
    check(logged == ["/hello", "/hello"], f"the access log holds the probes: {logged!r}")

    # A second SIGTERM cuts the drain short; SIGINT skips it.
    for signals, words in (((signal.SIGTERM, signal.SIGTERM), "drain cut short"),
                           ((signal.SIGINT,), "SIGINT: shutting down")):
        port = free_port()
        p, first = start(["--addr", f"127.0.0.1:{port}"], env={"GORO_DRAIN_DELAY": "30s"})
        began = time.monotonic()
        for sig in signals:
            p.send_signal(sig)
            time.sleep(0.3)
        out, err = p.communicate(timeout=15)
        took = time.monotonic() - began
        check(p.returncode == 0 and words in out and took < 5,
              f"{signals}: exit {p.returncode} after {took:.2f} s: {out!r}")
else:
    p.kill()
    p.communicate()
os.unlink(log_path)
os.unlink(ready_file)
os.rmdir(log_dir)

# 10. The drain delay and the shutdown timeout from the environment: a value that does
# not parse is named, exit 2; --help shows the flags.
for var in ("GORO_DRAIN_DELAY", "GORO_SHUTDOWN_TIMEOUT"):
    p = subprocess.run([binary], capture_output=True, text=True, timeout=10,
                       env=dict(os.environ, **{var: "soon"}))
    check(p.returncode == 2 and f"{var}='soon': takes a duration" in p.stderr,
          f"{var}=soon: {p.returncode} {p.stderr!r}")
p = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10,
                   env=dict(os.environ, GORO_DRAIN_DELAY="7s"))
for words in ("--drain-delay duration", "(default 7s)", "--upgrade-timeout", "--pid-file FILE"):
    check(words in p.stdout, f"--help shows {words!r}: {p.stdout!r}")

if failures:
    print(f"{len(failures)} failure(s)", file=sys.stderr)
    sys.exit(1)
print("app: ok")
