# -*- test-case-name: tests.storage.test_contract -*-
"""
The behaviour every L{IStore} backend must have, run against each backend.

L{StoreContract} holds the tests; L{MemoryStoreTests}, L{LevelDBStoreTests}
and L{EtcdStoreTests} (on a real etcd, skipped when it is not installed) run them. The LevelDB store is built with tiny replay
and sweep chunks, so the multi-turn paths run here too.
"""

import random

from twisted.internet import defer, reactor
from twisted.trial.unittest import SynchronousTestCase, TestCase
from zope.interface.verify import verifyObject

from orchd.storage.interfaces import (
    ADDED,
    DELETED,
    MODIFIED,
    CompactedError,
    ConflictError,
    Event,
    FutureRevisionError,
    IStore,
    IStoreWatch,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    StoreUnavailableError,
)
from orchd.storage.etcd import EtcdStore
from orchd.storage.leveldb import LevelDBStore
from orchd.storage.memory import MemoryStore
from tests.etcdsupport import require_etcd, shared_cluster, unique_prefix

CM = "/registry/configmaps/"


class Collector:
    """Records what a watch delivers and lets a test wait for a number of events."""

    def __init__(self):
        self.events = []
        self.batches = 0
        self.errors = []
        self._waiters = []

    def on_events(self, events):
        self.batches += 1
        self.events.extend(events)
        self._wake()

    def on_error(self, error):
        self.errors.append(error)
        self._wake()

    def _wake(self):
        for waiter in list(self._waiters):
            count, deferred = waiter
            if len(self.events) >= count or self.errors:
                self._waiters.remove(waiter)
                deferred.callback(None)

    def wait_for(self, count):
        """A Deferred firing once C{count} events (or an error) have arrived."""
        deferred = defer.Deferred()
        self._waiters.append((count, deferred))
        self._wake()
        return deferred

    @property
    def revisions(self):
        return [event.revision for event in self.events]


class StoreContract:
    """Behaviour every IStore must have; subclasses provide C{make_store}."""

    #: The store's revision when a test starts: 0 for a fresh store; a shared
    #: etcd has moved on (it starts at 1 and other tests wrote before).
    base = 0

    def setUp(self):
        self.store = self.make_store()

    def r(self, n):
        """Revision C{n} of this test: the n-th write since it started."""
        return self.base + n

    async def watch(self, prefix, after, collector=None):
        collector = collector or Collector()
        handle = await self.store.watch(prefix, after, collector.on_events, collector.on_error)
        self.addCleanup(handle.stop)
        return collector, handle

    async def replay(self, prefix, after, count):
        """The first C{count} events of a watch from C{after}, then stop it."""
        collector, handle = await self.watch(prefix, after)
        await collector.wait_for(count)
        handle.stop()
        return collector.events

    async def fill(self, *keys):
        return [await self.store.create(CM + key, key.encode()) for key in keys]

    async def keys(self, prefix=CM, **kwargs):
        result = await self.store.list(prefix, **kwargs)
        return [item.key[len(prefix) :] for item in result.items]

    # Basics.

    async def test_provides_interface(self):
        """The store provides IStore completely."""
        self.assertTrue(verifyObject(IStore, self.store))

    async def test_empty_store(self):
        """An empty store is at revision 0 and holds nothing."""
        self.assertEqual(await self.store.current_revision(), self.r(0))
        self.assertIsNone(await self.store.get(CM + "a"))
        result = await self.store.list("/")
        self.assertEqual((result.items, result.revision, result.more), ([], self.r(0), False))
        self.assertEqual(await self.store.count("/"), 0)
        self.assertEqual(self.store.compacted_revision, 0)

    async def test_create_then_get(self):
        """A create takes revision 1 as both create and mod revision, and get returns it."""
        created = await self.store.create(CM + "a", b"{}")
        self.assertEqual(created, KeyValue(CM + "a", b"{}", self.r(1), self.r(1)))
        self.assertEqual(await self.store.get(CM + "a"), created)

    async def test_create_existing_key_fails(self):
        """Creating a present key raises KeyExistsError and takes no revision."""
        await self.store.create(CM + "a", b"1")
        error = await self.assertFailure(self.store.create(CM + "a", b"2"), KeyExistsError)
        self.assertEqual(error.key, CM + "a")
        self.assertEqual((await self.store.get(CM + "a")).value, b"1")
        self.assertEqual(await self.store.current_revision(), self.r(1))

    async def test_every_write_takes_exactly_one_revision(self):
        """Create, update, delete and re-create each advance the revision by one."""
        kv = await self.store.create(CM + "a", b"1")
        self.assertEqual(await self.store.current_revision(), self.r(1))
        kv = await self.store.update(CM + "a", b"2", kv.mod_revision)
        self.assertEqual((kv.mod_revision, await self.store.current_revision()), (self.r(2),) * 2)
        revision, _ = await self.store.delete(CM + "a")
        self.assertEqual((revision, await self.store.current_revision()), (self.r(3),) * 2)
        kv = await self.store.create(CM + "a", b"3")
        self.assertEqual((kv.create_revision, kv.mod_revision), (self.r(4),) * 2)

    async def test_update_keeps_create_revision(self):
        """An update moves the mod revision and keeps the create revision."""
        await self.fill("x")
        kv = await self.store.create(CM + "a", b"1")
        updated = await self.store.update(CM + "a", b"2", kv.mod_revision)
        self.assertEqual(updated, KeyValue(CM + "a", b"2", self.r(2), self.r(3)))
        self.assertEqual(await self.store.get(CM + "a"), updated)

    async def test_update_missing_key_fails(self):
        """Updating an absent key raises KeyNotFoundError."""
        error = await self.assertFailure(self.store.update(CM + "a", b"1", 1), KeyNotFoundError)
        self.assertEqual(error.key, CM + "a")
        self.assertEqual(await self.store.current_revision(), self.r(0))

    async def test_update_conflict_carries_current(self):
        """A stale expected revision raises ConflictError carrying the current KeyValue."""
        kv = await self.store.create(CM + "a", b"1")
        current = await self.store.update(CM + "a", b"2", kv.mod_revision)
        error = await self.assertFailure(
            self.store.update(CM + "a", b"3", kv.mod_revision), ConflictError
        )
        self.assertEqual((error.key, error.current), (CM + "a", current))
        self.assertEqual(await self.store.current_revision(), self.r(2))

    async def test_delete_returns_revision_and_previous(self):
        """A delete returns its revision and the KeyValue it removed."""
        kv = await self.store.create(CM + "a", b"1")
        self.assertEqual(await self.store.delete(CM + "a"), (self.r(2), kv))
        self.assertIsNone(await self.store.get(CM + "a"))

    async def test_delete_with_expected_revision(self):
        """A delete with a stale revision conflicts; with the current one it deletes."""
        kv = await self.store.create(CM + "a", b"1")
        kv = await self.store.update(CM + "a", b"2", kv.mod_revision)
        error = await self.assertFailure(self.store.delete(CM + "a", self.r(1)), ConflictError)
        self.assertEqual(error.current, kv)
        self.assertEqual(await self.store.delete(CM + "a", self.r(2)), (self.r(3), kv))

    async def test_delete_missing_key_fails(self):
        """Deleting an absent key raises KeyNotFoundError."""
        await self.assertFailure(self.store.delete(CM + "a"), KeyNotFoundError)
        await self.assertFailure(self.store.delete(CM + "a", 5), KeyNotFoundError)

    async def test_recreated_key_gets_new_create_revision(self):
        """A key created again after a delete starts a new life at the new revision."""
        await self.fill("a")
        await self.store.delete(CM + "a")
        kv = await self.store.create(CM + "a", b"again")
        self.assertEqual(kv, KeyValue(CM + "a", b"again", self.r(3), self.r(3)))

    async def test_values_round_trip_exactly(self):
        """Every byte of empty, binary and multi-megabyte values comes back unchanged."""
        values = {
            "empty": b"",
            "binary": bytes(range(256)) * 4,
            "large": random.Random(1).randbytes(3 << 20),
        }
        for name, value in values.items():
            await self.store.create(CM + name, value)
        for name, value in values.items():
            self.assertEqual((await self.store.get(CM + name)).value, value)
        listed = await self.store.list(CM)
        self.assertEqual({kv.key[len(CM) :]: kv.value for kv in listed.items}, values)

    async def test_wrong_types_are_refused_without_taking_a_revision(self):
        """A value that is not bytes or a key that is not str fails and leaves no hole in the log."""
        await self.assertFailure(self.store.create(CM + "a", "text"), TypeError)
        await self.assertFailure(self.store.create(b"/bytes", b""), TypeError)
        kv = await self.store.create(CM + "a", b"")
        self.assertEqual(kv.mod_revision, self.r(1))
        self.assertEqual(await self.store.current_revision(), self.r(1))

    async def test_unicode_keys_round_trip(self):
        """Keys outside ASCII are stored, listed in code point order and found again."""
        await self.fill("b", "é", "a", "日本")
        self.assertEqual(await self.keys(), ["a", "b", "é", "日本"])
        self.assertEqual((await self.store.get(CM + "日本")).value, "日本".encode())

    # Lists.

    async def test_list_prefix_boundaries(self):
        """A prefix matches only keys under it: /a/ never matches /ab/x or /a."""
        for key in ("/a/x", "/a/y", "/ab/x", "/a", "/b/z", "/a/"):
            await self.store.create(key, b"")
        result = await self.store.list("/a/")
        self.assertEqual([kv.key for kv in result.items], ["/a/", "/a/x", "/a/y"])
        self.assertEqual(result.revision, self.r(6))
        self.assertEqual(await self.store.count("/a/"), 3)
        self.assertEqual(await self.store.count("/"), 6)

    async def test_list_is_key_ordered(self):
        """Items come in key order whatever the order of creation."""
        await self.fill("c", "a", "b2", "b10", "b")
        self.assertEqual(await self.keys(), ["a", "b", "b10", "b2", "c"])

    async def test_list_paging(self):
        """Pages follow start (inclusive) and limit, with more and remaining."""
        await self.fill("a", "b", "c", "d", "e")
        page = await self.store.list(CM, limit=2, count_remaining=True)
        self.assertEqual([kv.key for kv in page.items], [CM + "a", CM + "b"])
        self.assertEqual((page.more, page.remaining, page.revision), (True, 3, self.r(5)))
        page = await self.store.list(CM, start=CM + "c", limit=2, count_remaining=True)
        self.assertEqual([kv.key for kv in page.items], [CM + "c", CM + "d"])
        self.assertEqual((page.more, page.remaining), (True, 1))
        page = await self.store.list(CM, start=CM + "e", limit=2, count_remaining=True)
        self.assertEqual([kv.key for kv in page.items], [CM + "e"])
        self.assertEqual((page.more, page.remaining), (False, 0))

    async def test_list_limit_edges(self):
        """A limit equal to the key count has no more; limit 0 lists everything."""
        await self.fill("a", "b", "c")
        page = await self.store.list(CM, limit=3, count_remaining=True)
        self.assertEqual((len(page.items), page.more, page.remaining), (3, False, 0))
        page = await self.store.list(CM, limit=0)
        self.assertEqual((len(page.items), page.more, page.remaining), (3, False, None))

    async def test_list_start_between_keys_and_outside_prefix(self):
        """A start between keys begins at the next key; one before the prefix is ignored."""
        await self.fill("a", "c")
        await self.store.create("/registry/configmapz", b"")
        self.assertEqual(await self.keys(start=CM + "b"), ["c"])
        self.assertEqual(await self.keys(start="/"), ["a", "c"])
        self.assertEqual(await self.keys(start=CM + "d"), [])

    async def test_list_at_older_revision_sees_old_state(self):
        """A list at a past revision shows values, revisions and keys as they were."""
        a, b, c = await self.fill("a", "b", "c")
        await self.store.update(CM + "b", b"b2", b.mod_revision)
        await self.store.delete(CM + "c")
        await self.fill("d")
        result = await self.store.list(CM, revision=self.r(3))
        self.assertEqual(result.items, [a, b, c])
        self.assertEqual(result.revision, self.r(3))
        self.assertEqual(await self.keys(revision=self.r(1)), ["a"])
        self.assertEqual(await self.keys(revision=self.r(4)), ["a", "b", "c"])
        self.assertEqual(await self.keys(revision=self.r(5)), ["a", "b"])
        self.assertEqual(await self.keys(revision=self.r(6)), ["a", "b", "d"])
        self.assertEqual((await self.store.list(CM, revision=self.r(4))).items[1].value, b"b2")

    async def test_list_at_older_revision_pages_consistently(self):
        """Paging at a fixed revision ignores writes made between the pages."""
        await self.fill("a", "b", "c", "d")
        first = await self.store.list(CM, limit=2, count_remaining=True)
        await self.store.delete(CM + "c")
        await self.fill("bb", "e")
        kv = await self.store.get(CM + "d")
        await self.store.update(CM + "d", b"new", kv.mod_revision)
        second = await self.store.list(
            CM, revision=first.revision, start=CM + "b\x00", limit=2, count_remaining=True
        )
        self.assertEqual([kv.key for kv in second.items], [CM + "c", CM + "d"])
        self.assertEqual(second.items[1].value, b"d")
        self.assertEqual((first.remaining, second.more, second.remaining), (2, False, 0))
        latest = await self.store.list(CM, start=CM + "b", limit=2, count_remaining=True)
        self.assertEqual([kv.key for kv in latest.items], [CM + "b", CM + "bb"])
        self.assertEqual((latest.more, latest.remaining), (True, 2))

    async def test_list_at_older_revision_counts_remaining(self):
        """Remaining at a past revision counts deleted keys and not newer ones."""
        await self.fill("a", "b", "c", "d")
        await self.store.delete(CM + "c")
        await self.fill("e", "f")
        page = await self.store.list(CM, revision=self.r(4), limit=1, count_remaining=True)
        self.assertEqual([kv.key for kv in page.items], [CM + "a"])
        self.assertEqual((page.more, page.remaining), (True, 3))

    async def test_list_future_revision_fails(self):
        """A list at a revision the store has not reached raises FutureRevisionError."""
        await self.fill("a")
        error = await self.assertFailure(self.store.list(CM, revision=self.r(2)), FutureRevisionError)
        self.assertEqual((error.requested, error.current), (self.r(2), self.r(1)))

    async def test_list_after_compaction(self):
        """After compaction the horizon is still listable and older revisions are not."""
        await self.fill("a", "b", "c")
        kv = await self.store.get(CM + "a")
        await self.store.update(CM + "a", b"a2", kv.mod_revision)
        await self.store.delete(CM + "b")
        before = await self.store.list(CM, revision=self.r(4))
        await self.store.compact(self.r(4))
        self.assertEqual(self.store.compacted_revision, self.r(4))
        self.assertEqual((await self.store.list(CM, revision=self.r(4))).items, before.items)
        error = await self.assertFailure(self.store.list(CM, revision=self.r(3)), CompactedError)
        self.assertEqual((error.requested, error.compacted), (self.r(3), self.r(4)))
        self.assertEqual(await self.keys(), ["a", "c"])

    async def test_compaction_keeps_every_later_state_and_event(self):
        """Lists at and watches from any revision at or above the horizon are unchanged by compaction."""
        chooser = random.Random(3)
        for step in range(60):
            key = CM + chooser.choice("abcdef")
            current = await self.store.get(key)
            if current is None:
                await self.store.create(key, b"%d" % step)
            elif chooser.random() < 0.3:
                await self.store.delete(key, current.mod_revision)
            else:
                await self.store.update(key, b"%d" % step, current.mod_revision)
        latest = await self.store.current_revision()
        lists = {r: await self.store.list(CM, revision=r) for r in range(self.r(1), latest + 1)}
        watches = {r: await self.replay(CM, r, latest - r) for r in range(self.r(1), latest)}
        for horizon in (self.r(20), self.r(21), self.r(45)):
            await self.store.compact(horizon)
            for revision in range(horizon, latest + 1):
                listed = await self.store.list(CM, revision=revision)
                self.assertEqual(listed.items, lists[revision].items)
            for revision in range(horizon, latest):
                self.assertEqual(await self.replay(CM, revision, latest - revision), watches[revision])
            await self.assertFailure(self.store.list(CM, revision=horizon - 1), CompactedError)

    async def test_compact_future_revision_fails(self):
        """Compacting past the current revision raises FutureRevisionError."""
        await self.fill("a")
        await self.assertFailure(self.store.compact(self.r(2)), FutureRevisionError)
        self.assertEqual(self.store.compacted_revision, 0)

    async def test_count(self):
        """count gives the number of keys under a prefix, following deletes."""
        await self.fill("a", "b", "c")
        await self.store.create("/registry/secrets/x", b"")
        await self.store.delete(CM + "b")
        self.assertEqual(await self.store.count(CM), 2)
        self.assertEqual(await self.store.count("/registry/"), 3)
        self.assertEqual(await self.store.count("/nothing/"), 0)

    # Watches.

    async def test_watch_from_zero_sees_only_new_events(self):
        """A watch from revision 0 starts now: it sees later writes and nothing before."""
        await self.fill("a", "b")
        collector, _ = await self.watch(CM, 0)
        await self.fill("c")
        self.assertEqual(collector.events, [Event(ADDED, CM + "c", b"c", self.r(3), self.r(3))])

    async def test_watch_types_and_prev_value(self):
        """Writes arrive as ADDED, MODIFIED with prev_value, and DELETED with the last value."""
        collector, _ = await self.watch(CM, 0)
        kv = await self.store.create(CM + "a", b"1")
        await self.store.update(CM + "a", b"2", kv.mod_revision)
        await self.store.delete(CM + "a")
        self.assertEqual(
            collector.events,
            [
                Event(ADDED, CM + "a", b"1", self.r(1), self.r(1)),
                Event(MODIFIED, CM + "a", b"2", self.r(2), self.r(1), prev_value=b"1"),
                Event(DELETED, CM + "a", b"2", self.r(3), self.r(1)),
            ],
        )

    async def test_watch_replays_then_continues_live(self):
        """A watch from an old revision replays the log after it, then delivers live writes."""
        kv = await self.store.create(CM + "a", b"1")
        await self.store.update(CM + "a", b"2", kv.mod_revision)
        await self.fill("b", "c", "d", "e", "f")
        collector, _ = await self.watch(CM, self.r(1))
        await collector.wait_for(6)
        await self.store.delete(CM + "b")
        self.assertEqual(collector.revisions, [self.r(n) for n in range(2, 9)])
        self.assertEqual(collector.events[0],
                         Event(MODIFIED, CM + "a", b"2", self.r(2), self.r(1), b"1"))
        self.assertEqual(collector.events[-1], Event(DELETED, CM + "b", b"b", self.r(8), self.r(3)))

    async def test_watch_from_current_revision_sees_nothing_old(self):
        """A watch from the current revision replays nothing and then gets live events."""
        await self.fill("a", "b")
        collector, _ = await self.watch(CM, self.r(2))
        self.assertEqual(collector.events, [])
        await self.fill("c")
        self.assertEqual(collector.revisions, [self.r(3)])

    async def test_watch_prefix_filtering(self):
        """A watch sees only keys under its prefix, in replay and live alike."""
        await self.store.create("/a/x", b"")
        await self.store.create("/ab/x", b"")
        collector, _ = await self.watch("/a/", self.r(1))
        await self.store.create("/ab/y", b"")
        await self.store.create("/a/y", b"")
        await self.store.create("/b", b"")
        await collector.wait_for(1)
        self.assertEqual([e.key for e in collector.events], ["/a/y"])
        everything, _ = await self.watch("", 0)
        await self.store.create("/c", b"")
        self.assertEqual([e.key for e in everything.events], ["/c"])

    async def test_watch_nested_and_partial_prefixes(self):
        """Writes committed together reach each watch whose prefix they start with, nested
        or cut inside a segment, in revision order."""
        prefixes = ("", "/", "/a", "/a/", "/a/b/", "/a/b/c", "/ab/", "/z/")
        collectors = {p: (await self.watch(p, self.r(0)))[0] for p in prefixes}
        keys = ["/a/b/c1", "/ab/x", "/a/x", "/a/b/cd/e", "/b", "/a/b/", "/abc"]
        await defer.gatherResults([self.store.create(k, b"") for k in keys])
        await collectors[""].wait_for(len(keys))
        # Concurrent writes take revisions in an order of the store's choosing.
        written = [e.key for e in collectors[""].events]
        self.assertEqual(sorted(written), sorted(keys))
        for prefix, collector in collectors.items():
            expected = [k for k in written if k.startswith(prefix)]
            if expected:
                await collector.wait_for(len(expected))
            self.assertEqual([e.key for e in collector.events], expected, prefix)
            self.assertEqual(collector.revisions, sorted(collector.revisions), prefix)

    async def test_watch_after_compaction_fails(self):
        """A watch from below the horizon fails with CompactedError; from the horizon it works."""
        kv = await self.store.create(CM + "a", b"1")
        await self.fill("b")
        await self.store.update(CM + "a", b"2", kv.mod_revision)
        await self.store.compact(self.r(2))
        error = await self.assertFailure(
            self.store.watch(CM, self.r(1), Collector().on_events, Collector().on_error),
            CompactedError,
        )
        self.assertEqual((error.requested, error.compacted), (self.r(1), self.r(2)))
        events = await self.replay(CM, self.r(2), 1)
        self.assertEqual(
            events, [Event(MODIFIED, CM + "a", b"2", self.r(3), self.r(1), prev_value=b"1")])
        collector, _ = await self.watch(CM, 0)
        await self.fill("c")
        self.assertEqual(collector.revisions, [self.r(4)])

    async def test_watch_stop_stops_delivery(self):
        """After stop() a watch receives nothing more."""
        collector, handle = await self.watch(CM, 0)
        self.assertTrue(verifyObject(IStoreWatch, handle))
        await self.fill("a")
        handle.stop()
        handle.stop()
        await self.fill("b")
        self.assertEqual(collector.revisions, [self.r(1)])

    async def test_raising_callback_does_not_affect_other_watchers(self):
        """A watcher whose callback raises is logged and the other watchers still get every event."""

        def explode(events):
            raise ZeroDivisionError("consumer bug")

        await self.store.watch(CM, 0, explode, Collector().on_error)
        collector, _ = await self.watch(CM, 0)
        await self.fill("a", "b")
        self.assertEqual(collector.revisions, [self.r(1), self.r(2)])
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 2)

    async def test_watch_sees_writes_made_by_callbacks_in_order(self):
        """Writes made from inside a watch callback reach every watch after the write that caused them."""
        async def answer(event):
            if event.key == CM + "ping":
                await self.store.create(CM + "pong", b"")

        def on_events(events):
            for event in events:
                defer.Deferred.fromCoroutine(answer(event))

        first, _ = await self.watch(CM, 0)
        await self.store.watch(CM, 0, on_events, Collector().on_error)
        last, _ = await self.watch(CM, 0)
        await self.fill("ping")
        await first.wait_for(2)
        await last.wait_for(2)
        self.assertEqual(first.revisions, [self.r(1), self.r(2)])
        self.assertEqual(last.revisions, [self.r(1), self.r(2)])

    async def test_watches_have_no_gaps_or_duplicates(self):
        """Watches started at every revision while writes go on each see one contiguous run."""
        collectors = []
        for step in range(20):
            collector, _ = await self.watch(CM, self.r(step))
            collectors.append((step, collector))
            await self.fill("k%02d" % step)
        for step, collector in collectors:
            await collector.wait_for(20 - step)
            self.assertEqual(collector.revisions, [self.r(n) for n in range(step + 1, 21)])

    # Life cycle.

    async def test_check_and_close(self):
        """check() succeeds while open; after close() operations fail as unavailable."""
        await self.store.check()
        await self.fill("a")
        await self.store.close()
        await self.assertFailure(self.store.check(), StoreUnavailableError)
        await self.assertFailure(self.store.create(CM + "b", b""), StoreUnavailableError)
        await self.assertFailure(self.store.get(CM + "a"), StoreUnavailableError)
        await self.assertFailure(self.store.list(CM), StoreUnavailableError)

    async def test_close_ends_watches(self):
        """Closing the store ends every watch through on_error."""
        collector, _ = await self.watch(CM, 0)
        await self.store.close()
        self.assertEqual(len(collector.errors), 1)
        self.assertIsInstance(collector.errors[0], StoreUnavailableError)


class MemoryStoreTests(StoreContract, TestCase):
    """The contract, run against MemoryStore."""

    def make_store(self):
        return MemoryStore()


class LevelDBStoreTests(StoreContract, TestCase):
    """The contract, run against LevelDBStore with tiny chunks."""

    def make_store(self):
        store = LevelDBStore(self.mktemp(), reactor, replay_chunk=3, sweep_chunk=4)
        self.addCleanup(store.close)
        return store


class EtcdStoreTests(StoreContract, TestCase):
    """
    The contract, run against EtcdStore on a real etcd (one per test process).

    Each test has a prefix of its own, so revisions count from the one etcd
    had reached when the test began.
    """

    def make_store(self):
        store = EtcdStore(shared_cluster().client_urls, reactor, prefix=unique_prefix("contract"))
        self.addCleanup(store.close)
        return store

    async def _start(self):
        self.base = await self.store.current_revision()

    def setUp(self):
        require_etcd()
        super().setUp()
        return defer.Deferred.fromCoroutine(self._start())


class MemoryStoreSynchronousTests(SynchronousTestCase):
    """MemoryStore answers at once, so tests using it need no reactor."""

    def test_deferreds_have_fired(self):
        """Writes, reads and their errors are available through successResultOf at once."""
        store = MemoryStore()
        kv = self.successResultOf(store.create("/a", b"1"))
        self.assertEqual(self.successResultOf(store.get("/a")), kv)
        self.failureResultOf(store.create("/a", b"1"), KeyExistsError)
        self.assertEqual(self.successResultOf(store.list("/")).items, [kv])

    def test_watch_delivers_synchronously(self):
        """Replayed and live events are delivered before the calls return."""
        store = MemoryStore()
        store.create("/a", b"1")
        collector = Collector()
        self.successResultOf(store.watch("/", 0, collector.on_events, collector.on_error))
        store.create("/b", b"2")
        self.assertEqual(collector.revisions, [2])
        from_start = Collector()
        self.successResultOf(store.watch("/", 1, from_start.on_events, from_start.on_error))
        self.assertEqual(from_start.revisions, [2])

    def test_returned_values_are_copies(self):
        """Changing a returned KeyValue does not change what the store holds."""
        store = MemoryStore()
        self.successResultOf(store.create("/a", b"1")).value = b"changed"
        self.successResultOf(store.get("/a")).mod_revision = 99
        self.assertEqual(self.successResultOf(store.get("/a")), KeyValue("/a", b"1", 1, 1))
