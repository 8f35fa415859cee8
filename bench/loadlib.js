// What the load generators share: their command-line flags and the latency
// figures of a run.
'use strict';

// Flags as --name value, or --name alone for true.
function parseArgs(argv) {
  const args = {};
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) continue;
    const next = argv[i + 1];
    if (next === undefined || next.startsWith('--')) args[a.slice(2)] = true;
    else { args[a.slice(2)] = next; i++; }
  }
  return args;
}

// Requests, rate and percentiles (ms) of the latencies of a run of `secs`.
function latencyFigures(lat, secs) {
  lat.sort((a, b) => a - b);
  const pct = (p) => lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : null;
  return {
    requests: lat.length, rps: lat.length / secs, p50_ms: pct(0.5), p99_ms: pct(0.99),
    max_ms: lat[lat.length - 1] || null,
  };
}

module.exports = { parseArgs, latencyFigures };
