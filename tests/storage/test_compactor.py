"""Periodic compaction keeps one interval of history."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.storage.compactor import Compactor
from orchd.storage.interfaces import CompactedError
from orchd.storage.memory import MemoryStore


class CompactorTests(SynchronousTestCase):
    def test_compacts_to_previous_tick(self):
        """Each tick compacts to the revision of the tick before, never further."""
        store, clock = MemoryStore(), Clock()
        compactor = Compactor(store, clock, interval=300)
        store.create("/a", b"1")
        compactor.startService()
        self.addCleanup(compactor.stopService)
        self.assertEqual(store.compacted_revision, 0)
        store.create("/b", b"2")
        clock.advance(300)
        self.assertEqual(store.compacted_revision, 1)
        self.successResultOf(store.list("/", revision=1))
        clock.advance(300)
        self.assertEqual(store.compacted_revision, 2)
        self.failureResultOf(store.list("/", revision=1), CompactedError)

    def test_zero_interval_never_compacts(self):
        """An interval of 0 keeps all history."""
        store, clock = MemoryStore(), Clock()
        compactor = Compactor(store, clock, interval=0)
        compactor.startService()
        store.create("/a", b"1")
        clock.advance(10_000)
        self.assertEqual(store.compacted_revision, 0)
