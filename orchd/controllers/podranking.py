# -*- test-case-name: tests.controllers.test_podranking -*-
"""
Which pods a replica set removes first when it has too many: upstream's
C{ActivePodsWithRanks.Less} (C{controller_utils.go}) and C{getPodsToDelete}
(C{replica_set.go}), with logarithmic scale-down as upstream has it on.

Earliest deleted first: unassigned before assigned; Pending, then Unknown,
then Running; not ready before ready; lower C{pod-deletion-cost}; more
doubled up (more active pods of the same owner family on its node); ready
for less time; more restarts; newer. Times are compared in log2 buckets of
their age, so pods of about the same age are picked at random (by UID)
instead of always the very newest.
"""

import math
from collections import Counter
from functools import cmp_to_key

from orchd.controllers.podstate import (
    PENDING, RUNNING, UNKNOWN, deletion_cost, is_active, is_ready, max_restarts, parse_time,
    ready_since,
)

#: Upstream's C{podPhaseToOrdinal}; other phases count as Pending (a missing map entry).
_PHASE_ORDINAL = {PENDING: 0, UNKNOWN: 1, RUNNING: 2}


def _node(pod):
    return (pod.get("spec") or {}).get("nodeName") or ""


def _phase(pod):
    return _PHASE_ORDINAL.get((pod.get("status") or {}).get("phase"), 0)


def _after_or_zero(t1, t2):
    """Upstream's C{afterOrZero}: a zero time first, then the later one."""
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


def _log_rank(stamp, now):
    """The log2 bucket of an age in nanoseconds (-1 for none), as upstream's."""
    age = now - stamp
    return int(math.log2(age * 1e9)) if age > 0 else -1


def _newer_first(t1, t2, uid1, uid2, now):
    """
    -1 if the first of two different times goes first, else 1: by log2
    bucket of age, ties broken by UID (upstream's C{logarithmicRankDiff}).
    """
    if now is None or t1 is None or t2 is None:
        return -1 if _after_or_zero(t1, t2) else 1
    diff = _log_rank(t1, now) - _log_rank(t2, now)
    if diff == 0:
        return -1 if uid1 < uid2 else 1
    return -1 if diff < 0 else 1


def compare(a, b, now):
    """
    Upstream's C{ActivePodsWithRanks.Less} as a comparison of C{(pod, rank)}
    pairs: negative when C{a} is deleted before C{b}.
    """
    pa, ra = a
    pb, rb = b
    node_a, node_b = _node(pa), _node(pb)
    if node_a != node_b and (not node_a or not node_b):
        return -1 if not node_a else 1
    if _phase(pa) != _phase(pb):
        return -1 if _phase(pa) < _phase(pb) else 1
    ready_a, ready_b = is_ready(pa), is_ready(pb)
    if ready_a != ready_b:
        return -1 if not ready_a else 1
    cost_a, cost_b = deletion_cost(pa), deletion_cost(pb)
    if cost_a != cost_b:
        return -1 if cost_a < cost_b else 1
    if ra != rb:
        return -1 if ra > rb else 1
    uid_a, uid_b = pa["metadata"].get("uid", ""), pb["metadata"].get("uid", "")
    if ready_a and ready_b:
        since_a, since_b = ready_since(pa), ready_since(pb)
        if since_a != since_b:
            return _newer_first(since_a, since_b, uid_a, uid_b, now)
    restarts_a, restarts_b = max_restarts(pa), max_restarts(pb)
    if restarts_a != restarts_b:
        return -1 if restarts_a > restarts_b else 1
    created_a = parse_time(pa["metadata"].get("creationTimestamp"))
    created_b = parse_time(pb["metadata"].get("creationTimestamp"))
    if created_a != created_b:
        return _newer_first(created_a, created_b, uid_a, uid_b, now)
    return 0


def ranks_on_nodes(pods, related):
    """
    Each pod's rank: how many active pods of C{related} (the pods of every
    replica set with the same controlling owner) share its node.
    """
    on_node = Counter(_node(pod) for pod in related if is_active(pod))
    return [on_node[_node(pod)] for pod in pods]


def pods_to_delete(pods, related, count, now):
    """
    The first C{count} of C{pods} in deletion order (all of them, unsorted,
    when C{count} covers them).

    @param related: see L{ranks_on_nodes}.
    @param now: the current time in seconds, for the log2 age buckets.
    """
    if count >= len(pods):
        return list(pods)
    ranked = sorted(zip(pods, ranks_on_nodes(pods, related)),
                    key=cmp_to_key(lambda a, b: compare(a, b, now)))
    return [pod for pod, _ in ranked[:count]]
