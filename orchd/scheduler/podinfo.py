# -*- test-case-name: tests.scheduler.test_podinfo -*-
"""
What the scheduler reads of a pod, parsed once per version of the pod.

The pods informer keeps a L{PodInfo} instead of the object: requests
counted, host ports listed, tolerations and node affinity compiled, so
that trying a pod on a hundred nodes reads small attributes, never the
pod's JSON.
"""

import orjson

from orchd.api.taints import as_dicts
from orchd.scheduler import nodeaffinity
from orchd.scheduler.resources import CPU, MEMORY, PODS, pod_requests

DEFAULT_SCHEDULER = "default-scheduler"
POD_SCHEDULED = "PodScheduled"
_TERMINAL = ("Succeeded", "Failed")


def _host_ports(spec):
    """C{(ip, protocol, port)} of every container port with a host port."""
    ports = []
    containers = spec.get("containers")
    for container in containers if isinstance(containers, list) else ():
        if not isinstance(container, dict) or not isinstance(container.get("ports"), list):
            continue
        for port in container["ports"]:
            if not isinstance(port, dict):
                continue
            host_port = port.get("hostPort")
            if isinstance(host_port, int) and not isinstance(host_port, bool) and host_port > 0:
                ports.append((port.get("hostIP") or "0.0.0.0", port.get("protocol") or "TCP",
                              host_port))
    return tuple(ports)


def _claim_names(spec):
    """The names of the PersistentVolumeClaims the pod's volumes use, in order."""
    names = []
    volumes = spec.get("volumes")
    for volume in volumes if isinstance(volumes, list) else ():
        source = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
        name = source.get("claimName") if isinstance(source, dict) else None
        if isinstance(name, str) and name and name not in names:
            names.append(name)
    return tuple(names)


def _controller_uid(meta):
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, dict) and ref.get("controller") is True and ref.get("uid"):
            return ref["uid"]
    return None


def _scheduled_condition(status):
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, dict) and condition.get("type") == POD_SCHEDULED:
            return (condition.get("status"), condition.get("reason"), condition.get("message"))
    return None


class PodInfo:
    """
    One version of one pod, as the scheduler reads it.

    @ivar key: C{namespace/name}.
    @ivar requests: C{{resource: amount}} it needs of its node (for fit).
    @ivar non_zero: the same with unset cpu and memory counted (for scoring).
    @ivar fit_requests: C{(resource, amount)} of the requests the fit check
        compares (those above zero, the pod count aside).
    @ivar host_ports: C{(ip, protocol, port)} it binds on its node.
    @ivar claims: the names of the PersistentVolumeClaims its volumes use.
    @ivar owner: the uid of its controlling owner, or None.
    @ivar signature: what, when it changes, may make a pod schedulable
        again (its spec, labels and annotations); None for a pod with a node.
    """

    __slots__ = ("key", "namespace", "name", "uid", "resource_version", "node_name",
                 "scheduler_name", "terminal", "deleting", "gated", "priority", "requests",
                 "non_zero", "fit_requests", "non_zero_cpu", "non_zero_memory", "host_ports",
                 "tolerations", "node_selector", "required", "preferred", "claims", "owner",
                 "condition", "preempt_never", "signature")

    def __init__(self, pod):
        meta = pod.get("metadata") or {}
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            spec = {}
        status = pod.get("status")
        self.namespace = meta.get("namespace") or ""
        self.name = meta.get("name") or ""
        self.key = f"{self.namespace}/{self.name}"
        self.uid = meta.get("uid") or ""
        self.resource_version = meta.get("resourceVersion") or ""
        self.node_name = spec.get("nodeName") or ""
        self.scheduler_name = spec.get("schedulerName") or DEFAULT_SCHEDULER
        phase = status.get("phase") if isinstance(status, dict) else None
        self.terminal = phase in _TERMINAL
        self.deleting = bool(meta.get("deletionTimestamp"))
        self.gated = bool(spec.get("schedulingGates"))
        priority = spec.get("priority")
        self.priority = priority if isinstance(priority, int) and not isinstance(
            priority, bool) else 0
        self.requests = pod_requests(spec)
        self.non_zero = pod_requests(spec, non_zero=True)
        self.fit_requests = tuple((name, value) for name, value in self.requests.items()
                                  if value > 0 and name != PODS)
        self.non_zero_cpu = self.non_zero.get(CPU, 0)
        self.non_zero_memory = self.non_zero.get(MEMORY, 0)
        self.host_ports = _host_ports(spec)
        self.tolerations = as_dicts(spec.get("tolerations"))
        selector = spec.get("nodeSelector")
        self.node_selector = selector if isinstance(selector, dict) else {}
        self.required, self.preferred = nodeaffinity.compile_affinity(spec.get("affinity"))
        self.claims = _claim_names(spec)
        self.owner = _controller_uid(meta)
        self.condition = _scheduled_condition(status)
        self.preempt_never = spec.get("preemptionPolicy") == "Never"
        # Only a pending pod is compared with its last version; a bound pod
        # changes (its status written by its node) far more often.
        self.signature = None if self.node_name else orjson.dumps(
            (spec, meta.get("labels"), meta.get("annotations")), option=orjson.OPT_SORT_KEYS)

    @property
    def assigned(self):
        return bool(self.node_name)

    def reference(self):
        """The pod as an event's involved object is made from it."""
        return {"kind": "Pod", "apiVersion": "v1",
                "metadata": {"namespace": self.namespace, "name": self.name, "uid": self.uid,
                             "resourceVersion": self.resource_version}}

    def __repr__(self):
        return f"<PodInfo {self.key} node={self.node_name!r}>"
