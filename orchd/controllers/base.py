# -*- test-case-name: tests.controllers -*-
"""
What controllers share: informers feeding one work queue.

Each controller follows a few resources and reconciles one key at a time;
this holds their start, stop and the small helpers they read the API
with, so each module keeps only its rules.
"""

from twisted.application.service import Service
from twisted.internet.defer import Deferred, gatherResults
from twisted.logger import Logger

from orchd.controllers.informer import Informer
from orchd.controllers.queue import WorkQueue


def is_terminating(namespace):
    """A namespace being deleted (or gone, when C{namespace} is None)."""
    return (namespace is None or bool(namespace["metadata"].get("deletionTimestamp"))
            or (namespace.get("status") or {}).get("phase") == "Terminating")


def name_only(obj):
    """An informer C{keep}: just what identifies an object."""
    meta = obj["metadata"]
    return {"metadata": {"name": meta["name"], "namespace": meta.get("namespace", ""),
                         "uid": meta.get("uid", "")}}


class QueuedController(Service):
    """
    Informers whose handlers queue keys for C{self._sync(key)}.

    Subclasses call L{follow} in their constructor for each resource.

    @ivar started: fires once every informer holds its first listing.
    """

    log = Logger()

    def __init__(self, catalog, clock, concurrency=4):
        self._catalog = catalog
        self._clock = clock
        self._queue = WorkQueue(self._sync, clock, concurrency=concurrency)
        self._informers = []
        self.started = None

    def follow(self, group, resource, on_change, keep=None, namespace=None):
        """
        Watch a resource (or one namespace of it); returns the L{Informer},
        whose C{cache} holds what C{keep} keeps of each object by key.
        """
        info = self._catalog.resource(group, resource).info
        informer = Informer(self._catalog.store, info.key_prefix(namespace), on_change, keep)
        self._informers.append(informer)
        return informer

    def startService(self):
        super().startService()
        self.started = gatherResults(
            [Deferred.fromCoroutine(informer.start()) for informer in self._informers],
            consumeErrors=True)
        self.started.addErrback(
            lambda f: self.log.failure("Controller {name} failed to start", f, name=self.name))

    def stopService(self):
        for informer in self._informers:
            informer.stop()
        self._queue.stop()
        return super().stopService()

    async def _sync(self, key):
        raise NotImplementedError()

    async def get_or_none(self, provider, namespace, name):
        """An object read from the store (not a cache), or None when missing."""
        return await provider.find(self._catalog.system_context(namespace), name)
