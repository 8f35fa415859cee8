# -*- test-case-name: tests.registry.test_disruptionbudget -*-
"""
PodDisruptionBudget: the rules of its spec (upstream's
C{ValidatePodDisruptionBudgetSpec}) and the status fields always written.

A budget names C{minAvailable} or C{maxUnavailable}, not both, each a
non-negative integer or a percentage of at most 100%; its selector is a
valid label selector; C{unhealthyPodEvictionPolicy} is C{IfHealthyBudget}
or C{AlwaysAllow}. The eviction subresource and the disruption controller
can then rely on what they read.
"""

import json

from zope.interface import implementer

from orchd.api.errors import FieldError
from orchd.registry.kinds.statusfields import StatusFieldsStrategy
from orchd.registry.kinds.workloads import int_or_percent_errors, label_selector_errors
from orchd.registry.strategy import IStrategy

EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")


def budget_spec_errors(spec, path="spec"):
    """The L{FieldError}s of a PodDisruptionBudget's C{spec}."""
    if not isinstance(spec, dict):
        return [FieldError.type_invalid(path, spec, "must be of type object")]
    errors = []
    minimum, maximum = spec.get("minAvailable"), spec.get("maxUnavailable")
    if minimum is not None and maximum is not None:
        errors.append(FieldError.invalid(
            path, json.dumps(spec, sort_keys=True, separators=(",", ":")),
            "minAvailable and maxUnavailable cannot be both set"))
    for field, value in (("minAvailable", minimum), ("maxUnavailable", maximum)):
        if value is not None:
            errors += int_or_percent_errors(value, f"{path}.{field}", at_most_all=True)
    selector = spec.get("selector")
    if selector is not None:
        errors += label_selector_errors(selector, f"{path}.selector")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in EVICTION_POLICIES:
        errors.append(FieldError.not_supported(f"{path}.unhealthyPodEvictionPolicy", policy,
                                               EVICTION_POLICIES))
    return errors


@implementer(IStrategy)
class PodDisruptionBudgetStrategy(StatusFieldsStrategy):
    zero_status = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                   "expectedPods": 0}

    def validate(self, ctx, obj):
        return budget_spec_errors(obj.get("spec") or {})
