// WebSocket conformance against Node's `ws` package (npm): its client drives goro's
// server (websocket_peer serve) through echo with and without permessage-deflate,
// fragmentation both ways, ping/pong, close codes and reasons both ways, invalid UTF-8
// (1007) and oversize messages (1009).
//
//   node websocket_node_test.js PEER_BINARY     (with `ws` on NODE_PATH)
'use strict';
const { spawn } = require('child_process');
const WebSocket = require('ws');

const peer = process.argv[2];
const failures = [];

function check(cond, what) {
  console.log((cond ? 'ok   ' : 'FAIL ') + what);
  if (!cond) failures.push(what);
}

// Opens a client and collects what happens to it: messages, pongs and the close.
function open(url, options = {}) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options.protocols || [], options);
    const state = { ws, messages: [], waiters: [], pongs: [], closed: null };
    state.closedPromise = new Promise((done) => {
      ws.on('close', (code, reason) => {
        state.closed = { code, reason: reason.toString() };
        for (const w of state.waiters) w(null);
        done(state.closed);
      });
    });
    ws.on('message', (data, isBinary) => {
      const m = { data: isBinary ? data : data.toString(), isBinary };
      const w = state.waiters.shift();
      if (w) w(m);
      else state.messages.push(m);
    });
    ws.on('pong', (data) => state.pongs.push(data.toString()));
    ws.on('error', () => {});
    ws.on('open', () => resolve(state));
    ws.on('unexpected-response', (req, res) => reject(new Error('HTTP ' + res.statusCode)));
    setTimeout(() => reject(new Error('open timed out')), 5000);
  });
}

function next(state) {
  if (state.messages.length) return Promise.resolve(state.messages.shift());
  if (state.closed) return Promise.resolve(null);
  return new Promise((resolve) => state.waiters.push(resolve));
}

function send(ws, data, options = {}) {
  return new Promise((resolve, reject) => ws.send(data, options, (e) => (e ? reject(e) : resolve())));
}

async function cases(base) {
  for (const deflate of [true, false]) {
    const label = deflate ? ' (deflate)' : '';
    const s = await open(base + '/echo', { perMessageDeflate: deflate, protocols: ['chat'] });
    check(s.ws.protocol === 'chat', 'subprotocol chosen' + label);
    check((s.ws.extensions.indexOf('permessage-deflate') >= 0) === deflate,
      'extensions: ' + JSON.stringify(s.ws.extensions) + label);
    for (const m of ['hello', 'ünïcødé ✓ 𝄞', 'x'.repeat(300000), '']) {
      await send(s.ws, m);
      const got = await next(s);
      check(got && got.data === m && !got.isBinary, 'echo text ' + JSON.stringify(m.slice(0, 12)) + label);
    }
    const binary = Buffer.from([0, 255, 128, 1]);
    await send(s.ws, binary);
    let got = await next(s);
    check(got && got.isBinary && Buffer.compare(got.data, binary) === 0, 'echo binary' + label);
    // One message in three frames: fin only on the last.
    await send(s.ws, 'frag', { fin: false });
    await send(s.ws, 'men', { fin: false });
    await send(s.ws, 'ted', { fin: true });
    got = await next(s);
    check(got && got.data === 'fragmented', 'fragmented message reassembled' + label);
    s.ws.ping('are you there');
    await send(s.ws, 'after ping');
    got = await next(s);
    check(got && got.data === 'after ping' && s.pongs.includes('are you there'), 'ping answered' + label);
    s.ws.close(4000, 'client done');
    const closed = await s.closedPromise;
    check(closed.code === 4000, 'close code echoed: ' + closed.code + label);
  }

  const f = await open(base + '/fragments');
  let got = await next(f);
  check(got && got.data === 'fragmented', "server's fragmented text");
  got = await next(f);
  check(got && got.isBinary && Buffer.compare(got.data, Buffer.from([0, 1, 2, 3])) === 0,
    "server's fragmented binary");
  f.ws.close();
  await f.closedPromise;

  const c = await open(base + '/close?code=4001&reason=bye%20now');
  let closed = await c.closedPromise;
  check(closed.code === 4001 && closed.reason === 'bye now',
    'server close code and reason: ' + closed.code + ' ' + closed.reason);

  // ws sends whatever bytes it is given as a text frame: here, invalid UTF-8.
  const u = await open(base + '/echo');
  await send(u.ws, Buffer.from([0x63, 0x61, 0x66, 0xc3]), { binary: false });
  closed = await u.closedPromise;
  check(closed.code === 1007, 'invalid UTF-8 closed with 1007: ' + closed.code);

  const o = await open(base + '/small');
  await send(o.ws, 'y'.repeat(1000));
  got = await next(o);
  check(got && got.data === 'y'.repeat(1000), 'message under the limit');
  await send(o.ws, 'z'.repeat(2000)).catch(() => {});
  closed = await o.closedPromise;
  check(closed.code === 1009, 'oversize closed with 1009: ' + closed.code);
}

const server = spawn(peer, ['serve'], { stdio: ['ignore', 'pipe', 'inherit'] });
const timer = setTimeout(() => {
  console.log('FAIL timed out');
  server.kill();
  process.exit(1);
}, 30000);
server.stdout.once('data', async (chunk) => {
  const match = /listening (\d+)/.exec(chunk.toString());
  try {
    if (!match) throw new Error('websocket_peer did not start: ' + chunk);
    await cases('ws://127.0.0.1:' + match[1]);
  } catch (e) {
    check(false, 'exception: ' + e.message);
  }
  server.kill();
  clearTimeout(timer);
  console.log('websocket node: ' + failures.length + ' failure(s)');
  process.exit(failures.length ? 1 : 0);
});
