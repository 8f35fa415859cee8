// etcdload: etcd's raw put rate through its JSON gateway, in hload.js's style.
// Keep-alive plain-HTTP connections, each looping one POST /v3/kv/put at a time
// with a unique key and the value read from --value; reports req/s and latency
// percentiles as one JSON line, with the same fields as hload.js.
//   node etcdload.js --url http://127.0.0.1:2379 --value FILE [--conns 16] [--secs 10]
//        [--prefix /bench-raw/]
'use strict';
const http = require('http');
const fs = require('fs');
const { URL } = require('url');

const { parseArgs, latencyFigures } = require('./loadlib');

const args = parseArgs(process.argv);
const url = new URL(args.url);
const conns = parseInt(args.conns || '16', 10);
const secs = parseFloat(args.secs || '10');
const value = fs.readFileSync(args.value).toString('base64');
const prefix = (args.prefix || '/bench-raw/') + process.pid + '-';
const agent = new http.Agent({ keepAlive: true, maxSockets: conns });
const lat = [];
const codes = {};
let errors = 0, seq = 0, failed = 0;
const t0 = process.hrtime.bigint();
const deadline = t0 + BigInt(Math.round(secs * 1e9));

function one(done) {
  const key = Buffer.from(prefix + (seq++)).toString('base64');
  const b = '{"key":"' + key + '","value":"' + value + '"}';
  const start = process.hrtime.bigint();
  const req = http.request({
    agent, host: url.hostname, port: url.port, method: 'POST', path: '/v3/kv/put',
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(b) },
  }, (res) => {
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (chunk) => { if (text.length < 4096) text += chunk; });
    res.on('end', () => {
      const end = process.hrtime.bigint();
      // The gateway answers 200 with {"header": {"revision": ...}}, or an error object.
      const ok = res.statusCode === 200 && text.includes('"revision"');
      const code = ok ? 200 : res.statusCode === 200 ? 'bad-body' : res.statusCode;
      if (!ok) failed++;
      codes[code] = (codes[code] || 0) + 1;
      if (end <= deadline) lat.push(Number(end - start) / 1e6);
      done();
    });
  });
  req.on('error', () => { errors++; setTimeout(done, 10); });
  req.write(b);
  req.end();
}

function loop() {
  if (process.hrtime.bigint() >= deadline) return finished();
  one(loop);
}
let live = conns;
function finished() {
  if (--live > 0) return;
  console.log(JSON.stringify({
    url: args.url, method: 'PUT', conns, secs, ...latencyFigures(lat, secs),
    ok: lat.length - failed, codes, errors,
  }));
  agent.destroy();
}
for (let i = 0; i < conns; i++) loop();
