# -*- test-case-name: tests.registry.test_placement -*-
"""
Where a pod may go, checked as upstream's pod validation checks it: the
node selector, required and preferred node affinity, and tolerations.

The scheduler and the DaemonSet controller read these fields; a malformed
one there would only ever match no node (or every node), so it is refused
at the door with upstream's messages instead.
"""

from orchd.api.errors import FieldError
from orchd.api.meta import dns1123_subdomain_errors, label_key_errors, label_value_errors

_SET_OPERATORS = ("In", "NotIn")
_PRESENCE_OPERATORS = ("Exists", "DoesNotExist")
_ORDER_OPERATORS = ("Gt", "Lt")
#: The node fields a node selector may match, and how their values are checked.
_FIELD_VALUES = {"metadata.name": dns1123_subdomain_errors}
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_TOLERATION_OPERATORS = ("Equal", "Exists")


def placement_errors(spec, path):
    """The errors of C{spec}'s nodeSelector, nodeAffinity and tolerations."""
    errors = _node_selector_errors(spec.get("nodeSelector"), f"{path}.nodeSelector")
    affinity = spec.get("affinity")
    if isinstance(affinity, dict) and isinstance(affinity.get("nodeAffinity"), dict):
        errors += _node_affinity_errors(affinity["nodeAffinity"],
                                        f"{path}.affinity.nodeAffinity")
    tolerations = spec.get("tolerations")
    if isinstance(tolerations, list):
        for i, toleration in enumerate(tolerations):
            if isinstance(toleration, dict):
                errors += _toleration_errors(toleration, f"{path}.tolerations[{i}]")
    return errors


def _strings(value):
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _node_selector_errors(selector, path):
    if selector is None:
        return []
    if not isinstance(selector, dict):
        return [FieldError.invalid(path, selector, "must be a map of strings")]
    errors = []
    for key, value in selector.items():
        errors += [FieldError.invalid(path, key, m) for m in label_key_errors(key)]
        if not isinstance(value, str):
            errors.append(FieldError.invalid(f"{path}[{key}]", value, "must be a string"))
        else:
            errors += [FieldError.invalid(path, value, m) for m in label_value_errors(value)]
    return errors


def _node_affinity_errors(affinity, path):
    errors = []
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, dict):
        terms_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms = required.get("nodeSelectorTerms")
        if not isinstance(terms, list) or not terms:
            errors.append(FieldError.required(terms_path,
                                              "must have at least one node selector term"))
        else:
            for i, term in enumerate(terms):
                errors += _term_errors(term, f"{terms_path}[{i}]")
    preferred = affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    if isinstance(preferred, list):
        for i, item in enumerate(preferred):
            if not isinstance(item, dict):
                continue
            item_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            weight = item.get("weight")
            if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
                errors.append(FieldError.invalid(f"{item_path}.weight", weight,
                                                 "must be in the range 1-100"))
            errors += _term_errors(item.get("preference"), f"{item_path}.preference")
    return errors


def _term_errors(term, path):
    if not isinstance(term, dict):
        return []
    errors = []
    for i, requirement in enumerate(term.get("matchExpressions") or ()):
        if isinstance(requirement, dict):
            errors += _requirement_errors(requirement, f"{path}.matchExpressions[{i}]")
    for i, requirement in enumerate(term.get("matchFields") or ()):
        if isinstance(requirement, dict):
            errors += _field_requirement_errors(requirement, f"{path}.matchFields[{i}]")
    return errors


def _requirement_errors(requirement, path):
    """Upstream's C{ValidateNodeSelectorRequirement}."""
    operator, values = requirement.get("operator"), _strings(requirement.get("values"))
    errors = []
    if operator in _SET_OPERATORS:
        if not values:
            errors.append(FieldError.required(
                f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif operator in _PRESENCE_OPERATORS:
        if values:
            errors.append(FieldError.forbidden(
                f"{path}.values",
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif operator in _ORDER_OPERATORS:
        if len(values) != 1:
            errors.append(FieldError.required(
                f"{path}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    else:
        errors.append(FieldError.invalid(f"{path}.operator", operator,
                                         "not a valid selector operator"))
    key = requirement.get("key")
    key = key if isinstance(key, str) else ""
    errors += [FieldError.invalid(f"{path}.key", key, m) for m in label_key_errors(key)]
    return errors


def _field_requirement_errors(requirement, path):
    """Upstream's C{ValidateNodeFieldSelectorRequirement}."""
    operator, values = requirement.get("operator"), _strings(requirement.get("values"))
    errors = []
    if operator in _SET_OPERATORS:
        if len(values) != 1:
            errors.append(FieldError.required(
                f"{path}.values",
                "must be only one value when `operator` is 'In' or 'NotIn' for node field "
                "selector"))
    else:
        errors.append(FieldError.invalid(f"{path}.operator", operator,
                                         "not a valid selector operator"))
    key = requirement.get("key")
    check = _FIELD_VALUES.get(key) if isinstance(key, str) else None
    if check is None:
        errors.append(FieldError.invalid(f"{path}.key", key, "not a valid field selector key"))
    else:
        for i, value in enumerate(values):
            errors += [FieldError.invalid(f"{path}.values[{i}]", value, m)
                       for m in check(value)]
    return errors


def _toleration_errors(toleration, path):
    """Upstream's C{validateTolerations}, for one toleration."""
    errors = []
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or ""
    value = toleration.get("value") or ""
    effect = toleration.get("effect") or ""
    if key:
        errors += [FieldError.invalid(f"{path}.key", key, m)
                   for m in label_key_errors(key if isinstance(key, str) else "")]
    elif operator != "Exists":
        errors.append(FieldError.invalid(
            f"{path}.operator", operator,
            'operator must be Exists when `key` is empty, which means "match all values and '
            'all keys"'))
    if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
        errors.append(FieldError.invalid(f"{path}.effect", effect,
                                         "effect must be 'NoExecute' when `tolerationSeconds` "
                                         "is set"))
    if operator in ("Equal", ""):
        text = value if isinstance(value, str) else ""
        problems = label_value_errors(text) if isinstance(value, str) else ["must be a string"]
        if problems:
            errors.append(FieldError.invalid(f"{path}.operator", value, ";".join(problems)))
    elif operator == "Exists":
        if value:
            errors.append(FieldError.invalid(f"{path}.operator", value,
                                             "value must be empty when `operator` is 'Exists'"))
    else:
        errors.append(FieldError.not_supported(f"{path}.operator", operator,
                                               _TOLERATION_OPERATORS))
    if effect and effect not in _EFFECTS:
        errors.append(FieldError.not_supported(f"{path}.effect", effect, _EFFECTS))
    return errors
