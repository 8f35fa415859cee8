# -*- test-case-name: tests.auth.test_bootstrappolicy -*-
"""
Bootstrap roles and bindings that live in the system namespaces.

Upstream's namespaced defaults, moved to C{orch-system} and C{orch-public}
(the deprecated cloud-provider role is left out), plus the public read of
the signed C{cluster-info} config map that anonymous joiners need.
"""

from orchd.api.kinds import COORDINATION
from orchd.auth.bootstrappolicy.clusterroles import (
    KUBE_CONTROLLER_MANAGER,
    KUBE_SCHEDULER,
)
from orchd.auth.bootstrappolicy.objects import (
    CONTROLLER_NAMESPACE,
    CONTROLLER_ROLE_PREFIX,
    READ,
    events_rule,
    namespaced_role,
    namespaced_role_binding,
    service_account,
    user,
)
from orchd.auth.rbac.rules import rule
from orchd.auth.user import ANONYMOUS

SYSTEM = CONTROLLER_NAMESPACE
PUBLIC = "orch-public"

CLUSTER_INFO = "cluster-info"
#: Lets anonymous users read the signed C{cluster-info} config map.
CLUSTER_INFO_READER = "orch:bootstrap-signer-clusterinfo"
BOOTSTRAP_SIGNER = CONTROLLER_ROLE_PREFIX + "bootstrap-signer"
TOKEN_CLEANER = CONTROLLER_ROLE_PREFIX + "token-cleaner"
AUTHENTICATION_READER = "extension-apiserver-authentication-reader"


def _leader_locking(component):
    """Taking the leader lock of C{component}, as a config map or a lease."""
    return namespaced_role(SYSTEM, f"system::leader-locking-{component}", [
        rule(["watch"], [""], ["configmaps"]),
        rule(["get", "update"], [""], ["configmaps"], names=[component]),
        rule(["get", "watch", "list", "create", "update"], [COORDINATION], ["leases"]),
        rule(["get", "watch", "list", "create", "update"], [COORDINATION], ["leasecandidates"]),
    ])


NAMESPACED_ROLES = (
    # Finding the authentication settings a delegating server starts with.
    namespaced_role(SYSTEM, AUTHENTICATION_READER, [
        rule(READ, [""], ["configmaps"], names=["extension-apiserver-authentication"]),
    ]),
    # The bootstrap signer reads the token secrets ...
    namespaced_role(SYSTEM, BOOTSTRAP_SIGNER, [
        rule(READ, [""], ["secrets"]),
    ]),
    # ... and the token cleaner removes expired ones, in orch-system only.
    namespaced_role(SYSTEM, TOKEN_CLEANER, [
        rule(["get", "list", "watch", "delete"], [""], ["secrets"]),
        events_rule(),
    ]),
    _leader_locking("kube-controller-manager"),
    _leader_locking("kube-scheduler"),
    # The bootstrap signer writes its signatures into cluster-info.
    namespaced_role(PUBLIC, BOOTSTRAP_SIGNER, [
        rule(READ, [""], ["configmaps"]),
        rule(["update"], [""], ["configmaps"], names=[CLUSTER_INFO]),
        events_rule(),
    ]),
    namespaced_role(PUBLIC, CLUSTER_INFO_READER, [
        rule(["get"], [""], ["configmaps"], names=[CLUSTER_INFO]),
    ]),
)

NAMESPACED_ROLE_BINDINGS = (
    namespaced_role_binding(SYSTEM, AUTHENTICATION_READER, user(KUBE_CONTROLLER_MANAGER),
                            user(KUBE_SCHEDULER),
                            name="system::extension-apiserver-authentication-reader"),
    namespaced_role_binding(SYSTEM, "system::leader-locking-kube-controller-manager",
                            user(KUBE_CONTROLLER_MANAGER),
                            service_account(SYSTEM, "kube-controller-manager")),
    namespaced_role_binding(SYSTEM, "system::leader-locking-kube-scheduler",
                            user(KUBE_SCHEDULER), service_account(SYSTEM, "kube-scheduler")),
    namespaced_role_binding(SYSTEM, BOOTSTRAP_SIGNER,
                            service_account(SYSTEM, "bootstrap-signer")),
    namespaced_role_binding(SYSTEM, TOKEN_CLEANER, service_account(SYSTEM, "token-cleaner")),
    namespaced_role_binding(PUBLIC, BOOTSTRAP_SIGNER, service_account(SYSTEM, "bootstrap-signer")),
    # Joining nodes read cluster-info before they hold any credential.
    namespaced_role_binding(PUBLIC, CLUSTER_INFO_READER, user(ANONYMOUS)),
)
