# -*- test-case-name: tests.controllers.test_podgc -*-
"""
The pod garbage collector: pods bound to a node that no longer exists are
deleted, which frees their names (the spec's "deleting a Node removes all
pod objects bound to it"), and so are pods being deleted on a node that is
not ready and tainted C{node.orch.io/out-of-service}.

A Node's deletion queues its pods at once. A pod seen bound to a node the
controller does not know (at start, or a pod bound before its Node is
registered) is looked at again after a quarantine, as upstream's orphan
check, and removed only if the Node is still missing from the store then.

A pod being deleted gracefully waits for its node agent to stop it. On a
node whose agent is gone that never happens, and as upstream the pod stays
C{Terminating} until the Node is deleted or an administrator marks the
node out of service (upstream's C{gcTerminating}, for a node shut down for
good): then it is deleted with grace period 0.
"""

from orchd.api import taints as t
from orchd.api.errors import StatusError
from orchd.controllers.base import PodsByNode, QueuedController
from orchd.controllers.servicepods import is_pod_ready
from orchd.registry.context import RequestContext
from orchd.registry.options import DeleteOptions
from orchd.storage.interfaces import DELETED

MANAGER = "pod-garbage-collector"
#: Upstream's quarantine for pods bound to a node the informer lacks.
QUARANTINE = 40.0


def _pod_keep(pod):
    meta = pod["metadata"]
    return ((pod.get("spec") or {}).get("nodeName") or "", meta.get("uid"),
            bool(meta.get("deletionTimestamp")))


def _node_keep(node):
    """C{(name, out of service)}: not ready, and tainted out-of-service."""
    out = (not is_pod_ready(node.get("status") or {})
           and any(taint.get("key") == t.OUT_OF_SERVICE for taint in t.node_taints(node)))
    return node["metadata"]["name"], out


class PodGarbageCollector(QueuedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    """

    name = "podgc"

    def __init__(self, catalog, clock, quarantine=QUARANTINE):
        super().__init__(catalog, clock)
        self._quarantine = quarantine
        self._pods = catalog.resource("", "pods")
        self._node_provider = catalog.resource("", "nodes")
        self._pod_prefix = self._pods.info.key_prefix()
        self._node_prefix = self._node_provider.info.key_prefix()
        self._by_node = PodsByNode()
        self._nodes = self.follow("", "nodes", self._node_changed, keep=_node_keep)
        self._pod_cache = self.follow("", "pods", self._pod_changed, keep=_pod_keep)

    def _node_changed(self, type, obj, old):
        if type == DELETED or _node_keep(obj)[1]:
            for key in self._by_node.pods_on(obj["metadata"]["name"]):
                self._queue.add(key)

    def _pod_changed(self, type, obj, old):
        key, node = self._by_node.changed(type, obj, old)
        if not node:
            return
        kept = self._nodes.cache.get(self._node_prefix + node)
        if kept is None:
            self._queue.add_after(key, self._quarantine)
        elif kept[1] and obj["metadata"].get("deletionTimestamp"):
            self._queue.add(key)

    async def _sync(self, key):
        kept = self._pod_cache.cache.get(self._pod_prefix + key)
        if kept is None or not kept[0]:
            return
        node, uid, terminating = kept
        found = await self.get_or_none(self._node_provider, "", node)
        if found is not None and not (terminating and _node_keep(found)[1]):
            return
        why = "missing" if found is None else "out-of-service"
        namespace, name = key.split("/", 1)
        ctx = RequestContext(self._catalog.system_context().user, namespace,
                             field_manager=MANAGER)
        try:
            await self._pods.delete(ctx, name, DeleteOptions(uid=uid, grace_period_seconds=0))
        except StatusError as e:
            if e.code in (404, 409):
                return
            raise
        self.log.info("Deleted pod {key} bound to {why} node {node}", key=key, why=why,
                      node=node)
