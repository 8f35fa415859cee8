# -*- test-case-name: tests.registry.test_kinds -*-
"""
The namespace controller: a terminating namespace is emptied, then removed.

For each namespace being deleted it deletes every object of every
namespaced resource in it; once nothing is left it drops the namespace's
C{orch} finalizer through the C{finalize} subresource, and the generic
store then removes the namespace. Objects held by finalizers, and pods
being deleted gracefully (their node agent stops them first), keep the
namespace waiting, checked again after a short delay.
"""

from orchd.api.errors import StatusError
from orchd.controllers.base import QueuedController
from orchd.registry.kinds.namespace import FINALIZER
from orchd.registry.options import ListOptions
from orchd.storage.interfaces import DELETED


class NamespaceController(QueuedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    @param recheck: seconds before looking again at a namespace still holding objects.
    """

    name = "namespace"

    def __init__(self, catalog, clock, recheck=5.0):
        super().__init__(catalog, clock)
        self._namespaces = catalog.resource("", "namespaces")
        self._recheck = recheck
        self.follow("", "namespaces", self._changed)

    def _changed(self, type, obj, old):
        if type != DELETED and obj["metadata"].get("deletionTimestamp"):
            self._queue.add(obj["metadata"]["name"])

    async def _sync(self, name):
        ctx = self._catalog.system_context()
        try:
            namespace = await self._namespaces.get(ctx, name)
        except StatusError as e:
            if e.code == 404:
                return
            raise
        if not namespace["metadata"].get("deletionTimestamp"):
            return
        remaining = 0
        for store in self._catalog.namespaced_stores():
            listed = await store.delete_collection(self._catalog.system_context(name),
                                                   ListOptions())
            remaining += sum(1 for item in listed["items"]
                             if item["metadata"].get("deletionTimestamp"))
        if remaining:
            self.log.info("Namespace {name} waits on {count} objects being deleted",
                          name=name, count=remaining)
            self._queue.add_after(name, self._recheck)
            return
        finalizers = [f for f in namespace.get("spec", {}).get("finalizers", []) if f != FINALIZER]
        namespace.setdefault("spec", {})["finalizers"] = finalizers
        await self._namespaces.update(ctx, name, namespace, "finalize")
        self.log.info("Namespace {name} emptied and finalized", name=name)
