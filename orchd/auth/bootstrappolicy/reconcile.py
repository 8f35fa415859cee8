# -*- test-case-name: tests.auth.test_bootstrappolicy -*-
"""
Deciding what to write so that a stored RBAC object grants what bootstrap policy wants.

Reconciliation only ever adds: labels and annotations missing from the
stored object, rules it does not cover, aggregation selectors and binding
subjects it lacks. What an administrator added stays. An object annotated
C{rbac.authorization.orch.io/autoupdate: "false"} is left alone. A binding
whose C{roleRef} differs cannot be updated (the field is immutable), so it is
deleted and created again as bootstrap policy has it.

These functions read and return plain dicts and never write anything.
"""

import copy

from orchd.api.kinds import RBAC
from orchd.auth.bootstrappolicy.objects import AUTOUPDATE_ANNOTATION
from orchd.auth.rbac.rules import uncovered

CREATE = "create"
UPDATE = "update"
RECREATE = "recreate"
NONE = "none"


class Reconciliation:
    """
    What reconciling one object decided.

    @ivar action: L{CREATE}, L{UPDATE}, L{RECREATE} or L{NONE}.
    @ivar obj: the object to create or to update with (None for L{NONE}).
    @ivar protected: the stored object opted out of reconciliation.
    @ivar missing_rules: the expected rules the stored role did not cover.
    @ivar missing_selectors: the aggregation selectors it lacked.
    @ivar missing_subjects: the subjects the stored binding lacked.
    """

    __slots__ = (
        "action",
        "missing_rules",
        "missing_selectors",
        "missing_subjects",
        "obj",
        "protected",
    )

    def __init__(self, action, obj=None, protected=False, missing_rules=(),
                 missing_selectors=(), missing_subjects=()):
        self.action = action
        self.obj = obj
        self.protected = protected
        self.missing_rules = list(missing_rules)
        self.missing_selectors = list(missing_selectors)
        self.missing_subjects = list(missing_subjects)

    def __repr__(self):
        return f"<Reconciliation {self.action}{' (protected)' if self.protected else ''}>"


def is_protected(obj):
    """Whether a stored object opted out of reconciliation."""
    annotations = (obj.get("metadata") or {}).get("annotations")
    return isinstance(annotations, dict) and annotations.get(AUTOUPDATE_ANNOTATION) == "false"


def _mapping(value):
    return value if isinstance(value, dict) else {}


def _list(value):
    return value if isinstance(value, list) else []


def _merge_metadata(obj, expected):
    """
    Add the expected labels and annotations that C{obj} lacks; values it has win.

    @return: whether C{obj} changed.
    """
    meta = obj.setdefault("metadata", {})
    wanted = expected.get("metadata") or {}
    changed = False
    for field in ("labels", "annotations"):
        current = _mapping(meta.get(field))
        merged = {**_mapping(wanted.get(field)), **current}
        if merged != current:
            meta[field] = merged
            changed = True
    return changed


def _selectors(role):
    return _list(_mapping(role.get("aggregationRule")).get("clusterRoleSelectors"))


def reconcile_role(expected, existing):
    """
    Reconcile a Role or ClusterRole.

    Rules of C{expected} that the stored rules do not cover are appended
    whole; the stored rules stay. An aggregated role's rules belong to the
    aggregation controller, so only its selectors are reconciled, and a role
    that bootstrap policy does not aggregate loses a stored aggregationRule
    (the controller would otherwise replace its rules).

    @param expected: the bootstrap object.
    @param existing: the stored object, or None when there is none.
    @rtype: L{Reconciliation}
    """
    if existing is None:
        return Reconciliation(CREATE, copy.deepcopy(expected),
                              missing_rules=_list(expected.get("rules")),
                              missing_selectors=_selectors(expected))
    if is_protected(existing):
        return Reconciliation(NONE, protected=True)
    obj = copy.deepcopy(existing)
    changed = _merge_metadata(obj, expected)
    missing_rules, missing_selectors = [], []
    if "aggregationRule" in expected:
        have = _selectors(obj)
        missing_selectors = [s for s in _selectors(expected) if s not in have]
        if missing_selectors:
            aggregation = _mapping(obj.get("aggregationRule"))
            obj["aggregationRule"] = {**aggregation,
                                      "clusterRoleSelectors": have + missing_selectors}
            changed = True
    else:
        stored_rules = _list(obj.get("rules"))
        missing_rules = [r for r in _list(expected.get("rules")) if uncovered(stored_rules, [r])]
        if missing_rules:
            obj["rules"] = stored_rules + copy.deepcopy(missing_rules)
            changed = True
        if obj.get("aggregationRule") is not None:
            del obj["aggregationRule"]
            changed = True
    if not changed:
        return Reconciliation(NONE)
    return Reconciliation(UPDATE, obj, missing_rules=missing_rules,
                          missing_selectors=missing_selectors)


def _role_ref(binding):
    ref = _mapping(binding.get("roleRef"))
    return ref.get("apiGroup") or "", ref.get("kind") or "", ref.get("name") or ""


def subject_key(subject):
    """
    A subject in a comparable form, with the API group its kind defaults to.

    Users and groups belong to the RBAC group, service accounts to the core
    group, whether or not the stored subject spells it out.
    """
    subject = _mapping(subject)
    kind = subject.get("kind") or ""
    default_group = "" if kind == "ServiceAccount" else RBAC
    return (kind, subject.get("apiGroup") or default_group, subject.get("name") or "",
            subject.get("namespace") or "")


def reconcile_binding(expected, existing):
    """
    Reconcile a RoleBinding or ClusterRoleBinding.

    Expected subjects missing from the stored binding are appended; the
    stored ones stay. A different C{roleRef} means the binding is recreated
    from C{expected}.

    @param expected: the bootstrap object.
    @param existing: the stored object, or None when there is none.
    @rtype: L{Reconciliation}
    """
    if existing is None:
        return Reconciliation(CREATE, copy.deepcopy(expected),
                              missing_subjects=_list(expected.get("subjects")))
    if is_protected(existing):
        return Reconciliation(NONE, protected=True)
    if _role_ref(existing) != _role_ref(expected):
        return Reconciliation(RECREATE, copy.deepcopy(expected),
                              missing_subjects=_list(expected.get("subjects")))
    obj = copy.deepcopy(existing)
    changed = _merge_metadata(obj, expected)
    stored_subjects = _list(obj.get("subjects"))
    have = {subject_key(s) for s in stored_subjects}
    missing = [s for s in _list(expected.get("subjects")) if subject_key(s) not in have]
    if missing:
        obj["subjects"] = stored_subjects + copy.deepcopy(missing)
        changed = True
    if not changed:
        return Reconciliation(NONE)
    return Reconciliation(UPDATE, obj, missing_subjects=missing)


def reconcile(resource, expected, existing):
    """L{reconcile_role} or L{reconcile_binding}, as the resource name says."""
    if resource in ("roles", "clusterroles"):
        return reconcile_role(expected, existing)
    return reconcile_binding(expected, existing)
