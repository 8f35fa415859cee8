# -*- test-case-name: tests.controllers.test_statefulset -*-
"""
A StatefulSet's pods and claims as values: names, ordinals, the pod of an
ordinal at a revision, its claims, the claims' owners under the retention
policy, and the status the pods add up to (upstream's
C{stateful_set_utils.go} and C{computeReplicaStatus}).

Pod C{<set>-<ordinal>} has hostname its name and subdomain the set's
C{serviceName}, the labels of its template plus C{controller-revision-hash}
(the revision's name), C{statefulset.orch.io/pod-name} and
C{apps.orch.io/pod-index} (upstream's C{statefulset.kubernetes.io/pod-name}
and C{apps.kubernetes.io/pod-index}, renamed as the naming rule asks:
kubectl reads neither), and a volume per claim template naming the claim
C{<template>-<set>-<ordinal>}.
"""

import copy
import re

from orchd.controllers.history import REVISION_LABEL
from orchd.controllers.podstate import (
    FAILED, RUNNING, SUCCEEDED, is_available, is_ready,
)

#: [renamed] Upstream C{statefulset.kubernetes.io/pod-name}.
POD_NAME_LABEL = "statefulset.orch.io/pod-name"
#: [renamed] Upstream C{apps.kubernetes.io/pod-index}.
POD_INDEX_LABEL = "apps.orch.io/pod-index"
API_VERSION, KIND = "apps/v1", "StatefulSet"
RETAIN, DELETE = "Retain", "Delete"
_ORDINAL = re.compile(r"^(.*)-([0-9]+)\Z")


def _int(value, default=0):
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def replicas_of(sts):
    return _int((sts.get("spec") or {}).get("replicas"), 1)


def start_ordinal(sts):
    """C{spec.ordinals.start}, 0 when unset."""
    ordinals = (sts.get("spec") or {}).get("ordinals")
    return max(_int(ordinals.get("start")), 0) if isinstance(ordinals, dict) else 0


def partition(sts):
    strategy = (sts.get("spec") or {}).get("updateStrategy") or {}
    return max(_int((strategy.get("rollingUpdate") or {}).get("partition")), 0)


def update_type(sts):
    return ((sts.get("spec") or {}).get("updateStrategy") or {}).get("type") or "RollingUpdate"


def is_parallel(sts):
    return (sts.get("spec") or {}).get("podManagementPolicy") == "Parallel"


def min_ready(sts):
    return max(_int((sts.get("spec") or {}).get("minReadySeconds")), 0)


def parent_and_ordinal(pod):
    """
    C{(set name, ordinal)} from a pod's name, or C{(None, -1)} (upstream's
    C{getParentNameAndOrdinal}).
    """
    match = _ORDINAL.match(pod["metadata"]["name"])
    if match is None:
        return None, -1
    return match.group(1), int(match.group(2))


def is_member(sts, pod):
    """A pod named for the set (upstream's C{isMemberOf})."""
    return parent_and_ordinal(pod)[0] == sts["metadata"]["name"]


def pod_name(sts, ordinal):
    return f"{sts['metadata']['name']}-{ordinal}"


def claim_templates(sts):
    templates = (sts.get("spec") or {}).get("volumeClaimTemplates")
    return [t for t in templates if isinstance(t, dict) and isinstance(
        (t.get("metadata") or {}).get("name"), str)] if isinstance(templates, list) else []


def claim_name(template, sts, ordinal):
    """Upstream's C{getPersistentVolumeClaimName}: C{<template>-<set>-<ordinal>}."""
    return f"{template['metadata']['name']}-{pod_name(sts, ordinal)}"


def revision_of(pod):
    return (pod["metadata"].get("labels") or {}).get(REVISION_LABEL, "")


def is_created(pod):
    return pod is not None and "uid" in pod["metadata"]


def is_terminating(pod):
    return bool(pod["metadata"].get("deletionTimestamp"))


def phase(pod):
    return (pod.get("status") or {}).get("phase")


def is_finished(pod):
    return phase(pod) in (FAILED, SUCCEEDED)


def running_and_ready(pod):
    return phase(pod) == RUNNING and is_ready(pod)


def is_healthy(pod):
    """Upstream's C{isHealthy}: running, ready and not being deleted."""
    return running_and_ready(pod) and not is_terminating(pod)


def identity_labels(pod):
    """The labels naming a pod's place in its set: its name and its ordinal."""
    name = pod["metadata"]["name"]
    return {POD_NAME_LABEL: name, POD_INDEX_LABEL: str(parent_and_ordinal(pod)[1])}


def new_pod(sts, template, ordinal, revision):
    """
    The pod of C{ordinal} made from C{template} (the template of the
    revision named C{revision}): upstream's C{newVersionedStatefulSetPod}
    without the owner reference, which the caller adds.
    """
    template = copy.deepcopy(template or {})
    template_meta = template.get("metadata") or {}
    name = pod_name(sts, ordinal)
    labels = dict(template_meta.get("labels") or {})
    labels.update({REVISION_LABEL: revision, POD_NAME_LABEL: name,
                   POD_INDEX_LABEL: str(ordinal)})
    meta = {"name": name, "namespace": sts["metadata"].get("namespace", ""), "labels": labels}
    for field in ("annotations", "finalizers"):
        if template_meta.get(field):
            meta[field] = template_meta[field]
    spec = template.get("spec") or {}
    spec["hostname"] = name
    service = (sts.get("spec") or {}).get("serviceName")
    if service:
        spec["subdomain"] = service
    claims = claim_templates(sts)
    if claims:
        names = {t["metadata"]["name"] for t in claims}
        volumes = [v for v in spec.get("volumes") or () if isinstance(v, dict)
                   and v.get("name") not in names]
        for claim in claims:
            volumes.append({"name": claim["metadata"]["name"], "persistentVolumeClaim": {
                "claimName": claim_name(claim, sts, ordinal)}})
        spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def new_claim(sts, template, ordinal):
    """
    The claim of C{ordinal} from a claim template: its labels plus the set's
    selector labels (upstream's C{getPersistentVolumeClaims}).
    """
    claim = copy.deepcopy(template)
    meta = claim.setdefault("metadata", {})
    meta["name"] = claim_name(template, sts, ordinal)
    meta["namespace"] = sts["metadata"].get("namespace", "")
    selector = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    if selector:
        meta["labels"] = dict(meta.get("labels") or {}, **selector)
    for field in ("uid", "resourceVersion", "creationTimestamp"):
        meta.pop(field, None)
    claim.pop("status", None)
    claim["apiVersion"], claim["kind"] = "v1", "PersistentVolumeClaim"
    return claim


def retention(sts):
    policy = (sts.get("spec") or {}).get("persistentVolumeClaimRetentionPolicy") or {}
    return policy.get("whenDeleted") or RETAIN, policy.get("whenScaled") or RETAIN


def in_range(sts, ordinal):
    start = start_ordinal(sts)
    return start <= ordinal < start + replicas_of(sts)


def claim_owners(sts, pod, ordinal):
    """
    The controller references a claim of C{ordinal} should carry (upstream's
    C{updateClaimOwnerRefForSetAndPod}): the pod's when the ordinal is
    scaled down and whenScaled is Delete (the claim goes with the pod),
    else the set's when whenDeleted is Delete (it goes with the set), else
    none.
    """
    when_deleted, when_scaled = retention(sts)
    if when_scaled == DELETE and not in_range(sts, ordinal):
        if pod is None or not is_created(pod):
            return []
        return [{"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                 "uid": pod["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    if when_deleted == DELETE:
        return [{"apiVersion": API_VERSION, "kind": KIND, "name": sts["metadata"]["name"],
                 "uid": sts["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    return []


def with_claim_owners(refs, sts, pod, wanted):
    """The claim's references with those to the set and the pod replaced by C{wanted}."""
    ours = {sts["metadata"]["uid"]}
    if pod is not None and is_created(pod):
        ours.add(pod["metadata"]["uid"])
    kept = [r for r in refs or () if isinstance(r, dict) and r.get("uid") not in ours
            and not (r.get("kind") == KIND and r.get("name") == sts["metadata"]["name"])]
    return kept + wanted


def compute_status(sts, pods, current, update, collisions, now):
    """The set's status from its pods and revisions (upstream's C{computeReplicaStatus})."""
    status = {"replicas": 0, "readyReplicas": 0, "availableReplicas": 0,
              "currentReplicas": 0, "updatedReplicas": 0}
    seconds = min_ready(sts)
    for pod in pods:
        status["replicas"] += 1
        if running_and_ready(pod):
            status["readyReplicas"] += 1
            if is_available(pod, seconds, now):
                status["availableReplicas"] += 1
        if not is_terminating(pod):
            if revision_of(pod) == current:
                status["currentReplicas"] += 1
            if revision_of(pod) == update:
                status["updatedReplicas"] += 1
    status.update(currentRevision=current, updateRevision=update, collisionCount=collisions,
                  observedGeneration=sts["metadata"].get("generation") or 0)
    if update_type(sts) == "RollingUpdate" and \
            status["updatedReplicas"] == status["replicas"] == status["readyReplicas"]:
        status["currentReplicas"] = status["updatedReplicas"]
        status["currentRevision"] = update
    return status
