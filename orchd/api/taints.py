# -*- test-case-name: tests.controllers.test_tainteviction,tests.controllers.test_nodelifecycle,tests.admission.test_defaulttolerationseconds -*-
"""
Node taints and pod tolerations: the well-known keys and the matching rule.

The node lifecycle controller writes these taints, the taint eviction
controller and the DefaultTolerationSeconds admission plugin read them;
the rule a toleration matches a taint by is upstream's C{ToleratesTaint}.
"""

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"

#: [renamed] Upstream C{node.kubernetes.io/...}.
NOT_READY = "node.orch.io/not-ready"
UNREACHABLE = "node.orch.io/unreachable"
UNSCHEDULABLE = "node.orch.io/unschedulable"
MEMORY_PRESSURE = "node.orch.io/memory-pressure"
DISK_PRESSURE = "node.orch.io/disk-pressure"
PID_PRESSURE = "node.orch.io/pid-pressure"
NETWORK_UNAVAILABLE = "node.orch.io/network-unavailable"
OUT_OF_SERVICE = "node.orch.io/out-of-service"


def as_dicts(value):
    """The dict items of a list field (anything else reads as empty)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def node_taints(node):
    return as_dicts((node.get("spec") or {}).get("taints"))


def pod_tolerations(pod):
    return as_dicts((pod.get("spec") or {}).get("tolerations"))


def tolerates(toleration, taint):
    """
    Whether C{toleration} matches C{taint}: the same effect (or any, when
    the toleration names none), the same key (or any, for an empty key),
    and the same value unless the operator is C{Exists}.
    """
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")
