# -*- test-case-name: tests.controllers.test_job -*-
"""
The pods a Job makes (upstream's C{job_controller.go} and
C{indexed_job_utils.go}): from its template, with the tracking finalizer
and, for an Indexed Job, the completion index as annotation, label,
environment variable and hostname; and the order surplus pods are deleted in.
"""

import copy

from orchd.api.meta import GENERATED_NAME_MAX
from orchd.controllers import jobutil as ju
from orchd.controllers.controllerref import owner_reference
from orchd.controllers.podcontrol import pod_from_template


def name_with_index(job_name, index):
    """
    Upstream's C{podGenerateNameWithIndex}: C{<job>-<index>-}, the Job's
    name cut so that the index survives the cut of a generated name.
    """
    suffix = f"-{index}-"
    prefix = job_name + suffix
    if len(prefix) > GENERATED_NAME_MAX:
        prefix = prefix[:GENERATED_NAME_MAX - len(suffix)] + suffix
    return prefix


def pod_for(job, index):
    """
    The pod C{job} creates, for completion C{index} (None for a NonIndexed Job).

    @raise orchd.api.errors.StatusError: for a template without labels.
    """
    meta = job["metadata"]
    template = copy.deepcopy(ju.job_spec(job).get("template") or {})
    reference = owner_reference("batch/v1", "Job", job)
    pod = pod_from_template(template, meta["name"], meta.get("namespace", ""), reference)
    pod_meta = pod["metadata"]
    pod_meta["finalizers"] = list(pod_meta.get("finalizers") or ()) + [ju.TRACKING_FINALIZER]
    if index is None:
        return pod
    pod_meta["generateName"] = name_with_index(meta["name"], index)
    pod_meta.setdefault("annotations", {})[ju.COMPLETION_INDEX] = str(index)
    pod_meta["labels"][ju.COMPLETION_INDEX] = str(index)
    spec = pod["spec"]
    if not spec.get("hostname"):
        spec["hostname"] = f"{meta['name']}-{index}"
    env = {"name": ju.COMPLETION_INDEX_ENV, "valueFrom": {"fieldRef": {
        "apiVersion": "v1", "fieldPath": f"metadata.annotations['{ju.COMPLETION_INDEX}']"}}}
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or ():
            if isinstance(container, dict):
                container["env"] = list(container.get("env") or ()) + [env]
    return pod


def removal_order(pods):
    """
    Active pods in the order upstream deletes surplus ones: not ready
    before ready, newer before older.
    """
    newest_first = sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "",
                          reverse=True)
    return sorted(newest_first, key=ju.is_job_pod_ready)
