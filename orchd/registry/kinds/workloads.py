# -*- test-case-name: tests.registry.test_workloads -*-
"""
The workload kinds with a pod template: Deployments, ReplicaSets,
StatefulSets and DaemonSets (C{apps/v1}) and ReplicationControllers.

Each gets upstream's defaults on every write (kk C{pkg/apis/apps/v1/defaults.go},
C{pkg/apis/core/v1/defaults.go}; the template's pod spec as any pod's,
L{orchd.registry.kinds.podspec}), the checks kubectl users meet with
upstream's messages (a selector that picks the template's own pods,
C{replicas} not negative, restart policy C{Always}, the rolling update
bounds; the selector of a Deployment, ReplicaSet or DaemonSet never
changes), and from its creation the status fields that upstream always
writes (C{replicas: 0} and the like), which the official client's models
require.

The kinds with replicas have a C{scale} subresource
(L{orchd.registry.scale}): a write to it changes C{spec.replicas} and
nothing else.
"""

from zope.interface import implementer

from orchd.api.errors import FieldError, StatusError
from orchd.api.meta import label_key_errors, label_value_errors, regex_error
from orchd.api.selectors import (
    EQUALS, LabelSelector, new_requirement, selector_from_label_selector_object,
)
from orchd.registry.kinds.podspec import (
    canonical_pod_resources, default_pod_template, pod_spec_errors, template_selector_errors,
)
from orchd.registry.kinds.statusfields import StatusFieldsStrategy
from orchd.registry.strategy import IStrategy, immutable_field

_PERCENT_MSG = regex_error("a valid percent string must be a numeric string followed by an "
                           "ending '%'", "[0-9]+%", "1%", "93%")


def spec_of(obj):
    """The object's spec, made an empty one when it has none; None if it is not an object."""
    spec = obj.get("spec")
    if spec is None:
        spec = obj["spec"] = {}
    return spec if isinstance(spec, dict) else None


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def nonnegative_errors(spec, field, path):
    """Upstream's C{ValidateNonnegativeField} of C{spec[field]}, when set."""
    value = spec.get(field)
    if value is None:
        return []
    if not _is_int(value):
        return [FieldError.type_invalid(path, value, "must be of type integer")]
    if value < 0:
        return [FieldError.invalid(path, value, "must be greater than or equal to 0")]
    return []


def label_map_errors(labels, path):
    """Upstream's C{ValidateLabels} of a map (e.g. a ReplicationController's selector)."""
    if not isinstance(labels, dict):
        return [FieldError.type_invalid(path, labels, "must be of type object")]
    errors = []
    for key, value in labels.items():
        errors += [FieldError.invalid(path, key, m) for m in label_key_errors(key)]
        if not isinstance(value, str):
            errors.append(FieldError.type_invalid(f"{path}[{key}]", value,
                                                  "must be of type string"))
        else:
            errors += [FieldError.invalid(path, value, m) for m in label_value_errors(value)]
    return errors


def label_selector_errors(selector, path):
    """Upstream's C{ValidateLabelSelector} of a C{LabelSelector} object."""
    if not isinstance(selector, dict):
        return [FieldError.type_invalid(path, selector, "must be of type object")]
    errors = label_map_errors(selector.get("matchLabels") or {}, f"{path}.matchLabels")
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        return errors + [FieldError.type_invalid(f"{path}.matchExpressions", expressions,
                                                 "must be of type array")]
    for i, expression in enumerate(expressions):
        where = f"{path}.matchExpressions[{i}]"
        if not isinstance(expression, dict):
            errors.append(FieldError.type_invalid(where, expression, "must be of type object"))
            continue
        operator, values = expression.get("operator"), expression.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                errors.append(FieldError.required(
                    f"{where}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errors.append(FieldError.forbidden(
                    f"{where}.values",
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            errors.append(FieldError.invalid(f"{where}.operator", operator,
                                             "not a valid selector operator"))
        key = expression.get("key")
        if not isinstance(key, str) or not key:
            errors.append(FieldError.required(f"{where}.key"))
        else:
            errors += [FieldError.invalid(f"{where}.key", key, m) for m in label_key_errors(key)]
        for j, value in enumerate(values if isinstance(values, list) else ()):
            if isinstance(value, str):
                errors += [FieldError.invalid(f"{where}.values[{j}]", value, m)
                           for m in label_value_errors(value)]
    return errors


def selector_of(selector):
    """The L{LabelSelector} of a valid C{LabelSelector} object, or None."""
    try:
        return selector_from_label_selector_object(selector)
    except (StatusError, AttributeError, TypeError):
        return None


def map_selector(labels):
    """The L{LabelSelector} of a ReplicationController's selector map, or None."""
    try:
        return LabelSelector([new_requirement(k, EQUALS, [v]) for k, v in labels.items()])
    except (ValueError, AttributeError):
        return None


def selector_text(obj):
    """
    The selector of a workload as the text form of a label selector
    (C{app=web}), as a Scale's C{status.selector} gives it.
    """
    spec = obj.get("spec") or {}
    selector = spec.get("selector")
    if obj.get("kind") == "ReplicationController":
        selector = map_selector(selector) if isinstance(selector, dict) and selector else None
    elif isinstance(selector, dict):
        selector = selector_of(selector)
    else:
        selector = None
    return str(selector) if selector is not None else ""


def int_or_percent_errors(value, path, at_most_all=False):
    """
    Upstream's C{ValidatePositiveIntOrPercent}, and with C{at_most_all} its
    C{IsNotMoreThan100Percent}.
    """
    if isinstance(value, str):
        if not value[:-1].isdigit() or not value.endswith("%") or not value[:-1].isascii():
            return [FieldError.invalid(path, value, _PERCENT_MSG)]
        if at_most_all and int(value[:-1]) > 100:
            return [FieldError.invalid(path, value, "must not be greater than 100%")]
        return []
    if _is_int(value):
        if value < 0:
            return [FieldError.invalid(path, value, "must be greater than or equal to 0")]
        return []
    return [FieldError.type_invalid(path, value, "must be an integer or a percent string")]


def _int_or_percent_zero(value):
    """True for 0 and a zero percent (C{0%}, C{00%})."""
    if isinstance(value, str):
        return value.endswith("%") and value[:-1].isdigit() and int(value[:-1]) == 0
    return value == 0


@implementer(IStrategy)
class TemplatedStrategy(StatusFieldsStrategy):
    """
    What every kind with a pod template shares: the template's defaults,
    canonical quantities, the status upstream writes from the start, and,
    for kinds with C{spec.replicas}, the C{scale} subresource.

    @cvar kind: the kind, for messages.
    @cvar scalable: True for kinds with C{spec.replicas} and a C{scale}
        subresource.
    """

    kind = ""
    scalable = True

    def prepare_for_create(self, ctx, obj):
        spec = spec_of(obj)
        if spec is not None:
            self.set_defaults(obj, spec)
        super().prepare_for_create(ctx, obj)

    def prepare_for_update(self, ctx, obj, old):
        spec = spec_of(obj)
        if spec is not None:
            self.set_defaults(obj, spec)

    def set_defaults(self, obj, spec):
        """Upstream's defaults of the kind, in place; C{spec} is C{obj}'s."""
        template = spec.get("template")
        default_pod_template(template)
        if isinstance(template, dict):
            canonical_pod_resources(template.get("spec"), self.kind)

    def subresource_update(self, subresource, obj, old):
        if subresource == "scale" and self.scalable:
            return scaled(obj, old)
        return super().subresource_update(subresource, obj, old)

    def validate(self, ctx, obj):
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [FieldError.type_invalid("spec", spec, "must be of type object")]
        return self.spec_errors(spec)

    def spec_errors(self, spec):
        """The kind's checks of a defaulted spec."""
        return []

    def validate_update(self, ctx, obj, old):
        """
        The checks of an update that changes the spec (L{validate_spec_update}).
        One that leaves it as it was (a status write, a label) cannot break
        a spec rule: it is not checked again, which keeps the frequent status
        writes of controllers cheap and lets objects stored before a rule
        existed still take them.
        """
        if obj.get("spec") == old.get("spec"):
            return []
        return self.validate_spec_update(ctx, obj, old)

    def validate_spec_update(self, ctx, obj, old):
        """The checks of an update that changes the spec: the create checks, by default."""
        return self.validate(ctx, obj)

    def template_errors(self, spec, selector, path="spec.template"):
        """
        The checks of a replicated pod template: present, its labels picked
        by C{selector}, restart policy C{Always}, no active deadline, its
        pod spec.
        """
        template = spec.get("template")
        if not isinstance(template, dict):
            return [FieldError.required(path)]
        errors = []
        if selector is not None:
            errors += template_selector_errors(selector, template, path)
        pod_spec = template.get("spec")
        errors += pod_spec_errors(pod_spec, f"{path}.spec", require_image=False)
        if isinstance(pod_spec, dict):
            policy = pod_spec.get("restartPolicy")
            if policy != "Always":
                errors.append(FieldError.not_supported(f"{path}.spec.restartPolicy", policy,
                                                       ["Always"]))
            if pod_spec.get("activeDeadlineSeconds") is not None:
                errors.append(FieldError.invalid(
                    f"{path}.spec.activeDeadlineSeconds", pod_spec["activeDeadlineSeconds"],
                    f"activeDeadlineSeconds in {self.kind} is not Supported"))
        return errors

    def selector_errors(self, spec, path="spec.selector"):
        """
        The checks of a required, non-empty C{LabelSelector}.

        @return: C{(errors, LabelSelector or None)}.
        """
        selector = spec.get("selector")
        if selector is None:
            return [FieldError.required(path)], None
        errors = label_selector_errors(selector, path)
        if not errors and not (selector.get("matchLabels") or selector.get("matchExpressions")):
            errors.append(FieldError.invalid(
                path, selector, f"empty selector is invalid for {self.kind.lower()}"))
        parsed = selector_of(selector) if not errors else None
        return errors, parsed


def scaled(obj, old):
    """
    The object a write to C{scale} stores: C{old} with C{obj}'s
    C{spec.replicas} (and the managedFields the write recorded).
    """
    replicas = (obj.get("spec") or {}).get("replicas")
    spec = old.get("spec")
    if not isinstance(spec, dict):
        spec = old["spec"] = {}
    spec["replicas"] = replicas
    managed = (obj.get("metadata") or {}).get("managedFields")
    if managed is not None:
        old["metadata"]["managedFields"] = managed
    return old


def _rolling_update_errors(rolling, path):
    errors = int_or_percent_errors(rolling.get("maxUnavailable"), f"{path}.maxUnavailable",
                                   at_most_all=True)
    errors += int_or_percent_errors(rolling.get("maxSurge"), f"{path}.maxSurge")
    if not errors and _int_or_percent_zero(rolling.get("maxUnavailable")) \
            and _int_or_percent_zero(rolling.get("maxSurge")):
        errors.append(FieldError.invalid(f"{path}.maxUnavailable", rolling["maxUnavailable"],
                                         "may not be 0 when `maxSurge` is 0"))
    return errors


def _default_rolling_update(spec, field, max_unavailable, max_surge):
    """Upstream's default update strategy: RollingUpdate, with these bounds when unset."""
    strategy = spec.get(field)
    if strategy is None:
        strategy = spec[field] = {}
    if not isinstance(strategy, dict):
        return
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] != "RollingUpdate":
        return
    rolling = strategy.get("rollingUpdate")
    if rolling is None:
        rolling = strategy["rollingUpdate"] = {}
    if isinstance(rolling, dict):
        if rolling.get("maxUnavailable") is None:
            rolling["maxUnavailable"] = max_unavailable
        if rolling.get("maxSurge") is None:
            rolling["maxSurge"] = max_surge


@implementer(IStrategy)
class DeploymentStrategy(TemplatedStrategy):
    kind = "Deployment"

    def set_defaults(self, obj, spec):
        super().set_defaults(obj, spec)
        spec.setdefault("replicas", 1)
        _default_rolling_update(spec, "strategy", max_unavailable="25%", max_surge="25%")
        if spec.get("revisionHistoryLimit") is None:
            spec["revisionHistoryLimit"] = 10
        if spec.get("progressDeadlineSeconds") is None:
            spec["progressDeadlineSeconds"] = 600

    def spec_errors(self, spec):
        errors = nonnegative_errors(spec, "replicas", "spec.replicas")
        selector_errors, selector = self.selector_errors(spec)
        errors += selector_errors
        errors += self.template_errors(spec, selector)
        strategy = spec.get("strategy")
        if isinstance(strategy, dict):
            kind = strategy.get("type")
            if kind == "Recreate":
                if strategy.get("rollingUpdate") is not None:
                    errors.append(FieldError.forbidden(
                        "spec.strategy.rollingUpdate",
                        "may not be specified when strategy `type` is 'Recreate'"))
            elif kind == "RollingUpdate":
                rolling = strategy.get("rollingUpdate")
                if isinstance(rolling, dict):
                    errors += _rolling_update_errors(rolling, "spec.strategy.rollingUpdate")
            else:
                errors.append(FieldError.not_supported("spec.strategy", strategy,
                                                       ["Recreate", "RollingUpdate"]))
        errors += nonnegative_errors(spec, "minReadySeconds", "spec.minReadySeconds")
        errors += nonnegative_errors(spec, "revisionHistoryLimit", "spec.revisionHistoryLimit")
        deadline = spec.get("progressDeadlineSeconds")
        deadline_errors = nonnegative_errors(spec, "progressDeadlineSeconds",
                                             "spec.progressDeadlineSeconds")
        errors += deadline_errors
        ready = spec.get("minReadySeconds") or 0
        if not deadline_errors and _is_int(deadline) and _is_int(ready) and deadline <= ready:
            errors.append(FieldError.invalid("spec.progressDeadlineSeconds", deadline,
                                             "must be greater than minReadySeconds"))
        return errors

    def validate_spec_update(self, ctx, obj, old):
        return _with_immutable_selector(self.validate(ctx, obj), obj, old)


def _with_immutable_selector(errors, obj, old):
    changed = immutable_field((obj.get("spec") or {}).get("selector"),
                              (old.get("spec") or {}).get("selector"), "spec.selector")
    return errors + [changed] if changed else errors


@implementer(IStrategy)
class ReplicaSetStrategy(TemplatedStrategy):
    kind = "ReplicaSet"
    zero_status = {"replicas": 0}

    def set_defaults(self, obj, spec):
        super().set_defaults(obj, spec)
        spec.setdefault("replicas", 1)

    def spec_errors(self, spec):
        errors = nonnegative_errors(spec, "replicas", "spec.replicas")
        errors += nonnegative_errors(spec, "minReadySeconds", "spec.minReadySeconds")
        selector_errors, selector = self.selector_errors(spec)
        errors += selector_errors
        return errors + self.template_errors(spec, selector)

    def validate_spec_update(self, ctx, obj, old):
        return _with_immutable_selector(self.validate(ctx, obj), obj, old)


#: The fields of a StatefulSet's spec an update may change (upstream's list).
_STATEFUL_SET_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy",
                         "revisionHistoryLimit", "persistentVolumeClaimRetentionPolicy",
                         "minReadySeconds")


@implementer(IStrategy)
class StatefulSetStrategy(TemplatedStrategy):
    kind = "StatefulSet"
    zero_status = {"replicas": 0, "availableReplicas": 0}

    def set_defaults(self, obj, spec):
        super().set_defaults(obj, spec)
        if not spec.get("podManagementPolicy"):
            spec["podManagementPolicy"] = "OrderedReady"
        update = spec.get("updateStrategy")
        if update is None:
            update = spec["updateStrategy"] = {}
        if isinstance(update, dict):
            if not update.get("type"):
                update["type"] = "RollingUpdate"
                if update.get("rollingUpdate") is None:
                    update["rollingUpdate"] = {}
            rolling = update.get("rollingUpdate")
            if update["type"] == "RollingUpdate" and isinstance(rolling, dict) \
                    and rolling.get("partition") is None:
                rolling["partition"] = 0
        retention = spec.get("persistentVolumeClaimRetentionPolicy")
        if retention is None:
            retention = spec["persistentVolumeClaimRetentionPolicy"] = {}
        if isinstance(retention, dict):
            for field in ("whenDeleted", "whenScaled"):
                if not retention.get(field):
                    retention[field] = "Retain"
        spec.setdefault("replicas", 1)
        if spec.get("revisionHistoryLimit") is None:
            spec["revisionHistoryLimit"] = 10

    def spec_errors(self, spec):
        errors = []
        policy = spec.get("podManagementPolicy")
        if policy not in ("OrderedReady", "Parallel"):
            errors.append(FieldError.not_supported("spec.podManagementPolicy", policy,
                                                   ["OrderedReady", "Parallel"]))
        update = spec.get("updateStrategy")
        if isinstance(update, dict):
            kind, rolling = update.get("type"), update.get("rollingUpdate")
            if kind == "OnDelete":
                if rolling is not None:
                    errors.append(FieldError.invalid(
                        "spec.updateStrategy.rollingUpdate", rolling,
                        "only allowed for updateStrategy 'RollingUpdate'"))
            elif kind == "RollingUpdate":
                if isinstance(rolling, dict):
                    errors += nonnegative_errors(rolling, "partition",
                                                 "spec.updateStrategy.rollingUpdate.partition")
                    if rolling.get("maxUnavailable") is not None:
                        errors += int_or_percent_errors(
                            rolling["maxUnavailable"],
                            "spec.updateStrategy.rollingUpdate.maxUnavailable")
            else:
                errors.append(FieldError.not_supported("spec.updateStrategy.type", kind,
                                                       ["OnDelete", "RollingUpdate"]))
        for field in ("whenDeleted", "whenScaled"):
            value = (spec.get("persistentVolumeClaimRetentionPolicy") or {}).get(field)
            if value not in ("Retain", "Delete"):
                errors.append(FieldError.not_supported(
                    f"spec.persistentVolumeClaimRetentionPolicy.{field}", value,
                    ["Retain", "Delete"]))
        errors += nonnegative_errors(spec, "replicas", "spec.replicas")
        errors += nonnegative_errors(spec, "minReadySeconds", "spec.minReadySeconds")
        selector_errors, selector = self.selector_errors(spec)
        errors += selector_errors
        return errors + self.template_errors(spec, selector)

    def validate_spec_update(self, ctx, obj, old):
        errors = self.validate(ctx, obj)
        spec, old_spec = obj.get("spec") or {}, old.get("spec") or {}
        if isinstance(spec, dict) and isinstance(old_spec, dict) and \
                {k: v for k, v in spec.items() if k not in _STATEFUL_SET_MUTABLE} != \
                {k: v for k, v in old_spec.items() if k not in _STATEFUL_SET_MUTABLE}:
            errors.append(FieldError.forbidden(
                "spec", "updates to statefulset spec for fields other than 'replicas', "
                        "'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', "
                        "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
                        "forbidden"))
        return errors


def _daemon_rolling_update_errors(rolling, path):
    """Upstream's C{ValidateRollingUpdateDaemonSet}: exactly one of the two is not zero."""
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    errors = int_or_percent_errors(unavailable, f"{path}.maxUnavailable", at_most_all=True)
    errors += int_or_percent_errors(surge, f"{path}.maxSurge", at_most_all=True)
    if errors:
        return errors
    if not _int_or_percent_zero(unavailable) and not _int_or_percent_zero(surge):
        errors.append(FieldError.invalid(f"{path}.maxSurge", surge,
                                         "may not be set when maxUnavailable is non-zero"))
    elif _int_or_percent_zero(unavailable) and _int_or_percent_zero(surge):
        errors.append(FieldError.required(f"{path}.maxUnavailable",
                                          "cannot be 0 when maxSurge is 0"))
    return errors


@implementer(IStrategy)
class DaemonSetStrategy(TemplatedStrategy):
    kind = "DaemonSet"
    scalable = False
    zero_status = {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                   "desiredNumberScheduled": 0, "numberReady": 0}

    def set_defaults(self, obj, spec):
        super().set_defaults(obj, spec)
        _default_rolling_update(spec, "updateStrategy", max_unavailable=1, max_surge=0)
        if spec.get("revisionHistoryLimit") is None:
            spec["revisionHistoryLimit"] = 10

    def spec_errors(self, spec):
        selector_errors, selector = self.selector_errors(spec)
        errors = selector_errors + self.template_errors(spec, selector)
        update = spec.get("updateStrategy")
        if isinstance(update, dict):
            kind = update.get("type")
            if kind == "RollingUpdate":
                rolling = update.get("rollingUpdate")
                if isinstance(rolling, dict):
                    errors += _daemon_rolling_update_errors(
                        rolling, "spec.updateStrategy.rollingUpdate")
            elif kind != "OnDelete":
                errors.append(FieldError.not_supported("spec.updateStrategy", kind,
                                                       ["OnDelete", "RollingUpdate"]))
        errors += nonnegative_errors(spec, "minReadySeconds", "spec.minReadySeconds")
        errors += nonnegative_errors(spec, "revisionHistoryLimit", "spec.revisionHistoryLimit")
        return errors

    def validate_spec_update(self, ctx, obj, old):
        return _with_immutable_selector(self.validate(ctx, obj), obj, old)


@implementer(IStrategy)
class ReplicationControllerStrategy(TemplatedStrategy):
    """
    ReplicationControllers (core v1): their selector is a map, which
    defaults, with the object's labels, to the template's labels.
    """

    kind = "ReplicationController"
    zero_status = {"replicas": 0}

    def set_defaults(self, obj, spec):
        super().set_defaults(obj, spec)
        template = spec.get("template")
        labels = ((template.get("metadata") or {}).get("labels")
                  if isinstance(template, dict) else None)
        if isinstance(labels, dict) and labels:
            if not spec.get("selector"):
                spec["selector"] = dict(labels)
            meta = obj["metadata"]
            if not meta.get("labels"):
                meta["labels"] = dict(labels)
        spec.setdefault("replicas", 1)

    def spec_errors(self, spec):
        errors = nonnegative_errors(spec, "minReadySeconds", "spec.minReadySeconds")
        selector = spec.get("selector")
        parsed = None
        if not selector:
            errors.append(FieldError.required("spec.selector"))
        else:
            selector_errors = label_map_errors(selector, "spec.selector")
            errors += selector_errors
            parsed = None if selector_errors else map_selector(selector)
        errors += nonnegative_errors(spec, "replicas", "spec.replicas")
        return errors + self.template_errors(spec, parsed)
