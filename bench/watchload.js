// watchload: watch fan-out under a steady write rate, over HTTPS with client
// certificates. One process plays both sides:
//   - N watchers, one TLS connection each, on the config maps of one namespace,
//     all from the resourceVersion of a LIST made first (so none misses an event
//     whatever the order in which the streams open);
//   - one writer creating uniquely named ~2 KB config maps at --rate per second,
//     paced by a timer with at most --inflight POSTs outstanding.
// Delay per (watcher, event) = receipt of the ADDED event at the watcher minus
// arrival of the 201 at the writer; it may be slightly negative when the event
// beats the 201, and is reported with its sign. Prints one JSON line.
//   node watchload.js --url https://127.0.0.1:6443 --cert F --key F [--ca F]
//        [--namespace bench-watch] [--watchers 1000] [--rate 100] [--secs 20]
//        [--body FILE]      (a config map; metadata.name is replaced per write)
//        [--inflight 32]    (most POSTs outstanding; past it, due writes wait)
//        [--open 50]        (most watch requests being opened at once)
//        [--open-timeout 60] [--drain 5]  (seconds)
//        [--idle 0]         (seconds the open watches wait before the writes)
// Phases are announced on stderr, one line each when reached: "open" (every
// watch opened), "writing" (after --idle) and "drained" (the last events in),
// so that a caller can measure the server at each (run.py: RSS with idle
// watchers, CPU over the writes).
// The namespace is created if missing. A watcher fails on a non-200 answer, a
// socket error, an ERROR event or its stream ending before the run does.
'use strict';
const https = require('https');
const tls = require('tls');
const fs = require('fs');
const { URL } = require('url');
const { performance } = require('perf_hooks');

const { parseArgs } = require('./loadlib');

const args = parseArgs(process.argv);
const base = new URL(args.url);
const port = base.port || 443;
const namespace = args.namespace || 'bench-watch';
const nWatchers = parseInt(args.watchers || '1000', 10);
const rate = parseFloat(args.rate || '100');
const secs = parseFloat(args.secs || '20');
const maxInflight = parseInt(args.inflight || '32', 10);
const openConcurrency = parseInt(args.open || '50', 10);
const openTimeout = parseFloat(args['open-timeout'] || '60') * 1000;
const drain = parseFloat(args.drain || '5') * 1000;
const idle = parseFloat(args.idle || '0') * 1000;
const collection = `/api/v1/namespaces/${namespace}/configmaps`;
// Unique per run, so earlier runs' objects in the namespace never match.
const prefix = `wl-${process.pid}-${Date.now().toString(36)}-`;
const capacity = Math.ceil(rate * secs) + 1;  // writes never exceed this

let template;
if (args.body) {
  template = JSON.parse(fs.readFileSync(args.body, 'utf8'));
} else {
  // The same ~2 KB object as run.py's make_body: ten 180-byte values.
  template = { apiVersion: 'v1', kind: 'ConfigMap', metadata: {}, data: {} };
  for (let i = 0; i < 10; i++) template.data[`key${i}`] = 'v'.repeat(180);
}

const tlsOptions = {
  cert: args.cert ? fs.readFileSync(args.cert) : undefined,
  key: args.key ? fs.readFileSync(args.key) : undefined,
  ca: args.ca ? fs.readFileSync(args.ca) : undefined,
  rejectUnauthorized: !!args.ca,
};
// No SNI for an IP address (as https.Agent does).
const tlsServername = require('net').isIP(base.hostname) ? '' : base.hostname;
// The writer (and setup requests): keep-alive connections.
const writeAgent = new https.Agent({ ...tlsOptions, keepAlive: true, maxSockets: maxInflight });

function fail(message) {
  console.error(`watchload: ${message}`);
  process.exit(2);
}

// One request on the keep-alive agent: resolves to {status, body}.
function call(method, path, body) {
  return new Promise((resolve, reject) => {
    const req = https.request({
      agent: writeAgent, host: base.hostname, port, method, path,
      headers: body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {},
    }, (res) => {
      const parts = [];
      res.on('data', (c) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(parts).toString() }));
    });
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}

// ---------------------------------------------------------------- watchers

// Receipt times by write sequence number, NaN until the ADDED event arrives.
const watchers = [];
const failures = {};       // reason -> count
let finished = false;      // set before we close the streams ourselves
let parseFast = true;      // byte scan of each line (see scan), else JSON.parse
let parseChecks = 0, parseMismatches = 0, parsedFull = 0;
let duplicates = 0, bookmarks = 0, otherEvents = 0, lines = 0;

function failWatcher(w, reason) {
  if (w.failed || finished) return;
  w.failed = reason;
  failures[reason] = (failures[reason] || 0) + 1;
  if (w.req) w.req.destroy();
}

// The type and metadata.name of one event line, found in the bytes without
// decoding and parsing ~2 KB of JSON per event per watcher (100,000 a second
// at 1,000 x 100/s would take a good part of the load's core). orchd writes
// compact JSON with the type first and the name first in metadata; any other
// layout takes the JSON.parse path. JSON.parse checks the scan on the first
// 100 lines, every 1,000th, and any whose name is not one of ours (a name
// found in the wrong place); after a mismatch, it reads every line.
const TYPE_KEY = Buffer.from('{"type":"');
const NAME_KEY = Buffer.from('"metadata":{"name":"');
const QUOTE = 0x22, NEWLINE = 0x0a;
function scan(buf, start, end) {
  if (parseFast && buf.compare(TYPE_KEY, 0, TYPE_KEY.length, start, start + TYPE_KEY.length) === 0) {
    const at = start + TYPE_KEY.length;
    const type = buf.toString('latin1', at, buf.indexOf(QUOTE, at));
    if (type !== 'ADDED') return { type, name: null };
    const key = buf.indexOf(NAME_KEY, at);
    if (key >= 0 && key < end) {
      const from = key + NAME_KEY.length;
      const name = buf.toString('latin1', from, buf.indexOf(QUOTE, from));
      if (++lines <= 100 || lines % 1000 === 0 || !name.startsWith(prefix)) {
        return check(buf, start, end, type, name);
      }
      return { type, name };
    }
  }
  return full(buf, start, end);
}
function full(buf, start, end) {
  parsedFull++;
  const event = JSON.parse(buf.toString('utf8', start, end));
  const meta = (event.object && event.object.metadata) || {};
  return { type: event.type, name: meta.name || null, object: event.object };
}
function check(buf, start, end, type, name) {
  parseChecks++;
  parsedFull--;  // a check, not a line the scan could not read
  const e = full(buf, start, end);
  if (e.type !== type || e.name !== name) { parseMismatches++; parseFast = false; }
  return e;
}

function onLine(w, buf, start, end, now) {
  if (end === start || (end === start + 1 && buf[start] === 0x0d)) return;
  let e;
  try { e = scan(buf, start, end); } catch (err) { return failWatcher(w, 'bad_json'); }
  if (e.type === 'BOOKMARK') { bookmarks++; return; }
  if (e.type === 'ERROR') {
    const o = e.object || full(buf, start, end).object || {};
    return failWatcher(w, `error_event_${o.code || 'unknown'}`);
  }
  if (e.type !== 'ADDED' || !e.name || !e.name.startsWith(prefix)) { otherEvents++; return; }
  const seq = parseInt(e.name.slice(prefix.length), 10);
  if (!(seq >= 0 && seq < capacity)) { otherEvents++; return; }
  if (!Number.isNaN(w.got[seq])) { duplicates++; return; }
  w.got[seq] = now;
  w.count++;
}

// Watch streams are read off raw TLS sockets: a status line, headers, then
// the chunked body, decoded here. Node's HTTP client costs several
// microseconds per chunk, and at 1,000 x 100 events/s that alone would take
// much of the load's core (the writer keeps the HTTP client).
const secureContext = tls.createSecureContext(tlsOptions);
const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');

// Incremental decoder of one HTTP/1.1 response: onHead(status, headers) once,
// then onBody(buf, start, end) for each piece of the (de-chunked) body, then
// onEnd() at the terminating zero-size chunk.
class ResponseReader {
  constructor(onHead, onBody, onEnd) {
    Object.assign(this, { onHead, onBody, onEnd });
    this.pending = null;   // bytes of a head or chunk-size line not yet complete
    this.state = 'head';   // head | size | data | crlf | done | raw
    this.left = 0;         // bytes left in the current chunk
  }

  push(chunk) {
    let buf = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = null;
    let at = 0;
    while (at < buf.length) {
      if (this.state === 'data') {
        const end = Math.min(buf.length, at + this.left);
        this.onBody(buf, at, end);
        this.left -= end - at;
        at = end;
        if (this.left === 0) this.state = 'crlf';
      } else if (this.state === 'size' || this.state === 'crlf' || this.state === 'head') {
        const mark = this.state === 'head' ? HEAD_END : CRLF;
        const found = buf.indexOf(mark, at);
        if (found < 0) { this.pending = Buffer.from(buf.subarray(at)); return; }
        const text = buf.toString('latin1', at, found);
        at = found + mark.length;
        if (this.state === 'crlf') {
          this.state = 'size';  // text is empty: the CRLF after a chunk's data
        } else if (this.state === 'size') {
          this.left = parseInt(text, 16);  // chunk extensions (;...) are ignored by parseInt
          if (!(this.left >= 0)) throw new Error(`bad chunk size ${JSON.stringify(text)}`);
          if (this.left === 0) { this.state = 'done'; this.onEnd(); return; }
          this.state = 'data';
        } else {
          const [statusLine, ...lines] = text.split('\r\n');
          const headers = {};
          for (const line of lines) {
            const colon = line.indexOf(':');
            headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
          }
          // Only a chunked body is a stream; anything else is read as is.
          this.state = /chunked/i.test(headers['transfer-encoding'] || '') ? 'size' : 'raw';
          this.onHead(parseInt(statusLine.split(' ')[1], 10), headers);
        }
      } else if (this.state === 'raw') {
        this.onBody(buf, at, buf.length);
        return;
      } else {
        return;  // done
      }
    }
  }
}

// Open one watch; resolves once the 200 (or a failure) is in.
function openWatcher(w, rv) {
  return new Promise((resolve) => {
    const path = `${collection}?watch=true&resourceVersion=${encodeURIComponent(rv)}&allowWatchBookmarks=true`;
    const socket = tls.connect({
      host: base.hostname, port, secureContext, servername: tlsServername,
      rejectUnauthorized: tlsOptions.rejectUnauthorized,
    });
    w.req = socket;
    let tail = null;  // the start of a line the last piece ended in
    let status = 0;
    const reader = new ResponseReader((code) => {
      status = code;
      if (code === 200) { w.ready = true; resolve(); }
    }, (piece, start, end) => {
      if (status !== 200) return;
      const now = performance.now();
      let buf = piece, from = start;
      if (tail) { buf = Buffer.concat([tail, piece.subarray(start, end)]); from = 0; end = buf.length; }
      let nl;
      while ((nl = buf.indexOf(NEWLINE, from)) >= 0 && nl < end) {
        onLine(w, buf, from, nl, now);
        from = nl + 1;
      }
      tail = from < end ? Buffer.from(buf.subarray(from, end)) : null;
    }, () => socket.end());
    socket.on('secureConnect', () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: ${base.host}\r\nAccept: application/json\r\n` +
                   'User-Agent: watchload\r\n\r\n');
    });
    socket.on('data', (chunk) => {
      try { reader.push(chunk); } catch (err) { failWatcher(w, 'bad_http'); }
      if (status && status !== 200) { failWatcher(w, `http_${status}`); resolve(); }
    });
    socket.on('error', (err) => { failWatcher(w, `socket_${err.code || 'error'}`); resolve(); });
    socket.on('close', () => { failWatcher(w, status === 200 ? 'closed' : 'socket_closed'); resolve(); });
  });
}

async function openAll(rv) {
  for (let i = 0; i < nWatchers; i++) {
    watchers.push({ got: new Float64Array(capacity).fill(NaN), count: 0, ready: false, failed: null, req: null });
  }
  let next = 0;
  async function lane() {
    while (next < watchers.length) await openWatcher(watchers[next++], rv);
  }
  const lanes = [];
  for (let i = 0; i < Math.min(openConcurrency, nWatchers); i++) lanes.push(lane());
  // Past the timeout the writes start anyway: the watches began at rv, so a
  // stream that opens late still owes every event.
  await Promise.race([Promise.all(lanes), new Promise((r) => setTimeout(r, openTimeout))]);
}

// ---------------------------------------------------------------- writer

const acked = new Float64Array(capacity).fill(NaN);  // 201 arrival by sequence
const writeLat = [];
const writeCodes = {};
let writeErrors = 0, issued = 0, inflight = 0, late = 0;

function write(seq) {
  const obj = { ...template, metadata: { ...(template.metadata || {}), name: prefix + seq } };
  delete obj.metadata.resourceVersion;
  const body = JSON.stringify(obj);
  const start = performance.now();
  if (start - (writeStart + seq * 1000 / rate) > 10) late++;  // behind schedule by > 10 ms
  inflight++;
  let done = false;
  const release = () => { if (!done) { done = true; inflight--; pump(); } };
  const req = https.request({
    agent: writeAgent, host: base.hostname, port, method: 'POST', path: collection,
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
  }, (res) => {
    const now = performance.now();  // the acknowledgement: status line in
    writeCodes[res.statusCode] = (writeCodes[res.statusCode] || 0) + 1;
    if (res.statusCode === 201) { acked[seq] = now; writeLat.push(now - start); }
    res.resume();
    res.on('end', release);
  });
  req.on('error', () => { writeErrors++; release(); });
  req.end(body);
}

// Issue every write that is due by the clock, as far as --inflight allows;
// writes held back by the bound go out as soon as a slot frees (counted as
// late when more than 10 ms behind their time).
let writeStart = 0, writeEnd = 0;
function pump() {
  const now = performance.now();
  if (now >= writeEnd) return;
  const due = Math.min(capacity, Math.floor((now - writeStart) * rate / 1000) + 1);
  while (issued < due && inflight < maxInflight) write(issued++);
}

function runWrites() {
  return new Promise((resolve) => {
    writeStart = performance.now();
    writeEnd = writeStart + secs * 1000;
    const tick = setInterval(pump, Math.max(1, Math.min(10, 1000 / rate / 2)));
    pump();
    setTimeout(() => { clearInterval(tick); resolve(); }, secs * 1000);
  });
}

// After the last write: wait for the outstanding 201s and for every live
// watcher to have every acknowledged event, or for --drain to run out.
function waitDrain() {
  return new Promise((resolve) => {
    const deadline = performance.now() + drain;
    const poll = setInterval(() => {
      let want = 0;
      for (let s = 0; s < capacity; s++) if (!Number.isNaN(acked[s])) want++;
      const done = inflight === 0 && watchers.every((w) => w.failed || w.count >= want);
      if (done || performance.now() >= deadline) { clearInterval(poll); resolve(); }
    }, 50);
  });
}

// ---------------------------------------------------------------- report

function percentile(sorted, p) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : null;
}
const round3 = (x) => (x === null ? null : Math.round(x * 1000) / 1000);

function report(openSeconds, cpu, wall) {
  const ackedSeqs = [];
  for (let s = 0; s < capacity; s++) if (!Number.isNaN(acked[s])) ackedSeqs.push(s);
  const delays = new Float64Array(ackedSeqs.length * watchers.length);
  let n = 0, unacked = 0;
  for (const w of watchers) {
    for (const s of ackedSeqs) {
      const t = w.got[s];
      if (!Number.isNaN(t)) delays[n++] = t - acked[s];
    }
    unacked += w.count;
  }
  unacked -= n;  // events for writes whose 201 never came
  const sorted = delays.subarray(0, n).sort();
  writeLat.sort((a, b) => a - b);
  const expected = ackedSeqs.length * watchers.length;
  return {
    url: args.url, namespace, watchers: watchers.length,
    watchers_ready: watchers.filter((w) => w.ready).length,
    watchers_failed: watchers.filter((w) => w.failed).length,
    failures, open_seconds: round3(openSeconds),
    rate, secs, writes_issued: issued, writes_acked: ackedSeqs.length, writes_late: late,
    write_codes: writeCodes, write_errors: writeErrors,
    write_p50_ms: round3(percentile(writeLat, 0.5)), write_p99_ms: round3(percentile(writeLat, 0.99)),
    events_expected: expected, events_received: n, missed: expected - n,
    events_unacked: unacked, duplicates, bookmarks, other_events: otherEvents,
    delay_p50_ms: round3(percentile(sorted, 0.5)), delay_p99_ms: round3(percentile(sorted, 0.99)),
    delay_max_ms: round3(n ? sorted[n - 1] : null), delay_min_ms: round3(n ? sorted[0] : null),
    // CPU of this process over the write phase, in cores: near 1.0 means the
    // load generator itself was saturated and the delays include its queueing.
    load_cpu: round3(cpu / wall),
    // Lines read by JSON.parse rather than the scan (all of them after a mismatch).
    parsed_full: parsedFull, parse_checks: parseChecks, parse_mismatches: parseMismatches,
  };
}

async function main() {
  // The namespace (201, or 409 when it exists), then the revision to watch from.
  const ns = await call('POST', '/api/v1/namespaces', JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }));
  if (ns.status !== 201 && ns.status !== 409) fail(`creating namespace: ${ns.status} ${ns.body.slice(0, 200)}`);
  const list = await call('GET', `${collection}?limit=1`);
  if (list.status !== 200) fail(`LIST: ${list.status} ${list.body.slice(0, 200)}`);
  const rv = JSON.parse(list.body).metadata.resourceVersion;

  const t0 = performance.now();
  await openAll(rv);
  const openSeconds = (performance.now() - t0) / 1000;
  process.stderr.write('open\n');
  if (idle > 0) await new Promise((r) => setTimeout(r, idle));
  process.stderr.write('writing\n');

  const cpu0 = process.cpuUsage();
  const w0 = performance.now();
  await runWrites();
  const cpu = process.cpuUsage(cpu0);
  const wall = performance.now() - w0;
  await waitDrain();
  process.stderr.write('drained\n');

  finished = true;
  for (const w of watchers) if (w.req) w.req.destroy();
  console.log(JSON.stringify(report(openSeconds, (cpu.user + cpu.system) / 1000, wall)));
  writeAgent.destroy();
  process.exit(0);
}

main().catch((err) => fail(err.stack || String(err)));
