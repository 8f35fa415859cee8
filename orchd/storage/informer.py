# -*- test-case-name: tests.storage.test_informer -*-
"""
An informer: a resource listed once, then kept current by watching the store.

Controllers and in-memory indexes read from its cache instead of scanning
the store, and hear of every change through one callback. If the watch
falls behind the kept history it lists again and reports the difference.
"""

from collections import OrderedDict

import orjson
from twisted.internet.defer import Deferred, gatherResults
from twisted.logger import Logger

from orchd.storage.interfaces import ADDED, DELETED, MODIFIED, CompactedError
from orchd.storage.watchcache import CachedEvent

#: Listed objects decoded per reactor turn.
LIST_SLICE = 1000


def event_object(event):
    """The object carried by a store event, with the change's resourceVersion (a new copy)."""
    obj = orjson.loads(event.value)
    obj["metadata"]["resourceVersion"] = str(event.revision)
    return obj


def shared_event_object(event):
    """
    The object of a store event, decoded once for every follower of the
    change: a watch cache's events (L{orchd.storage.watchcache.CachedEvent})
    carry it, decoded on first need; plain store events are decoded here.
    Whoever gets it must not change it.
    """
    if isinstance(event, CachedEvent):
        return event.obj
    return event_object(event)


def _listed_object(kv):
    obj = orjson.loads(kv.value)
    obj["metadata"]["resourceVersion"] = str(kv.mod_revision)
    return obj


class _ListingDecoder:
    """
    The objects of one prefix's listings decoded lately, for the informers
    listing it at the same time (see L{Informer.start}): the last
    C{2 * LIST_SLICE} decodings, while any of them lists, forgotten when the
    last one is done. An object is reused only for the very bytes it was
    decoded from (the watch cache hands every listing the same bytes
    object), so listings of different stores never share.
    """

    _open = {}

    def __init__(self, prefix):
        self._prefix = prefix
        self._recent = OrderedDict()
        self._users = 0

    @classmethod
    def open(cls, prefix):
        decoder = cls._open.get(prefix)
        if decoder is None:
            decoder = cls._open[prefix] = cls(prefix)
        decoder._users += 1
        return decoder

    def close(self):
        self._users -= 1
        if not self._users:
            self._recent.clear()
            del self._open[self._prefix]

    def decode(self, kv):
        """The object of C{kv} with its resourceVersion; it must not be changed."""
        recent = self._recent
        entry = recent.get(kv.key)
        if entry is not None and entry[0] is kv.value and entry[1] == kv.mod_revision:
            return entry[2]
        obj = _listed_object(kv)
        recent[kv.key] = (kv.value, kv.mod_revision, obj)
        if len(recent) > 2 * LIST_SLICE:
            recent.popitem(last=False)
        return obj


def start_all(informers):
    """A Deferred firing once every one of C{informers} holds its first listing."""
    return gatherResults([Deferred.fromCoroutine(i.start()) for i in informers],
                         consumeErrors=True)


def stop_all(informers):
    for informer in informers:
        informer.stop()


class Informer:
    """
    @param store: where to list and watch: an IStore, or the watch caches
        (L{orchd.storage.cachedreads.CachedReads}) in the API server.
    @param prefix: the key prefix of the resource (a L{KindInfo.key_prefix}).
    @param on_change: C{on_change(type, obj, old)} for every change; C{old}
        is the cached object before it (None for ADDED).
    @param keep: C{keep(obj)}: what the cache holds of an object, by default
        all of it. A handler that needs little of it keeps the process lean by
        keeping only that: what is kept is what it gets as C{old}, and as
        C{obj} too for deletions found by listing again. With a C{keep}, the
        C{obj} of a watched change or of a listed object is the one decoded
        for every informer of the resource (a pod change is not decoded once
        per controller), so
        neither C{keep} nor C{on_change} may change it (nor what C{keep}
        takes of it unchanged, such as its labels); without one, the cache
        holds objects of this informer's own, which its user may change.
    @param clock: the reactor turns of a long listing are taken from (by
        default the global reactor's).
    """

    log = Logger()

    def __init__(self, store, prefix, on_change, keep=None, clock=None):
        self._store = store
        self._clock = clock
        self._prefix = prefix
        self._on_change = on_change
        self._keep = keep or (lambda obj: obj)
        self._decode = shared_event_object if keep is not None else event_object
        self._watch = None
        self._stopped = False
        self.cache = {}
        self._revisions = {}
        self.revision = 0

    async def start(self):
        """
        List, then watch; fires once the cache holds the listed state.

        A long listing is decoded a slice per reactor turn (tens of thousands
        of pods take seconds, and many informers list at once when the
        controllers start, which must not stall the Lease renewal or anyone's
        request); the cache then changes at once, and handlers hear of it,
        again a slice per turn.

        Only what is kept is held between the two passes: a listing held
        decoded costs several times its encoded size (a 3.7 KB pod is 16 KB
        of dicts and strings), once per informer, and a dozen informers
        follow pods. An informer with a C{keep} decodes each listed object
        twice, through a small memory of recent decodings (L{_ListingDecoder})
        shared by the informers listing the same prefix: they list in step,
        a slice each in turn, so an object is decoded once per pass for all
        of them, and what they keep of it (names, labels) is shared.
        """
        page = await self._store.list(self._prefix)
        shared = self._decode is shared_event_object
        decoder = _ListingDecoder.open(self._prefix) if shared else None
        try:
            await self._replace(page, decoder)
        finally:
            if decoder is not None:
                decoder.close()
        if self._stopped:
            return
        self._watch = await self._store.watch(
            self._prefix, page.revision, self._events, self._failed)

    async def _replace(self, page, decoder):
        """Make the cache C{page}'s state, and tell the handlers what changed."""
        listed = []
        keep = self._keep
        for index, kv in enumerate(page.items):
            if index and index % LIST_SLICE == 0:
                await self._next_turn()
                if self._stopped:
                    return
            if decoder is None:
                kept = keep(_listed_object(kv))
            else:
                kept = keep(decoder.decode(kv))
            listed.append((kv, kept))
        old_cache, self.cache = self.cache, {}
        old_revisions, self._revisions = self._revisions, {}
        self.revision = page.revision
        changed = []
        for kv, kept in listed:
            self.cache[kv.key] = kept
            self._revisions[kv.key] = kv.mod_revision
            if kv.key not in old_cache:
                changed.append((kv, kept, None))
            elif old_revisions[kv.key] != kv.mod_revision:
                changed.append((kv, kept, old_cache[kv.key]))
        del listed
        for index, (kv, kept, old) in enumerate(changed):
            if index and index % LIST_SLICE == 0:
                await self._next_turn()
                if self._stopped:
                    return
            obj = kept if decoder is None else decoder.decode(kv)
            self._notify(ADDED if old is None else MODIFIED, obj, old)
        for key, kept in old_cache.items():
            if key not in self.cache:
                self._notify(DELETED, kept, kept)

    def _next_turn(self):
        clock = self._clock
        if clock is None:
            from twisted.internet import reactor as clock
        turn = Deferred()
        clock.callLater(0, turn.callback, None)
        return turn

    def stop(self):
        self._stopped = True
        if self._watch is not None:
            self._watch.stop()
            self._watch = None

    def _events(self, events):
        for event in events:
            if event.revision <= self.revision:
                continue
            self.revision = event.revision
            obj = self._decode(event)
            before = self.cache.get(event.key)
            if event.type == DELETED:
                self.cache.pop(event.key, None)
                self._revisions.pop(event.key, None)
            else:
                self.cache[event.key] = self._keep(obj)
                self._revisions[event.key] = event.revision
            self._notify(event.type, obj, before)

    def _notify(self, type, obj, old):
        try:
            self._on_change(type, obj, old)
        except Exception:
            self.log.failure("Informer handler failed for {prefix}", prefix=self._prefix)

    def _failed(self, error):
        self._watch = None
        if self._stopped:
            return
        if isinstance(error, CompactedError):
            self.log.info("Watch on {prefix} fell behind; listing again", prefix=self._prefix)
        else:
            self.log.warn("Watch on {prefix} ended: {error}; listing again",
                          prefix=self._prefix, error=error)
        d = Deferred.fromCoroutine(self.start())
        d.addErrback(lambda f: self.log.failure("Relisting {prefix} failed", f,
                                                prefix=self._prefix))

    def objects(self):
        return list(self.cache.values())
