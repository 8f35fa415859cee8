# -*- test-case-name: tests.api.test_disruption -*-
"""
What a PodDisruptionBudget's status says, shared by the eviction
subresource (which spends a budget) and the disruption controller (which
computes it).

The rules are upstream's C{k8s.io/component-helpers/apps/poddisruptionbudget}
and C{apimeta.SetStatusCondition}: the C{DisruptionAllowed} condition is
True with reason C{SufficientPods} while C{disruptionsAllowed} is positive,
False with C{InsufficientPods} otherwise, and False with C{SyncFailed}
when the controller could not compute the status.
"""

from orchd.api.meta import rfc3339

DISRUPTION_ALLOWED = "DisruptionAllowed"
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"

#: The pod condition set on a pod about to be deleted for a disruption, and
#: its reasons as upstream writes them.
DISRUPTION_TARGET = "DisruptionTarget"
EVICTION_BY_API = "EvictionByEvictionAPI"
DELETION_BY_TAINT_MANAGER = "DeletionByTaintManager"

#: How long an eviction's entry in C{status.disruptedPods} keeps its pod out
#: of the healthy count (upstream's C{DeletionTimeout}).
DELETION_TIMEOUT = 120.0


def set_status_condition(conditions, condition, now):
    """
    Put a C{metav1.Condition} into the list C{conditions}, as upstream's
    C{SetStatusCondition}: a new condition, or one whose status changes,
    takes C{lastTransitionTime} now; otherwise the old time stays.

    @return: True when the list changed.
    """
    for index, old in enumerate(conditions):
        if isinstance(old, dict) and old.get("type") == condition["type"]:
            new = dict(condition)
            if old.get("status") == new["status"] and old.get("lastTransitionTime"):
                new["lastTransitionTime"] = old["lastTransitionTime"]
            else:
                new["lastTransitionTime"] = rfc3339(now)
            if new == old:
                return False
            conditions[index] = new
            return True
    conditions.append(dict(condition, lastTransitionTime=rfc3339(now)))
    return True


def _conditions(status):
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = status["conditions"] = []
    return conditions


def update_disruption_allowed(status, now):
    """Set C{DisruptionAllowed} from C{status["disruptionsAllowed"]} (upstream's helper)."""
    allowed = (status.get("disruptionsAllowed") or 0) > 0
    set_status_condition(_conditions(status), {
        "type": DISRUPTION_ALLOWED, "status": "True" if allowed else "False",
        "reason": SUFFICIENT_PODS if allowed else INSUFFICIENT_PODS, "message": "",
        "observedGeneration": status.get("observedGeneration") or 0}, now)


def sync_failed(status, message, now):
    """No disruption allowed, and why: the controller's fail-safe status."""
    status["disruptionsAllowed"] = 0
    set_status_condition(_conditions(status), {
        "type": DISRUPTION_ALLOWED, "status": "False", "reason": SYNC_FAILED,
        "message": message, "observedGeneration": status.get("observedGeneration") or 0}, now)


def conditions_up_to_date(pdb):
    """Whether C{DisruptionAllowed} says what C{disruptionsAllowed} does, for this generation."""
    status = pdb.get("status") or {}
    condition = next((c for c in status.get("conditions") or ()
                      if isinstance(c, dict) and c.get("type") == DISRUPTION_ALLOWED), None)
    if condition is None:
        return False
    if (status.get("observedGeneration") or 0) != (pdb["metadata"].get("generation") or 0):
        return False
    if (status.get("disruptionsAllowed") or 0) > 0:
        return condition.get("status") == "True" and condition.get("reason") == SUFFICIENT_PODS
    return condition.get("status") == "False" and condition.get("reason") == INSUFFICIENT_PODS


def disruption_target(reason, message, now):
    """The C{DisruptionTarget=True} pod condition, for L{set_pod_condition}-style writers."""
    return {"type": DISRUPTION_TARGET, "status": "True", "lastProbeTime": None,
            "lastTransitionTime": rfc3339(now), "reason": reason, "message": message}
