# -*- test-case-name: tests.auth.test_bootstrappolicy -*-
"""Every bootstrap RBAC object, in the order they are written."""

import copy

from orchd.auth.bootstrappolicy.clusterroles import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES
from orchd.auth.bootstrappolicy.controllers import (
    CONTROLLER_ROLE_BINDINGS,
    CONTROLLER_ROLES,
)
from orchd.auth.bootstrappolicy.namespaced import (
    NAMESPACED_ROLE_BINDINGS,
    NAMESPACED_ROLES,
)

# Roles come before the bindings that name them.
_TABLES = (
    ("clusterroles", CLUSTER_ROLES + CONTROLLER_ROLES),
    ("clusterrolebindings", CLUSTER_ROLE_BINDINGS + CONTROLLER_ROLE_BINDINGS),
    ("roles", NAMESPACED_ROLES),
    ("rolebindings", NAMESPACED_ROLE_BINDINGS),
)


def bootstrap_policy():
    """
    The bootstrap objects as C{(resource, object)} pairs.

    @return: a list of fresh copies, which the caller may change or store.
    """
    return [(resource, copy.deepcopy(obj)) for resource, objects in _TABLES for obj in objects]


def object_ref(resource, obj):
    """C{clusterroles/<name>} or C{roles/<namespace>/<name>}: an object's name in logs."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return "/".join(filter(None, (resource, namespace, meta.get("name", ""))))
