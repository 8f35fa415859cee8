"""The garbage collector's policy: what survives a full collection is frozen, unfrozen hourly."""

import gc
import weakref

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.app.collector import (
    PACE, UNFREEZE_INTERVAL, FreezeAfterFullCollections, PacedCollections, install)


class RecordingGC:
    """Stands in for the gc module, so that tests leave the test process's collector alone."""

    def __init__(self):
        self.calls = []
        self.callbacks = []

    def freeze(self):
        self.calls.append("freeze")

    def unfreeze(self):
        self.calls.append("unfreeze")

    def set_threshold(self, *thresholds):
        self.calls.append(("set_threshold", thresholds))


class CountingGC:
    """Counts as CPython's collector does: a collection resets its own count and younger ones."""

    def __init__(self, thresholds=(10_000, 3, 2)):
        self.thresholds = thresholds
        self.counts = [0, 0, 0]
        self.collected = []

    def get_threshold(self):
        return self.thresholds

    def get_count(self):
        return tuple(self.counts)

    def collect(self, generation):
        self.collected.append(generation)
        for younger in range(generation + 1):
            self.counts[younger] = 0
        if generation < 2:
            self.counts[generation + 1] += 1
        return 0


class FreezeTests(SynchronousTestCase):
    def setUp(self):
        self.now = 1000.0
        self.gc = RecordingGC()
        self.hook = FreezeAfterFullCollections(self.gc, lambda: self.now)

    def collect(self, generation):
        self.hook("start", {"generation": generation, "collected": 0, "uncollectable": 0})
        self.hook("stop", {"generation": generation, "collected": 0, "uncollectable": 0})

    def test_full_collections_freeze(self):
        """Each full collection freezes its survivors; young and middle ones change nothing."""
        self.collect(0)
        self.collect(1)
        self.assertEqual(self.gc.calls, [])
        self.collect(2)
        self.collect(2)
        self.assertEqual(self.gc.calls, ["freeze", "freeze"])

    def test_unfreeze_hourly(self):
        """The first full collection after an hour walks the frozen objects too, once."""
        self.now += UNFREEZE_INTERVAL - 1
        self.collect(2)
        self.now += 1
        self.collect(2)
        self.collect(2)
        self.assertEqual(self.gc.calls, ["freeze", "unfreeze", "freeze", "freeze"])

    def test_install_once(self):
        """install freezes and sets the thresholds each time, and hooks in once."""
        first = install(self.gc)
        self.assertIs(install(self.gc), first)
        self.assertEqual(self.gc.callbacks, [first])
        self.assertEqual(self.gc.calls.count("freeze"), 2)


class RealCollectorTests(SynchronousTestCase):
    def test_frozen_cycle_freed_at_unfreeze(self):
        """With the real collector: a cycle frozen alive, then dropped, is freed at the unfreeze."""
        now = [0.0]
        hook = FreezeAfterFullCollections(gc, lambda: now[0])
        gc.callbacks.append(hook)
        self.addCleanup(gc.callbacks.remove, hook)
        self.addCleanup(gc.unfreeze)

        class Node:
            pass
        cycle = Node()
        cycle.me = cycle
        alive = weakref.ref(cycle)
        gc.collect()
        self.assertGreater(gc.get_freeze_count(), 0)
        del cycle
        gc.collect()
        self.assertIsNotNone(alive())
        now[0] = UNFREEZE_INTERVAL
        gc.collect()
        self.assertIsNone(alive())


class PacedCollectionsTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.gc = CountingGC()
        self.paced = PacedCollections(self.clock, self.gc)

    def test_young_each_pace(self):
        """Running, it collects the young generation every PACE seconds, none at start."""
        self.paced.startService()
        self.assertEqual(self.gc.collected, [])
        self.clock.advance(PACE)
        self.clock.advance(PACE)
        self.assertEqual(self.gc.collected, [0, 0])

    def test_older_generations_by_threshold(self):
        """A middle collection after threshold[1] young ones, a full one after threshold[2]
        middle ones."""
        for _ in range(12):
            self.paced.collect()
        self.assertEqual(self.gc.collected, [0, 0, 0, 1, 0, 0, 0, 1, 2, 0, 0, 0])

    def test_stop(self):
        """Stopped, it leaves no call behind and collects nothing more."""
        self.paced.startService()
        self.paced.stopService()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.clock.advance(10 * PACE)
        self.assertEqual(self.gc.collected, [])
