# -*- test-case-name: tests.scheduler.test_cache -*-
"""
The scheduler's view of the cluster: each node with what its pods use.

A L{NodeInfo} holds what the filters and scores read of a node, parsed
once per version of the Node (labels, taints split by effect,
allocatable), and the sums over the pods on it (requests, scoring
requests, pod count, host ports, pods per owner), changed one pod at a
time as the informers report pods, so deciding for a pod never adds up a
node's pods again.

A pod the scheduler has chosen a node for is I{assumed} there at once,
before its binding is written, so the next decision counts it; when the
informer reports the pod bound the assumption is confirmed, and when the
binding fails it is forgotten. Pods that finished (Succeeded, Failed) use
nothing. Pods bound to a node the cache has not seen yet are kept under
that name and counted once the Node appears.
"""

from collections import Counter

from orchd.api.taints import NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, node_taints
from orchd.scheduler.resources import CPU, MEMORY, PODS, resource_list

_ALL_ADDRESSES = "0.0.0.0"


class NodeSpec:
    """
    What the scheduler reads of one version of a Node.

    Two versions compare equal when nothing the scheduler reads differs
    (a heartbeat in the status does not count).
    """

    __slots__ = ("name", "labels", "unschedulable", "hard_taints", "hard_taints_key",
                 "soft_taints", "allocatable", "cpu", "memory", "pods", "_identity")

    def __init__(self, node):
        meta = node.get("metadata") or {}
        spec = node.get("spec") if isinstance(node.get("spec"), dict) else {}
        status = node.get("status") if isinstance(node.get("status"), dict) else {}
        self.name = meta.get("name") or ""
        labels = meta.get("labels")
        self.labels = labels if isinstance(labels, dict) else {}
        self.unschedulable = spec.get("unschedulable") is True
        taints = node_taints(node)
        self.hard_taints = tuple(t for t in taints
                                 if t.get("effect") in (NO_SCHEDULE, NO_EXECUTE))
        #: Equal for nodes with the same hard taints: what the taint filter
        #: decides for a pod holds for every node of one key.
        self.hard_taints_key = repr(self.hard_taints)
        self.soft_taints = tuple(t for t in taints if t.get("effect") == PREFER_NO_SCHEDULE)
        self.allocatable = resource_list(status.get("allocatable"))
        self.cpu = self.allocatable.get(CPU, 0)
        self.memory = self.allocatable.get(MEMORY, 0)
        self.pods = self.allocatable.get(PODS, 0)
        self._identity = (self.name, sorted(self.labels.items(), key=str), self.unschedulable,
                          repr(taints), sorted(self.allocatable.items()))

    def __eq__(self, other):
        return isinstance(other, NodeSpec) and self._identity == other._identity

    def __repr__(self):
        return f"<NodeSpec {self.name}>"


class NodeInfo:
    """
    One node and what the pods on it use.

    @ivar node: its L{NodeSpec}, or None while only pods name it.
    @ivar requested: C{{resource: amount}} the pods request (for fit).
    @ivar non_zero_cpu: millicores counted for scoring (unset requests as 100m).
    @ivar non_zero_memory: bytes counted for scoring (unset requests as 200Mi).
    @ivar pod_count: how many pods use it.
    @ivar ports: C{{(protocol, port): Counter of host IPs}} bound on it.
    @ivar owners: C{Counter} of pods per controlling owner uid.
    """

    __slots__ = ("name", "node", "requested", "non_zero_cpu", "non_zero_memory", "pod_count",
                 "ports", "owners", "pods")

    def __init__(self, name):
        self.name = name
        self.node = None
        self.requested = {}
        self.non_zero_cpu = 0
        self.non_zero_memory = 0
        self.pod_count = 0
        self.ports = {}
        self.owners = Counter()
        self.pods = {}

    # What the plugins read of the node itself.

    @property
    def labels(self):
        return self.node.labels

    @property
    def allocatable(self):
        return self.node.allocatable

    def add(self, pod):
        """Count C{pod} (a L{PodInfo}) as using this node."""
        self.pods[pod.key] = pod
        self._count(pod, 1)

    def remove(self, key):
        """Stop counting the pod C{key}; its L{PodInfo}, or None."""
        pod = self.pods.pop(key, None)
        if pod is not None:
            self._count(pod, -1)
        return pod

    def _count(self, pod, sign):
        requested = self.requested
        for name, value in pod.requests.items():
            requested[name] = requested.get(name, 0) + sign * value
        self.non_zero_cpu += sign * pod.non_zero_cpu
        self.non_zero_memory += sign * pod.non_zero_memory
        self.pod_count += sign
        for ip, protocol, port in pod.host_ports:
            ips = self.ports.setdefault((protocol, port), Counter())
            ips[ip] += sign
            if ips[ip] <= 0:
                del ips[ip]
                if not ips:
                    del self.ports[(protocol, port)]
        if pod.owner is not None:
            self.owners[pod.owner] += sign
            if self.owners[pod.owner] <= 0:
                del self.owners[pod.owner]

    def port_in_use(self, ip, protocol, port):
        """Upstream's C{HostPortInfo.CheckConflict}: 0.0.0.0 clashes with every address."""
        ips = self.ports.get((protocol, port))
        if not ips:
            return False
        if ip == _ALL_ADDRESSES:
            return True
        return ip in ips or _ALL_ADDRESSES in ips

    def __repr__(self):
        return f"<NodeInfo {self.name} pods={self.pod_count}>"


class SchedulerCache:
    """
    Every node and every pod bound (or assumed) to one.

    @ivar assumed: the keys of pods counted on the node chosen for them,
        whose binding the informer has not reported yet.
    """

    def __init__(self):
        self._nodes = {}
        self._list = None
        self._pod_nodes = {}
        self.assumed = set()

    # -- nodes --------------------------------------------------------------

    def node_info(self, name):
        return self._nodes.get(name)

    def node_list(self):
        """The L{NodeInfo}s of the known Nodes, in a stable order (by name)."""
        if self._list is None:
            self._list = [self._nodes[name] for name in sorted(self._nodes)
                          if self._nodes[name].node is not None]
        return self._list

    def set_node(self, spec):
        """Add or update a node from its L{NodeSpec}."""
        info = self._nodes.get(spec.name)
        if info is None:
            info = self._nodes[spec.name] = NodeInfo(spec.name)
        if info.node is None:
            self._list = None
        info.node = spec

    def remove_node(self, name):
        """
        Forget a Node; pods still bound to it stay counted under its name
        (they go with their own deletion, as upstream's cache keeps them).
        """
        info = self._nodes.get(name)
        if info is None:
            return
        info.node = None
        self._list = None
        if not info.pods:
            del self._nodes[name]

    # -- pods ---------------------------------------------------------------

    def _place(self, pod, node_name):
        info = self._nodes.get(node_name)
        if info is None:
            info = self._nodes[node_name] = NodeInfo(node_name)
        info.add(pod)
        self._pod_nodes[pod.key] = node_name

    def set_pod(self, pod):
        """
        Count a pod the informer reports bound to a node (confirming an
        assumption), or stop counting it once it has finished.
        """
        self.remove_pod(pod.key)
        if not pod.terminal:
            self._place(pod, pod.node_name)

    def remove_pod(self, key):
        """Stop counting pod C{key} (deleted, finished or forgotten); its node name or None."""
        self.assumed.discard(key)
        node_name = self._pod_nodes.pop(key, None)
        if node_name is None:
            return None
        info = self._nodes[node_name]
        info.remove(key)
        if info.node is None and not info.pods:
            del self._nodes[node_name]
        return node_name

    def assume(self, pod, node_name):
        """Count C{pod} on the node chosen for it, until its binding is seen or fails."""
        self.remove_pod(pod.key)
        self._place(pod, node_name)
        self.assumed.add(pod.key)

    def forget(self, key):
        """Undo L{assume} of a pod whose binding failed (if still only assumed)."""
        if key in self.assumed:
            self.remove_pod(key)

    def node_of(self, key):
        """The node a pod is counted on, or None."""
        return self._pod_nodes.get(key)
