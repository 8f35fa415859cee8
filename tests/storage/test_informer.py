"""The informer: list, watch, relist after losing the watch, and what it keeps."""

import gc

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.storage.cachedreads import CachedReads
from orchd.storage.informer import LIST_SLICE, Informer, _ListingDecoder
from orchd.storage.interfaces import ADDED, DELETED, MODIFIED, CompactedError, KeyValue
from orchd.storage.memory import MemoryStore
from orchd.storage.watchcache import WatchCache
from tests.storage.things import PREFIX, thing

def uid_only(obj):
    meta = obj["metadata"]
    return {"metadata": {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}}


class InformerTests(SynchronousTestCase):
    def setUp(self):
        self.store = MemoryStore()
        self.seen = []

    def start(self, **kwargs):
        informer = Informer(self.store, PREFIX, self.record, **kwargs)
        self.successResultOf(Deferred.fromCoroutine(informer.start()))
        self.addCleanup(informer.stop)
        return informer

    def record(self, type, obj, old):
        self.seen.append((type, obj["metadata"]["uid"], obj.get("colour"),
                          old and old.get("colour")))

    def write(self, verb, name, colour=None):
        key = PREFIX + name
        if verb == "create":
            return self.successResultOf(self.store.create(key, thing(name, colour)))
        current = self.successResultOf(self.store.get(key))
        if verb == "update":
            return self.successResultOf(
                self.store.update(key, thing(name, colour), current.mod_revision))
        return self.successResultOf(self.store.delete(key))

    def test_long_listing_is_decoded_over_several_turns(self):
        """A listing past a slice yields the reactor; the cache and handlers change at the end."""
        for i in range(2 * LIST_SLICE + 1):
            self.write("create", f"t{i:05d}", "red")
        clock = Clock()
        informer = Informer(self.store, PREFIX, self.record, clock=clock)
        started = Deferred.fromCoroutine(informer.start())
        self.addCleanup(informer.stop)
        self.assertNoResult(started)
        self.assertEqual((informer.cache, self.seen), ({}, []))
        self.assertEqual(len(clock.getDelayedCalls()), 1)
        clock.advance(0)            # runs the later slices' turns too
        self.successResultOf(started)
        self.assertEqual(len(informer.cache), 2 * LIST_SLICE + 1)
        self.assertEqual(len(self.seen), 2 * LIST_SLICE + 1)
        self.write("update", "t00000", "green")
        self.assertEqual(self.seen[-1], (MODIFIED, "uid-t00000", "green", "red"))

    def test_stopped_while_listing(self):
        """An informer stopped between slices ends its listing and never watches."""
        for i in range(LIST_SLICE + 1):
            self.write("create", f"t{i:05d}", "red")
        clock = Clock()
        informer = Informer(self.store, PREFIX, self.record, clock=clock)
        started = Deferred.fromCoroutine(informer.start())
        informer.stop()
        clock.advance(0)
        self.successResultOf(started)
        self.write("create", "late", "blue")
        self.assertEqual((informer.cache, self.seen), ({}, []))

    def test_lists_then_follows(self):
        """Listed objects arrive as ADDED; later changes as they happen, with the old object."""
        self.write("create", "a", "red")
        informer = self.start()
        self.write("create", "b", "blue")
        self.write("update", "a", "green")
        self.write("delete", "b")
        self.assertEqual(self.seen, [
            (ADDED, "uid-a", "red", None),
            (ADDED, "uid-b", "blue", None),
            (MODIFIED, "uid-a", "green", "red"),
            (DELETED, "uid-b", "blue", "blue"),
        ])
        [kept] = informer.objects()
        self.assertEqual(kept["colour"], "green")
        self.assertEqual(kept["metadata"]["resourceVersion"], str(informer.revision - 1))

    def test_relist_reports_the_difference(self):
        """After losing its watch the informer lists again and reports only what changed."""
        for name in "abc":
            self.write("create", name, "red")
        informer = self.start()
        informer._watch.stop()
        informer._watch = None
        self.write("update", "a", "green")
        self.write("delete", "b")
        self.write("create", "d", "blue")
        del self.seen[:]
        informer._failed(CompactedError(1, 2))
        self.assertEqual(sorted(self.seen), [
            (ADDED, "uid-d", "blue", None),
            (DELETED, "uid-b", "red", "red"),
            (MODIFIED, "uid-a", "green", "red"),
        ])
        self.write("update", "c", "blue")
        self.assertEqual(self.seen[-1], (MODIFIED, "uid-c", "blue", "red"))

    def test_keep_limits_the_cache(self):
        """With C{keep}, handlers get whole objects but the cache holds only what is kept."""
        self.write("create", "a", "red")
        informer = self.start(keep=uid_only)
        self.write("update", "a", "green")
        self.assertEqual(self.seen[-1], (MODIFIED, "uid-a", "green", None))
        informer._watch.stop()
        informer._watch = None
        self.write("delete", "a")
        informer._failed(CompactedError(1, 2))
        # A deletion found by listing again carries what was kept.
        self.assertEqual(self.seen[-1], (DELETED, "uid-a", None, None))
        self.assertEqual(informer.objects(), [])

    def test_handler_failure_is_contained(self):
        """A failing handler is logged; the informer goes on with the next change."""
        informer = self.start()
        calls = []

        def failing(type, obj, old):
            calls.append(type)
            raise ValueError("handler bug")

        informer._on_change = failing
        self.write("create", "a", "red")
        self.write("create", "b", "red")
        self.assertEqual(calls, [ADDED, ADDED])
        self.assertEqual(len(self.flushLoggedErrors(ValueError)), 2)


class SharedDecodingTests(SynchronousTestCase):
    """Informers following one watch cache decode each change once between them."""

    def setUp(self):
        self.store = MemoryStore()
        self.cache = WatchCache(self.store, PREFIX, Clock())
        self.successResultOf(Deferred.fromCoroutine(self.cache.start()))
        self.addCleanup(self.cache.stop)
        self.reads = CachedReads({PREFIX: self.cache}, self.store)

    def start(self, keep=None):
        seen = []
        informer = Informer(self.reads, PREFIX, lambda type, obj, old: seen.append(obj),
                            keep=keep)
        self.successResultOf(Deferred.fromCoroutine(informer.start()))
        self.addCleanup(informer.stop)
        return informer, seen

    def test_informers_with_keep_share_the_decoded_object(self):
        """Two informers with a keep function are handed the same object for one change."""
        first, first_seen = self.start(keep=uid_only)
        second, second_seen = self.start(keep=uid_only)
        self.successResultOf(self.store.create(PREFIX + "a", thing("a", "red")))
        self.assertIs(first_seen[0], second_seen[0])
        self.assertEqual(first_seen[0]["metadata"]["resourceVersion"],
                         first.cache[PREFIX + "a"]["metadata"]["resourceVersion"])

    def test_informer_keeping_whole_objects_gets_its_own(self):
        """An informer that caches whole objects (which its user may change) decodes its own."""
        shared, shared_seen = self.start(keep=uid_only)
        whole, whole_seen = self.start()
        self.successResultOf(self.store.create(PREFIX + "a", thing("a", "red")))
        self.assertIsNot(whole_seen[0], shared_seen[0])
        self.assertEqual(whole_seen[0], shared_seen[0])
        whole.cache[PREFIX + "a"]["colour"] = "blue"
        self.assertEqual(shared_seen[0]["colour"], "red")

    def test_history_keeps_no_objects(self):
        """History keeps plain tuples (which the collector stops tracking); a replay decodes."""
        self.start(keep=uid_only)
        self.successResultOf(self.store.create(PREFIX + "a", thing("a", "red")))
        [entry] = self.cache.history
        self.assertEqual(entry[:3], ("ADDED", PREFIX + "a", entry[2]))
        self.assertTrue(all(isinstance(field, (str, int, bytes, type(None))) for field in entry))
        gc.collect()
        self.assertFalse(gc.is_tracked(entry))
        replayed = []
        subscription = self.cache.subscribe(
            PREFIX, 0, lambda events: replayed.extend(e.obj["colour"] for e in events),
            lambda error: None)
        self.addCleanup(subscription.stop)
        self.assertEqual(replayed, ["red"])


class SharedListingTests(SynchronousTestCase):
    """Informers listing one watch cache at once decode each listed object once per pass."""

    def setUp(self):
        self.store = MemoryStore()
        for i in range(LIST_SLICE + 2):
            self.successResultOf(self.store.create(PREFIX + f"t{i:05d}", thing(f"t{i:05d}", "red")))
        self.cache = WatchCache(self.store, PREFIX, Clock())
        self.successResultOf(Deferred.fromCoroutine(self.cache.start()))
        self.addCleanup(self.cache.stop)
        self.reads = CachedReads({PREFIX: self.cache}, self.store)
        self.clock = Clock()

    def informer(self, seen, keep=uid_only):
        informer = Informer(self.reads, PREFIX, lambda type, obj, old: seen.append(
            (obj, len(informer.cache))), keep=keep, clock=self.clock)
        self.addCleanup(informer.stop)
        return informer

    def test_listed_objects_are_shared_and_then_forgotten(self):
        """Two informers with a keep listing together get the same objects; none is held after."""
        first_seen, second_seen = [], []
        started = [Deferred.fromCoroutine(self.informer(seen).start())
                   for seen in (first_seen, second_seen)]
        self.clock.advance(0)
        for d in started:
            self.successResultOf(d)
        self.assertEqual(len(first_seen), LIST_SLICE + 2)
        for (first, _), (second, _) in zip(first_seen, second_seen):
            self.assertIs(first, second)
        self.assertEqual(first_seen[-1][0]["metadata"]["resourceVersion"],
                         str(LIST_SLICE + 2))
        self.assertEqual(_ListingDecoder._open, {})

    def test_handlers_hear_of_the_listing_once_the_cache_holds_it(self):
        """Every listed object is in the cache before the handlers hear of the first."""
        seen = []
        started = Deferred.fromCoroutine(self.informer(seen).start())
        self.clock.advance(0)
        self.successResultOf(started)
        self.assertEqual({size for _, size in seen}, {LIST_SLICE + 2})

    def test_whole_objects_are_the_informers_own(self):
        """An informer without keep is handed the very objects its cache holds."""
        seen = []
        informer = self.informer(seen, keep=None)
        started = Deferred.fromCoroutine(informer.start())
        self.clock.advance(0)
        self.successResultOf(started)
        self.assertIs(seen[0][0], informer.cache[PREFIX + "t00000"])

    def test_decoder_reuses_only_the_same_bytes(self):
        """A recent decoding serves only the same bytes object at the same revision."""
        decoder = _ListingDecoder.open(PREFIX)
        self.addCleanup(decoder.close)
        value = thing("a", "red")
        first = decoder.decode(KeyValue(PREFIX + "a", value, 1, 1))
        self.assertIs(decoder.decode(KeyValue(PREFIX + "a", value, 1, 1)), first)
        self.assertIsNot(decoder.decode(KeyValue(PREFIX + "a", bytes(bytearray(value)), 1, 1)),
                         first)
        self.assertIsNot(decoder.decode(KeyValue(PREFIX + "a", value, 1, 2)), first)
