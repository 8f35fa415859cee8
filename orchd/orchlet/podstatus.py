# -*- test-case-name: tests.orchlet.test_podstatus -*-
"""
A pod's status as the node agent computes it: phase and conditions from
container states, by upstream's rules, and the merge with what is stored.

The rules are the kubelet's (C{pkg/kubelet/kubelet_pods.go getPhase},
C{pkg/kubelet/status/generate.go}), so that whatever reads pods (kubectl's
STATUS and READY columns, the endpoints and workload controllers) sees
what it would see upstream. A runtime only reports container states; this
module turns them into the rest.

The agent owns five conditions (L{OWNED}); the others (a readiness gate's,
C{DisruptionTarget}) belong to whoever set them and are kept. An owned
condition keeps its C{lastTransitionTime} while its status stays the same,
so C{PodScheduled} keeps the time the scheduler bound the pod.
"""

POD_READY_TO_START = "PodReadyToStartContainers"
INITIALIZED = "Initialized"
READY = "Ready"
CONTAINERS_READY = "ContainersReady"
POD_SCHEDULED = "PodScheduled"
#: The conditions the node agent writes, in the kubelet's order.
OWNED = (POD_READY_TO_START, INITIALIZED, READY, CONTAINERS_READY, POD_SCHEDULED)

#: Upstream's condition reasons (C{pkg/kubelet/status/generate.go}).
UNKNOWN_CONTAINER_STATUSES = "UnknownContainerStatuses"
POD_COMPLETED = "PodCompleted"
POD_FAILED = "PodFailed"
CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_INITIALIZED = "ContainersNotInitialized"
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
TERMINAL = (SUCCEEDED, FAILED)

#: The status fields the node agent writes (with the owned conditions).
WRITTEN = ("phase", "hostIP", "hostIPs", "podIP", "podIPs", "startTime",
           "initContainerStatuses", "containerStatuses")


def go_list(names):
    """A list of names as Go's C{%s} prints a C{[]string}: C{[a b]}."""
    return "[" + " ".join(names) + "]"


def _by_name(statuses):
    return {s.get("name"): s for s in statuses or () if isinstance(s, dict)}


def _restartable(container):
    return container.get("restartPolicy") == "Always"


def _terminated(status, which="state"):
    return ((status.get(which) or {}).get("terminated")) or None


def _started_regular(spec, statuses):
    """Upstream's C{HasAnyRegularContainerStarted}."""
    known = _by_name(statuses)
    for container in spec.get("containers") or ():
        state = (known.get(container.get("name")) or {}).get("state") or {}
        if state.get("running") or state.get("terminated"):
            return True
    return False


def pod_phase(spec, init_statuses, statuses, terminal=False):
    """
    The phase of a pod whose containers are in these states (upstream's C{getPhase}).

    @param terminal: True once the pod is stopped for good (deleted, or
        finished), when containers are never restarted whatever the policy.
    """
    policy = spec.get("restartPolicy") or "Always"
    init_known = _by_name(init_statuses)
    pending_init = pending_sidecars = failed_init = 0
    for container in spec.get("initContainers") or ():
        status = init_known.get(container.get("name"))
        if _restartable(container):
            if status is None or not status.get("started"):
                pending_sidecars += 1
            continue
        if status is None:
            pending_init += 1
            continue
        state = status.get("state") or {}
        if state.get("running"):
            pending_init += 1
        elif state.get("terminated"):
            if state["terminated"].get("exitCode") != 0:
                failed_init += 1
        elif state.get("waiting"):
            last = _terminated(status, "lastState")
            if last is not None:
                if last.get("exitCode") != 0:
                    failed_init += 1
            else:
                pending_init += 1
        else:
            pending_init += 1
    known = _by_name(statuses)
    unknown = running = waiting = stopped = succeeded = 0
    for container in spec.get("containers") or ():
        status = known.get(container.get("name"))
        if status is None:
            unknown += 1
            continue
        state = status.get("state") or {}
        if state.get("running"):
            running += 1
        elif state.get("terminated"):
            stopped += 1
            if state["terminated"].get("exitCode") == 0:
                succeeded += 1
        elif state.get("waiting"):
            if _terminated(status, "lastState") is not None:
                stopped += 1
            else:
                waiting += 1
        else:
            unknown += 1
    if failed_init and policy == "Never":
        return FAILED
    all_statuses = list(init_statuses or ()) + list(statuses or ())
    if pending_init or (pending_sidecars and not _started_regular(spec, all_statuses)) \
            or waiting:
        return PENDING
    if running and not unknown:
        return RUNNING
    if not running and stopped and not unknown:
        if terminal:
            return SUCCEEDED if stopped == succeeded else FAILED
        if policy == "Always":
            return RUNNING
        if stopped == succeeded:
            return SUCCEEDED
        if policy == "Never":
            return FAILED
        return RUNNING
    return PENDING


def _condition(kind, status, reason=None, message=None):
    condition = {"type": kind, "status": status}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


def initialized_condition(spec, init_statuses, statuses, phase):
    """Upstream's C{GeneratePodInitializedCondition}."""
    known = _by_name(init_statuses)
    unknown, incomplete = [], []
    for container in spec.get("initContainers") or ():
        name = container.get("name")
        status = known.get(name)
        if status is None:
            unknown.append(name)
            continue
        if _restartable(container):
            if not status.get("started"):
                incomplete.append(name)
            continue
        done = _terminated(status)
        if done is None or done.get("exitCode") != 0:
            incomplete.append(name)
    if phase == SUCCEEDED and not unknown:
        return _condition(INITIALIZED, "True", POD_COMPLETED)
    if _started_regular(spec, statuses):
        return _condition(INITIALIZED, "True")
    messages = []
    if unknown:
        messages.append(f"containers with unknown status: {go_list(unknown)}")
    if incomplete:
        messages.append(f"containers with incomplete status: {go_list(incomplete)}")
    if messages:
        return _condition(INITIALIZED, "False", CONTAINERS_NOT_INITIALIZED, ", ".join(messages))
    return _condition(INITIALIZED, "True")


def containers_ready_condition(spec, init_statuses, statuses, phase):
    """Upstream's C{GenerateContainersReadyCondition}."""
    if statuses is None:
        return _condition(CONTAINERS_READY, "False", UNKNOWN_CONTAINER_STATUSES)
    unknown, unready = [], []
    init_known = _by_name(init_statuses)
    for container in spec.get("initContainers") or ():
        if not _restartable(container):
            continue
        status = init_known.get(container.get("name"))
        if status is None:
            unknown.append(container.get("name"))
        elif not status.get("ready"):
            unready.append(container.get("name"))
    known = _by_name(statuses)
    for container in spec.get("containers") or ():
        status = known.get(container.get("name"))
        if status is None:
            unknown.append(container.get("name"))
        elif not status.get("ready"):
            unready.append(container.get("name"))
    if phase == SUCCEEDED and not unknown:
        return _condition(CONTAINERS_READY, "False", POD_COMPLETED)
    if phase == FAILED:
        return _condition(CONTAINERS_READY, "False", POD_FAILED)
    messages = []
    if unknown:
        messages.append(f"containers with unknown status: {go_list(unknown)}")
    if unready:
        messages.append(f"containers with unready status: {go_list(unready)}")
    if messages:
        return _condition(CONTAINERS_READY, "False", CONTAINERS_NOT_READY, ", ".join(messages))
    return _condition(CONTAINERS_READY, "True")


def ready_condition(spec, containers_ready, conditions):
    """
    Upstream's C{GeneratePodReadyCondition}: ContainersReady, then the
    pod's readiness gates against C{conditions} (the stored ones).
    """
    if containers_ready["status"] != "True":
        return dict(containers_ready, type=READY)
    present = {c.get("type"): c for c in conditions or () if isinstance(c, dict)}
    messages = []
    for gate in spec.get("readinessGates") or ():
        kind = gate.get("conditionType") if isinstance(gate, dict) else None
        if not kind:
            continue
        condition = present.get(kind)
        if condition is None:
            messages.append(f"corresponding condition of pod readiness gate {_quote(kind)} "
                            "does not exist.")
        elif condition.get("status") != "True":
            messages.append(f"the status of pod readiness gate {_quote(kind)} is not "
                            f"\"True\", but {condition.get('status')}")
    if messages:
        return _condition(READY, "False", READINESS_GATES_NOT_READY, ", ".join(messages))
    return _condition(READY, "True")


def _quote(text):
    """Go's C{%q} for the plain strings condition types are."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def owned_conditions(spec, init_statuses, statuses, phase, sandbox_ready, conditions=()):
    """
    The five conditions the node agent owns, without times.

    @param sandbox_ready: whether the pod's sandbox (its network) is up.
    @param conditions: the pod's stored conditions, for its readiness gates.
    """
    containers = containers_ready_condition(spec, init_statuses, statuses, phase)
    return [
        _condition(POD_READY_TO_START, "True" if sandbox_ready else "False"),
        initialized_condition(spec, init_statuses, statuses, phase),
        ready_condition(spec, containers, conditions),
        containers,
        _condition(POD_SCHEDULED, "True"),
    ]


def stamp_conditions(conditions, previous, now):
    """
    C{conditions} with their C{lastTransitionTime}: kept from C{previous}
    (a list) for a condition whose status did not change, else C{now}.

    No C{lastProbeTime}: upstream's is always null, and a null in the
    merge patch that writes the status would mean "remove the field".
    """
    before = {c.get("type"): c for c in previous or () if isinstance(c, dict)}
    stamped = []
    for condition in conditions:
        old = before.get(condition["type"])
        since = now
        if old is not None and old.get("status") == condition["status"] \
                and old.get("lastTransitionTime"):
            since = old["lastTransitionTime"]
        stamped.append(dict(condition, lastTransitionTime=since))
    return stamped


def merge_status(stored, reported):
    """
    The status a pod should have: C{stored} with what the agent reports
    (L{WRITTEN} fields and the owned conditions) laid over it.

    Conditions not owned by the agent are kept; an owned condition whose
    status did not change keeps its stored C{lastTransitionTime}.
    """
    stored = stored if isinstance(stored, dict) else {}
    merged = dict(stored)
    for field in WRITTEN:
        if field in reported:
            merged[field] = reported[field]
    old = [c for c in stored.get("conditions") or () if isinstance(c, dict)]
    before = {c.get("type"): c for c in old}
    owned = []
    for condition in reported.get("conditions") or ():
        prev = before.get(condition["type"])
        if prev is not None and prev.get("status") == condition["status"] \
                and prev.get("lastTransitionTime"):
            condition = dict(condition, lastTransitionTime=prev["lastTransitionTime"])
        owned.append(condition)
    mine = {c["type"] for c in owned}
    merged["conditions"] = [c for c in old if c.get("type") not in mine] + owned
    return merged


def same_status(a, b):
    """Whether two statuses say the same, whatever the order of their conditions."""
    a, b = a or {}, b or {}
    if {k: v for k, v in a.items() if k != "conditions"} != \
            {k: v for k, v in b.items() if k != "conditions"}:
        return False
    return _conditions_by_type(a) == _conditions_by_type(b)


def _conditions_by_type(status):
    """Conditions by type, null fields left out (a stored null and an absent field agree)."""
    return {c.get("type"): {k: v for k, v in c.items() if v is not None}
            for c in status.get("conditions") or () if isinstance(c, dict)}


def status_patch(merged):
    """
    The strategic merge patch writing the agent's part of C{merged}.

    Conditions merge by type, field by field, so a condition that lost its
    reason or message says so with a null (upstream's generated patches do
    the same).
    """
    status = {field: merged[field] for field in WRITTEN if field in merged}
    owned = [dict({"reason": None, "message": None}, **c)
             for c in merged.get("conditions") or () if c.get("type") in OWNED]
    if owned:
        status["conditions"] = owned
    return {"status": status}
