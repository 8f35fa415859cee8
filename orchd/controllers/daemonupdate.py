# -*- test-case-name: tests.controllers.test_daemonset -*-
"""
What a DaemonSet's pods call for, as values: which surplus pods on a node
go, which old pods a RollingUpdate replaces, and the status the nodes add
up to (upstream's C{podsShouldBeOnNode}, C{rollingUpdate} and
C{updateDaemonSetStatus}, C{pkg/controller/daemon}).

A RollingUpdate without surge deletes old pods while fewer than
C{maxUnavailable} nodes lack an available pod (an old pod that is not
available anyway may always go); with C{maxSurge} it starts a new pod
beside at most that many old ones, and the old one goes once the new one
is available.
"""

from functools import cmp_to_key

from orchd.controllers.deploymentutil import scaled_value
from orchd.controllers.history import REVISION_LABEL
from orchd.controllers.podstate import FAILED, RUNNING, is_available, is_ready, parse_time
from orchd.controllers.replicaset import min_ready_seconds


def _by_age(a, b):
    """Upstream's C{podByCreationTimestampAndPhase}: running first, then oldest, then name."""
    ra = (a.get("status") or {}).get("phase") == RUNNING
    rb = (b.get("status") or {}).get("phase") == RUNNING
    if ra != rb:
        return -1 if ra else 1
    ta = parse_time(a["metadata"].get("creationTimestamp")) or 0
    tb = parse_time(b["metadata"].get("creationTimestamp")) or 0
    if ta != tb:
        return -1 if ta < tb else 1
    na, nb = a["metadata"]["name"], b["metadata"]["name"]
    return (na > nb) - (na < nb)


def oldest_first(pods):
    return sorted(pods, key=cmp_to_key(_by_age))


def is_rolling(owner):
    strategy = (owner.get("spec") or {}).get("updateStrategy") or {}
    return strategy.get("type", "RollingUpdate") == "RollingUpdate"


def rolling_bounds(owner, desired):
    """C{(maxSurge, maxUnavailable)} of a RollingUpdate scaled to C{desired} nodes, rounded up."""
    strategy = (owner.get("spec") or {}).get("updateStrategy") or {}
    rolling = strategy.get("rollingUpdate") or {}
    surge, unavailable = rolling.get("maxSurge"), rolling.get("maxUnavailable")
    try:
        surge = scaled_value(0 if surge is None else surge, desired, True)
        unavailable = scaled_value(1 if unavailable is None else unavailable, desired, True)
    except ValueError:
        surge, unavailable = 0, 1
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def allows_surge(owner):
    """Upstream's C{AllowsSurge}: a RollingUpdate whose maxSurge is not zero."""
    return is_rolling(owner) and rolling_bounds(owner, 1)[0] > 0


def _hash(pod):
    return pod["metadata"]["labels"].get(REVISION_LABEL)


def surplus(running, hash, surge, min_ready, now):
    """
    The pods to delete of those running on one node: all but the oldest;
    while surging, the oldest new and oldest old pod both stay until the
    new one is available (or the old one is not ready).
    """
    running = oldest_first(running)
    if not surge:
        return running[1:]
    new = [p for p in running if _hash(p) == hash]
    old = [p for p in running if _hash(p) != hash]
    doomed = new[1:] + old[1:]
    if new and old and (not is_ready(old[0]) or is_available(new[0], min_ready, now)):
        doomed.append(old[0])
    return doomed


def new_and_old(pods, hash):
    """
    The one new and one old active pod on a node (upstream's
    C{findUpdatedPodsOnNode}), or None when there are more.
    """
    new = old = None
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp") or \
                (pod.get("status") or {}).get("phase") == FAILED:
            continue
        if _hash(pod) == hash:
            if new is not None:
                return None
            new = pod
        else:
            if old is not None:
                return None
            old = pod
    return new, old


def replacements(per_node, names, hash, surge, unavailable, min_ready, now):
    """
    C{(old pods to delete, nodes to start a new pod on)} of a rolling update
    step over the eligible nodes C{names} and their pods C{per_node}.
    """
    count, allowed, candidates, doomed = 0, [], [], []
    for pods, name in zip(per_node, names):
        found = new_and_old(pods, hash)
        if found is None:
            count += 1          # manage removes the extra pods first
            continue
        new, old = found
        if surge:
            if old is None:
                continue
            if new is None:
                if not is_available(old, min_ready, now):
                    allowed.append(name)
                elif count < surge:
                    candidates.append(name)
            elif not is_available(new, min_ready, now):
                count += 1
            else:
                doomed.append(old)
            continue
        if (old is None) == (new is None):
            count += 1          # manage creates or deletes here: unavailable meanwhile
        elif old is None:
            if not is_available(new, min_ready, now):
                count += 1
        elif not is_available(old, min_ready, now):
            allowed.append(old)
            count += 1
        elif count < unavailable:
            candidates.append(old)
    remaining = max((surge or unavailable) - count, 0)
    chosen = allowed + candidates[:remaining]
    return (doomed, chosen) if surge else (chosen, [])


def daemon_status(owner, nodes, by_node, hash, now):
    """
    The DaemonSet's status counts (upstream's C{updateDaemonSetStatus});
    C{nodes} are C{(name, should run, should continue running)}.
    """
    min_ready = min_ready_seconds(owner)
    desired = scheduled = misscheduled = ready = updated = available = 0
    for name, run, _ in nodes:
        pods = oldest_first(by_node.get(name, []))
        if run:
            desired += 1
            if pods:
                scheduled += 1
                pod = pods[0]
                if is_ready(pod):
                    ready += 1
                    if is_available(pod, min_ready, now):
                        available += 1
                if _hash(pod) == hash:
                    updated += 1
        elif pods:
            misscheduled += 1
    status = dict(owner.get("status") or {})
    status.update(desiredNumberScheduled=desired, currentNumberScheduled=scheduled,
                  numberMisscheduled=misscheduled, numberReady=ready,
                  updatedNumberScheduled=updated, numberAvailable=available,
                  numberUnavailable=desired - available,
                  observedGeneration=owner["metadata"].get("generation") or 0)
    return status
