# -*- test-case-name: tests.registry.test_autoscaler -*-
"""
HorizontalPodAutoscaler (C{autoscaling/v2}): upstream's defaults and the
rules of its spec (C{pkg/apis/autoscaling/v2/defaults.go},
C{pkg/apis/autoscaling/validation}), so that the controller reads only
what it can act on and a mistake is a 422 naming the field.

Defaults: C{minReplicas} 1; no metrics means CPU at 80% of the requests; a
C{behavior} given gets every rule it leaves out (scale up: no
stabilization, the larger of 4 pods or 100% per 15 s; scale down: 100% per
15 s, stabilized over the controller's 5 minutes unless set).
"""

import copy

from zope.interface import implementer

from orchd.api.autoscalingv1 import ROUND_TRIP_ANNOTATIONS
from orchd.api.errors import FieldError
from orchd.api.meta import path_segment_errors
from orchd.api.quantity import parse_quantity
from orchd.registry.kinds.statusfields import StatusFieldsStrategy
from orchd.registry.strategy import IStrategy

METRIC_TYPES = ("ContainerResource", "External", "Object", "Pods", "Resource")
TARGET_TYPES = ("AverageValue", "Utilization", "Value")
POLICY_TYPES = ("Percent", "Pods")
SELECT_POLICIES = ("Disabled", "Max", "Min")
#: Upstream's bounds of a policy's period and of a stabilization window (seconds).
MAX_PERIOD_SECONDS = 1800
MAX_STABILIZATION_SECONDS = 3600

DEFAULT_METRICS = [{"type": "Resource", "resource": {
    "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
_SCALE_UP = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
             "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                          {"type": "Percent", "value": 100, "periodSeconds": 15}]}
_SCALE_DOWN = {"selectPolicy": "Max",
               "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


def _int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def set_defaults(spec):
    """Upstream's C{SetDefaults_HorizontalPodAutoscaler}, in place."""
    if not isinstance(spec, dict):
        return
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = copy.deepcopy(DEFAULT_METRICS)
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        for side, defaults in (("scaleUp", _SCALE_UP), ("scaleDown", _SCALE_DOWN)):
            rules = behavior.get(side)
            if rules is None:
                behavior[side] = copy.deepcopy(defaults)
            elif isinstance(rules, dict):
                for field, value in defaults.items():
                    if rules.get(field) is None:
                        rules[field] = copy.deepcopy(value)


def spec_errors(spec, path="spec"):
    """The L{FieldError}s of an autoscaler's C{spec} (upstream's
    C{validateHorizontalPodAutoscalerSpec})."""
    if not isinstance(spec, dict):
        return [FieldError.type_invalid(path, spec, "must be of type object")]
    errors = []
    minimum, maximum = spec.get("minReplicas"), spec.get("maxReplicas")
    if minimum is not None and (not _int(minimum) or minimum < 1):
        errors.append(FieldError.invalid(f"{path}.minReplicas", minimum,
                                         "must be greater than or equal to 1"))
    if not _int(maximum) or maximum < 1:
        errors.append(FieldError.invalid(f"{path}.maxReplicas", maximum,
                                         "must be greater than 0"))
    elif _int(minimum) and minimum > maximum:
        errors.append(FieldError.invalid(f"{path}.maxReplicas", maximum,
                                         "must be greater than or equal to `minReplicas`"))
    errors += _reference_errors(spec.get("scaleTargetRef"), f"{path}.scaleTargetRef")
    metrics = spec.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, list):
            errors.append(FieldError.type_invalid(f"{path}.metrics", metrics,
                                                  "must be of type array"))
        else:
            for index, metric in enumerate(metrics):
                errors += _metric_errors(metric, f"{path}.metrics[{index}]")
    behavior = spec.get("behavior")
    if behavior is not None:
        if not isinstance(behavior, dict):
            errors.append(FieldError.type_invalid(f"{path}.behavior", behavior,
                                                  "must be of type object"))
        else:
            for side in ("scaleUp", "scaleDown"):
                if behavior.get(side) is not None:
                    errors += _rules_errors(behavior[side], f"{path}.behavior.{side}")
    return errors


def _reference_errors(ref, path):
    if not isinstance(ref, dict):
        return [FieldError.required(f"{path}.kind"), FieldError.required(f"{path}.name")]
    errors = []
    for field in ("kind", "name"):
        value = ref.get(field)
        if not value:
            errors.append(FieldError.required(f"{path}.{field}"))
        elif not isinstance(value, str):
            errors.append(FieldError.type_invalid(f"{path}.{field}", value,
                                                  "must be of type string"))
        else:
            errors += [FieldError.invalid(f"{path}.{field}", value, message)
                       for message in path_segment_errors(value)]
    return errors


def _metric_errors(metric, path):
    if not isinstance(metric, dict):
        return [FieldError.type_invalid(path, metric, "must be of type object")]
    kind = metric.get("type")
    if not kind:
        return [FieldError.required(f"{path}.type", "must specify a metric source type")]
    if kind not in METRIC_TYPES:
        return [FieldError.not_supported(f"{path}.type", kind, METRIC_TYPES)]
    field = {"ContainerResource": "containerResource", "External": "external",
             "Object": "object", "Pods": "pods", "Resource": "resource"}[kind]
    source = metric.get(field)
    if not isinstance(source, dict):
        return [FieldError.required(f"{path}.{field}",
                                    "must populate information for the given metric source")]
    if kind not in ("Resource", "ContainerResource"):
        return []
    errors = []
    if not source.get("name"):
        errors.append(FieldError.required(f"{path}.{field}.name",
                                          "must specify a resource name"))
    if kind == "ContainerResource" and not source.get("container"):
        errors.append(FieldError.required(f"{path}.{field}.container",
                                          "must specify a container"))
    errors += _target_errors(source.get("target"), f"{path}.{field}.target")
    return errors


def _target_errors(target, path):
    if not isinstance(target, dict):
        return [FieldError.required(path)]
    kind = target.get("type")
    if not kind:
        return [FieldError.required(f"{path}.type", "must specify a metric target type")]
    if kind not in TARGET_TYPES:
        return [FieldError.not_supported(f"{path}.type", kind, TARGET_TYPES)]
    errors = []
    utilization = target.get("averageUtilization")
    if utilization is not None and (not _int(utilization) or utilization < 1):
        errors.append(FieldError.invalid(f"{path}.averageUtilization", utilization,
                                         "must be greater than 0"))
    for field in ("averageValue", "value"):
        value = target.get(field)
        if value is None:
            continue
        try:
            amount = parse_quantity(value)
        except ValueError as e:
            errors.append(FieldError.invalid(f"{path}.{field}", value, str(e)))
            continue
        if amount <= 0:
            errors.append(FieldError.invalid(f"{path}.{field}", value, "must be positive"))
    if kind == "Utilization" and utilization is None:
        errors.append(FieldError.required(f"{path}.averageUtilization",
                                          "must set averageUtilization for Utilization targets"))
    if kind == "AverageValue" and target.get("averageValue") is None:
        errors.append(FieldError.required(f"{path}.averageValue",
                                          "must set averageValue for AverageValue targets"))
    return errors


def _rules_errors(rules, path):
    if not isinstance(rules, dict):
        return [FieldError.type_invalid(path, rules, "must be of type object")]
    errors = []
    window = rules.get("stabilizationWindowSeconds")
    if window is not None and (not _int(window) or not 0 <= window <= MAX_STABILIZATION_SECONDS):
        errors.append(FieldError.invalid(
            f"{path}.stabilizationWindowSeconds", window,
            f"must be less than or equal to {MAX_STABILIZATION_SECONDS}" if _int(window)
            and window > 0 else "must be greater than or equal to zero"))
    select = rules.get("selectPolicy")
    if select is not None and select not in SELECT_POLICIES:
        errors.append(FieldError.not_supported(f"{path}.selectPolicy", select, SELECT_POLICIES))
    policies = rules.get("policies")
    if not isinstance(policies, list) or not policies:
        errors.append(FieldError.required(f"{path}.policies",
                                          "must specify at least one Policy"))
        return errors
    for index, policy in enumerate(policies):
        where = f"{path}.policies[{index}]"
        if not isinstance(policy, dict):
            errors.append(FieldError.type_invalid(where, policy, "must be of type object"))
            continue
        if policy.get("type") not in POLICY_TYPES:
            errors.append(FieldError.not_supported(f"{where}.type", policy.get("type"),
                                                   POLICY_TYPES))
        value = policy.get("value")
        if not _int(value) or value <= 0:
            errors.append(FieldError.invalid(f"{where}.value", value,
                                             "must be greater than zero"))
        period = policy.get("periodSeconds")
        if not _int(period) or period <= 0:
            errors.append(FieldError.invalid(f"{where}.periodSeconds", period,
                                             "must be greater than zero"))
        elif period > MAX_PERIOD_SECONDS:
            errors.append(FieldError.invalid(f"{where}.periodSeconds", period,
                                             f"must be less than or equal to "
                                             f"{MAX_PERIOD_SECONDS}"))
    return errors


def drop_round_trip_annotations(obj):
    """
    Take off the annotations that carry v2 content through v1 objects
    (L{orchd.api.autoscalingv1}): a v2 object says it in its fields, and
    upstream's v2 drops them too, so they never reach storage.
    """
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if isinstance(annotations, dict) and any(k in annotations for k in ROUND_TRIP_ANNOTATIONS):
        for key in ROUND_TRIP_ANNOTATIONS:
            annotations.pop(key, None)
        if not annotations:
            del meta["annotations"]


@implementer(IStrategy)
class HorizontalPodAutoscalerStrategy(StatusFieldsStrategy):
    zero_status = {"desiredReplicas": 0}

    def prepare_for_create(self, ctx, obj):
        super().prepare_for_create(ctx, obj)
        set_defaults(obj.get("spec"))
        drop_round_trip_annotations(obj)

    def prepare_for_update(self, ctx, obj, old):
        super().prepare_for_update(ctx, obj, old)
        set_defaults(obj.get("spec"))
        drop_round_trip_annotations(obj)

    def validate(self, ctx, obj):
        return spec_errors(obj.get("spec"))

    def validate_update(self, ctx, obj, old):
        return self.validate(ctx, obj)
