"""
The durable store alone: --objects creates of ~2 KB config maps through
orchd's LevelDBStore in this process (no HTTP, no registry), --inflight at
a time, as create@16 makes them: names of the load generator's shape
(``bench-<pid>-<n>``, a new pid every 20,000), the value the same bytes
each time.

Every --window creates it prints the CPU time per create of each thread
(from ``/proc/self/task``: the reactor thread, the store's writer thread
and the rest, which is LevelDB's own compaction thread), the creates per
second, and LevelDB's tables per level; at the end LevelDB's compaction
statistics. The store's size is what makes the compaction thread's share
grow, so the windows are the figure.

    taskset -c 0 python bench/storewrites.py --objects 100000
    taskset -c 0 python bench/storewrites.py --leveldb-option write_buffer_size=16777216

``--leveldb-option NAME=VALUE`` (repeatable; a JSON value) overrides one of
the options the store opens LevelDB with, to try them one at a time.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import plyvel  # noqa: E402
from twisted.internet import reactor  # noqa: E402

from orchd.storage import leveldb  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")
VALUE = json.dumps({
    "apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "bench", "namespace": "bench-post",
                 "uid": "0f2a6c1e-3c4b-4f8a-9b1e-0123456789ab",
                 "creationTimestamp": "2026-11-26T11:00:00Z"},
    "data": {f"key{i}": "v" * 180 for i in range(10)},
}).encode()


def thread_ticks():
    """CPU clock ticks (user and system) of each thread of this process, by thread id."""
    ticks = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue    # a thread that just ended
        ticks[int(tid)] = int(fields[11]) + int(fields[12])
    return ticks


def with_options(overrides):
    """plyvel as the store sees it, its databases opened with C{overrides} on top."""
    if not overrides:
        return plyvel

    class Overridden:
        Error = plyvel.Error

        @staticmethod
        def DB(path, **options):
            return plyvel.DB(path, **dict(options, **overrides))

    return Overridden


class Run:
    """Creates kept --inflight at a time, reported every --window."""

    def __init__(self, args, store):
        self.args = args
        self.store = store
        self.issued = self.done = 0
        roles = {threading.get_native_id(): "reactor", store._writer._thread.native_id: "writer"}
        self.role = lambda tid: roles.get(tid, "other")
        self.ticks, self.started = thread_ticks(), time.monotonic()

    def start(self):
        for _ in range(min(self.args.inflight, self.args.objects)):
            self.create()

    def create(self):
        n = self.issued
        self.issued += 1
        name = f"bench-{1000 + n // 20000}-{n % 20000}"
        written = self.store.create(f"/registry/configmaps/bench-post/{name}", VALUE)
        written.addCallback(self.created).addErrback(self.failed)

    def created(self, _):
        self.done += 1
        if self.done % self.args.window == 0:
            self.report()
        if self.issued < self.args.objects:
            self.create()
        elif self.done == self.args.objects:
            print(self.store._db.get_property(b"leveldb.stats").decode())
            self.store.close().addBoth(lambda _: reactor.stop())

    def failed(self, failure):
        failure.printTraceback()
        reactor.stop()

    def report(self):
        ticks, now = thread_ticks(), time.monotonic()
        used = {"reactor": 0, "writer": 0, "other": 0}
        for tid, count in ticks.items():
            used[self.role(tid)] += count - self.ticks.get(tid, 0)
        window = self.args.window
        per_write = {role: count / HZ / window * 1e6 for role, count in used.items()}
        db = self.store._db
        tables = [int(db.get_property(b"leveldb.num-files-at-level%d" % level)) for level in range(4)]
        print(f"{self.done:>8} objects  CPU us per create: all {sum(per_write.values()):5.0f}  "
              + "  ".join(f"{role} {us:4.0f}" for role, us in per_write.items())
              + f"  {window / (now - self.started):6.0f} creates/s  tables by level {tables}",
              flush=True)
        self.ticks, self.started = ticks, now


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=10_000, help="creates per line")
    parser.add_argument("--inflight", type=int, default=16, help="creates in flight")
    parser.add_argument("--dir", help="the store's directory (default: a temporary one, removed)")
    parser.add_argument("--leveldb-option", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    overrides = {}
    for option in args.leveldb_option:
        name, _, value = option.partition("=")
        overrides[name] = json.loads(value)
    leveldb.plyvel = with_options(overrides)
    path = args.dir or tempfile.mkdtemp(prefix="orchd-storewrites-")
    try:
        store = leveldb.LevelDBStore(os.path.join(path, "db"), reactor=reactor)
        reactor.callWhenRunning(Run(args, store).start)
        reactor.run()
    finally:
        if not args.dir:
            shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()
