#!/usr/bin/env python3
"""goro::App over HTTPS reloads its certificate on SIGHUP, as an operator rotating a
certificate would see it (argv[1]: app_test_server): after the files are replaced and
SIGHUP sent, new connections get the new certificate and a connection opened before
keeps working; a garbage certificate file makes SIGHUP log an error naming the file
while the server keeps serving the previous certificate; twenty rotations during a
wrk run whose every request makes a new TLS connection fail none; with
--tls-reload-interval,
replacing the files is enough. Certificates come from the
openssl command line tool. Standard library only; exits non-zero with the reasons."""
import hashlib
import http.client
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

binary = sys.argv[1]
failures = []
if "--tsan" in sys.argv[2:]:
    # As in app_test.py: TSan defers a signal to an idle runtime's threads indefinitely.
    print("app tls reload: skipped under TSan")
    sys.exit(0)
if shutil.which("openssl") is None:
    print("app tls reload: no openssl tool, skipped")
    sys.exit(77)


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def make_cert(d, stem):
    cert, key = os.path.join(d, stem + ".pem"), os.path.join(d, stem + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    return cert, key


def fingerprint_of(cert_file):
    out = subprocess.run(["openssl", "x509", "-in", cert_file, "-outform", "DER"], check=True,
                         capture_output=True).stdout
    return hashlib.sha256(out).hexdigest()


def context():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def served_fingerprint(port):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context().wrap_socket(raw, server_hostname="localhost") as s:
            return hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(stream, words, seconds=10):
    """Reads lines of stream until one holds words (the server's report of a reload)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        line = stream.readline()
        if not line:
            return None
        if words in line:
            return line
    return None


d = tempfile.mkdtemp()
try:
    live_cert, live_key = make_cert(d, "live")
    next_cert, next_key = make_cert(d, "next")
    first = fingerprint_of(live_cert)
    second = fingerprint_of(next_cert)
    port = free_port()
    env = dict(os.environ, GORO_MAXPROCS="2")
    p = subprocess.Popen([binary, "--addr", f"127.0.0.1:{port}", "--tls-cert", live_cert,
                          "--tls-key", live_key], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    line = p.stdout.readline()
    check(f"serving https://127.0.0.1:{port}" in line, f"startup line: {line!r}")
    check(served_fingerprint(port) == first, "the first certificate is served")

    kept = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context())
    kept.request("GET", "/hello")
    check(kept.getresponse().read() == b"hello", "a keep-alive connection before the reload")

    # Rotation: replace both files, then SIGHUP.
    shutil.copy(next_cert, live_cert)
    shutil.copy(next_key, live_key)
    p.send_signal(signal.SIGHUP)
    line = wait_for(p.stdout, "SIGHUP")
    check(line is not None and "reloaded TLS certificate" in line, f"reload report: {line!r}")
    check(served_fingerprint(port) == second, "new connections get the new certificate")
    kept.request("GET", "/hello")
    check(kept.getresponse().read() == b"hello", "the connection from before still works")
    kept.close()

    # A garbage certificate: the error names the file, the previous certificate stays.
    with open(live_cert, "w") as f:
        f.write("not a certificate\n")
    p.send_signal(signal.SIGHUP)
    line = wait_for(p.stderr, "SIGHUP")
    check(line is not None and "reload failed" in line and live_cert in line,
          f"failed reload report: {line!r}")
    check(served_fingerprint(port) == second, "still serving the previous certificate")

    # Twenty rotations during a wrk run over TLS whose every request is a new connection
    # (Connection: close), so handshakes keep starting while the certificate changes:
    # no failed handshake or request, and each rotation reported.
    if shutil.which("wrk") is None:
        print("app tls reload: no wrk, the rotation under load is skipped")
    else:
        shutil.copy(next_cert, live_cert)
        p.send_signal(signal.SIGHUP)
        check(wait_for(p.stdout, "reloaded TLS certificate") is not None, "reload before wrk")
        load = subprocess.Popen(["wrk", "-t1", "-c8", "-d6s", "-H", "Connection: close",
                                 f"https://127.0.0.1:{port}/hello"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(0.5)
        pairs = [make_cert(d, "rot0"), make_cert(d, "rot1")]
        served = set()
        for i in range(20):
            cert, key = pairs[i % 2]
            shutil.copy(key, live_key)
            shutil.copy(cert, live_cert)
            p.send_signal(signal.SIGHUP)
            line = wait_for(p.stdout, "SIGHUP")
            check(line is not None and "reloaded TLS certificate" in line,
                  f"rotation {i + 1} under load: {line!r}")
            served.add(served_fingerprint(port) == fingerprint_of(cert))
            time.sleep(0.2)
        out = load.communicate(timeout=30)[0]
        check(served == {True}, "after each rotation a new connection gets its certificate")
        check(load.returncode == 0, f"wrk exit status {load.returncode}: {out}")
        check("Socket errors" not in out, f"wrk saw socket errors during rotations: {out}")
        check("Non-2xx" not in out, f"wrk saw failed requests during rotations: {out}")
        done = [l for l in out.splitlines() if "requests in" in l]
        check(done and int(done[0].split()[0]) >= 100, f"wrk made too few requests: {out}")
        print("app tls reload: 20 rotations under wrk:", done[0].strip() if done else out)

    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=15)
    check(p.returncode == 0, f"exit code after SIGTERM: {p.returncode}")

    # --tls-reload-interval: replacing the files is enough.
    live_cert, live_key = make_cert(d, "live")
    first = fingerprint_of(live_cert)
    port = free_port()
    p = subprocess.Popen([binary, "--addr", f"127.0.0.1:{port}", "--tls-cert", live_cert,
                          "--tls-key", live_key, "--tls-reload-interval", "100ms"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    p.stdout.readline()
    check(served_fingerprint(port) == first, "watched: the first certificate")
    third_cert, third_key = make_cert(d, "third")
    third = fingerprint_of(third_cert)
    shutil.copy(third_key, live_key)
    shutil.copy(third_cert, live_cert)
    line = wait_for(p.stdout, "reloaded TLS certificate")
    check(line is not None and line.startswith("app-test: change: "), f"watch report: {line!r}")
    check(served_fingerprint(port) == third, "watched: the new certificate after the change")
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=15)
    check(p.returncode == 0, f"exit code after SIGTERM (watched): {p.returncode}")
finally:
    shutil.rmtree(d, ignore_errors=True)

if failures:
    print(f"{len(failures)} failure(s)", file=sys.stderr)
    sys.exit(1)
print("app tls reload: ok")
