# -*- test-case-name: tests.controllers -*-
"""
What controllers share: informers feeding one work queue.

Each controller follows a few resources and reconciles one key at a time;
this holds their start, stop and the small helpers they read the API
with, so each module keeps only its rules.
"""

import abc
from collections import defaultdict

from twisted.application.service import Service
from twisted.logger import Logger

from orchd.api.errors import StatusError
from orchd.controllers.queue import WorkQueue
from orchd.controllers.queuemetrics import WORKQUEUES
from orchd.controllers.retry import Backoff
from orchd.storage.informer import Informer, start_all, stop_all
from orchd.storage.interfaces import DELETED


def is_terminating(namespace):
    """A namespace being deleted (or gone, when C{namespace} is None)."""
    return (namespace is None or bool(namespace["metadata"].get("deletionTimestamp"))
            or (namespace.get("status") or {}).get("phase") == "Terminating")


class _Replaced(Exception):
    """The object was deleted and made again under its name (another uid)."""


async def write_status(provider, ctx, meta, new_status):
    """
    Write the status of the object C{meta} names through its status
    subresource: C{new_status(stored status)} gives the status to write,
    from the state the write starts from (so it may keep what a concurrent
    writer stored). An object that is gone, or was made again under its
    name (another uid), is left alone.

    @return: True once written, False when the object is gone.
    """
    uid = meta.get("uid")

    def change(current):
        if current["metadata"].get("uid") != uid:
            raise _Replaced()
        current["status"] = new_status(current.get("status") or {})
        current["metadata"].pop("resourceVersion", None)
        return current

    try:
        await provider.patch(ctx, meta["name"], change, subresource="status")
    except _Replaced:
        return False
    except StatusError as e:
        if e.code != 404:
            raise
        return False
    return True


def name_only(obj):
    """An informer C{keep}: just what identifies an object."""
    meta = obj["metadata"]
    return {"metadata": {"name": meta["name"], "namespace": meta.get("namespace", ""),
                         "uid": meta.get("uid", "")}}


class PodsByNode:
    """
    The pods bound to each node, as C{namespace/name} keys, kept from a pods
    informer whose C{keep} puts the node name first (C{(nodeName, ...)}).
    """

    def __init__(self):
        self._keys = defaultdict(set)

    def changed(self, type, obj, old):
        """Follow one pod change; returns the pod's key and its node ("" when none)."""
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if old is not None and old[0]:
            keys = self._keys[old[0]]
            keys.discard(key)
            if not keys:
                del self._keys[old[0]]
        node = "" if type == DELETED else (obj.get("spec") or {}).get("nodeName") or ""
        if node:
            self._keys[node].add(key)
        return key, node

    def pods_on(self, node):
        """The keys of the pods bound to C{node}, sorted."""
        return sorted(self._keys.get(node, ()))


class QueuedController(Service, metaclass=abc.ABCMeta):
    """
    Informers whose handlers queue keys for C{self._sync(key)}.

    Subclasses call L{follow} in their constructor for each resource.

    @ivar started: fires once every informer holds its first listing.
    """

    log = Logger()

    def __init__(self, catalog, clock, concurrency=4):
        self._catalog = catalog
        self._clock = clock
        self._queue = WorkQueue(self._sync, clock, concurrency=concurrency,
                                metrics=WORKQUEUES.for_queue(self.name or type(self).__name__,
                                                             clock))
        self._informers = []
        self.started = None

    def follow(self, group, resource, on_change, keep=None, namespace=None):
        """
        Watch a resource (or one namespace of it); returns the L{Informer},
        whose C{cache} holds what C{keep} keeps of each object by key.
        """
        info = self._catalog.resource(group, resource).info
        informer = Informer(self._catalog.reads, info.key_prefix(namespace), on_change, keep)
        self._informers.append(informer)
        return informer

    def startService(self):
        super().startService()
        self.started = start_all(self._informers)
        self.started.addErrback(
            lambda f: self.log.failure("Controller {name} failed to start", f, name=self.name))

    def stopService(self):
        stop_all(self._informers)
        self._queue.stop()
        return super().stopService()

    @abc.abstractmethod
    async def _sync(self, key):
        """Reconcile what C{key} names; a failure is retried with backoff by the queue."""

    async def get_or_none(self, provider, namespace, name):
        """An object read from the store (not a cache), or None when missing."""
        return await provider.find(self._catalog.system_context(namespace), name)


class CacheSyncedController(QueuedController):
    """
    A L{QueuedController} whose syncs wait until every informer holds its
    first listing (upstream's C{WaitForCacheSync}): a controller that
    creates objects must not count them from a half-filled cache. Handlers
    queue keys with L{enqueue}; keys queued before then run once the caches
    are full.
    """

    def __init__(self, catalog, clock, concurrency=4):
        super().__init__(catalog, clock, concurrency)
        self._synced = False
        self._early = set()
        #: Per-key delays of failed syncs (upstream's rate-limited requeue).
        self._backoff = Backoff()

    def retry_later(self, key, what, error):
        """Sync C{key} (a C{what}) again after its backoff: the API refused a write."""
        delay = self._backoff.failed(key)
        self.log.info("Sync of {what} {key} failed ({error}); retrying in {delay:.1f}s",
                      what=what, key=key, error=error.message, delay=delay)
        self.enqueue(key, after=delay)

    def startService(self):
        super().startService()
        self.started.addCallback(self._caches_synced)

    def _caches_synced(self, _):
        self._synced = True
        early, self._early = self._early, set()
        for key in sorted(early):
            self._queue.add(key)

    def enqueue(self, key, after=None):
        """Queue C{key}, now or C{after} seconds from now."""
        if not self._synced:
            self._early.add(key)
        elif after is None:
            self._queue.add(key)
        else:
            self._queue.add_after(key, after)
