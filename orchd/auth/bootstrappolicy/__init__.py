# -*- test-case-name: tests.auth.test_bootstrappolicy -*-
"""
The default RBAC policy, created and kept up to date at every start.

The tables (L{clusterroles}, L{controllers}, L{namespaced}) say what
bootstrap policy grants; L{reconcile} decides, object by object, what to
write so the stored policy grants at least that. Writing it through the
registry is a start-up task of the application, L{orchd.app.bootstrappolicy}:
authorization sits below the registry and does not write through it.
"""

from orchd.auth.bootstrappolicy.objects import (
    AUTOUPDATE_ANNOTATION,
    BOOTSTRAP_LABEL,
    BOOTSTRAP_LABEL_VALUE,
)
from orchd.auth.bootstrappolicy.policy import bootstrap_policy, object_ref
from orchd.auth.bootstrappolicy.reconcile import (
    CREATE,
    NONE,
    RECREATE,
    UPDATE,
    Reconciliation,
    reconcile,
    reconcile_binding,
    reconcile_role,
)

__all__ = [
    "AUTOUPDATE_ANNOTATION", "BOOTSTRAP_LABEL", "BOOTSTRAP_LABEL_VALUE", "CREATE", "NONE",
    "RECREATE", "UPDATE", "Reconciliation", "bootstrap_policy", "object_ref", "reconcile",
    "reconcile_binding", "reconcile_role",
]
