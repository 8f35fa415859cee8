# -*- test-case-name: tests.registry.test_rbac_kinds -*-
"""
Roles, ClusterRoles and their bindings: the shape of rules, role references
and subjects.

Validation follows upstream's v1 rules and messages, so clients see the
errors they know; what a rule grants is the authorizer's business, and who
may write one is escalation checking's. All four kinds create on PUT, as
upstream's do. Bindings are defaulted before validation, on create and on
update alike, so an update that only spells a default out (or writes the
[COMPAT] C{rbac.authorization.k8s.io} group) does not read as a change of
the immutable C{roleRef}.
"""

import json

from zope.interface import implementer

from orchd.api.errors import INVALID, TYPE_INVALID, FieldError, StatusError
from orchd.api.groups import canonical_group
from orchd.api.kinds import RBAC
from orchd.api.meta import (
    dns1123_subdomain_errors, label_key_errors, label_value_errors, path_segment_errors,
)
from orchd.api.selectors import selector_from_label_selector_object
from orchd.registry.strategy import DefaultStrategy, IStrategy

SERVICE_ACCOUNT, USER, GROUP = "ServiceAccount", "User", "Group"
_SUBJECT_KINDS = (SERVICE_ACCOUNT, USER, GROUP)
_RULE_LISTS = ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")


# -- helpers ---------------------------------------------------------------------

def _go_quote(text):
    """Go's C{%q}, near enough: JSON's string escaping."""
    return json.dumps(text, ensure_ascii=False)


def _go_strings(values):
    """Go's C{%#v} of a []string, as upstream's messages show list values."""
    return "[]string{" + ", ".join(_go_quote(v) for v in values) + "}"


def _go_invalid(path, rendered, detail):
    """An Invalid error whose value is already rendered (a Go literal)."""
    return FieldError(INVALID, path, detail=f"{rendered}: {detail}")


def _type_error(path, value, json_type):
    return FieldError.type_invalid(path, value, f"must be of type {json_type}")


def _list(value, path, errors):
    """C{value} as a list (None reads as empty), or None after recording a type error."""
    if value is None:
        return []
    if not isinstance(value, list):
        errors.append(_type_error(path, value, "array"))
        return None
    return value


def _strings(value, path, errors):
    """A list of strings; bad items are reported and left out."""
    items = _list(value, path, errors)
    if items is None:
        return []
    good = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            good.append(item)
        else:
            errors.append(_type_error(f"{path}[{index}]", item, "string"))
    return good


def _rbac_spelling(group):
    """The served spelling of the RBAC group; anything else is left as sent."""
    if isinstance(group, str) and canonical_group(group) == RBAC:
        return RBAC
    return group


# -- rules -----------------------------------------------------------------------

def _misplaced_star(url):
    """
    True when C{*} appears other than as the whole last path segment.

    The specification allows C{*} only there; upstream stores any URL and
    its authorizer treats a trailing C{*} as a prefix (C{/healthz*}). The
    specification wins, so such a rule cannot be stored.
    """
    if "*" not in url:
        return False
    head, _, last = url.rpartition("/")
    return last != "*" or "*" in head


def _rule_errors(rule, namespaced, path):
    if not isinstance(rule, dict):
        return [_type_error(path, rule, "object")]
    errors = []
    lists = {name: _strings(rule.get(name), f"{path}.{name}", errors) for name in _RULE_LISTS}
    if not lists["verbs"]:
        errors.append(FieldError.required(f"{path}.verbs", "verbs must contain at least one value"))
    urls = lists["nonResourceURLs"]
    if urls:
        rendered = _go_strings(urls)
        if namespaced:
            errors.append(_go_invalid(f"{path}.nonResourceURLs", rendered,
                                      "namespaced rules cannot apply to non-resource URLs"))
        if lists["apiGroups"] or lists["resources"] or lists["resourceNames"]:
            errors.append(_go_invalid(
                f"{path}.nonResourceURLs", rendered,
                "rules cannot apply to both regular resources and non-resource URLs"))
        for index, url in enumerate(rule["nonResourceURLs"]):
            if isinstance(url, str) and _misplaced_star(url):
                errors.append(FieldError.invalid(
                    f"{path}.nonResourceURLs[{index}]", url,
                    "'*' is allowed only as a whole, final path segment"))
        return errors
    if not lists["apiGroups"]:
        errors.append(FieldError.required(
            f"{path}.apiGroups", "resource rules must supply at least one api group"))
    if not lists["resources"]:
        errors.append(FieldError.required(
            f"{path}.resources", "resource rules must supply at least one resource"))
    return errors


def rules_errors(obj, namespaced):
    """The errors of C{obj["rules"]}; a namespaced Role may not name URLs."""
    errors = []
    rules = _list(obj.get("rules"), "rules", errors) or []
    for index, rule in enumerate(rules):
        errors += _rule_errors(rule, namespaced, f"rules[{index}]")
    return errors


# -- label selectors ---------------------------------------------------------------

def _requirement_errors(requirement, path):
    if not isinstance(requirement, dict):
        return [_type_error(path, requirement, "object")]
    errors = []
    operator = requirement.get("operator", "")  # absent reads as Go's zero value
    values = _strings(requirement.get("values"), f"{path}.values", errors)
    if operator in ("In", "NotIn"):
        if not values:
            errors.append(FieldError.required(
                f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errors.append(FieldError.forbidden(
                f"{path}.values",
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    else:
        errors.append(FieldError.invalid(f"{path}.operator", operator,
                                         "not a valid selector operator"))
    key = requirement.get("key", "")
    if not isinstance(key, str):
        errors.append(_type_error(f"{path}.key", key, "string"))
    else:
        errors += [FieldError.invalid(f"{path}.key", key, m) for m in label_key_errors(key)]
    for index, value in enumerate(values):
        errors += [FieldError.invalid(f"{path}.values[{index}]", value, m)
                   for m in label_value_errors(value)]
    return errors


def label_selector_errors(selector, path):
    """
    Upstream's LabelSelector validation, plus its check that the selector
    converts: a selector that does not adds C{Invalid value: "null": invalid
    label selector.}, as upstream's ClusterRole validation does.
    """
    if not isinstance(selector, dict):
        return [_type_error(path, selector, "object")]
    errors = []
    labels = selector.get("matchLabels")
    if labels is not None and not isinstance(labels, dict):
        errors.append(_type_error(f"{path}.matchLabels", labels, "object"))
    for key, value in (labels if isinstance(labels, dict) else {}).items():
        errors += [FieldError.invalid(f"{path}.matchLabels", key, m)
                   for m in label_key_errors(key)]
        if not isinstance(value, str):
            errors.append(_type_error(f"{path}.matchLabels[{key}]", value, "string"))
            continue
        errors += [FieldError.invalid(f"{path}.matchLabels", value, m)
                   for m in label_value_errors(value)]
    expressions = _list(selector.get("matchExpressions"), f"{path}.matchExpressions", errors)
    for index, requirement in enumerate(expressions or []):
        errors += _requirement_errors(requirement, f"{path}.matchExpressions[{index}]")
    if any(e.type == TYPE_INVALID for e in errors):
        return errors  # a shape upstream could not even decode; nothing to convert
    try:
        selector_from_label_selector_object(selector)
    except StatusError:
        errors.append(FieldError.invalid(path, "null", "invalid label selector."))
    return errors


def aggregation_errors(obj):
    """A ClusterRole's C{aggregationRule}: at least one selector, each valid."""
    rule = obj.get("aggregationRule")
    if rule is None:
        return []
    if not isinstance(rule, dict):
        return [_type_error("aggregationRule", rule, "object")]
    path = "aggregationRule.clusterRoleSelectors"
    errors = []
    selectors = _list(rule.get("clusterRoleSelectors"), path, errors)
    if selectors is None:
        return errors
    if not selectors:
        errors.append(FieldError.required(
            path, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
    for index, selector in enumerate(selectors):
        errors += label_selector_errors(selector, f"{path}[{index}]")
    return errors


# -- bindings --------------------------------------------------------------------

def default_binding(obj):
    """
    Upstream's defaults: C{roleRef.apiGroup} and the C{apiGroup} of User and
    Group subjects are the RBAC group (a ServiceAccount's stays empty); the
    [COMPAT] upstream spelling of that group is stored as ours.
    """
    ref = obj.get("roleRef")
    if ref is None:
        ref = obj["roleRef"] = {}  # upstream's zero RoleRef, defaulted like any other
    if isinstance(ref, dict):
        ref["apiGroup"] = _rbac_spelling(ref.get("apiGroup")) or RBAC
    for subject in obj.get("subjects") or ():
        if not isinstance(subject, dict):
            continue
        group = subject.get("apiGroup")
        if group:
            subject["apiGroup"] = _rbac_spelling(group)
        elif subject.get("kind") in (USER, GROUP):
            subject["apiGroup"] = RBAC


def _string(mapping, key, path, errors):
    value = mapping.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        errors.append(_type_error(f"{path}.{key}", value, "string"))
        return ""
    return value


def _role_ref_errors(ref, kinds):
    if not isinstance(ref, dict):
        return [_type_error("roleRef", ref, "object")]
    errors = []
    group = ref.get("apiGroup")
    if group != RBAC:
        errors.append(FieldError.not_supported("roleRef.apiGroup", group, (RBAC,)))
    kind = ref.get("kind")
    if kind not in kinds:
        errors.append(FieldError.not_supported("roleRef.kind", "" if kind is None else kind,
                                               kinds))
    name = ref.get("name")
    if name is not None and not isinstance(name, str):
        errors.append(_type_error("roleRef.name", name, "string"))
    elif not name:
        errors.append(FieldError.required("roleRef.name"))
    else:
        errors += [FieldError.invalid("roleRef.name", name, m) for m in path_segment_errors(name)]
    return errors


def _subject_errors(subject, namespaced, path):
    if not isinstance(subject, dict):
        return [_type_error(path, subject, "object")]
    errors = []
    name = _string(subject, "name", path, errors)
    kind = _string(subject, "kind", path, errors)
    group = _string(subject, "apiGroup", path, errors)
    namespace = _string(subject, "namespace", path, errors)
    if not name:
        errors.append(FieldError.required(f"{path}.name"))
    if kind == SERVICE_ACCOUNT:
        if name:
            errors += [FieldError.invalid(f"{path}.name", name, m)
                       for m in dns1123_subdomain_errors(name)]
        if group:
            errors.append(FieldError.not_supported(f"{path}.apiGroup", group, ("",)))
        if not namespaced and not namespace:
            # A RoleBinding's service accounts default to its own namespace.
            errors.append(FieldError.required(f"{path}.namespace"))
    elif kind in (USER, GROUP):
        # A namespace here is not refused: upstream stores it, and the
        # specification has the authorizer report it.
        if group != RBAC:
            errors.append(FieldError.not_supported(f"{path}.apiGroup", group, (RBAC,)))
    else:
        errors.append(FieldError.not_supported(f"{path}.kind", kind, _SUBJECT_KINDS))
    return errors


def binding_errors(obj, role_kinds, namespaced):
    """The errors of a binding's C{roleRef} and C{subjects}."""
    errors = _role_ref_errors(obj.get("roleRef"), role_kinds)
    subjects = _list(obj.get("subjects"), "subjects", errors) or []
    for index, subject in enumerate(subjects):
        errors += _subject_errors(subject, namespaced, f"subjects[{index}]")
    return errors


_REF_FIELDS = (("APIGroup", "apiGroup"), ("Kind", "kind"), ("Name", "name"))


def _ref_identity(ref):
    """What two role references are compared by, after defaulting."""
    if not isinstance(ref, dict):
        return ref
    return (_rbac_spelling(ref.get("apiGroup")) or RBAC, ref.get("kind") or "",
            ref.get("name") or "")


def role_ref_change(obj, old):
    """The error of changing C{roleRef}, worded (Go literal and all) as upstream's."""
    ref = obj.get("roleRef")
    if _ref_identity(ref) == _ref_identity(old.get("roleRef")):
        return []
    if not isinstance(ref, dict):
        return [FieldError.invalid("roleRef", ref, "cannot change roleRef")]
    fields = ", ".join(f"{go}:{_go_quote(str(ref.get(key) or ''))}" for go, key in _REF_FIELDS)
    return [_go_invalid("roleRef", f"rbac.RoleRef{{{fields}}}", "cannot change roleRef")]


# -- strategies ------------------------------------------------------------------

@implementer(IStrategy)
class RoleStrategy(DefaultStrategy):
    allow_create_on_update = True

    def validate(self, ctx, obj):
        return rules_errors(obj, namespaced=True)


@implementer(IStrategy)
class ClusterRoleStrategy(DefaultStrategy):
    allow_create_on_update = True

    def validate(self, ctx, obj):
        return rules_errors(obj, namespaced=False) + aggregation_errors(obj)


@implementer(IStrategy)
class RoleBindingStrategy(DefaultStrategy):
    allow_create_on_update = True
    #: The kinds C{roleRef} may name.
    role_kinds = ("Role", "ClusterRole")
    #: True when subjects' service accounts may leave out their namespace.
    namespaced = True

    def prepare_for_create(self, ctx, obj):
        default_binding(obj)

    def prepare_for_update(self, ctx, obj, old):
        default_binding(obj)

    def validate(self, ctx, obj):
        return binding_errors(obj, self.role_kinds, self.namespaced)

    def validate_update(self, ctx, obj, old):
        return self.validate(ctx, obj) + role_ref_change(obj, old)


@implementer(IStrategy)
class ClusterRoleBindingStrategy(RoleBindingStrategy):
    role_kinds = ("ClusterRole",)
    namespaced = False
