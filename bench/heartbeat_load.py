#!/usr/bin/env python3
"""
Simulated nodes renewing their Leases: the load of the heartbeats case.

Each node of --nodes-file (a JSON list of {"name", "cert", "key", "lease"}:
its client certificate, CN system:node:<name> O system:nodes, and its Lease
as created) renews its Lease every --interval seconds with a PUT of the
lease it last got back (so with its resourceVersion), over its own
keep-alive HTTPS connection (orchd.orchlet.apiclient.APIClient, the
orchlet's own client), as that node. Node i renews at i/n of the interval
after the start, then on a fixed cadence: a renewal still in flight when the
next is due skips that one (counted as ``skipped``).

The first interval is warm-up (connections and TLS handshakes); then the
load prints ``measuring`` on a line of its own, and after --secs more
seconds it prints one JSON line: renewals done and expected in the measured
window, their latency (p50, p99, max in ms, successes only), failures by
reason, and its own CPU time in cores.

Usage: python bench/heartbeat_load.py --url URL --ca CA.crt --nodes-file FILE
           [--interval 10] [--secs 300]
"""

import argparse
import datetime
import json
import os
import sys
import time

from twisted.internet import defer, task

from orchd.orchlet.apiclient import APIClient

LEASES = "/apis/coordination.orch.io/v1/namespaces/orch-node-lease/leases/"


def micro_time():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Stats:
    def __init__(self):
        self.measuring = False
        self.latencies = []
        self.failures = {}
        self.skipped = 0
        self.expected = 0

    def fail(self, reason):
        if self.measuring:
            self.failures[reason] = self.failures.get(reason, 0) + 1


class Node:
    """One node's renewals on its own connection."""

    def __init__(self, reactor, url, ca, spec, stats):
        self.name = spec["name"]
        self.path = LEASES + self.name
        self.lease = spec["lease"]
        self.api = APIClient(reactor, url, ca, spec["cert"].encode(), spec["key"].encode())
        self.stats = stats
        self.busy = False

    def tick(self):
        stats = self.stats
        if stats.measuring:
            stats.expected += 1
        if self.busy:
            if stats.measuring:
                stats.skipped += 1
            return
        self.busy = True
        defer.Deferred.fromCoroutine(self.renew()).addBoth(self._done)

    def _done(self, _):
        self.busy = False

    async def renew(self):
        measured = self.stats.measuring
        lease = dict(self.lease, spec=dict(self.lease["spec"], renewTime=micro_time()))
        began = time.perf_counter()
        try:
            code, body = await self.api.request("PUT", self.path, lease)
        except Exception as e:
            if measured:
                self.stats.fail(type(e).__name__)
            return
        elapsed = time.perf_counter() - began
        if code == 200:
            self.lease = body
            if measured:
                self.stats.latencies.append(elapsed)
            return
        if measured:
            self.stats.fail(str(code))
        if code == 409:         # someone else wrote it: read it again for the next renewal
            try:
                code, body = await self.api.request("GET", self.path)
                if code == 200:
                    self.lease = body
            except Exception:
                pass


def percentile(ordered, q):
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3) if ordered else None


async def run(reactor, args):
    with open(args.ca, "rb") as f:
        ca = f.read()
    with open(args.nodes_file) as f:
        specs = json.load(f)
    stats = Stats()
    nodes = [Node(reactor, args.url, ca, spec, stats) for spec in specs]
    loops = []
    for i, node in enumerate(nodes):
        loop = task.LoopingCall(node.tick)
        loop.clock = reactor
        loops.append(loop)
        reactor.callLater(i * args.interval / len(nodes), loop.start, args.interval)
    # Warm-up: the first round of renewals opens every connection.
    await task.deferLater(reactor, args.interval - 0.001, lambda: None)
    stats.measuring = True
    cpu_before, began = os.times(), time.monotonic()
    print("measuring", flush=True)
    await task.deferLater(reactor, args.secs, lambda: None)
    stats.measuring = False
    cpu_after, wall = os.times(), time.monotonic() - began
    for loop in loops:
        if loop.running:
            loop.stop()
    await task.deferLater(reactor, 2, lambda: None)     # let renewals in flight finish
    ordered = sorted(t * 1000 for t in stats.latencies)
    result = {
        "nodes": len(nodes), "interval": args.interval, "secs": round(wall, 3),
        "expected": stats.expected, "renewed": len(ordered), "skipped": stats.skipped,
        "failures": stats.failures, "errors": sum(stats.failures.values()),
        "p50_ms": percentile(ordered, 0.5), "p99_ms": percentile(ordered, 0.99),
        "max_ms": percentile(ordered, 1),
        "load_cpu": round((cpu_after.user + cpu_after.system - cpu_before.user
                           - cpu_before.system) / wall, 3),
    }
    await defer.DeferredList([node.api.close() for node in nodes])
    print(json.dumps(result), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--nodes-file", required=True)
    parser.add_argument("--interval", type=float, default=10)
    parser.add_argument("--secs", type=float, default=300)
    args = parser.parse_args()
    task.react(lambda reactor: defer.Deferred.fromCoroutine(run(reactor, args)))


if __name__ == "__main__":
    sys.exit(main())
