# -*- test-case-name: tests.api.test_autoscalingv1 -*-
"""
HorizontalPodAutoscaler in C{autoscaling/v1}, converted to and from the
C{autoscaling/v2} objects it is stored as (upstream's
C{pkg/apis/autoscaling/v1/conversion.go}).

v1 knows one metric: C{spec.targetCPUUtilizationPercentage} is a v2
C{Resource} metric of C{cpu} with a C{Utilization} target, and
C{status.currentCPUUtilizationPercentage} the current C{cpu} utilization.
Whatever v2 says beyond that (other metrics, the behavior, the conditions,
every current metric) rides in a v1 object's annotations, as JSON of the v2
fields, so that a v1 client's read-modify-write loses none of it; the
annotations are taken off again on the way back, as upstream's v2 drops
them (C{DropRoundTripHorizontalPodAutoscalerAnnotations}).

Both functions are pure: they build a new object and never change theirs
(watch events share their objects between watchers).
"""

import orjson

from orchd.api.errors import StatusError

V1 = "autoscaling/v1"
V2 = "autoscaling/v2"

METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
#: The annotations that carry v2-only content through a v1 object.
ROUND_TRIP_ANNOTATIONS = (METRICS_ANNOTATION, CURRENT_METRICS_ANNOTATION,
                          CONDITIONS_ANNOTATION, BEHAVIOR_ANNOTATION)

_REPLICAS = ("minReplicas", "maxReplicas")
_STATUS_COMMON = ("observedGeneration", "lastScaleTime")


def _copy(value):
    return orjson.loads(orjson.dumps(value))


def _dict(value):
    return value if isinstance(value, dict) else {}


def _cpu_source(metric, side):
    """
    The C{resource} source of C{metric} when it is a C{Resource} metric of
    C{cpu}, else None; C{side} is C{target} (spec) or C{current} (status).
    """
    if not isinstance(metric, dict) or metric.get("type") != "Resource":
        return None
    source = metric.get("resource")
    if not isinstance(source, dict) or source.get("name") != "cpu":
        return None
    return _dict(source.get(side))


def _cpu_utilization(metrics, side):
    """The C{averageUtilization} of the first cpu metric of C{metrics}, or None."""
    for metric in metrics if isinstance(metrics, list) else ():
        values = _cpu_source(metric, side)
        if values is not None:
            return values.get("averageUtilization")
    return None


def _dumps(value):
    return orjson.dumps(value).decode()


def to_v1(obj):
    """The v1 object of the stored (v2) HorizontalPodAutoscaler C{obj}."""
    obj = _copy(obj)
    spec, status = _dict(obj.get("spec")), obj.get("status")
    metadata = _dict(obj.get("metadata"))
    annotations = {key: value for key, value in _dict(metadata.get("annotations")).items()
                   if key not in ROUND_TRIP_ANNOTATIONS}
    metrics = spec.get("metrics") if isinstance(spec.get("metrics"), list) else []
    other = [metric for metric in metrics
             if _cpu_source(metric, "target") is None
             or _cpu_source(metric, "target").get("averageUtilization") is None]
    if other:
        annotations[METRICS_ANNOTATION] = _dumps(other)
    if spec.get("behavior") is not None:
        annotations[BEHAVIOR_ANNOTATION] = _dumps(spec["behavior"])
    out_spec = {key: spec[key] for key in ("scaleTargetRef",) + _REPLICAS if key in spec}
    target = _cpu_utilization(metrics, "target")
    if target is not None:
        out_spec["targetCPUUtilizationPercentage"] = target
    out = {"apiVersion": V1, "kind": obj.get("kind", "HorizontalPodAutoscaler"),
           "metadata": metadata, "spec": out_spec}
    if isinstance(status, dict):
        current_metrics = status.get("currentMetrics")
        if current_metrics:
            annotations[CURRENT_METRICS_ANNOTATION] = _dumps(current_metrics)
        if status.get("conditions"):
            annotations[CONDITIONS_ANNOTATION] = _dumps(status["conditions"])
        out_status = {key: status[key] for key in _STATUS_COMMON if key in status}
        out_status["currentReplicas"] = status.get("currentReplicas") or 0
        out_status["desiredReplicas"] = status.get("desiredReplicas") or 0
        current = _cpu_utilization(current_metrics, "current")
        if current is not None:
            out_status["currentCPUUtilizationPercentage"] = current
        out["status"] = out_status
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    return out


def _annotation(annotations, key, kind):
    """The JSON value of annotation C{key} (of Python type C{kind}), or None; 400 if it is not."""
    text = annotations.pop(key, None)
    if text is None:
        return None
    try:
        value = orjson.loads(text) if isinstance(text, str) else None
    except orjson.JSONDecodeError as e:
        raise StatusError.bad_request(f"annotation {key}: {e}") from None
    if not isinstance(value, kind):
        raise StatusError.bad_request(
            f"annotation {key}: must be a JSON {'array' if kind is list else 'object'}")
    return value


def to_v2(obj):
    """
    The v2 (stored) object of the v1 HorizontalPodAutoscaler C{obj}.

    @raise StatusError: 400 when a round-trip annotation is not the JSON it
        carries.
    """
    obj = _copy(obj)
    spec, status = _dict(obj.get("spec")), obj.get("status")
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    had = metadata.get("annotations")
    annotations = dict(had) if isinstance(had, dict) else {}
    other = _annotation(annotations, METRICS_ANNOTATION, list)
    behavior = _annotation(annotations, BEHAVIOR_ANNOTATION, dict)
    current_metrics = _annotation(annotations, CURRENT_METRICS_ANNOTATION, list)
    conditions = _annotation(annotations, CONDITIONS_ANNOTATION, list)
    if isinstance(had, dict):
        if annotations or len(had) == len(annotations):
            metadata["annotations"] = annotations
        else:
            metadata.pop("annotations", None)
    out_spec = {key: spec[key] for key in ("scaleTargetRef",) + _REPLICAS if key in spec}
    metrics = []
    target = spec.get("targetCPUUtilizationPercentage")
    if target is not None:
        metrics.append({"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}})
    metrics += other or []
    if metrics:
        out_spec["metrics"] = metrics
    if behavior is not None:
        out_spec["behavior"] = behavior
    out = {"apiVersion": V2, "kind": obj.get("kind", "HorizontalPodAutoscaler"),
           "metadata": metadata, "spec": out_spec}
    if isinstance(status, dict):
        out_status = {key: status[key] for key in _STATUS_COMMON if key in status}
        if status.get("currentReplicas") is not None:
            out_status["currentReplicas"] = status["currentReplicas"]
        out_status["desiredReplicas"] = status.get("desiredReplicas") or 0
        current = status.get("currentCPUUtilizationPercentage")
        if current_metrics is not None:
            # The annotation says more than the one percentage: it wins.
            out_status["currentMetrics"] = current_metrics
        elif current is not None:
            out_status["currentMetrics"] = [{"type": "Resource", "resource": {
                "name": "cpu", "current": {"averageUtilization": current}}}]
        if conditions is not None:
            out_status["conditions"] = conditions
        out["status"] = out_status
    return out
