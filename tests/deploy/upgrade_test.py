#!/usr/bin/env python3
"""Binary upgrades on one host, under load. goro-demo (argv[1]) is copied to a temporary
folder and started from there; while wrk (count.lua) drives it with keep-alive HTTP/1.1,
the binary is replaced 5 times (a new file renamed over the old, as a deploy does) and
the running process sent SIGUSR2 each time: it starts the new file with its listening
socket (LISTEN_FDS), waits for its READY=1, stops accepting and finishes what it has.

Checked: every process exits 0; each new process runs the new file (/proc/PID/exe is not
"(deleted)") and wrote the pid file; wrk saw no socket error and no non-2xx answer; the
requests all the processes handled (their "stopped: N requests handled" lines) equal the
responses wrk counted, none cut off. Then: an upgrade to a binary that cannot start
fails, the old process says so and keeps serving; systemd's socket activation
(systemd-socket-activate, where installed) starts one on a socket it was given. The
test makes itself a child subreaper (prctl), so the processes the upgrades start, which
their parents leave behind, are its children and their exit codes its to read."""
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib as dl  # noqa: E402

UPGRADES = 5
source = sys.argv[1]
if not shutil.which("wrk"):
    print("SKIP: wrk not installed (scripts/deps.sh test)")
    sys.exit(77)

PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


d = dl.workdir("goro-upgrade-")
binary = os.path.join(d, "goro-demo")
pid_file = os.path.join(d, "demo.pid")
log_path = os.path.join(d, "demo.log")


def install(src):
    """Puts src at binary the way a deploy does: a new file renamed over the old one."""
    tmp = binary + ".new"
    shutil.copy2(src, tmp)
    os.rename(tmp, binary)


def read_pid(old=None, timeout=15):
    """The pid in the pid file, once it is there and not old."""
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        try:
            with open(pid_file) as f:
                pid = int(f.read().strip() or 0)
            if pid and pid != old:
                return pid
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    return None


exit_codes = {}


def reap(block=False):
    """Collects the exit codes of children and orphans that ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        exit_codes[pid] = os.waitstatus_to_exitcode(status)
        if block:
            return


def wait_exit(pid, timeout=20):
    until = time.monotonic() + timeout
    while pid not in exit_codes and time.monotonic() < until:
        reap()
        time.sleep(0.02)
    return exit_codes.get(pid)


install(source)
port = dl.free_port()
log = open(log_path, "w")
env = dict(os.environ, GORO_MAXPROCS="1", GORO_DRAIN_DELAY="0")
first = subprocess.Popen([binary, "--addr", f"127.0.0.1:{port}", "--pid-file", pid_file,
                          "--shutdown-timeout", "5s"], stdout=log, stderr=subprocess.STDOUT, env=env)
pid = read_pid()
check(pid == first.pid, f"the pid file says {pid}, the process is {first.pid}")

# ---- 1. five upgrades under wrk ---------------------------------------------------
duration = UPGRADES + 5
wrk = dl.run_wrk(f"http://127.0.0.1:{port}", duration, duration - 2)
time.sleep(1)
pids = [pid]
for i in range(UPGRADES):
    install(source)
    os.kill(pid, signal.SIGUSR2)
    new = read_pid(old=pid)
    check(new is not None, f"upgrade {i + 1}: no new pid in {pid_file}")
    if new is None:
        break
    exe = os.readlink(f"/proc/{new}/exe")
    check(exe == binary, f"upgrade {i + 1}: process {new} runs {exe!r}, not the new {binary}")
    code = wait_exit(pid)
    check(code == 0, f"upgrade {i + 1}: the old process {pid} exited {code}")
    pid = new
    pids.append(pid)
    time.sleep(0.8)
report = wrk.communicate(timeout=duration + 30)[0]
got = dl.wrk_counts(report)

# ---- 2. an upgrade that cannot start: the old process keeps serving ----------------
with open(binary + ".new", "w") as f:
    f.write("#!/bin/sh\nexit 3\n")
os.chmod(binary + ".new", 0o755)
os.rename(binary + ".new", binary)
os.kill(pid, signal.SIGUSR2)
time.sleep(1.5)
reap()
alive = pid not in exit_codes
check(alive, f"process {pid} stopped after a failed upgrade")
status = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                         f"http://127.0.0.1:{port}/plaintext"], capture_output=True, text=True)
check(status.stdout == "200", f"after the failed upgrade, GET /plaintext: {status.stdout!r}")
install(source)

os.kill(pid, signal.SIGINT)
check(wait_exit(pid) == 0, f"the last process {pid} exited {exit_codes.get(pid)}")
log.close()
with open(log_path) as f:
    output = f.read()
counts = dl.stopped_counts(output)
handled = sum(h for h, _ in counts) - 1  # less the GET after the failed upgrade
cut = sum(c for _, c in counts)
check(len(counts) == UPGRADES + 1, f"{len(counts)} 'stopped:' lines for {UPGRADES + 1} processes")
check(re.search(r"SIGUSR2: upgrade failed, still serving: .*exited before it was ready "
                r"\(exit code 3\)", output), "no line saying the bad upgrade failed")
print(f"upgrades: {UPGRADES} under wrk; handled {handled}, answered {got['counted']}, non-2xx "
      f"{got['non2xx']}, failed {got['failed']}, socket errors {got['socket_errors']}, cut off {cut}")
check(got["counted"] is not None and got["counted"] > 0, f"wrk counted nothing: {report[-1500:]}")
check(handled == got["counted"], f"the processes handled {handled}, wrk saw {got['counted']}")
check(cut == 0, f"{cut} requests cut off")
check(got["socket_errors"] == 0, f"{got['socket_errors']} socket errors:\n{report}")
check(got["non2xx"] == 0 and got["failed"] == 0, f"{got['non2xx']} non-2xx answers")

# ---- 3. systemd's socket activation ----------------------------------------------
activate = shutil.which("systemd-socket-activate")
if activate:
    port2 = dl.free_port()
    p = subprocess.Popen([activate, "-l", f"127.0.0.1:{port2}", "--fdname=web", binary],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(env, GORO_ADDR="127.0.0.1:1"))
    # It starts the program at the first connection: the request below.
    dl.wait_listening(port2)
    status = subprocess.run(["curl", "-s", "--max-time", "10", f"http://127.0.0.1:{port2}/plaintext"],
                            capture_output=True, text=True)
    check(status.stdout == "Hello, World!", f"activation: GET /plaintext: {status.stdout!r}")
    lines = []
    while not any("serving http" in line for line in lines) and len(lines) < 10:
        lines.append(p.stdout.readline())
    check(any("given (LISTEN_FDS): web" in line for line in lines), f"activation: {lines}")
    check(any(f"serving http://127.0.0.1:{port2} " in line for line in lines), f"activation: {lines}")
    p.send_signal(signal.SIGINT)
    out = p.communicate(timeout=15)[0]
    check(p.returncode == 0, f"activation: exit {p.returncode}: {out}")
else:
    print("socket activation: systemd-socket-activate not installed; skipped")

reap()
if failures:
    print(output[-3000:], file=sys.stderr)
    print(f"upgrade_test: FAILED ({len(failures)})", file=sys.stderr)
    sys.exit(1)
shutil.rmtree(d, ignore_errors=True)
print("upgrade_test: PASSED")
