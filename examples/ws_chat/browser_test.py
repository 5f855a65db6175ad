#!/usr/bin/python3
"""goro-ws-chat in a real browser: headless Chromium (Debian's chromium) opens the chat
page twice, as alice and bob, and the two pages exchange messages over the server's
WebSocket; then SIGTERM makes the server close both with 1001, which the pages show.
The pages are driven over the Chrome DevTools Protocol with Python's websockets (Debian's
python3-websockets, so run with /usr/bin/python3).

argv[1]: the goro-ws-chat binary. Exits 77 (skipped) when websockets or chromium is
missing, or Chromium cannot start here; 1 with the reason on a failure."""
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

try:
    import websockets
except ImportError:
    print("skipped: Python's websockets module is missing (apt-get install python3-websockets; "
          "run with /usr/bin/python3)")
    sys.exit(77)

binary = sys.argv[1]
chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if chromium is None:
    print("skipped: chromium is not installed (apt-get install chromium)")
    sys.exit(77)


class Skip(Exception):
    pass


class DevTools:
    """A minimal CDP client: commands by id, on the browser or a page's session."""

    def __init__(self, socket):
        self.socket = socket
        self.next_id = 0

    async def call(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        await self.socket.send(json.dumps(message))
        while True:
            reply = json.loads(await self.socket.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return reply["result"]

    async def open_page(self, url):
        target = await self.call("Target.createTarget", {"url": url})
        attached = await self.call("Target.attachToTarget",
                                   {"targetId": target["targetId"], "flatten": True})
        return attached["sessionId"]

    async def evaluate(self, session, expression):
        result = await self.call("Runtime.evaluate",
                                 {"expression": expression, "returnByValue": True}, session)
        return result["result"].get("value")

    async def wait_for(self, session, expression, what, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await self.evaluate(session, expression):
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}")


def log_has(text):
    return ("Array.from(document.querySelectorAll('#log li')).some(li => li.textContent === "
            + json.dumps(text) + ")")


async def drive(devtools_url, page, server):
    async with websockets.connect(devtools_url, max_size=None) as socket:
        cdp = DevTools(socket)
        alice = await cdp.open_page(page + "?name=alice")
        await cdp.wait_for(alice, "document.getElementById('status')?.textContent === 'connected'",
                           "alice's page to connect")
        bob = await cdp.open_page(page + "?name=bob")
        await cdp.wait_for(bob, "document.getElementById('status')?.textContent === 'connected'",
                           "bob's page to connect")
        await cdp.wait_for(alice, log_has("bob joined"), "alice to see bob join")

        await cdp.evaluate(alice, "say('hello from alice ✓')")
        await cdp.wait_for(bob, log_has("alice: hello from alice ✓"), "bob to get alice's message")
        # Through the form, as a person types.
        await cdp.evaluate(bob, "document.getElementById('text').value = 'hi alice';"
                                "document.getElementById('send').click()")
        await cdp.wait_for(alice, log_has("bob: hi alice"), "alice to get bob's message")
        print("ok: two pages exchanged messages", flush=True)

        server.send_signal(signal.SIGTERM)
        for who, session in (("alice", alice), ("bob", bob)):
            await cdp.wait_for(
                session,
                "document.getElementById('status').textContent === "
                "'closed (1001 server shutting down)'",
                f"{who}'s page to show the server going away")
        print("ok: SIGTERM closed both pages with 1001", flush=True)
        await cdp.call("Browser.close")


def start_chromium(profile):
    log = open(os.path.join(profile, "chromium.log"), "w")
    proc = subprocess.Popen(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--no-default-browser-check", "--remote-debugging-port=0",
         "--user-data-dir=" + profile, "about:blank"],
        stdout=log, stderr=subprocess.STDOUT)
    port_file = os.path.join(profile, "DevToolsActivePort")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if os.path.exists(port_file):
            lines = open(port_file).read().split("\n")
            if len(lines) >= 2 and lines[1]:
                return proc, f"ws://127.0.0.1:{lines[0]}{lines[1]}"
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    with open(os.path.join(profile, "chromium.log")) as f:
        tail = f.read()[-2000:]
    raise Skip("Chromium did not start (no DevTools port within 30 s):\n" + tail)


def main():
    server = subprocess.Popen([binary, "--addr", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
    profile = tempfile.mkdtemp(prefix="goro-ws-chat-chromium-")
    browser = None
    try:
        line = server.stdout.readline()
        match = re.search(r"serving (http://\S+)", line)
        if not match:
            print(f"FAIL: no address in the startup line {line!r}")
            return 1
        page = match.group(1) + "/"
        browser, devtools_url = start_chromium(profile)
        asyncio.run(asyncio.wait_for(drive(devtools_url, page, server), 60))
        code = server.wait(timeout=10)
        if code != 0:
            print(f"FAIL: goro-ws-chat exited {code} after SIGTERM")
            return 1
        return 0
    except Skip as e:
        print(f"skipped: {e}")
        return 77
    except (AssertionError, asyncio.TimeoutError, OSError) as e:
        print(f"FAIL: {type(e).__name__}: {e}")
        return 1
    finally:
        if browser is not None:
            try:
                browser.wait(timeout=5)
            except subprocess.TimeoutExpired:
                browser.kill()
                browser.wait()
        if server.poll() is None:
            server.kill()
            server.wait()
        shutil.rmtree(profile, ignore_errors=True)


sys.exit(main())
