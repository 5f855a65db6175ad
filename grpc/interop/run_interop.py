#!/usr/bin/python3
"""Runs the gRPC interop test cases between goro and real peers, both ways, h2c and TLS.

    /usr/bin/python3 grpc/interop/run_interop.py \\
        --goro-server build/x/grpc/interop/goro-grpc-interop-server \\
        --goro-client build/x/grpc/interop/goro-grpc-interop-client

The peers are grpc-go (Debian's golang-google-grpc-dev, built here offline in GOPATH mode
from grpc/interop/go/) and python3-grpcio (grpc/interop/python/, on /usr/bin/python3). For
each pair (client -> server) and transport it starts the server once on 127.0.0.1 with
--port=0 (every server prints "listening on port N"), then runs the client once per test
case, each bounded by --case-timeout; a server that died is started again for the next
case. TLS uses a CA and a server certificate for foo.test.google.fr (the name upstream's
test certificates carry, which clients verify through --server_host_override) made here
with openssl.

Everything generated (Go and Python stubs, binaries, certificates) goes to a temporary
folder removed at the end (--keep keeps it). --gocache names a Go build cache that
outlives the run, so that grpc-go is compiled once, not on every run.

Prints a table of the results (ok, FAIL, TIME for a case that ran out of time, STOP for
one not run because the whole run ran out of time, skip for a missing peer) and
exits 0 when every case that ran passed, 1 when one failed, 2 on a usage error, and 77
(ctest's SKIP_RETURN_CODE) when all that ran passed but a peer was missing (no Go, no
grpc-go, no protoc-gen-go, no grpcio for /usr/bin/python3, no openssl): the output says
which and what to install.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEBIAN_PYTHON = "/usr/bin/python3"
GOCODE = "/usr/share/gocode"
SERVER_NAME = "foo.test.google.fr"
SKIP = 77

CASES = [
    "empty_unary",
    "large_unary",
    "client_streaming",
    "server_streaming",
    "ping_pong",
    "empty_stream",
    "timeout_on_sleeping_server",
    "cancel_after_begin",
    "cancel_after_first_response",
    "status_code_and_message",
    "special_status_message",
    "custom_metadata",
    "unimplemented_method",
    "unimplemented_service",
]
TRANSPORTS = ["h2c", "tls"]
# (client, server): goro against each peer both ways, and goro against itself. The
# harness pairs (the peers against each other, no goro in them) check the peers and
# this script; they run with --pairs harness or all.
GORO_PAIRS = [("goro", "goro"), ("goro", "go"), ("goro", "python"), ("go", "goro"),
              ("python", "goro")]
HARNESS_PAIRS = [("go", "python"), ("python", "go")]


def log(message):
    print(message, flush=True)


class Peers:
    """How to start each implementation's server and client, once they are built."""

    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.servers = {}  # name -> argv prefix
        self.clients = {}
        self.env = dict(os.environ)
        self.missing = {}  # name -> why it is not available

    def setup(self, wanted):
        if "goro" in wanted:
            self._setup_goro()
        if "go" in wanted:
            self._setup_go()
        if "python" in wanted:
            self._setup_python()

    def _setup_goro(self):
        for kind, path in (("server", self.args.goro_server), ("client", self.args.goro_client)):
            if not path or not os.access(path, os.X_OK):
                sys.exit(f"run_interop: goro's interop {kind} {path!r} is not an executable "
                         f"(build goro-grpc-interop-{kind}, pass --goro-{kind})")
        self.servers["goro"] = [self.args.goro_server]
        self.clients["goro"] = [self.args.goro_client]

    def _setup_go(self):
        go = shutil.which("go")
        protoc = shutil.which("protoc")
        plugin = shutil.which("protoc-gen-go")
        why = None
        if not go:
            why = "no go on PATH (apt-get install golang-go)"
        elif not os.path.isdir(f"{GOCODE}/src/google.golang.org/grpc"):
            why = f"no grpc-go in {GOCODE} (apt-get install golang-google-grpc-dev)"
        elif not protoc:
            why = "no protoc (apt-get install protobuf-compiler)"
        elif not plugin:
            why = "no protoc-gen-go (apt-get install protoc-gen-go-1-3)"
        if why:
            self.missing["go"] = why
            return
        gopath = self.work / "gopath"
        stubs = gopath / "src" / "interop"
        stubs.mkdir(parents=True)
        # protoc-gen-go v1.3 (Debian's protoc-gen-go-1-3) with its grpc plugin writes stubs
        # for github.com/golang/protobuf 1.3, which Debian's grpc-go 1.33 is built on.
        run_checked([protoc, f"-I{HERE}", f"--plugin=protoc-gen-go={plugin}",
                     f"--go_out=plugins=grpc,paths=source_relative:{stubs}",
                     *proto_files()], "Go stubs")
        env = dict(os.environ, GO111MODULE="off", GOPATH=f"{gopath}:{GOCODE}", GOFLAGS="",
                   GOCACHE=self.args.gocache or str(self.work / "gocache"))
        started = time.monotonic()
        for name in ("server", "client"):
            run_checked([go, "build", "-o", str(self.work / f"go-interop-{name}"),
                         str(HERE / "go" / f"{name}.go")], f"go build {name}.go", env=env)
        log(f"built the Go peers in {time.monotonic() - started:.1f} s")
        self.servers["go"] = [str(self.work / "go-interop-server")]
        self.clients["go"] = [str(self.work / "go-interop-client")]

    def _setup_python(self):
        probe = subprocess.run(
            [DEBIAN_PYTHON, "-c", "import grpc, grpc_tools.protoc; print(grpc.__version__)"],
            capture_output=True, text=True) if os.access(DEBIAN_PYTHON, os.X_OK) else None
        if probe is None or probe.returncode != 0:
            self.missing["python"] = (f"{DEBIAN_PYTHON} has no grpcio/grpc_tools "
                                      "(apt-get install python3-grpcio python3-grpc-tools)")
            return
        out = self.work / "python"
        out.mkdir()
        run_checked([DEBIAN_PYTHON, "-m", "grpc_tools.protoc", f"-I{HERE}",
                     f"--python_out={out}", f"--grpc_python_out={out}", *proto_files()],
                    "Python stubs")
        self.env["PYTHONPATH"] = str(out)
        self.servers["python"] = [DEBIAN_PYTHON, str(HERE / "python" / "server.py")]
        self.clients["python"] = [DEBIAN_PYTHON, str(HERE / "python" / "client.py")]


def proto_files():
    return [str(p) for p in sorted((HERE / "proto" / "grpc" / "testing").glob("*.proto"))]


def run_checked(argv, what, env=None):
    result = subprocess.run(argv, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"run_interop: {what} failed ({' '.join(argv)}):\n{result.stdout}{result.stderr}")


def make_certs(work):
    """A CA and a server certificate for SERVER_NAME signed by it; None without openssl."""
    openssl = shutil.which("openssl")
    if not openssl:
        return None
    d = work / "certs"
    d.mkdir()
    ext = d / "server.ext"
    ext.write_text(f"subjectAltName=DNS:{SERVER_NAME},DNS:*.test.google.fr\n"
                   "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                   "extendedKeyUsage=serverAuth\n")
    steps = [
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
         "/CN=goro interop test CA", "-keyout", "ca.key", "-out", "ca.pem"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={SERVER_NAME}",
         "-keyout", "server.key", "-out", "server.csr"],
        ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
         "-CAcreateserial", "-days", "2", "-extfile", "server.ext", "-out", "server.pem"],
    ]
    for step in steps:
        result = subprocess.run([openssl, *step], cwd=d, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"run_interop: openssl {' '.join(step)} failed:\n{result.stderr}")
    return {"ca": str(d / "ca.pem"), "cert": str(d / "server.pem"), "key": str(d / "server.key")}


class RunningServer:
    """One interop server process; its output goes to a log file."""

    def __init__(self, argv, env, log_path, startup_timeout):
        self.log_path = log_path
        self.log_file = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log_file,
                                     stdin=subprocess.DEVNULL, env=env)
        self.port = None
        found = threading.Event()

        def read_stdout():
            for raw in self.proc.stdout:
                self.log_file.write(raw)
                self.log_file.flush()
                line = raw.decode(errors="replace").strip()
                if self.port is None and line.startswith("listening on port "):
                    try:
                        self.port = int(line.rsplit(" ", 1)[1])
                    except ValueError:
                        pass
                    found.set()
            found.set()

        self.reader = threading.Thread(target=read_stdout, daemon=True)
        self.reader.start()
        found.wait(startup_timeout)

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(2)
        self.log_file.close()


def server_argv(peers, name, transport, certs):
    argv = [*peers.servers[name], "--port=0"]
    if transport == "tls":
        argv += ["--use_tls=true", f"--tls_cert_file={certs['cert']}",
                 f"--tls_key_file={certs['key']}"]
    return argv


def client_argv(peers, name, transport, certs, port, case):
    argv = [*peers.clients[name], "--server_host=127.0.0.1", f"--server_port={port}",
            f"--test_case={case}"]
    if transport == "tls":
        argv += ["--use_tls=true", f"--ca_file={certs['ca']}",
                 f"--server_host_override={SERVER_NAME}"]
    return argv


def run_pair(peers, client, server, transport, certs, cases, args, work, results):
    """Runs the cases of one (client, server, transport); fills results[(case, column)]."""
    column = (client, server, transport)
    log_path = work / f"server-{server}-{transport}-for-{client}.log"
    argv = server_argv(peers, server, transport, certs)
    running = None
    try:
        for case in cases:
            if time.monotonic() > args.run_deadline:
                results[(case, column)] = "STOP"
                continue
            if running is None or not running.alive():
                if running is not None:
                    log(f"  {server} server ({transport}) exited; starting it again")
                    running.stop()
                running = RunningServer(argv, peers.env, log_path, args.startup_timeout)
                if running.port is None:
                    log(f"  {server} server ({transport}) did not start: see {log_path}")
                    print_tail(log_path)
                    for rest in cases[cases.index(case):]:
                        results[(rest, column)] = "FAIL"
                    return
            cmd = client_argv(peers, client, transport, certs, running.port, case)
            server_log_offset = log_path.stat().st_size
            started = time.monotonic()
            try:
                result = subprocess.run(cmd, capture_output=True, text=True, env=peers.env,
                                        timeout=args.case_timeout, stdin=subprocess.DEVNULL)
                outcome = "ok" if result.returncode == 0 else "FAIL"
                output = result.stdout + result.stderr
            except subprocess.TimeoutExpired as expired:
                outcome = "TIME"
                output = f"(no result within {args.case_timeout} s)\n" + decode(expired.stdout) \
                    + decode(expired.stderr)
            elapsed = time.monotonic() - started
            results[(case, column)] = outcome
            if outcome != "ok" or args.verbose:
                log(f"  {client} -> {server} {transport} {case}: {outcome} ({elapsed:.2f} s)")
                log("    $ " + " ".join(cmd))
                for line in tail_lines(output):
                    log("    | " + line)
                # What the server wrote meanwhile (its errors, a sanitizer's report).
                with open(log_path, "rb") as server_log:
                    server_log.seek(server_log_offset)
                    server_output = server_log.read().decode(errors="replace").strip()
                for line in tail_lines(server_output):
                    log(f"    {server} server | " + line)
    finally:
        if running is not None:
            running.stop()


def tail_lines(output):
    """The last 20 lines of a program's output; from the start of a sanitizer's report
    where there is one (both stacks are needed to read a race), up to 300 lines."""
    lines = output.strip().splitlines()
    for i, line in enumerate(lines):
        if "Sanitizer" in line and ("WARNING" in line or "ERROR" in line):
            return lines[max(0, i - 1):][:300]
    return lines[-20:]


def decode(data):
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def print_tail(path, lines=20):
    try:
        for line in Path(path).read_text(errors="replace").splitlines()[-lines:]:
            log("    | " + line)
    except OSError:
        pass


def print_table(columns, cases, results):
    width = max(len(c) for c in cases) + 2
    pairs = []
    for client, server, _ in columns:
        if (client, server) not in pairs:
            pairs.append((client, server))
    cell = 5
    line1 = " " * width
    line2 = "case".ljust(width)
    for client, server in pairs:
        transports = [t for (c, s, t) in columns if (c, s) == (client, server)]
        label = f"{client}->{server}"
        span = max(len(label), cell * len(transports)) + 2
        line1 += label.center(span)
        line2 += "".join(t.center(cell) for t in transports).center(span)
    log(line1.rstrip())
    log(line2.rstrip())
    for case in cases:
        row = case.ljust(width)
        for client, server in pairs:
            transports = [t for (c, s, t) in columns if (c, s) == (client, server)]
            label = f"{client}->{server}"
            span = max(len(label), cell * len(transports)) + 2
            cells = "".join(results.get((case, (client, server, t)), "skip").center(cell)
                            for t in transports)
            row += cells.center(span)
        log(row.rstrip())


def parse_pairs(text):
    pairs = []
    for item in text.split(","):
        item = item.strip()
        if item == "goro":
            pairs += GORO_PAIRS
        elif item == "harness":
            pairs += HARNESS_PAIRS
        elif item == "all":
            pairs += GORO_PAIRS + HARNESS_PAIRS
        elif "->" in item or ":" in item:
            client, server = item.replace("->", ":").split(":")
            if {client, server} - {"goro", "go", "python"}:
                raise argparse.ArgumentTypeError(f"unknown implementation in {item!r}")
            pairs.append((client, server))
        else:
            raise argparse.ArgumentTypeError(f"bad pair {item!r} (client:server, goro, harness, all)")
    return list(dict.fromkeys(pairs))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goro-server", help="goro-grpc-interop-server")
    parser.add_argument("--goro-client", help="goro-grpc-interop-client")
    parser.add_argument("--pairs", type=parse_pairs, default=GORO_PAIRS,
                        help="client:server pairs, comma-separated, of goro, go, python; "
                             "or goro (the default: goro against all), harness (go and python "
                             "against each other), all")
    parser.add_argument("--cases", default=",".join(CASES),
                        help="comma-separated test cases (default: all 14)")
    parser.add_argument("--transports", default="h2c,tls", help="h2c, tls or both")
    parser.add_argument("--case-timeout", type=float, default=20,
                        help="seconds one client run may take (the clients' own call "
                             "deadlines are 10 s, so a stuck call reports its status first)")
    parser.add_argument("--total-timeout", type=float, default=480,
                        help="seconds for all the cases; those left when it passes are "
                             "marked STOP (ctest's own limit for the test is 600 s)")
    parser.add_argument("--startup-timeout", type=float, default=20,
                        help="seconds a server may take to print its port")
    parser.add_argument("--gocache", help="Go build cache to keep between runs")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--verbose", action="store_true", help="print every case's command")
    args = parser.parse_args()

    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(CASES))
    transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    if unknown or not cases or set(transports) - set(TRANSPORTS) or not transports:
        parser.error(f"unknown cases {unknown} or transports {transports}")

    work = Path(tempfile.mkdtemp(prefix="goro-interop-"))
    try:
        peers = Peers(args, work)
        peers.setup({name for pair in args.pairs for name in pair})
        certs = make_certs(work) if "tls" in transports else None
        skipped = [f"{name}: {why}" for name, why in peers.missing.items()]
        if "tls" in transports and certs is None:
            skipped.append("tls: no openssl to make the test certificates (apt-get install openssl)")

        columns, results = [], {}
        started = time.monotonic()
        args.run_deadline = started + args.total_timeout
        for client, server in args.pairs:
            for transport in transports:
                columns.append((client, server, transport))
                if client not in peers.clients or server not in peers.servers:
                    continue
                if transport == "tls" and certs is None:
                    continue
                log(f"{client} client -> {server} server over {transport}")
                run_pair(peers, client, server, transport, certs, cases, args, work, results)
        log("")
        print_table(columns, cases, results)
        failed = sorted({f"{c}->{s} {t}" for (case, (c, s, t)), r in results.items() if r != "ok"})
        passed = sum(1 for r in results.values() if r == "ok")
        log(f"\n{passed} of {len(results)} runs passed in {time.monotonic() - started:.1f} s"
            + (f"; failed: {', '.join(failed)}" if failed else ""))
        for why in skipped:
            log(f"SKIPPED {why}")
        if args.keep:
            log(f"kept {work}")
        if failed:
            return 1
        if skipped:
            log("run_interop: some pairs were skipped (a peer is missing); exit 77")
            return SKIP
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
