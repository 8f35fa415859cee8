# -*- test-case-name: tests.auth.test_bootstrappolicy -*-
"""
The shapes of bootstrap RBAC objects, and the marks every one of them carries.

The policy tables are written with these builders, so each object comes out
with the C{orch.io/bootstrapping} label and the autoupdate annotation that
reconciliation looks for.
"""

from orchd.api.kinds import EVENTS, RBAC
from orchd.auth.rbac.rules import rule

API_VERSION = f"{RBAC}/v1"

BOOTSTRAP_LABEL = "orch.io/bootstrapping"
BOOTSTRAP_LABEL_VALUE = "rbac-defaults"
#: Set to C{"false"} on a stored object to keep reconciliation away from it.
AUTOUPDATE_ANNOTATION = f"{RBAC}/autoupdate"
AGGREGATE_TO_PREFIX = f"{RBAC}/aggregate-to-"

#: The namespace whose service accounts the built-in controllers run as.
CONTROLLER_NAMESPACE = "orch-system"
CONTROLLER_ROLE_PREFIX = "system:controller:"

READ = ("get", "list", "watch")
WRITE = ("create", "update", "patch", "delete", "deletecollection")
READ_WRITE = READ + WRITE
READ_UPDATE = READ + ("update", "patch")


def events_rule():
    """Writing events in both event groups, which almost every component does."""
    return rule(["create", "update", "patch"], ["", EVENTS], ["events"])


def aggregate_to(target):
    """The label that makes a cluster role's rules flow into C{admin}, C{edit} or C{view}."""
    return {AGGREGATE_TO_PREFIX + target: "true"}


def _metadata(name, namespace=None, labels=None):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**(labels or {}), BOOTSTRAP_LABEL: BOOTSTRAP_LABEL_VALUE}
    meta["annotations"] = {AUTOUPDATE_ANNOTATION: "true"}
    return meta


def cluster_role(name, rules=(), labels=None, aggregate_from=None):
    """
    A bootstrap ClusterRole.

    @param aggregate_from: C{"admin"}, C{"edit"} or C{"view"} for a role whose
        rules the aggregation controller collects from roles labelled for it;
        such a role is written with no rules of its own.
    """
    role = {"apiVersion": API_VERSION, "kind": "ClusterRole",
            "metadata": _metadata(name, labels=labels), "rules": list(rules)}
    if aggregate_from is not None:
        role["aggregationRule"] = {"clusterRoleSelectors": [
            {"matchLabels": aggregate_to(aggregate_from)}]}
    return role


def namespaced_role(namespace, name, rules):
    """A bootstrap Role in C{namespace}."""
    return {"apiVersion": API_VERSION, "kind": "Role",
            "metadata": _metadata(name, namespace), "rules": list(rules)}


def user(name):
    return {"kind": "User", "apiGroup": RBAC, "name": name}


def group(name):
    return {"kind": "Group", "apiGroup": RBAC, "name": name}


def service_account(namespace, name):
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def _binding(kind, meta, role_kind, role_name, subjects):
    binding = {"apiVersion": API_VERSION, "kind": kind, "metadata": meta,
               "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role_name}}
    if subjects:
        binding["subjects"] = list(subjects)
    return binding


def cluster_role_binding(role_name, *subjects, name=None):
    """A bootstrap ClusterRoleBinding, named after its role unless C{name} says otherwise."""
    return _binding("ClusterRoleBinding", _metadata(name or role_name), "ClusterRole",
                    role_name, subjects)


def namespaced_role_binding(namespace, role_name, *subjects, name=None, role_kind="Role"):
    """A bootstrap RoleBinding in C{namespace} (of a Role there, unless C{role_kind} says)."""
    return _binding("RoleBinding", _metadata(name or role_name, namespace), role_kind,
                    role_name, subjects)
