# -*- test-case-name: tests.registry.test_pod_annotations,tests.registry.test_podspec,tests.registry.test_graceful_delete -*-
"""
Pods: defaults, a new pod's status, the reserved annotations and labels
whose values the API checks, and the grace period a deleted pod is given
(L{grace_period}; the deletion itself is L{orchd.registry.gracefuldelete}'s).

A pod gets upstream's defaults (L{orchd.registry.kinds.podspec}) on every
write, and a new pod starts C{Pending} with the QoS class its requests and
limits give it; later spec writes leave the status alone.

Two keys carry numbers that controllers read back:

  - C{controller.orch.io/pod-deletion-cost} (an annotation) orders which
    pods a replica set removes first. Upstream's
    C{ValidatePodSpecificAnnotations} refuses a value that is not a
    canonical 32-bit integer ("must be a 32bit integer"): no sign C{+},
    no leading zeros. As upstream, an update of a pod whose stored value is
    already invalid is not refused for it.
  - C{batch.orch.io/job-completion-index} (annotation and label) gives a
    pod of an Indexed Job its index. Upstream does not check it; here it is
    reserved for the Job controller: the value must be a canonical
    non-negative integer within int32, and a key that is newly set or
    changed is only accepted on a pod whose controlling owner is a
    C{batch/v1} Job. A pod that already has the key keeps it unchanged
    (an orphaned pod loses its owner but keeps its index).
"""

import re

from zope.interface import implementer

from orchd.api.errors import FieldError
from orchd.registry.kinds.podspec import (
    canonical_pod_resources, default_pod, default_pod_template, pod_spec_errors, qos_class,
)
from orchd.registry.strategy import DefaultStrategy, IStrategy

DELETION_COST = "controller.orch.io/pod-deletion-cost"
COMPLETION_INDEX = "batch.orch.io/job-completion-index"

#: The field selectors of pods beyond metadata.name and metadata.namespace, as upstream's.
POD_FIELDS = ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
              "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
              "status.nominatedNodeName")
_INT32_MAX = 2 ** 31 - 1
#: Upstream's C{validFirstDigit} and C{ParseInt}: optional C{-}, no C{+}, no leading zeros.
_CANONICAL_INT = re.compile(r"^(0|-?[1-9][0-9]*)\Z")
_NON_NEGATIVE_INT = re.compile(r"^(0|[1-9][0-9]*)\Z")


def _mapping(meta, field):
    value = meta.get(field) if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else {}


def valid_deletion_cost(value):
    """True for a canonical decimal int32, as upstream's C{GetDeletionCostFromPodAnnotations}."""
    return (isinstance(value, str) and bool(_CANONICAL_INT.match(value))
            and -_INT32_MAX - 1 <= int(value) <= _INT32_MAX)


def valid_completion_index(value):
    """True for a canonical decimal integer from 0 to the int32 maximum."""
    return (isinstance(value, str) and bool(_NON_NEGATIVE_INT.match(value))
            and int(value) <= _INT32_MAX)


def deletion_cost_errors(meta, old_meta=None):
    """The 422 of an invalid deletion cost, unless the stored pod's was already invalid."""
    annotations = _mapping(meta, "annotations")
    if DELETION_COST not in annotations or valid_deletion_cost(annotations[DELETION_COST]):
        return []
    if old_meta is not None:
        old = _mapping(old_meta, "annotations")
        if DELETION_COST in old and not valid_deletion_cost(old[DELETION_COST]):
            return []
    return [FieldError.invalid(f"metadata.annotations[{DELETION_COST}]",
                               annotations[DELETION_COST], "must be a 32bit integer")]


def controlled_by_job(meta):
    """True if the pod's controller owner reference is a C{batch/v1} Job."""
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    return any(isinstance(ref, dict) and ref.get("controller") is True
               and ref.get("kind") == "Job" and ref.get("apiVersion") == "batch/v1"
               for ref in (refs if isinstance(refs, list) else ()))


def completion_index_errors(meta, old_meta=None):
    """Refuse a new or changed completion index that is invalid or not set for a Job."""
    errors = []
    for field in ("annotations", "labels"):
        values = _mapping(meta, field)
        if COMPLETION_INDEX not in values:
            continue
        value = values[COMPLETION_INDEX]
        if old_meta is not None and _mapping(old_meta, field).get(COMPLETION_INDEX) == value:
            continue
        path = f"metadata.{field}[{COMPLETION_INDEX}]"
        if not valid_completion_index(value):
            errors.append(FieldError.invalid(path, value, "must be a non-negative integer"))
        elif not controlled_by_job(meta):
            errors.append(FieldError.forbidden(
                path, "reserved for the Job controller: only a pod controlled by a "
                      "batch/v1 Job may set it"))
    return errors


#: Upstream's default C{terminationGracePeriodSeconds}.
DEFAULT_GRACE_PERIOD = 30


def grace_period(pod, requested):
    """
    Seconds a deleted pod is given to stop (upstream's C{CheckGracefulDelete}):
    the request's, else the pod's C{terminationGracePeriodSeconds}, else 30;
    but 0 for a pod on no node (nothing runs it) or already finished.
    """
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    if requested is not None:
        return requested
    period = spec.get("terminationGracePeriodSeconds")
    if isinstance(period, int) and not isinstance(period, bool) and period >= 0:
        return period
    return DEFAULT_GRACE_PERIOD


def _defaulted(pod):
    default_pod(pod)
    canonical_pod_resources(pod.get("spec"), "Pod")


@implementer(IStrategy)
class PodStrategy(DefaultStrategy):
    """
    Defaults, the status of a new pod, the spec checks users meet most, the
    reserved keys, and graceful deletion. An update is checked against the
    spec rules only when it changes the spec, so that status and metadata
    writes to a pod stored before a rule existed still go through.
    """

    def graceful_delete_period(self, ctx, obj, requested):
        return grace_period(obj, requested)

    def prepare_for_create(self, ctx, obj):
        _defaulted(obj)
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj.get("spec"))}

    def prepare_for_update(self, ctx, obj, old):
        _defaulted(obj)

    def validate(self, ctx, obj):
        meta = obj.get("metadata")
        return (deletion_cost_errors(meta) + completion_index_errors(meta)
                + pod_spec_errors(obj.get("spec"), "spec"))

    def validate_update(self, ctx, obj, old):
        meta, old_meta = obj.get("metadata"), old.get("metadata") or {}
        errors = deletion_cost_errors(meta, old_meta) + completion_index_errors(meta, old_meta)
        if obj.get("spec") != old.get("spec"):
            errors += pod_spec_errors(obj.get("spec"), "spec")
        return errors


@implementer(IStrategy)
class PodTemplateStrategy(DefaultStrategy):
    """PodTemplates: the pod defaults of their template, and its spec checks."""

    def prepare_for_create(self, ctx, obj):
        template = obj.get("template")
        default_pod_template(template)
        if isinstance(template, dict):
            canonical_pod_resources(template.get("spec"), "PodTemplate")

    def prepare_for_update(self, ctx, obj, old):
        self.prepare_for_create(ctx, obj)

    def validate(self, ctx, obj):
        template = obj.get("template")
        spec = template.get("spec") if isinstance(template, dict) else {}
        return pod_spec_errors(spec, "template.spec", require_image=False)
