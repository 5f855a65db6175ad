#!/usr/bin/env python3
"""End-to-end test of goro-chat: starts the binary given as argv[1] on a free port and
talks to it over TCP as three users would. Exits non-zero (with the reason) on failure."""
import re
import socket
import subprocess
import sys
import time

binary = sys.argv[1]
server = subprocess.Popen([binary, "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
try:
    first = server.stderr.readline()  # "goro-chat on 127.0.0.1:PORT"
    match = re.search(r":(\d+)$", first.strip())
    assert match, f"no address in {first!r}"
    port = int(match.group(1))

    unread = {}  # socket -> bytes received but not yet consumed

    def connect():
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.settimeout(5)
        unread[s] = b""
        return s

    def read_until(s, token):
        """Everything up to and including the first token; the rest stays unread."""
        data = unread[s]
        while token not in data:
            chunk = s.recv(4096)
            if not chunk:
                raise AssertionError(f"connection closed before {token!r}; got {data!r}")
            data += chunk
        end = data.index(token) + len(token)
        unread[s] = data[end:]
        return data[:end]

    a = connect()
    read_until(a, b"joined\n")  # a sees itself join
    b = connect()
    read_until(a, b"joined\n")  # and b
    a.sendall(b"hello from a\n")
    assert b"hello from a\n" in read_until(b, b"hello from a\n")
    b.sendall(b"in ")
    time.sleep(0.05)
    b.sendall(b"two writes\n")  # one line, however it arrives
    assert b": in two writes\n" in read_until(a, b"two writes\n")

    c = connect()
    c.sendall(b"x" * 3000)  # no newline: refused with a message, not a reset
    assert b"line too long" in read_until(c, b"goodbye\n")
    assert b"dropped\n" in read_until(a, b"dropped\n")

    a_name = a.getsockname()
    a.shutdown(socket.SHUT_WR)  # a leaves: the server reads end of stream
    a_left = f"{a_name[0]}:{a_name[1]} left\n".encode()
    read_until(b, a_left)
    a.close()
    print("goro-chat: broadcast, split lines, overlong line, leaving: ok")
except BaseException:
    server.kill()
    print("goro-chat's stderr:\n" + server.stderr.read(), file=sys.stderr)
    raise
finally:
    server.kill()
    server.wait()
