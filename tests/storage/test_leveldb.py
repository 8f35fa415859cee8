# -*- test-case-name: tests.storage.test_leveldb -*-
"""
What only the LevelDB store does: durability, restart, group commit, the writer thread.

The behaviour it shares with every store is in L{tests.storage.test_contract}.
"""

import os
import sys
import textwrap
import threading

import plyvel
from twisted.internet import defer, protocol, reactor
from twisted.trial.unittest import SkipTest, TestCase

import orchd
from orchd.storage.interfaces import (
    CompactedError,
    ConflictError,
    KeyExistsError,
    KeyNotFoundError,
    StoreUnavailableError,
)
from orchd.storage.leveldb import LevelDBStore

from tests.storage.test_contract import Collector

CM = "/registry/configmaps/"


class Gate:
    """Holds the writer thread inside C{_write_batch} until the test opens it."""

    def __init__(self, store, fail=False):
        self.opened = threading.Event()
        self.entered = defer.Deferred()
        self.threads = []
        self.sizes = []
        self._write = store._write_batch
        self._fail = fail
        store._write_batch = self._write_batch

    def _write_batch(self, writes):
        self.threads.append(threading.current_thread())
        self.sizes.append(len(writes))
        if len(self.sizes) == 1:
            reactor.callFromThread(self.entered.callback, None)
        self.opened.wait()
        if self._fail:
            self._fail = False
            raise OSError("disk on fire")
        return self._write(writes)

    def open(self):
        self.opened.set()


class LevelDBStoreTests(TestCase):
    """LevelDB-only behaviour."""

    def open_store(self, path=None, **kwargs):
        self.path = path or self.path
        store = LevelDBStore(self.path, reactor, **kwargs)
        self.addCleanup(store.close)
        return store

    def setUp(self):
        self.path = self.mktemp()
        self.store = self.open_store()

    def raw_keys(self, prefix):
        """The raw LevelDB keys under C{prefix}, read with the store closed."""
        db = plyvel.DB(self.path)
        try:
            return list(db.iterator(prefix=prefix, include_value=False))
        finally:
            db.close()

    async def test_reopen_restores_revision_horizon_and_data(self):
        """A reopened store has the same revision, horizon, data and history."""
        kv = await self.store.create(CM + "a", b"1")
        await self.store.create(CM + "b", b"2")
        await self.store.update(CM + "a", b"3", kv.mod_revision)
        await self.store.delete(CM + "b")
        await self.store.compact(2)
        before = await self.store.list(CM, revision=2)
        await self.store.close()
        store = self.open_store()
        self.assertEqual(await store.current_revision(), 4)
        self.assertEqual(store.compacted_revision, 2)
        self.assertEqual((await store.get(CM + "a")).value, b"3")
        self.assertEqual((await store.list(CM, revision=2)).items, before.items)
        await self.assertFailure(store.list(CM, revision=1), CompactedError)
        collector = Collector()
        await store.watch(CM, 2, collector.on_events, collector.on_error)
        await collector.wait_for(2)
        self.assertEqual(collector.revisions, [3, 4])
        self.assertEqual(collector.events[0].prev_value, b"1")
        kv = await store.create(CM + "c", b"")
        self.assertEqual(kv.mod_revision, 5)

    async def test_absent_keys_read_nothing(self):
        """Keys known absent (never written, deleted, or after a reopen) are not looked up in
        LevelDB; a present one is, and a reopened store knows which are which."""
        await self.store.create(CM + "kept", b"1")
        await self.store.create(CM + "gone", b"2")
        await self.store.delete(CM + "gone")
        await self.store.close()
        store = self.open_store()
        reads = []
        db = store._db

        class Counting:
            def __getattr__(self, name):
                if name in ("get", "raw_iterator"):
                    reads.append(name)
                return getattr(db, name)
        store._db = Counting()
        self.assertIsNone(await store.get(CM + "gone"))
        self.assertIsNone(await store.get(CM + "never"))
        await self.assertFailure(store.update(CM + "gone", b"3", 2), KeyNotFoundError)
        kv = await store.create(CM + "gone", b"4")
        self.assertEqual(reads, [])
        self.assertEqual((await store.get(CM + "kept")).value, b"1")
        await self.assertFailure(store.create(CM + "kept", b"5"), KeyExistsError)
        self.assertEqual(reads, ["get", "raw_iterator"])
        store._db = db
        self.assertEqual((await store.get(CM + "gone")).mod_revision, kv.mod_revision)

    async def test_sequential_writes_sync_once_each(self):
        """A lone client writing one at a time gets one synced batch per write."""
        for n in range(10):
            await self.store.create(CM + str(n), b"")
        self.assertEqual(self.store.batches_written, 10)

    async def test_concurrent_writes_share_batches(self):
        """A hundred concurrent creates complete in far fewer synced batches."""
        writes = [self.store.create(CM + "%03d" % n, b"x" * 100) for n in range(100)]
        results = await defer.gatherResults(writes)
        self.assertEqual([kv.mod_revision for kv in results], list(range(1, 101)))
        self.assertLessEqual(self.store.batches_written, 3)
        self.assertEqual(await self.store.count(CM), 100)

    async def test_writes_of_one_turn_share_a_batch(self):
        """Writes decided in one reactor turn, the first among them, go in one synced batch."""
        writes = [self.store.create(CM + str(n), b"") for n in range(5)]
        await defer.gatherResults(writes)
        self.assertEqual(self.store.batches_written, 1)

    async def test_writer_thread_does_not_preempt_the_reactor(self):
        """On Linux the writer thread is scheduled as SCHED_BATCH, so waking it preempts nothing."""
        if not hasattr(os, "SCHED_BATCH"):
            raise SkipTest("no SCHED_BATCH on this platform")
        await self.store.create(CM + "a", b"")
        thread = self.store._writer._thread
        self.assertEqual(os.sched_getscheduler(thread.native_id), os.SCHED_BATCH)

    async def test_writer_thread_ends_with_the_store(self):
        """Closing the store ends its writer thread."""
        await self.store.create(CM + "a", b"")
        thread = self.store._writer._thread
        await self.store.close()
        self.assertFalse(thread.is_alive())

    async def test_batch_sizes_observed(self):
        """Each group commit's write count lands in the batch-size histogram."""
        from orchd.api.metrics import Histogram
        sizes = Histogram("batch", "Batch.", (), (1, 2, 4, 8, 16, 32, 64, 128))
        self.store.batch_sizes = sizes.labels()
        await self.store.create(CM + "lone", b"")
        writes = [self.store.create(CM + "%03d" % n, b"x") for n in range(50)]
        await defer.gatherResults(writes)
        child = sizes.child()
        self.assertEqual(child.count, self.store.batches_written)
        self.assertEqual(child.sum, 51)
        self.assertGreaterEqual(child.counts[0], 1)          # the lone write: a batch of one
        self.assertLess(child.count, 51)                    # the fifty shared batches

    async def test_batches_are_written_off_the_reactor_thread(self):
        """The synced write happens in the store's writer thread, not the reactor's."""
        gate = Gate(self.store)
        gate.open()
        await self.store.create(CM + "a", b"")
        self.assertEqual(len(gate.threads), 1)
        self.assertIsNot(gate.threads[0], threading.current_thread())
        self.assertIn("orchd-leveldb-writer", gate.threads[0].name)

    async def test_reads_see_only_durable_writes(self):
        """Until its batch is written a write is invisible to reads and to watches."""
        collector = Collector()
        await self.store.watch(CM, 0, collector.on_events, collector.on_error)
        gate = Gate(self.store)
        created = self.store.create(CM + "a", b"1")
        self.assertIsNone(await self.store.get(CM + "a"))
        self.assertEqual((await self.store.list(CM)).revision, 0)
        self.assertEqual(await self.store.current_revision(), 0)
        self.assertEqual(collector.events, [])
        gate.open()
        kv = await created
        self.assertEqual(await self.store.get(CM + "a"), kv)
        self.assertEqual(collector.revisions, [1])

    async def test_compare_and_swap_sees_pending_writes(self):
        """Writes decided while earlier ones are still being synced see those earlier writes."""
        gate = Gate(self.store)
        created = self.store.create(CM + "a", b"1")
        await gate.entered
        updated = self.store.update(CM + "a", b"2", 1)
        await self.assertFailure(self.store.create(CM + "a", b"x"), KeyExistsError)
        stale = self.store.update(CM + "a", b"3", 1)
        deleted = self.store.delete(CM + "a", 2)
        gate.open()
        self.assertEqual((await created).mod_revision, 1)
        self.assertEqual((await updated).mod_revision, 2)
        self.assertEqual((await self.assertFailure(stale, ConflictError)).current.mod_revision, 2)
        self.assertEqual((await deleted)[0], 3)
        self.assertEqual(gate.sizes, [1, 2])
        self.assertIsNone(await self.store.get(CM + "a"))

    async def test_failed_batch_fails_pending_writes_and_recovers(self):
        """A batch that cannot be written fails it and every write queued behind it; later writes work."""
        await self.store.create(CM + "kept", b"")
        gate = Gate(self.store, fail=True)
        first = self.store.create(CM + "a", b"1")
        await gate.entered
        dependent = self.store.update(CM + "a", b"2", 2)
        other = self.store.create(CM + "b", b"")
        gate.open()
        for write in (first, dependent, other):
            await self.assertFailure(write, StoreUnavailableError)
        self.assertEqual(gate.sizes, [1])
        self.assertEqual(len(self.flushLoggedErrors(OSError)), 1)
        self.assertEqual(await self.store.current_revision(), 1)
        kv = await self.store.create(CM + "a", b"again")
        self.assertEqual((kv.mod_revision, gate.sizes), (2, [1, 1]))
        self.assertEqual(await self.store.count(CM), 2)
        self.assertIsNone(await self.store.get(CM + "b"))

    async def test_close_waits_for_pending_writes(self):
        """close() lets queued writes finish and become durable before closing."""
        writes = [self.store.create(CM + str(n), b"") for n in range(5)]
        await self.store.close()
        self.assertEqual(len(await defer.gatherResults(writes)), 5)
        store = self.open_store()
        self.assertEqual(await store.count(CM), 5)

    def tables_by_level(self, db):
        """The numbers of LevelDB's tables at each level that has some."""
        levels = {}
        for line in db.get_property(b"leveldb.sstables").decode().splitlines():
            if line.startswith("--- level "):
                level = int(line.split()[2])
            else:
                levels.setdefault(level, []).append(int(line.split(":")[0]))
        return levels

    async def test_writes_do_not_make_leveldb_merge_tables(self):
        """Creates of absent keys, each looked up through two tables, do not get the newer table merged into the older."""
        db = self.store._db
        # An older table spanning every key, then a newer one within it, a level above.
        for name in ("a", "z"):
            await self.store.create(CM + name, b"")
        db.compact_range()
        for name in ("b", "y"):
            await self.store.create(CM + name, b"")
        db.compact_range(start=b"x0", stop=b"x1")    # flushes the memtable, merges nothing
        before = self.tables_by_level(db)
        self.assertEqual([len(before[level]) for level in (1, 2)], [1, 1])
        # LevelDB merges a table after some hundreds of lookups charged to it.
        await defer.gatherResults([self.store.create(CM + "m%04d" % n, b"") for n in range(2000)])
        for _ in range(3):
            db.compact_range(start=b"x0", stop=b"x1")    # waits for the background thread
        after = self.tables_by_level(db)
        self.assertEqual(after[2], before[2])
        self.assertIn(before[1][0], after[1])

    async def test_compaction_forgets_superseded_history(self):
        """Compaction leaves each key's latest put at or below the horizon and everything above it."""
        kv = await self.store.create(CM + "a", b"1")
        for n in range(10):
            kv = await self.store.update(CM + "a", b"%d" % n, kv.mod_revision)
        await self.store.create(CM + "b", b"")
        await self.store.delete(CM + "b")
        await self.store.create(CM + "c", b"")
        await self.store.compact(13)
        await self.store.close()
        kept = [int.from_bytes(key[2:], "big") for key in self.raw_keys(b"e/")]
        self.assertEqual(kept, [11, 14])

    async def test_interrupted_compaction_resumes_on_reopen(self):
        """A horizon written without its sweep is swept when the store next opens."""
        kv = await self.store.create(CM + "a", b"1")
        for n in range(5):
            kv = await self.store.update(CM + "a", b"%d" % n, kv.mod_revision)
        await self.store.close()
        db = plyvel.DB(self.path)
        db.put(b"m/compacted", (5).to_bytes(8, "big"))
        db.close()
        store = self.open_store(sweep_chunk=2)
        self.assertEqual(store.compacted_revision, 5)
        await store.compact(5)
        await store.close()
        self.assertEqual(len(self.raw_keys(b"e/")), 2)

    async def test_compaction_ends_a_lagging_replay(self):
        """A watch still replaying history that compaction removes ends with CompactedError."""
        for n in range(10):
            await self.store.create(CM + str(n), b"")
        await self.store.close()
        store = self.open_store(replay_chunk=1)
        collector = Collector()
        await store.watch(CM, 1, collector.on_events, collector.on_error)
        await store.compact(8)
        await collector.wait_for(100)
        self.assertEqual(collector.revisions, [2])
        self.assertIsInstance(collector.errors[0], CompactedError)

    async def test_long_replay_spans_reactor_turns(self):
        """A replay longer than one chunk is spread over turns and meets live writes without gaps."""
        for n in range(10):
            await self.store.create(CM + str(n), b"")
        await self.store.close()
        store = self.open_store(replay_chunk=3)
        collector = Collector()
        await store.watch(CM, 1, collector.on_events, collector.on_error)
        self.assertEqual(collector.revisions, [2, 3, 4])
        await store.create(CM + "live", b"")
        await collector.wait_for(10)
        self.assertEqual(collector.revisions, list(range(2, 12)))

    async def test_acknowledged_writes_survive_kill_9(self):
        """Every create acknowledged before the writing process is SIGKILLed is there on reopen."""
        await self.store.close()
        script = self.mktemp()
        with open(script, "w") as f:
            f.write(CHILD)
        ended = defer.Deferred()
        child = KillAfterAcks(ended, 300)
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(orchd.__file__)))
        reactor.spawnProcess(child, sys.executable, [sys.executable, script, self.path], env=env)
        await ended
        self.assertTrue(child.killed, child.stderr.decode(errors="replace"))
        self.assertGreaterEqual(len(child.acked), 300)
        store = self.open_store()
        present = {kv.key for kv in (await store.list("/k/")).items}
        self.assertEqual({"/k/%08d" % n for n in child.acked} - present, set())
        self.assertGreaterEqual(await store.current_revision(), len(child.acked))


CHILD = textwrap.dedent(
    """
    import sys
    from twisted.internet import defer, task
    from orchd.storage.leveldb import LevelDBStore

    LANES = 8

    async def writer(store, lane):
        for n in range(lane, 1000000, LANES):
            await store.create("/k/%08d" % n, b"v" * 200)
            sys.stdout.write("acked %d\\n" % n)
            sys.stdout.flush()

    def main(reactor, path):
        store = LevelDBStore(path, reactor)
        return defer.gatherResults(
            [defer.Deferred.fromCoroutine(writer(store, lane)) for lane in range(LANES)]
        )

    task.react(main, sys.argv[1:])
    """
)


class KillAfterAcks(protocol.ProcessProtocol):
    """Collects the child's acknowledgements and SIGKILLs it after C{threshold} of them."""

    def __init__(self, ended, threshold):
        self.ended = ended
        self.threshold = threshold
        self.acked = []
        self.killed = False
        self.stderr = b""
        self._buffer = b""

    def outReceived(self, data):
        *lines, self._buffer = (self._buffer + data).split(b"\n")
        self.acked.extend(int(line.split()[1]) for line in lines if line.startswith(b"acked "))
        if len(self.acked) >= self.threshold and not self.killed:
            self.killed = True
            self.transport.signalProcess("KILL")

    def errReceived(self, data):
        self.stderr += data

    def processEnded(self, reason):
        self.ended.callback(None)
