# -*- test-case-name: tests.app.test_collector -*-
"""
How the process's cyclic garbage collector runs: short pauses, not none.

CPython's collector stops the process while it walks every tracked
container of the generations it collects, and orchd's process is one
reactor thread: every pause is a stall of every request, Lease renewal and
watch. Two kinds of pause grew with the cluster (measured with 3,000 and
5,000 simulated nodes):

  - The middle (generation 1) collections: with a first threshold of
    50,000 (L{THRESHOLDS}), generation 1 held up to ten times that many
    survivors of young collections, and walking them took up to 0.2 s of
    CPU. A first threshold of 10,000 keeps it to a fifth of that.

  - The full (generation 2) collections walk everything the process
    keeps: the watch caches, a dozen informers, a connection and a TLS
    session per node, millions of objects at 5,000 nodes (tenths of a
    second to seconds each). Most of them live as long as the process,
    and what orchd allocates (JSON trees, bytes) is freed by reference
    counting, not by the collector. So after each full collection, the
    objects that survived it are frozen (C{gc.freeze}): the next full
    collection walks only what has lived long enough since, as the
    long-running servers that freeze their warm heap do. A frozen object
    is still freed by reference counting; only one that later ends up in
    a garbage cycle (a closed connection and its protocol) stays until the
    next unfreeze: the first full collection after L{UNFREEZE_INTERVAL}
    walks the frozen objects once more (that collection takes the long
    pause, once an hour, and frees them).

L{install} is called once by C{orchd.app.tap.makeService}, after the
modules are loaded (they are frozen there once and for all).
"""

import gc
import time

#: The collector's thresholds (CPython's are 700, 10, 10): net container
#: allocations before a young collection, then young collections per middle
#: one and middle ones per full one. Larger first thresholds make fewer
#: objects survive into the old generations (with CPython's defaults, full
#: collections came several times per thousand pods started, a third of the
#: process's CPU), smaller ones shorter middle collections.
THRESHOLDS = (10_000, 10, 10)
#: Seconds between two full collections that walk the frozen objects too.
UNFREEZE_INTERVAL = 3600.0


class FreezeAfterFullCollections:
    """
    A C{gc.callbacks} entry freezing the survivors of each full collection,
    and unfreezing them before the first one after each
    L{UNFREEZE_INTERVAL}.

    @param collector: the C{gc} module (or a stand-in).
    @param seconds: C{seconds() -> float}, a monotonic clock.
    """

    def __init__(self, collector=gc, seconds=time.monotonic, interval=UNFREEZE_INTERVAL):
        self._gc = collector
        self._seconds = seconds
        self._interval = interval
        self._unfrozen = seconds()

    def __call__(self, phase, info):
        if info.get("generation") != 2:
            return
        if phase == "start":
            now = self._seconds()
            if now - self._unfrozen >= self._interval:
                # This collection walks the frozen objects too (they join
                # the oldest generation), and frees those now garbage.
                self._unfrozen = now
                self._gc.unfreeze()
        elif phase == "stop":
            self._gc.freeze()


def install(collector=gc, seconds=time.monotonic):
    """
    Freeze what is loaded, set L{THRESHOLDS} and freeze after full
    collections (once per process: a second call only freezes).
    """
    collector.freeze()
    collector.set_threshold(*THRESHOLDS)
    for hook in collector.callbacks:
        if isinstance(hook, FreezeAfterFullCollections):
            return hook
    hook = FreezeAfterFullCollections(collector, seconds)
    collector.callbacks.append(hook)
    return hook
