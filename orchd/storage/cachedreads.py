# -*- test-case-name: tests.storage.test_cachedreads -*-
"""
Listing and watching, as informers do them, answered from the watch caches.

Every part of the process that follows a resource (controllers, the RBAC
index, the node graph, the bootstrap-token index, the garbage collector)
lists it once and then watches it. Done against the store, each of them
was a watch of its own: on etcd a stream per informer and every change
sent, decoded and waited for once per informer. Answered from the
resource's watch cache, the store is watched once per resource and
process, and the informers hear of a change as the cache applies it, so
a write through this process has reached them when it returns, as before.

A prefix without a cache (a resource switched off) goes to the store.
"""

from twisted.internet.defer import fail, succeed

from orchd.storage.interfaces import CompactedError, KeyValue, ListResult


class CachedReads:
    """
    C{list(prefix)} and C{watch(prefix, after, on_events, on_error)} of
    L{orchd.storage.interfaces.IStore}, for informers.

    @param caches: C{{key prefix: WatchCache}} (filled by the catalog,
        possibly after this object is made; caches need not be started yet:
        a listing waits for its cache to follow the store).
    @param store: where prefixes without a cache are read.
    """

    def __init__(self, caches, store):
        self._caches = caches
        self._store = store

    def _cache_for(self, prefix):
        for cache_prefix, cache in self._caches.items():
            if prefix.startswith(cache_prefix):
                return cache
        return None

    def list(self, prefix):
        """Every object under C{prefix} at the cache's revision (one page)."""
        cache = self._cache_for(prefix)
        if cache is None:
            return self._store.list(prefix)
        return cache.following().addCallback(_listing, prefix)

    def get(self, key):
        """
        The L{KeyValue} of C{key}, or None: from its cache when the cache
        has it, else from the store (the cache may not have seen what
        another API server just wrote, nor be following yet).
        """
        cache = self._cache_for(key)
        kv = cache.get(key) if cache is not None else None
        if kv is not None:
            return succeed(kv)
        return self._store.get(key)

    def watch(self, prefix, after_revision, on_events, on_error):
        """Changes under C{prefix} after C{after_revision}; see L{WatchCache.subscribe}."""
        cache = self._cache_for(prefix)
        if cache is None:
            return self._store.watch(prefix, after_revision, on_events, on_error)
        try:
            return succeed(cache.subscribe(prefix, after_revision, on_events, on_error))
        except CompactedError as e:
            return fail(e)


def _listing(cache, prefix):
    state = cache.state
    return ListResult([KeyValue(key, *state[key]) for key in sorted(state)
                       if key.startswith(prefix)], cache.revision)
