"""Informers fed by the watch caches: one store watch per resource, whoever follows it."""

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.storage.informer import Informer
from orchd.storage.cachedreads import CachedReads
from orchd.storage.interfaces import (
    ADDED, DELETED, MODIFIED, CompactedError, StoreUnavailableError,
)
from orchd.storage.memory import MemoryStore
from orchd.storage.watchcache import WatchCache
from tests.storage.things import PREFIX, StoreWrites, thing
from tests.support import APIHarness

class CountingStore(MemoryStore):
    """A memory store that counts the watches opened on it."""

    def __init__(self):
        super().__init__()
        self.watches = 0

    def watch(self, prefix, after_revision, on_events, on_error):
        self.watches += 1
        return super().watch(prefix, after_revision, on_events, on_error)


class CachedReadsTests(StoreWrites, SynchronousTestCase):
    def setUp(self):
        self.store = CountingStore()
        self.cache = WatchCache(self.store, PREFIX, Clock(), history=3)
        self.addCleanup(self.cache.stop)
        self.reads = CachedReads({PREFIX: self.cache}, self.store)
        self.seen = []

    def start_cache(self):
        self.successResultOf(Deferred.fromCoroutine(self.cache.start()))

    def informer(self, prefix=PREFIX):
        informer = Informer(self.reads, prefix, lambda type, obj, old: self.seen.append(
            (type, obj["metadata"]["name"], obj["colour"])))
        self.addCleanup(informer.stop)
        return Deferred.fromCoroutine(informer.start())

    def test_listing_waits_for_the_cache(self):
        """An informer started before its cache lists once the cache follows the store."""
        self.write("a", "red")
        started = self.informer()
        self.assertNoResult(started)
        self.start_cache()
        self.successResultOf(started)
        self.assertEqual(self.seen, [(ADDED, "a", "red")])

    def test_one_store_watch_for_every_informer(self):
        """Three informers and the cache: one watch on the store; all see each change at once."""
        self.start_cache()
        for _ in range(3):
            self.successResultOf(self.informer())
        self.write("a", "red")
        self.write("a", "blue")
        self.successResultOf(self.store.delete(PREFIX + "a"))
        self.assertEqual(self.store.watches, 1)
        self.assertEqual(self.seen, [(ADDED, "a", "red")] * 3 + [(MODIFIED, "a", "blue")] * 3
                         + [(DELETED, "a", "blue")] * 3)

    def test_narrower_prefix(self):
        """An informer of one namespace hears only of that namespace's objects."""
        self.start_cache()
        self.successResultOf(self.informer(PREFIX + "ns1/"))
        self.write("ns1/a", "red")
        self.write("ns2/b", "blue")
        self.assertEqual(self.seen, [(ADDED, "ns1/a", "red")])

    def test_subscription_replays_history(self):
        """A subscription after a past revision first gets what it missed, in order."""
        self.start_cache()
        first = self.write("a", "red")
        self.write("b", "blue")
        self.write("a", "green")
        events = []
        self.cache.subscribe(PREFIX, first.mod_revision, events.extend, None)
        self.assertEqual([(e.key, e.type) for e in events],
                         [(PREFIX + "b", ADDED), (PREFIX + "a", MODIFIED)])

    def test_subscription_before_history_is_refused(self):
        """A revision older than the kept history fails the watch, so the informer lists."""
        self.start_cache()
        first = self.write("a", "red")
        for colour in ("b", "c", "d", "e"):
            self.write("a", colour)
        failure = self.failureResultOf(self.reads.watch(PREFIX, first.mod_revision, None, None))
        failure.trap(CompactedError)
        self.assertEqual(failure.value.requested, first.mod_revision)

    def test_cache_losing_the_store_relists_informers(self):
        """When the cache loses the store's watch, informers list again from the fresh cache."""
        self.start_cache()
        self.successResultOf(self.informer())
        self.write("a", "red")
        self.cache._subscription.stop()
        self.cache._subscription = None
        self.write("a", "blue")
        self.write("b", "green")
        self.cache._failed(StoreUnavailableError("gone"))
        self.flushLoggedErrors()
        self.assertEqual(self.seen[1:], [(MODIFIED, "a", "blue"), (ADDED, "b", "green")])
        self.write("b", "red")
        self.assertEqual(self.seen[-1], (MODIFIED, "b", "red"))

    def test_prefix_without_a_cache_reads_the_store(self):
        """A resource with no cache (switched off) is listed and watched on the store."""
        self.successResultOf(self.informer("/registry/others/"))
        self.assertEqual(self.store.watches, 1)
        self.successResultOf(self.store.create("/registry/others/x", thing("x", "red")))
        self.assertEqual(self.seen, [(ADDED, "x", "red")])


class NamespaceLookupTests(SynchronousTestCase):
    """Namespace lifecycle reads namespaces from the cache, the store only on a miss."""

    def test_cached_namespace_and_fallback(self):
        api = APIHarness()
        gets = []
        store_get = api.store.get
        api.store.get = lambda key: (gets.append(key), store_get(key))[1]
        namespace = self.successResultOf(Deferred.fromCoroutine(
            api.catalog.get_namespace("default")))
        self.assertEqual(namespace["metadata"]["name"], "default")
        self.assertEqual(gets, [])
        missing = self.successResultOf(Deferred.fromCoroutine(api.catalog.get_namespace("nope")))
        self.assertIsNone(missing)
        self.assertEqual(gets, ["/registry/namespaces/nope"])

    def test_cached_namespace_decoded_once_per_change(self):
        """The cached namespace is decoded once per change: a new state is a new object, a deleted one None."""
        api = APIHarness()
        code, _, _ = api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "team"}})
        self.assertEqual(code, 201)
        first = api.catalog.cached_namespace("team")
        self.assertIs(api.catalog.cached_namespace("team"), first)
        code, _, _ = api.call("PATCH", "/api/v1/namespaces/team",
                              {"metadata": {"labels": {"tier": "gold"}}},
                              content_type=b"application/merge-patch+json")
        self.assertEqual(code, 200)
        changed = api.catalog.cached_namespace("team")
        self.assertIsNot(changed, first)
        self.assertEqual(changed["metadata"]["labels"]["tier"], "gold")
        self.assertNotEqual(changed["metadata"]["resourceVersion"],
                            first["metadata"]["resourceVersion"])
        code, _, _ = api.call("DELETE", "/api/v1/namespaces/team")
        self.assertEqual(code, 200)
        terminating = api.catalog.cached_namespace("team")
        self.assertTrue(terminating["metadata"].get("deletionTimestamp"))
        code, obj, _ = api.call("POST", "/api/v1/namespaces/team/configmaps",
                                {"metadata": {"name": "late"}})
        self.assertEqual(code, 403, obj)
        self.assertIsNone(api.catalog.cached_namespace("absent"))
