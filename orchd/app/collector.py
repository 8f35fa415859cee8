# -*- test-case-name: tests.app.test_collector -*-
"""
How the process's cyclic garbage collector runs: short pauses, not none.

CPython's collector stops the process while it walks every tracked
container of the generations it collects, and orchd's process is one
reactor thread: every pause is a stall of every request, Lease renewal and
watch. Three kinds of pause grew with the cluster (measured with 3,000 and
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

  - The young collections: CPython counts container allocations minus
    deallocations, and a process that frees an old object for each new
    one (every Lease renewal replaces the last one in the watch caches and
    informers) lets the young generation grow to many times the first
    threshold before a collection comes: at 5,000 nodes, 60,000 objects
    walked in one pause of 40-110 ms every 20-30 s. L{PacedCollections}
    collects the young generation every second instead (the same work in
    pauses some thirty times shorter), and the middle and full ones after
    as many young and middle ones as the thresholds say; CPython's own
    trigger stays as the bound for bursts of allocation.

L{install} is called once by C{orchd.app.tap.makeService}, after the
modules are loaded (they are frozen there once and for all), which also
starts a L{PacedCollections} service.
"""

import gc
import time

from twisted.application.service import Service
from twisted.internet.task import LoopingCall

#: The collector's thresholds (CPython's are 700, 10, 10): net container
#: allocations before a young collection, then young collections per middle
#: one and middle ones per full one. Larger first thresholds make fewer
#: objects survive into the old generations (with CPython's defaults, full
#: collections came several times per thousand pods started, a third of the
#: process's CPU), smaller ones shorter middle collections.
THRESHOLDS = (10_000, 10, 10)
#: Seconds between two full collections that walk the frozen objects too.
UNFREEZE_INTERVAL = 3600.0
#: Seconds between two paced collections (L{PacedCollections}).
PACE = 1.0


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


class PacedCollections(Service):
    """
    A collection every L{PACE} seconds: of the oldest generation whose
    count has reached its threshold (C{gc.get_count} counts, for the middle
    and the oldest, the collections of the generation below since their
    own last one), else of the young one.

    @param clock: an C{IReactorTime}.
    @param collector: the C{gc} module (or a stand-in).
    """

    def __init__(self, clock, collector=gc, interval=PACE):
        self._clock = clock
        self._gc = collector
        self._interval = interval
        self._loop = None

    def startService(self):
        super().startService()
        self._loop = LoopingCall(self.collect)
        self._loop.clock = self._clock
        self._loop.start(self._interval, now=False)

    def stopService(self):
        super().stopService()
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def collect(self):
        """Collect the generation that is due; return which."""
        counts = self._gc.get_count()
        thresholds = self._gc.get_threshold()
        generation = 0
        for older in (1, 2):
            if counts[older] >= thresholds[older]:
                generation = older
        self._gc.collect(generation)
        return generation
