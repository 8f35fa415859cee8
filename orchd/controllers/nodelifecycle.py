# -*- test-case-name: tests.controllers.test_nodelifecycle -*-
"""
The node lifecycle controller: a node that stops reporting is marked
Unknown, and every node's taints follow its conditions.

An orchlet proves it is alive by renewing its Lease (in C{orch-node-lease})
and by posting status. The controller notes, on its own clock, when it last
saw either change (as upstream, so the clocks of nodes do not matter), and
sets a timer at that moment plus C{--node-monitor-grace-period}; a node
still silent then gets its Ready and pressure conditions set to Unknown.
Taints are then derived from the conditions (upstream's NoSchedule and
NoExecute tainting passes): the scheduler keeps new pods off, and the taint
eviction controller removes pods that do not tolerate the NoExecute ones.

When a node's Ready condition stops being True (the orchlet reports
NotReady, or the node fell silent), the pods bound to it are marked not
Ready, with a C{NodeNotReady} event (upstream's C{MarkPodsNotReady}):
endpoints drop them and disruption budgets stop counting them as healthy.
The controller evicts nothing itself, as upstream with taint-based
eviction: pods leave through the taint eviction controller.
"""

from orchd.api import taints as t
from orchd.api.errors import StatusError
from orchd.auth.authz.node import NODE_LEASE_NAMESPACE
from orchd.controllers.base import PodsByNode, QueuedController
from orchd.controllers.events import WARNING, EventRecorder
from orchd.registry.context import RequestContext
from orchd.api.meta import rfc3339
from orchd.storage.interfaces import DELETED

MANAGER = "node-lifecycle-controller"
COMPONENT = "node-controller"
DEFAULT_GRACE_PERIOD = 40.0
#: Conditions the orchlet owns, and so set Unknown when it falls silent
#: (NetworkUnavailable belongs to the network provider, as upstream).
MONITORED = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
#: (condition, status, taint key) for the NoSchedule taints.
_NO_SCHEDULE = (
    ("Ready", "False", t.NOT_READY),
    ("Ready", "Unknown", t.UNREACHABLE),
    ("MemoryPressure", "True", t.MEMORY_PRESSURE),
    ("DiskPressure", "True", t.DISK_PRESSURE),
    ("PIDPressure", "True", t.PID_PRESSURE),
    ("NetworkUnavailable", "True", t.NETWORK_UNAVAILABLE),
)
#: The taints this controller owns, by (key, effect); others are left alone.
MANAGED = frozenset([(key, t.NO_SCHEDULE) for _, _, key in _NO_SCHEDULE]
                    + [(t.UNSCHEDULABLE, t.NO_SCHEDULE), (t.NOT_READY, t.NO_EXECUTE),
                       (t.UNREACHABLE, t.NO_EXECUTE)])


class _Unchanged(Exception):
    """A patch found nothing to change (or judged a state that moved on)."""


def conditions(node):
    """The node's conditions by type (the last of a type wins, as upstream)."""
    return {c.get("type"): c for c in t.as_dicts((node.get("status") or {}).get("conditions"))}


def _ready_status(node):
    return (conditions(node).get("Ready") or {}).get("status")


def _pod_keep(pod):
    """C{(nodeName, Ready status)}: what marking pods not ready needs."""
    ready = next((c.get("status") for c in t.as_dicts((pod.get("status") or {}).get("conditions"))
                  if c.get("type") == "Ready"), None)
    return ((pod.get("spec") or {}).get("nodeName") or "", ready)


def _heartbeat(node):
    return (conditions(node).get("Ready") or {}).get("lastHeartbeatTime")


def wanted_taints(node):
    """The (key, effect) pairs of managed taints the node's state calls for."""
    by_type = conditions(node)
    wanted = {(key, t.NO_SCHEDULE) for type_, status, key in _NO_SCHEDULE
              if (by_type.get(type_) or {}).get("status") == status}
    if (node.get("spec") or {}).get("unschedulable"):
        wanted.add((t.UNSCHEDULABLE, t.NO_SCHEDULE))
    ready = (by_type.get("Ready") or {}).get("status")
    if ready == "False":
        wanted.add((t.NOT_READY, t.NO_EXECUTE))
    elif ready == "Unknown":
        wanted.add((t.UNREACHABLE, t.NO_EXECUTE))
    return wanted


def reconcile_taints(node, now):
    """
    The node's taints with the managed ones made to match its state: kept
    ones unchanged (their timeAdded too), missing ones added (NoExecute with
    C{timeAdded} now), stale ones removed. None when nothing changes.
    """
    current = t.node_taints(node)
    wanted = wanted_taints(node)
    kept = [taint for taint in current if (taint.get("key"), taint.get("effect")) not in MANAGED
            or (taint.get("key"), taint.get("effect")) in wanted]
    present = {(taint.get("key"), taint.get("effect")) for taint in kept}
    for key, effect in sorted(wanted - present):
        taint = {"key": key, "effect": effect}
        if effect == t.NO_EXECUTE:
            taint["timeAdded"] = rfc3339(now)
        kept.append(taint)
    return None if kept == current else kept


def mark_unknown(node, now):
    """
    Set the orchlet's conditions Unknown, as upstream: an existing one with
    reason C{NodeStatusUnknown}, a missing one added as C{NodeStatusNeverUpdated}.
    @return: True when something changed.
    """
    status = node.setdefault("status", {})
    if not isinstance(status.get("conditions"), list):
        status["conditions"] = []
    by_type = conditions(node)
    changed = False
    for type_ in MONITORED:
        condition = by_type.get(type_)
        if condition is None:
            status["conditions"].append({
                "type": type_, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                "message": "Orchlet never posted node status.",
                "lastHeartbeatTime": node["metadata"].get("creationTimestamp"),
                "lastTransitionTime": rfc3339(now)})
            changed = True
        elif condition.get("status") != "Unknown":
            condition.update(status="Unknown", reason="NodeStatusUnknown",
                             message="Orchlet stopped posting node status.",
                             lastTransitionTime=rfc3339(now))
            changed = True
    return changed


class _Health:
    """When the controller last saw the node alive, and the marks it judged by."""

    __slots__ = ("probed", "heartbeat", "renew")

    def __init__(self, probed, heartbeat, renew):
        self.probed = probed
        self.heartbeat = heartbeat
        self.renew = renew


class NodeLifecycleController(QueuedController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    @param grace_period: seconds without a Lease renewal or status post
        before a node is Unknown.
    """

    name = "nodelifecycle"

    def __init__(self, catalog, clock, grace_period=DEFAULT_GRACE_PERIOD, recorder=None):
        super().__init__(catalog, clock)
        self._grace = grace_period
        self._health = {}
        #: Nodes whose Ready stopped being True, whose pods are to be marked not ready.
        self._not_ready = set()
        self._recorder = recorder or EventRecorder(catalog, clock, COMPONENT)
        self._by_node = PodsByNode()
        self._pods_provider = catalog.resource("", "pods")
        self._pod_prefix = self._pods_provider.info.key_prefix()
        self._pods = self.follow("", "pods", self._pod_changed, keep=_pod_keep)
        self._provider = catalog.resource("", "nodes")
        self._node_prefix = self._provider.info.key_prefix()
        self._nodes = self.follow("", "nodes", self._node_changed)
        self._lease_prefix = catalog.resource("coordination.orch.io", "leases").info.key_prefix(
            NODE_LEASE_NAMESPACE)
        self._leases = self.follow("coordination.orch.io", "leases", self._lease_changed,
                                   keep=_renew_time, namespace=NODE_LEASE_NAMESPACE)

    @classmethod
    def from_environment(cls, env):
        grace = getattr(env.config, "node_monitor_grace_period", None)
        return cls(env.catalog, env.clock, DEFAULT_GRACE_PERIOD if grace is None else grace)

    def _node_changed(self, type, obj, old):
        name = obj["metadata"]["name"]
        if type == DELETED:
            self._health.pop(name, None)
            self._not_ready.discard(name)
            return
        if _ready_status(obj) == "True":
            self._not_ready.discard(name)
        elif old is not None and _ready_status(old) == "True":
            self._not_ready.add(name)
        heartbeat = _heartbeat(obj)
        health = self._health.get(name)
        if health is None:
            self._health[name] = _Health(self._clock.seconds(), heartbeat,
                                         self._leases.cache.get(self._lease_prefix + name))
        elif heartbeat != health.heartbeat:
            health.heartbeat, health.probed = heartbeat, self._clock.seconds()
        self._queue.add(name)

    def _pod_changed(self, type, obj, old):
        self._by_node.changed(type, obj, old)

    def _lease_changed(self, type, obj, old):
        name = obj["metadata"]["name"]
        health = self._health.get(name)
        renew = _renew_time(obj)
        if type == DELETED or health is None or not renew or renew == health.renew:
            return
        health.renew, health.probed = renew, self._clock.seconds()
        # A renewal only moves the deadline: the check already set for the
        # old one finds the new one and waits again. With thousands of
        # nodes renewing every 10 s, that is one sync per node and grace
        # period instead of one per renewal.
        if not self._queue.scheduled(name):
            self._queue.add(name)

    def _context(self):
        return RequestContext(self._catalog.system_context().user, field_manager=MANAGER)

    async def _sync(self, name):
        node = self._nodes.cache.get(self._node_prefix + name)
        health = self._health.get(name)
        if node is None or health is None:
            return
        now = self._clock.seconds()
        deadline = health.probed + self._grace
        if now < deadline:
            self._queue.add_after(name, deadline - now)
        elif any((conditions(node).get(type_) or {}).get("status") != "Unknown"
                 for type_ in MONITORED):
            await self._write(name, self._unknown(health.heartbeat), "status")
            self.log.info("Node {name} stopped posting status; marked Unknown", name=name)
            node = None             # the taints follow the conditions just written
        # The taints are written only when the cached node calls for a change:
        # a write that changes nothing still costs a read and a failure, and
        # a node whose cached state is behind comes back here with its next
        # change.
        if node is None or reconcile_taints(node, now) is not None:
            await self._write(name, self._taint)
        if name in self._not_ready:
            await self._mark_pods_not_ready(name)

    async def _mark_pods_not_ready(self, node):
        """Set the Ready condition of the node's ready pods to False (upstream's rules)."""
        now = self._clock.seconds()

        def not_ready(pod):
            if (pod.get("spec") or {}).get("nodeName") != node:
                return None
            for condition in t.as_dicts((pod.get("status") or {}).get("conditions")):
                if condition.get("type") == "Ready":
                    if condition.get("status") == "False":
                        return None
                    condition.update(status="False", lastTransitionTime=rfc3339(now))
                    return pod
            return None

        for key in self._by_node.pods_on(node):
            kept = self._pods.cache.get(self._pod_prefix + key)
            if kept is None or kept[1] == "False" or kept[1] is None:
                continue
            namespace, pod_name = key.split("/", 1)
            ctx = RequestContext(self._catalog.system_context().user, namespace,
                                 field_manager=MANAGER)
            try:
                pod = await self._pods_provider.rewrite(ctx, pod_name, not_ready)
            except StatusError as e:
                if e.code != 404:
                    raise
                continue
            self._recorder.record(pod, WARNING, "NodeNotReady", "Node is not ready")
        if _ready_status(self._nodes.cache.get(self._node_prefix + node) or {}) != "True":
            self._not_ready.discard(node)

    def _unknown(self, heartbeat):
        def patch(node):
            # A status posted since the judgement wins: the node is alive.
            if _heartbeat(node) != heartbeat or not mark_unknown(node, self._clock.seconds()):
                raise _Unchanged()
            return node
        return patch

    def _taint(self, node):
        taints = reconcile_taints(node, self._clock.seconds())
        if taints is None:
            raise _Unchanged()
        node.setdefault("spec", {})["taints"] = taints
        return node

    async def _write(self, name, patch, subresource=""):
        try:
            await self._provider.patch(self._context(), name, patch, subresource=subresource)
        except _Unchanged:
            return
        except StatusError as e:
            if e.code != 404:
                raise


def _renew_time(lease):
    return (lease.get("spec") or {}).get("renewTime")
