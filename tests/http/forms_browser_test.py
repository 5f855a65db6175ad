#!/usr/bin/python3
"""Forms and CORS in a real browser: headless Chromium (Debian's chromium) opens a page
served by forms_peer on one origin, which
  - PUTs with a custom header to forms_peer's API on another origin (another port): a
    real CORS preflight, answered by http::cors without running the handler, then the
    request itself, whose exposed header the page can read;
  - asks for a header the API does not allow, which the browser must refuse;
  - makes credentialed requests (credentials: 'include') to the API's /creds/ routes,
    whose cors() allows credentials: a login that sets an HttpOnly session cookie, which
    the browser then sends with a GET and with a PUT after a credentialed preflight;
    without credentials the cookie stays home, and a credentialed request to the /item
    routes, whose cors() does not allow credentials, is refused by the browser;
  - posts a FormData with a text field and a file (a Blob) to its own origin, which
    parse_multipart_form reads, answering the field, the file's name, type, size and
    checksum.
The page is driven over the Chrome DevTools Protocol with Python's websockets (Debian's
python3-websockets, so run with /usr/bin/python3), as examples/ws_chat/browser_test.py.

argv[1]: the forms_peer binary. Exits 77 (skipped) when websockets or chromium is
missing, or Chromium cannot start here; 1 with the reason on a failure."""
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

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
        """The value of expression (a promise is awaited)."""
        result = await self.call("Runtime.evaluate",
                                 {"expression": expression, "returnByValue": True,
                                  "awaitPromise": True}, session)
        if "exceptionDetails" in result:
            raise AssertionError(f"page threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, session, expression, what, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await self.evaluate(session, expression):
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}")


def expect(got, want, what):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")
    print(f"ok: {what}", flush=True)


def stats(api):
    with urllib.request.urlopen(api + "/stats", timeout=5) as r:
        return r.read().decode()


async def drive(devtools_url, page, api):
    async with websockets.connect(devtools_url, max_size=None) as socket:
        cdp = DevTools(socket)
        session = await cdp.open_page(page + "/")
        await cdp.wait_for(session, "document.readyState === 'complete' && "
                                    "document.body.textContent.includes('forms peer')",
                           "the page to load")

        put = await cdp.evaluate(session, f"""
            fetch({json.dumps(api + "/item")}, {{method: 'PUT', headers: {{'X-Token': 'abc'}},
                                                body: 'payload'}})
              .then(async r => r.status + ' ' + r.headers.get('X-Item-Version') + ' ' +
                               await r.text())""")
        expect(put, "200 3 put abc payload", "a cross-origin PUT with X-Token after a preflight")
        expect(stats(api), "preflights=1 runs=1",
               "the preflight was answered by cors() without running the handler")

        refused = await cdp.evaluate(session, f"""
            fetch({json.dumps(api + "/item")}, {{method: 'PUT', headers: {{'X-Other': '1'}},
                                                body: 'x'}})
              .then(r => 'allowed ' + r.status, e => 'refused ' + e.name)""")
        expect(refused, "refused TypeError", "a header the API does not allow is refused")
        expect(stats(api), "preflights=2 runs=1", "the refused request never reached the handler")

        creds = json.dumps(api + "/creds")
        login = await cdp.evaluate(session, f"""
            fetch({creds} + '/login', {{method: 'POST', credentials: 'include'}})
              .then(async r => r.status + ' ' + await r.text(), e => 'refused ' + e.name)""")
        expect(login, "200 logged in", "a credentialed POST whose answer sets a cookie")
        whoami = await cdp.evaluate(session, f"""
            fetch({creds} + '/whoami', {{credentials: 'include'}}).then(r => r.text())""")
        expect(whoami, "sid=s3cr3t", "the cookie the API set goes back with a credentialed GET")
        anonymous = await cdp.evaluate(session, f"""
            fetch({creds} + '/whoami', {{credentials: 'omit'}}).then(r => r.text())""")
        expect(anonymous, "sid=none", "credentials: 'omit' sends no cookie")
        put_creds = await cdp.evaluate(session, f"""
            fetch({creds} + '/item', {{method: 'PUT', credentials: 'include',
                                      headers: {{'X-Token': 'xyz'}}}})
              .then(async r => r.status + ' ' + await r.text(), e => 'refused ' + e.name)""")
        expect(put_creds, "200 put s3cr3t xyz",
               "a credentialed PUT with X-Token after a credentialed preflight, cookie sent")
        expect(stats(api), "preflights=3 runs=2", "the credentialed PUT had its preflight")
        without = await cdp.evaluate(session, f"""
            fetch({json.dumps(api + "/item")}, {{credentials: 'include'}})
              .then(r => 'allowed ' + r.status, e => 'refused ' + e.name)""")
        expect(without, "refused TypeError",
               "a credentialed request to a cors() without allow_credentials is refused")
        same = await cdp.evaluate(session, f"""
            fetch({json.dumps(api + "/item")}).then(r => r.text())""")
        expect(same, "item sid=none", "the same request without credentials is allowed")

        upload = await cdp.evaluate(session, """
            (async () => {
              const bytes = new Uint8Array(300000);
              for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7919) % 251;
              const form = new FormData();
              form.append('title', 'héllo wörld');
              form.append('file', new Blob([bytes], {type: 'application/x-test'}), 'data.bin');
              const r = await fetch('/upload', {method: 'POST', body: form});
              return r.status + ' ' + await r.text();
            })()""")
        data = bytes((i * 7919) % 251 for i in range(300000))
        h = 0xcbf29ce484222325
        for b in data:
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
        expect(upload, f"200 title=héllo wörld;file=data.bin,application/x-test,300000,{h:016x}",
               "a FormData upload from the page, its field and file checked by the server")
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
    server = subprocess.Popen([binary], stdout=subprocess.PIPE, text=True)
    profile = tempfile.mkdtemp(prefix="goro-forms-chromium-")
    browser = None
    try:
        urls = {}
        for _ in range(2):
            kind, _, url = server.stdout.readline().strip().partition(" ")
            urls[kind] = url
        if "page" not in urls or "api" not in urls:
            print(f"FAIL: forms_peer did not print its addresses: {urls!r}")
            return 1
        browser, devtools_url = start_chromium(profile)
        asyncio.run(asyncio.wait_for(drive(devtools_url, urls["page"], urls["api"]), 60))
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
        server.kill()
        server.wait()
        shutil.rmtree(profile, ignore_errors=True)


sys.exit(main())
