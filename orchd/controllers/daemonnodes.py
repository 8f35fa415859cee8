# -*- test-case-name: tests.controllers.test_daemonset -*-
"""
Which nodes a DaemonSet runs on, and the pod it puts there (upstream's
C{NodeShouldRunDaemonPod}, C{daemon/util/daemonset_util.go}).

A node is eligible when the template's C{nodeName} (if any) names it, its
labels meet the template's C{nodeSelector} and required node affinity, and
every NoSchedule and NoExecute taint is tolerated, counting the
tolerations upstream adds to every daemon pod: not-ready and unreachable
(NoExecute), the pressure taints and unschedulable (NoSchedule, so daemon
pods run on cordoned nodes), and network-unavailable for host-network
pods. A pod already there stays when only NoSchedule taints are not
tolerated. Resources are not checked: the scheduler places the pod, which
names its node by a C{matchFields metadata.name} affinity term.

The scheduler's own matcher lives in the scheduler package, which imports
the controllers; the few rules are repeated here instead.
"""

import copy

from orchd.api.taints import (
    DISK_PRESSURE, MEMORY_PRESSURE, NETWORK_UNAVAILABLE, NO_EXECUTE, NO_SCHEDULE, NOT_READY,
    PID_PRESSURE, UNREACHABLE, UNSCHEDULABLE, node_taints, tolerates,
)

NAME_FIELD = "metadata.name"


def daemon_tolerations(spec):
    """The tolerations upstream's C{AddOrUpdateDaemonPodTolerations} adds."""
    added = [(NOT_READY, NO_EXECUTE), (UNREACHABLE, NO_EXECUTE), (DISK_PRESSURE, NO_SCHEDULE),
             (MEMORY_PRESSURE, NO_SCHEDULE), (PID_PRESSURE, NO_SCHEDULE),
             (UNSCHEDULABLE, NO_SCHEDULE)]
    if spec.get("hostNetwork") is True:
        added.append((NETWORK_UNAVAILABLE, NO_SCHEDULE))
    return [{"key": key, "operator": "Exists", "effect": effect} for key, effect in added]


def with_daemon_tolerations(spec):
    """The spec's tolerations, the daemon ones replacing any of the same key and effect."""
    own = [t for t in spec.get("tolerations") or () if isinstance(t, dict)]
    added = daemon_tolerations(spec)
    keys = {(t["key"], t["effect"]) for t in added}
    return [t for t in own if (t.get("key"), t.get("effect")) not in keys] + added


def _int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _requirement_matches(requirement, labels):
    if not isinstance(requirement, dict):
        return False
    key, operator = requirement.get("key"), requirement.get("operator")
    values = requirement.get("values") or []
    if not isinstance(values, list):
        return False
    value = labels.get(key)
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and len(values) == 1:
        have, bound = _int(value), _int(values[0])
        if have is None or bound is None:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _term_matches(term, labels, name):
    if not isinstance(term, dict):
        return False
    expressions, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not isinstance(expressions, list) or not isinstance(fields, list):
        return False
    if not expressions and not fields:
        return False
    for requirement in fields:
        if not isinstance(requirement, dict) or requirement.get("key") != NAME_FIELD:
            return False
    return (all(_requirement_matches(r, labels) for r in expressions)
            and all(_requirement_matches(dict(r, key="name"), {"name": name}) for r in fields))


def fits_affinity(spec, node):
    """The template's C{nodeSelector} and required node affinity hold for C{node}."""
    meta = node["metadata"]
    labels, name = meta.get("labels") or {}, meta["name"]
    selector = spec.get("nodeSelector") or {}
    if isinstance(selector, dict) and any(labels.get(k) != v for k, v in selector.items()):
        return False
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(affinity, dict):
        return True
    terms = affinity.get("nodeSelectorTerms")
    return isinstance(terms, list) and any(_term_matches(t, labels, name) for t in terms)


def should_run(spec, node):
    """
    C{(should run, should continue running)} of a daemon pod of template
    spec C{spec} on C{node}: upstream's C{NodeShouldRunDaemonPod}.
    """
    name = node["metadata"]["name"]
    if spec.get("nodeName") and spec["nodeName"] != name:
        return False, False
    if not fits_affinity(spec, node):
        return False, False
    tolerations = with_daemon_tolerations(spec)
    untolerated = [t for t in node_taints(node)
                   if t.get("effect") in (NO_SCHEDULE, NO_EXECUTE)
                   and not any(tolerates(toleration, t) for toleration in tolerations)]
    if not untolerated:
        return True, True
    return False, not any(t.get("effect") == NO_EXECUTE for t in untolerated)


def pinned_affinity(affinity, node_name):
    """
    The affinity with its required node terms replaced by one naming
    C{node_name} (upstream's C{ReplaceDaemonSetPodNodeNameNodeAffinity}).
    """
    affinity = copy.deepcopy(affinity) if isinstance(affinity, dict) else {}
    node_affinity = affinity.get("nodeAffinity")
    if not isinstance(node_affinity, dict):
        node_affinity = affinity["nodeAffinity"] = {}
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
        {"matchFields": [{"key": NAME_FIELD, "operator": "In", "values": [node_name]}]}]}
    return affinity


def target_node(pod):
    """
    The node a daemon pod is for: its C{nodeName}, or before binding the
    node its affinity pins it to (upstream's C{GetTargetNodeName}).
    """
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")) or []
    for term in terms if isinstance(terms, list) else ():
        for field in (term.get("matchFields") or []) if isinstance(term, dict) else ():
            if isinstance(field, dict) and field.get("key") == NAME_FIELD \
                    and field.get("operator") == "In" and len(field.get("values") or []) == 1:
                return field["values"][0]
    return ""


def keep_node(node):
    """An informer C{keep} for nodes: what eligibility reads."""
    meta = node["metadata"]
    return {"metadata": {"name": meta["name"], "labels": meta.get("labels") or {}},
            "spec": {"taints": node_taints(node)}}
