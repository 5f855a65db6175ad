#!/usr/bin/python3
"""WebSocket conformance against Python's `websockets` (Debian's python3-websockets,
so run with /usr/bin/python3), both ways:

  A. websockets' client drives goro's server (websocket_peer serve): echo with and
     without permessage-deflate, subprotocols, fragmentation both ways, ping/pong,
     close codes and reasons both ways, invalid UTF-8 (1007), oversize (1009), and a
     plain HTTP request to a WebSocket route (426);
  B. goro's client (websocket_peer client URL) drives a websockets server, which checks
     the close codes the goro client sends when it is given invalid UTF-8 and an
     oversize message.

argv[1]: the websocket_peer binary. Exits 77 (skipped) when websockets is missing."""
import asyncio
import subprocess
import sys
import urllib.error
import urllib.request

try:
    import websockets
    from websockets.exceptions import ConnectionClosed
    from websockets.frames import OP_TEXT
except ImportError:
    print("skipped: Python's websockets module is missing "
          "(apt-get install python3-websockets; run with /usr/bin/python3)")
    sys.exit(77)

peer = sys.argv[1]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


async def goro_server_cases(port):
    base = f"ws://127.0.0.1:{port}"

    # Echo, with the deflate offer websockets makes by default, and a subprotocol.
    async with websockets.connect(base + "/echo", subprotocols=["superchat"]) as ws:
        check(ws.subprotocol == "superchat", "A: subprotocol chosen")
        check(any(e.name == "permessage-deflate" for e in ws.extensions), "A: deflate agreed")
        for message in ["hello", "ünïcødé ✓ 𝄞", b"\x00\xff\x80", "x" * 300000, ""]:
            await ws.send(message)
            check(await ws.recv() == message, f"A: echo {str(message)[:12]!r}")
        await ws.send(["frag", "men", "ted"])  # one message, three frames
        check(await ws.recv() == "fragmented", "A: fragmented message reassembled")
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, 5)
        check(True, "A: ping answered")
        await ws.close(4000, "client done")
        check(ws.close_code == 4000, f"A: close code echoed ({ws.close_code})")

    async with websockets.connect(base + "/echo-plain", compression=None) as ws:
        check(not ws.extensions, "A: no extension without deflate")
        await ws.send("plain")
        check(await ws.recv() == "plain", "A: echo without deflate")

    async with websockets.connect(base + "/fragments") as ws:
        check(await ws.recv() == "fragmented", "A: server's fragmented text")
        check(await ws.recv() == b"\x00\x01\x02\x03", "A: server's fragmented binary")

    async with websockets.connect(base + "/close?code=4001&reason=bye%20now") as ws:
        try:
            await ws.recv()
            check(False, "A: server close")
        except ConnectionClosed:
            check(ws.close_code == 4001 and ws.close_reason == "bye now",
                  f"A: server close code and reason ({ws.close_code} {ws.close_reason!r})")

    async with websockets.connect(base + "/echo") as ws:
        await ws.write_frame(True, OP_TEXT, b"caf\xc3")  # truncated UTF-8
        try:
            await asyncio.wait_for(ws.recv(), 5)
            check(False, "A: invalid UTF-8")
        except ConnectionClosed:
            check(ws.close_code == 1007, f"A: invalid UTF-8 closed with 1007 ({ws.close_code})")

    async with websockets.connect(base + "/small") as ws:
        await ws.send("y" * 1000)
        check(await ws.recv() == "y" * 1000, "A: message under the limit")
        await ws.send("z" * 2000)
        try:
            await asyncio.wait_for(ws.recv(), 5)
            check(False, "A: oversize")
        except ConnectionClosed:
            check(ws.close_code == 1009, f"A: oversize closed with 1009 ({ws.close_code})")

    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/echo", timeout=5)
        check(False, "A: plain HTTP refused")
    except urllib.error.HTTPError as e:
        check(e.code == 426 and e.headers.get("Upgrade") == "websocket",
              f"A: plain HTTP answered 426 ({e.code})")


async def goro_client_cases():
    seen = {}

    async def handler(ws):
        path = ws.path
        if path == "/close4001":
            await ws.close(4001, "custom")
        elif path == "/invalid-utf8":
            await ws.write_frame(True, OP_TEXT, b"ok\xff")
            await ws.wait_closed()
            seen[path] = ws.close_code
        elif path == "/oversize":
            try:
                await ws.send(b"x" * (2 << 20))
            except ConnectionClosed:
                pass
            await ws.wait_closed()
            seen[path] = ws.close_code
        else:
            async for message in ws:
                await ws.send(message)

    async with websockets.serve(handler, "127.0.0.1", 0, subprotocols=["chat"],
                                max_size=1 << 20) as server:
        port = server.sockets[0].getsockname()[1]
        proc = await asyncio.create_subprocess_exec(
            peer, "client", f"ws://127.0.0.1:{port}", stdout=asyncio.subprocess.PIPE)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), 30)
        except asyncio.TimeoutError:
            proc.kill()
            out, _ = await proc.communicate()
        for line in out.decode().splitlines():
            print("B: goro client: " + line)
        check(proc.returncode == 0, f"B: goro client against websockets (exit {proc.returncode})")
        check(seen.get("/invalid-utf8") == 1007,
              f"B: goro client closed invalid UTF-8 with 1007 ({seen.get('/invalid-utf8')})")
        check(seen.get("/oversize") == 1009,
              f"B: goro client closed an oversize message with 1009 ({seen.get('/oversize')})")


def main():
    server = subprocess.Popen([peer, "serve"], stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        if not line.startswith("listening "):
            print(f"FAIL websocket_peer did not start: {line!r}")
            return 1
        asyncio.run(asyncio.wait_for(goro_server_cases(int(line.split()[1])), 30))
    finally:
        server.kill()
        server.wait()
    asyncio.run(goro_client_cases())
    print(f"websocket python: {len(failures)} failure(s)")
    return 1 if failures else 0


sys.exit(main())
