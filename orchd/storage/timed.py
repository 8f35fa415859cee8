# -*- test-case-name: tests.storage.test_timed -*-
"""
C{etcd_request_duration_seconds{operation,type}} for every backend.

Upstream's API server measures its storage client's latency under this
name, and k3s/kine keep the name for SQLite, so the datastore dashboards
plot it whatever the backend; orchd does the same for LevelDB, memory and
etcd. L{TimedStore} wraps the backend at the store seam (inside encryption
at rest, as upstream's measure leaves out value transformation): one timer
read on each side of a call and one histogram observation, keyed by the
operation (C{get}, C{list}, C{listWithCount}, C{create}, C{update},
C{delete}) and the resource (C{pods}, C{deployments.apps}), which is read
off the key's prefix through a dict kept from the served kinds.
"""

import time

from zope.interface import implementer

from orchd.storage.interfaces import IStore

_ROOT = "/registry/"
#: Parent paths (a resource's, or a namespace's within it) whose child is kept, per operation.
_CACHED_PARENTS = 4096
_OPERATIONS = ("get", "list", "listWithCount", "create", "update", "delete")


@implementer(IStore)
class TimedStore:
    """
    @param store: the backend L{IStore}.
    @param histogram: the L{orchd.api.metrics.Histogram} with labels C{(operation, type)}.
    @param prefixes: C{prefixes()} gives C{(key prefix, resource label)}
        pairs of the served kinds; asked again when a key's prefix is new.
    """

    def __init__(self, store, histogram, prefixes=lambda: (), timer=time.perf_counter):
        self.store = store
        self._histogram = histogram
        self._prefixes = prefixes
        self._timer = timer
        self._types = {}
        #: {operation: {key's parent path: histogram child}}, at most
        #: L{_CACHED_PARENTS} paths each, so that a timed call costs one lookup.
        self._children = {operation: {} for operation in _OPERATIONS}
        self._gets = self._children["get"]

    @property
    def compacted_revision(self):
        return self.store.compacted_revision

    def type_of(self, key):
        """The resource label of C{key} (C{/registry/[<group>/]<resource>/...})."""
        cut = key.find("/", len(_ROOT))
        head = key[:cut + 1] if cut >= 0 else key
        label = self._types.get(head)
        if label is not None:
            return label
        # A grouped resource: the prefix runs one segment further.
        cut2 = key.find("/", cut + 1) if cut >= 0 else -1
        longer = key[:cut2 + 1] if cut2 >= 0 else None
        if longer is not None and longer in self._types:
            return self._types[longer]
        known = dict(self._prefixes())
        self._types.update(known)
        label = self._types.get(head) or (self._types.get(longer) if longer else None)
        if label is None:
            label = head[len(_ROOT):].strip("/")
            if known:
                # Remembered only once the kinds are known: before, a
                # grouped key would pin its group's name as a resource.
                self._types[head] = label
        return label

    def _timed(self, d, operation, key, start):
        # The histogram child of the operation on the key's resource, found
        # by the key's parent path: one lookup for a call on a known path.
        children = self._children[operation]
        parent = key[:key.rfind("/") + 1]
        child = children.get(parent)
        if child is None:
            child = self._histogram.labels(operation, self.type_of(key))
            if self._types:
                # Once the kinds are known the label of a path does not change.
                if len(children) >= _CACHED_PARENTS:
                    children.clear()
                children[parent] = child
        if d.called:
            # Answered at once (LevelDB's reads): no callback to add.
            child.observe(self._timer() - start)
            return d
        return d.addBoth(self._observe, child, start)

    def _observe(self, result, child, start):
        child.observe(self._timer() - start)
        return result

    def get(self, key):
        began = self._timer()
        d = self.store.get(key)
        # The read of every GET: a known path answered at once (LevelDB's)
        # is observed here, the rest as any other call.
        child = self._gets.get(key[:key.rfind("/") + 1])
        if child is None or not d.called:
            return self._timed(d, "get", key, began)
        child.observe(self._timer() - began)
        return d

    def list(self, prefix, revision=0, start=None, limit=0, count_remaining=False):
        began = self._timer()
        return self._timed(self.store.list(prefix, revision, start, limit, count_remaining),
                           "list", prefix, began)

    def count(self, prefix):
        began = self._timer()
        return self._timed(self.store.count(prefix), "listWithCount", prefix, began)

    def create(self, key, value):
        began = self._timer()
        return self._timed(self.store.create(key, value), "create", key, began)

    def update(self, key, value, expected_revision):
        began = self._timer()
        return self._timed(self.store.update(key, value, expected_revision), "update", key,
                           began)

    def delete(self, key, expected_revision=None):
        began = self._timer()
        return self._timed(self.store.delete(key, expected_revision), "delete", key, began)

    def watch(self, prefix, after_revision, on_events, on_error):
        return self.store.watch(prefix, after_revision, on_events, on_error)

    def current_revision(self):
        return self.store.current_revision()

    def compact(self, revision):
        return self.store.compact(revision)

    def check(self):
        return self.store.check()

    def close(self):
        return self.store.close()
