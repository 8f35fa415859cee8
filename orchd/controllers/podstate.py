# -*- test-case-name: tests.controllers.test_podstate -*-
"""
What workload controllers read of a pod: whether it is active, ready and
available, who controls it, and the few numbers that order its deletion.

The rules are upstream's (C{pkg/api/v1/pod/util.go}, C{controller_utils.go}).
The functions take a pod as the API has it, or as L{keep_pod} trims it for
an informer's cache: the trimmed pod keeps the same shape, so both read
alike, and a cache of many pods stays small.
"""

import calendar
import time
from functools import lru_cache

from orchd.registry.kinds.pod import DELETION_COST, valid_deletion_cost

PENDING, RUNNING, SUCCEEDED, FAILED, UNKNOWN = (
    "Pending", "Running", "Succeeded", "Failed", "Unknown")


@lru_cache(maxsize=4096)
def parse_time(stamp):
    """
    Seconds since the epoch of an RFC 3339 timestamp, or None for no or a
    malformed value (a zero time, upstream).
    """
    if not isinstance(stamp, str) or len(stamp) < 19:
        return None
    try:
        seconds = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None
    rest = stamp[19:]
    if rest.startswith("."):
        digits = rest[1:].rstrip("Zz")
        digits = digits.split("+")[0].split("-")[0]
        if digits.isdigit():
            seconds += int(digits) / 10 ** len(digits)
    return seconds


def controller_ref(meta):
    """The owner reference marked C{controller: true}, or None."""
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True and ref.get("uid"):
            return ref
    return None


def is_active(pod):
    """Upstream's C{IsPodActive}: not finished and not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in (SUCCEEDED, FAILED) and not pod["metadata"].get("deletionTimestamp")


def ready_condition(pod):
    """The pod's C{Ready} condition, or None."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition
    return None


def is_ready(pod):
    """Upstream's C{IsPodReady}: the C{Ready} condition is C{True}."""
    condition = ready_condition(pod)
    return condition is not None and condition.get("status") == "True"


def ready_since(pod):
    """When a ready pod became ready (seconds), or None when not ready or unknown."""
    if not is_ready(pod):
        return None
    return parse_time(ready_condition(pod).get("lastTransitionTime"))


def is_available(pod, min_ready_seconds, now):
    """
    Upstream's C{IsPodAvailable}: ready, and for longer than
    C{min_ready_seconds} (strictly) when that is not 0.
    """
    if not is_ready(pod):
        return False
    if not min_ready_seconds:
        return True
    since = ready_since(pod)
    return since is not None and since + min_ready_seconds < now


def deletion_cost(pod):
    """The C{controller.orch.io/pod-deletion-cost} annotation; 0 when absent or invalid."""
    value = (pod["metadata"].get("annotations") or {}).get(DELETION_COST)
    return int(value) if valid_deletion_cost(value) else 0


def max_restarts(pod):
    """
    The highest restart count of the pod's regular containers, and of its
    sidecars (init containers that restart always), as upstream's
    C{maxContainerRestarts}.
    """
    status = pod.get("status") or {}
    regular = max((s.get("restartCount") or 0 for s in status.get("containerStatuses") or ()
                   if isinstance(s, dict)), default=0)
    sidecars = {c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or ()
                if isinstance(c, dict) and c.get("restartPolicy") == "Always"}
    sidecar = max((s.get("restartCount") or 0 for s in status.get("initContainerStatuses") or ()
                   if isinstance(s, dict) and s.get("name") in sidecars), default=0)
    return regular, sidecar


def pod_key(pod):
    meta = pod["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def keep_pod(pod):
    """
    A pod trimmed to what workload controllers read (an informer C{keep}):
    identity, labels, owners, the deletion cost, node, phase, readiness and
    restart counts.
    """
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    kept_meta = {"name": meta["name"], "namespace": meta.get("namespace", ""),
                 "uid": meta.get("uid", ""), "labels": meta.get("labels") or {},
                 "creationTimestamp": meta.get("creationTimestamp")}
    for field in ("deletionTimestamp", "ownerReferences"):
        if meta.get(field):
            kept_meta[field] = meta[field]
    cost = (meta.get("annotations") or {}).get(DELETION_COST)
    if cost is not None:
        kept_meta["annotations"] = {DELETION_COST: cost}
    kept_status = {"phase": status.get("phase")}
    condition = ready_condition(pod)
    if condition is not None:
        kept_status["conditions"] = [{key: condition.get(key) for key in
                                      ("type", "status", "lastTransitionTime")}]
    restarts = max_restarts(pod)
    if restarts != (0, 0):
        kept_status["containerStatuses"] = [{"restartCount": restarts[0]}]
        if restarts[1]:
            kept_status["initContainerStatuses"] = [{"name": "", "restartCount": restarts[1]}]
    kept_spec = {"nodeName": spec.get("nodeName") or ""}
    if restarts[1]:
        kept_spec["initContainers"] = [{"name": "", "restartPolicy": "Always"}]
    return {"metadata": kept_meta, "spec": kept_spec, "status": kept_status}
