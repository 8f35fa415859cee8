# -*- test-case-name: tests.controllers.test_jobutil -*-
"""
What the Job controller reads of Jobs and their pods, as upstream reads
it (kk C{pkg/controller/job/{job_controller,indexed_job_utils,
pod_failure_policy,backoff_utils}.go}): whether a pod succeeded or failed,
its completion index, completed indexes written compressed
(C{"1,3-5"}), the pod failure policy's verdict, the conditions and the
failure back-off. Pure functions, so each rule is tested alone.
"""

from orchd.api.meta import rfc3339
from orchd.controllers.podstate import FAILED, SUCCEEDED, controller_ref, ready_condition

#: The finalizer that keeps a Job's finished pod until it is counted
#: (upstream C{batch.kubernetes.io/job-tracking}).
TRACKING_FINALIZER = "batch.orch.io/job-tracking"
#: A pod's index in an Indexed Job: annotation and label (upstream C{batch.kubernetes.io/...}).
COMPLETION_INDEX = "batch.orch.io/job-completion-index"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"

COMPLETE, FAILED_CONDITION = "Complete", "Failed"
SUCCESS_CRITERIA_MET, FAILURE_TARGET = "SuccessCriteriaMet", "FailureTarget"
SUSPENDED = "Suspended"
#: Interim condition -> the terminal one it becomes once no pod is left running.
TERMINAL_OF = {SUCCESS_CRITERIA_MET: COMPLETE, FAILURE_TARGET: FAILED_CONDITION}

COMPLETIONS_REACHED = ("CompletionsReached", "Reached expected number of succeeded pods")
BACKOFF_LIMIT_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE_EXCEEDED = ("DeadlineExceeded", "Job was active longer than specified deadline")
POD_FAILURE_POLICY = "PodFailurePolicy"

#: Pod failure back-off: 10 s doubling, at most 6 minutes (the issue's
#: figure and upstream's documented one; upstream's code caps at 10 minutes).
BACKOFF_BASE = 10.0
BACKOFF_MAX = 360.0


def _int(value, default=None):
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def job_spec(job):
    spec = job.get("spec")
    return spec if isinstance(spec, dict) else {}


def parallelism(job):
    return max(_int(job_spec(job).get("parallelism"), 1), 0)


def completions(job):
    """C{spec.completions}, None when unset (any one success completes the Job)."""
    return _int(job_spec(job).get("completions"))


def backoff_limit(job):
    return _int(job_spec(job).get("backoffLimit"), 6)


def is_indexed(job):
    return job_spec(job).get("completionMode") == "Indexed" and completions(job) is not None


def restart_policy(job):
    template = job_spec(job).get("template") or {}
    return (template.get("spec") or {}).get("restartPolicy") or "Never"


def find_condition(job, type):
    """The Job's condition of C{type} whose status is True, or None."""
    for condition in (job.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == type \
                and condition.get("status") == "True":
            return condition
    return None


def is_finished(job):
    """Upstream's C{IsJobFinished}: a True Complete or Failed condition."""
    return find_condition(job, COMPLETE) is not None \
        or find_condition(job, FAILED_CONDITION) is not None


def finish_time(job):
    """When the Job finished (its terminal condition's time, as text), or None."""
    for type in (COMPLETE, FAILED_CONDITION):
        condition = find_condition(job, type)
        if condition is not None:
            return condition.get("lastTransitionTime")
    return None


def interim_condition(job):
    """The True C{SuccessCriteriaMet} or C{FailureTarget} condition, or None."""
    for type in (SUCCESS_CRITERIA_MET, FAILURE_TARGET):
        condition = find_condition(job, type)
        if condition is not None:
            return condition
    return None


def new_condition(type, reason, message, now, status="True"):
    stamp = rfc3339(now)
    return {"type": type, "status": status, "lastProbeTime": stamp,
            "lastTransitionTime": stamp, "reason": reason, "message": message}


def set_condition(conditions, condition):
    """
    C{conditions} with C{condition} in place of the one of its type; the
    old one is kept (its times too) when nothing but the times changed.
    """
    kept = []
    replaced = False
    for existing in conditions:
        if existing.get("type") != condition["type"]:
            kept.append(existing)
            continue
        replaced = True
        same = all(existing.get(k) == condition.get(k) for k in ("status", "reason", "message"))
        kept.append(existing if same else condition)
    if not replaced:
        kept.append(condition)
    return kept


# -- pods ------------------------------------------------------------------------


def has_tracking_finalizer(pod):
    return TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or ())


def phase(pod):
    return (pod.get("status") or {}).get("phase")


def is_succeeded(pod):
    return phase(pod) == SUCCEEDED


def only_replace_failed(job):
    """Upstream's C{onlyReplaceFailedPods}: a terminating pod is not yet a failed one."""
    spec = job_spec(job)
    return spec.get("podReplacementPolicy") == "Failed" or spec.get("podFailurePolicy") is not None


def is_failed(pod, job):
    """
    Upstream's C{isPodFailed}: phase Failed or, unless the Job replaces only
    failed pods, being deleted (with our finalizer) without having succeeded.
    """
    if phase(pod) == FAILED:
        return True
    if only_replace_failed(job):
        return False
    return has_tracking_finalizer(pod) and bool(pod["metadata"].get("deletionTimestamp")) \
        and phase(pod) != SUCCEEDED


def is_terminating(pod):
    """Being deleted and not yet in a terminal phase (C{status.terminating})."""
    return bool(pod["metadata"].get("deletionTimestamp")) and phase(pod) not in (SUCCEEDED, FAILED)


def completion_index(pod):
    """The pod's completion index (annotation), or None when absent or not a number."""
    value = (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX)
    if not isinstance(value, str) or not value.isdigit() or len(value) > 9:
        return None
    return int(value)


def restarts(pod):
    """The restarts of all the pod's containers (upstream counts them for OnFailure Jobs)."""
    status = pod.get("status") or {}
    return sum(_int(s.get("restartCount"), 0) for field in ("initContainerStatuses",
                                                            "containerStatuses")
               for s in status.get(field) or () if isinstance(s, dict))


def keep_job_pod(pod):
    """
    A pod trimmed to what the Job controller reads (an informer C{keep}):
    identity, labels, owners, finalizers, the completion index, phase,
    readiness, the DisruptionTarget condition and each container's
    restarts and exit.
    """
    meta, status = pod["metadata"], pod.get("status") or {}
    kept_meta = {"name": meta["name"], "namespace": meta.get("namespace", ""),
                 "uid": meta.get("uid", ""), "labels": meta.get("labels") or {},
                 "creationTimestamp": meta.get("creationTimestamp")}
    for field in ("deletionTimestamp", "ownerReferences", "finalizers"):
        if meta.get(field):
            kept_meta[field] = meta[field]
    index = (meta.get("annotations") or {}).get(COMPLETION_INDEX)
    if index is not None:
        kept_meta["annotations"] = {COMPLETION_INDEX: index}
    conditions = [{k: c.get(k) for k in ("type", "status", "lastTransitionTime")}
                  for c in status.get("conditions") or ()
                  if isinstance(c, dict) and c.get("type") in ("Ready", "DisruptionTarget")]
    kept_status = {"phase": status.get("phase"), "conditions": conditions}
    for field in ("initContainerStatuses", "containerStatuses"):
        entries = []
        for entry in status.get(field) or ():
            if not isinstance(entry, dict):
                continue
            kept = {"name": entry.get("name"), "restartCount": entry.get("restartCount") or 0}
            terminated = (entry.get("state") or {}).get("terminated")
            if isinstance(terminated, dict):
                kept["state"] = {"terminated": {k: terminated.get(k) for k in
                                                ("exitCode", "finishedAt")}}
            entries.append(kept)
        if entries:
            kept_status[field] = entries
    return {"metadata": kept_meta, "spec": {"nodeName": (pod.get("spec") or {}).get("nodeName")},
            "status": kept_status}


def is_job_pod_ready(pod):
    condition = ready_condition(pod)
    return condition is not None and condition.get("status") == "True"


def owned_by_job(pod):
    """The pod's controlling reference when it is a Job, else None."""
    ref = controller_ref(pod["metadata"])
    return ref if ref is not None and ref.get("kind") == "Job" else None


# -- indexes ---------------------------------------------------------------------


def parse_indexes(text, limit):
    """The indexes below C{limit} of a compressed list such as C{"1,3-5"}; bad parts skipped."""
    indexes = set()
    if not isinstance(text, str) or not text:
        return indexes
    for part in text.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            continue
        start, end = int(low), int(high) if high else int(low)
        indexes.update(range(start, min(end, limit - 1) + 1))
    return indexes


def format_indexes(indexes):
    """Indexes written as upstream writes C{completedIndexes}: ranges, C{"0-2,4"}."""
    parts = []
    ordered = sorted(indexes)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


# -- pod failure policy -------------------------------------------------------------


def _exit_codes_match(requirement, pod):
    operator, values = requirement.get("operator"), requirement.get("values") or []
    name = requirement.get("containerName")
    status = pod.get("status") or {}
    for field in ("initContainerStatuses", "containerStatuses"):
        for entry in status.get(field) or ():
            if not isinstance(entry, dict) or (name and entry.get("name") != name):
                continue
            terminated = (entry.get("state") or {}).get("terminated") or {}
            code = terminated.get("exitCode")
            if not isinstance(code, int) or code == 0:
                continue
            if (operator == "In" and code in values) or (operator == "NotIn"
                                                         and code not in values):
                return entry.get("name"), code
    return None


def _condition_matches(patterns, pod):
    for pattern in patterns or ():
        if not isinstance(pattern, dict):
            continue
        wanted = pattern.get("status") or "True"
        for condition in (pod.get("status") or {}).get("conditions") or ():
            if condition.get("type") == pattern.get("type") and condition.get("status") == wanted:
                return pattern.get("type")
    return None


def failure_policy_action(job, pod):
    """
    Upstream's C{matchPodFailurePolicy} for a failed pod: C{(action,
    message)} of the first rule that matches (C{FailJob}, C{Ignore},
    C{Count}, C{FailIndex}), or C{(None, None)} (counted as a failure).
    """
    policy = job_spec(job).get("podFailurePolicy")
    if not isinstance(policy, dict):
        return None, None
    meta = pod["metadata"]
    where = f"{meta.get('namespace', '')}/{meta['name']}"
    for index, rule in enumerate(policy.get("rules") or ()):
        if not isinstance(rule, dict):
            continue
        action = rule.get("action")
        codes = rule.get("onExitCodes")
        if isinstance(codes, dict):
            matched = _exit_codes_match(codes, pod)
            if matched is not None:
                return action, (f"Container {matched[0]} for pod {where} failed with exit code "
                                f"{matched[1]} matching {action} rule at index {index}")
            continue
        matched = _condition_matches(rule.get("onPodConditions"), pod)
        if matched is not None:
            return action, (f"Pod {where} has condition {matched} matching {action} rule at "
                            f"index {index}")
    return None, None


def failure_backoff(failures):
    """Seconds to wait before the next pod after C{failures} failures in a row (0: none)."""
    if failures <= 0:
        return 0.0
    return min(BACKOFF_BASE * 2 ** min(failures - 1, 32), BACKOFF_MAX)
