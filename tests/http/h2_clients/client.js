// Node's built-in http2 client against goro: argv[2] is the server's URL (http:// for
// h2c with prior knowledge, https:// with ALPN h2), argv[3] for https the CA file; the
// certificate is checked for the name localhost.
// Sends 20 concurrent GETs and a 256 KiB POST on one session; prints "ok" and exits 0
// when every answer is right, else prints what was wrong and exits 1.
'use strict';
const http2 = require('http2');

const fs = require('fs');
const url = process.argv[2];
const tls = process.argv[3] ? { ca: fs.readFileSync(process.argv[3]), servername: 'localhost' } : {};
const session = http2.connect(url, tls);
session.on('error', (e) => { console.log('session error: ' + e.message); process.exit(1); });
setTimeout(() => { console.log('timeout'); process.exit(1); }, 15000).unref();

function request(headers, body) {
  return new Promise((resolve, reject) => {
    const req = session.request(headers);
    let status = 0;
    const chunks = [];
    req.on('response', (h) => { status = h[':status']; });
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve({ status, body: Buffer.concat(chunks).toString() }));
    req.on('error', reject);
    if (body !== undefined) req.end(body); else req.end();
  });
}

(async () => {
  const gets = [];
  for (let i = 0; i < 20; i++) gets.push(request({ ':path': '/hello?name=' + i }));
  const answers = await Promise.all(gets);
  answers.forEach((a, i) => {
    if (a.status !== 200 || a.body !== 'hello ' + i) throw new Error('GET ' + i + ': ' + JSON.stringify(a));
  });
  const big = 'n'.repeat(256 * 1024);
  const echoed = await request({ ':path': '/echo', ':method': 'POST' }, big);
  if (echoed.status !== 200 || echoed.body !== big) throw new Error('POST: status ' + echoed.status + ', ' + echoed.body.length + ' bytes');
  console.log('ok');
  session.close();
})().catch((e) => { console.log(e.message); process.exit(1); });
