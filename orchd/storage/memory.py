# -*- test-case-name: tests.storage.test_contract -*-
"""
An in-memory L{IStore} for fast tests.

Every Deferred it returns has already fired, so tests can use
C{SynchronousTestCase} and C{successResultOf}; watches replay and deliver
synchronously too. It keeps the same change log as the durable backends
and answers through the same rules (L{orchd.storage.revisioned}), so
passing the contract here means the same thing as passing it there.
"""

from bisect import bisect_left, insort
from itertools import takewhile

from twisted.internet import defer
from zope.interface import implementer

from orchd.storage.interfaces import DELETED, IStore, KeyValue, ListResult, StoreUnavailableError
from orchd.storage.revisioned import (
    RevisionedStore,
    change_event,
    garbage,
    old_states,
    read_page,
)


@implementer(IStore)
class MemoryStore(RevisionedStore):
    """
    A revisioned store held in dictionaries.

    Current values are kept as C{(value, create_revision, mod_revision)}
    tuples and turned into a fresh L{KeyValue} on every read, so a caller
    that changes what it was given cannot change the store.
    """

    def __init__(self):
        super().__init__(revision=0, compacted=0)
        self._items = {}
        self._keys = []
        self._log = {}
        self._swept = 0

    def _value_at(self, revision):
        return self._log[revision].value

    def _current(self, key):
        item = self._items.get(key)
        return None if item is None else KeyValue(key, *item)

    def _commit(self, change, event, result):
        key = change.key
        if change.type == DELETED:
            del self._items[key]
            del self._keys[bisect_left(self._keys, key)]
        else:
            if key not in self._items:
                insort(self._keys, key)
            self._items[key] = (change.value, change.create_revision, change.revision)
        self._log[change.revision] = change
        self._committed = change.revision
        self._hub.publish([event])
        return defer.succeed(result)

    def get(self, key):
        if not self._accepting:
            return self._unavailable()
        return defer.succeed(self._current(key))

    def _scan(self, prefix, start):
        """The C{scan} of L{read_page} over current keys under C{prefix} from C{start}."""
        keys, items = self._keys, self._items
        first = max(prefix, start) if start is not None else prefix

        def scan(from_key, values):
            index = bisect_left(keys, from_key if from_key is not None else first)
            following = (keys[i] for i in range(index, len(keys)))
            matching = takewhile(lambda key: key.startswith(prefix), following)
            if values:
                return ((key, items[key]) for key in matching)
            return matching

        return scan

    def list(self, prefix, revision=0, start=None, limit=0, count_remaining=False):
        if not self._accepting:
            return self._unavailable()
        latest = self._committed
        overrides = {}
        if revision:
            error = self._check_revision(revision, latest)
            if error is not None:
                return defer.fail(error)
            later = (self._log[r] for r in range(revision + 1, latest + 1))
            first = start if start is not None and start > prefix else prefix
            overrides = old_states(
                (c for c in later if c.key.startswith(prefix) and c.key >= first), self._value_at
            )
        items, more, remaining = read_page(
            self._scan(prefix, start),
            overrides,
            limit,
            count_remaining,
            lambda key, item: KeyValue(key, *item),
        )
        return defer.succeed(ListResult(items, revision or latest, more, remaining))

    def count(self, prefix):
        if not self._accepting:
            return self._unavailable()
        return defer.succeed(sum(1 for _ in self._scan(prefix, None)(None, False)))

    def _read_events(self, prefix, after, upto, limit):
        last = min(upto, after + limit)
        events = [
            change_event(change, self._value_at)
            for change in (self._log[r] for r in range(after + 1, last + 1))
            if change.key.startswith(prefix)
        ]
        return events, last

    def _compact(self):
        for revision in range(self._swept + 1, self.compacted_revision + 1):
            change = self._log.get(revision)
            if change is not None:
                for dropped in garbage(change):
                    self._log.pop(dropped, None)
        self._swept = self.compacted_revision
        return defer.succeed(None)

    def check(self):
        if not self._accepting:
            return self._unavailable()
        return defer.succeed(None)

    def close(self):
        if self._accepting:
            self._accepting = False
            self._hub.close(StoreUnavailableError("the store is closed"))
        return defer.succeed(None)
