"""What the deployment tests share: free ports, goro-demo processes whose request counts
are read from the line they print on the way out, and wrk's counts from count.lua.
Standard library only (/usr/bin/python3)."""
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
COUNT_LUA = os.path.join(HERE, "count.lua")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_listening(port, timeout=10.0, alive=lambda: True):
    """True once 127.0.0.1:port accepts a connection (no request is sent)."""
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        if not alive():
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.02)
    return False


STOPPED = re.compile(r"^goro-demo: stopped: (\d+) requests handled, (\d+) cut off$", re.M)


def stopped_counts(text):
    """[(handled, cut_off)] for each goro-demo process whose output is in text."""
    return [(int(h), int(c)) for h, c in STOPPED.findall(text)]


class Demo:
    """One goro-demo process on a fixed port, its output in a file of its own."""

    def __init__(self, binary, port, workdir, name, args=(), env=None):
        self.binary, self.port, self.workdir, self.name = binary, port, workdir, name
        self.args, self.env = list(args), dict(env or {})
        self.proc = None
        self.generation = 0
        self.exits = []      # (exit code, handled, cut off) per process that ended
        self.log_path = None

    def start(self):
        self.generation += 1
        self.log_path = os.path.join(self.workdir, f"{self.name}.{self.generation}.log")
        env = dict(os.environ, GORO_MAXPROCS="1")
        env.update(self.env)
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [self.binary, "--addr", f"127.0.0.1:{self.port}", *self.args],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        if not wait_listening(self.port, alive=lambda: self.proc.poll() is None):
            raise RuntimeError(f"{self.name} did not start: {self.output()[-2000:]}")

    def output(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Stops the process and records its exit code and counts."""
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        counts = stopped_counts(self.output())
        handled, cut = counts[-1] if counts else (None, None)
        self.exits.append((code, handled, cut))
        self.proc = None
        return code

    def restart(self):
        code = self.stop()
        self.start()
        return code


def run_wrk(url, seconds, stop_after, connections=32, threads=2, path="/plaintext"):
    """Starts wrk with count.lua on url for `seconds`; counted requests stop being sent
    `stop_after` seconds from now. Returns the Popen (stdout: its report)."""
    env = dict(os.environ, WRK_PATH=path, WRK_STOP_AT=str(int(time.time() + stop_after)))
    return subprocess.Popen(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--timeout", "5s",
         "-s", COUNT_LUA, url],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def wrk_counts(report):
    """count.lua's figures: counted, probes, failed, and socket errors summed."""
    def num(pattern):
        m = re.search(pattern, report, re.M)
        return int(m.group(1)) if m else None
    errors = re.search(r"^errors connect (\d+) read (\d+) write (\d+) status (\d+) timeout (\d+)$",
                       report, re.M)
    return {
        "counted": num(r"^counted (\d+)$"),
        "probes": num(r"^probes (\d+)$"),
        "failed": num(r"^failed (\d+)$"),
        # connect, read, write and timeout: wrk's "status" counts non-2xx answers.
        "socket_errors": (sum(int(errors.group(i)) for i in (1, 2, 3, 5)) if errors else None),
        "non2xx": num(r"Non-2xx or 3xx responses: (\d+)") or 0,
    }


def workdir(prefix):
    return tempfile.mkdtemp(prefix=prefix)
