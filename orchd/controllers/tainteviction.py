# -*- test-case-name: tests.controllers.test_tainteviction -*-
"""
The taint eviction controller: pods leave nodes tainted NoExecute.

A pod bound to a node with a NoExecute taint it does not tolerate is
deleted through the API at once; one that tolerates every such taint for a
limited time (C{tolerationSeconds}, the smallest of the tolerations used)
is deleted when that time, counted from the taint's C{timeAdded}, runs
out. This is how pods leave a node that stopped reporting: the node
lifecycle controller taints it, and DefaultTolerationSeconds admission
gave each pod C{--pod-eviction-timeout} seconds of toleration.
As upstream's taint manager, it does not go through the eviction
subresource (no disruption budget holds a pod on a node that must be
left): it sets the pod's C{DisruptionTarget} condition (reason
C{DeletionByTaintManager}) and deletes it.
Each pending eviction is one timer; a taint removed meanwhile is seen
when the timer fires, and the pod stays.
"""

from orchd.api import taints as t
from orchd.api.disruption import DELETION_BY_TAINT_MANAGER, disruption_target
from orchd.api.errors import StatusError
from orchd.api.printers.base import parse_time
from orchd.controllers.base import PodsByNode, QueuedController
from orchd.registry.binding import set_pod_condition
from orchd.registry.context import RequestContext
from orchd.registry.options import DeleteOptions
from orchd.storage.interfaces import DELETED

MANAGER = "taint-eviction-controller"


def _no_execute(node):
    return [taint for taint in t.node_taints(node) if taint.get("effect") == t.NO_EXECUTE]


def _pod_keep(pod):
    """C{(nodeName, uid, tolerations)}: what deciding an eviction needs."""
    return ((pod.get("spec") or {}).get("nodeName") or "", pod["metadata"].get("uid"),
            t.pod_tolerations(pod))


def eviction_delay(taints, tolerations):
    """
    Seconds a pod may stay on a node with these NoExecute C{taints}: 0 when
    one is not tolerated, None when all are tolerated for ever, else the
    smallest C{tolerationSeconds} of the tolerations that match.
    """
    smallest = None
    for taint in taints:
        used = [tol for tol in tolerations if t.tolerates(tol, taint)]
        if not used:
            return 0
        for tol in used:
            seconds = tol.get("tolerationSeconds")
            if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
                seconds = max(seconds, 0)
                smallest = seconds if smallest is None else min(smallest, seconds)
    return smallest


class TaintEvictionController(QueuedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    """

    name = "taint-eviction-controller"

    def __init__(self, catalog, clock):
        super().__init__(catalog, clock)
        self._pods = catalog.resource("", "pods")
        self._pod_prefix = self._pods.info.key_prefix()
        self._node_prefix = catalog.resource("", "nodes").info.key_prefix()
        self._by_node = PodsByNode()
        #: When a pending eviction was first judged, for taints without timeAdded.
        self._since = {}
        self._nodes = self.follow("", "nodes", self._node_changed, keep=_no_execute)
        self._pod_cache = self.follow("", "pods", self._pod_changed, keep=_pod_keep)

    def _node_changed(self, type, obj, old):
        if type == DELETED or _no_execute(obj) == (old or []):
            return
        for key in self._by_node.pods_on(obj["metadata"]["name"]):
            self._queue.add(key)

    def _pod_changed(self, type, obj, old):
        key, node = self._by_node.changed(type, obj, old)
        if type == DELETED:
            self._since.pop(key, None)
        elif node:
            self._queue.add(key)

    async def _sync(self, key):
        kept = self._pod_cache.cache.get(self._pod_prefix + key)
        taints = self._nodes.cache.get(self._node_prefix + kept[0]) if kept else None
        delay = eviction_delay(taints, kept[2]) if taints else None
        if delay is None:
            self._since.pop(key, None)
            return
        node, uid, _ = kept
        now = self._clock.seconds()
        if delay > 0:
            added = [parse_time(taint.get("timeAdded")) for taint in taints]
            start = min([a for a in added if a is not None],
                        default=self._since.setdefault(key, now))
            if start + delay > now:
                self._queue.add_after(key, start + delay - now)
                return
        namespace, name = key.split("/", 1)
        ctx = RequestContext(self._catalog.system_context().user, namespace,
                             field_manager=MANAGER)
        condition = disruption_target(DELETION_BY_TAINT_MANAGER,
                                      "Taint manager: deleting due to NoExecute taint", now)

        def mark(pod):
            status = pod.get("status")
            if not isinstance(status, dict):
                status = pod["status"] = {}
            return pod if set_pod_condition(status, dict(condition)) else None

        try:
            await self._pods.rewrite(ctx, name, mark, DeleteOptions(uid=uid))
            await self._pods.delete(ctx, name, DeleteOptions(uid=uid))
        except StatusError as e:
            if e.code not in (404, 409):
                raise
            return       # gone already, or a new pod of that name
        self._since.pop(key, None)
        self.log.info("Evicted pod {key} from tainted node {node}", key=key, node=node)
