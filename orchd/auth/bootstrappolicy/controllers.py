# -*- test-case-name: tests.auth.test_bootstrappolicy -*-
"""
The roles of the built-in controllers: C{system:controller:<name>}.

Each is bound to the service account C{<name>} in C{orch-system}, so a
controller that runs with its own identity gets exactly these rights.
Upstream's list, less the controllers that have nothing to act on here:
the cloud ones (route, service load balancers) and those of kinds or groups
this server does not serve (resource claims, service CIDRs, validating
admission policies, storage versions and their migration, volume
attributes classes). The autoscaler's rules on the custom and external
metrics groups are left out with those groups.
"""

from orchd.api.kinds import (
    APPS,
    AUTHORIZATION,
    AUTOSCALING,
    BATCH,
    CERTIFICATES,
    DISCOVERY,
    METRICS,
    POLICY,
    RBAC,
    STORAGE,
)
from orchd.auth.bootstrappolicy.clusterroles import (
    SIGNER_KUBE_APISERVER_CLIENT_ORCHLET,
    SIGNER_ORCHLET_SERVING,
    SIGNERS,
)
from orchd.auth.bootstrappolicy.objects import (
    CONTROLLER_NAMESPACE,
    CONTROLLER_ROLE_PREFIX,
    READ,
    cluster_role,
    cluster_role_binding,
    events_rule,
    service_account,
)
from orchd.auth.rbac.rules import rule

#: The config map the legacy token tracker keeps in C{orch-system}.
LEGACY_TOKEN_TRACKING_CONFIGMAP = "kube-apiserver-legacy-service-account-token-tracking"

_CSR = "certificatesigningrequests"

#: Controller name -> its rules.
CONTROLLER_RULES = {
    "attachdetach-controller": (
        rule(["list", "watch"], [""], ["persistentvolumes", "persistentvolumeclaims"]),
        rule(READ, [""], ["nodes"]),
        rule(["patch", "update"], [""], ["nodes/status"]),
        rule(["list", "watch"], [""], ["pods"]),
        events_rule(),
        rule(["get", "create", "delete", "list", "watch"], [STORAGE], ["volumeattachments"]),
        rule(["get", "watch", "list"], [STORAGE], ["csidrivers"]),
        rule(["get", "watch", "list"], [STORAGE], ["csinodes"]),
    ),
    # It must be able to change cluster roles in any way, hence escalate.
    "clusterrole-aggregation-controller": (
        rule(["escalate", "get", "list", "watch", "update", "patch"], [RBAC], ["clusterroles"]),
    ),
    "cronjob-controller": (
        rule(["get", "list", "watch", "update"], [BATCH], ["cronjobs"]),
        rule(["get", "list", "watch", "create", "update", "delete", "patch"], [BATCH], ["jobs"]),
        rule(["update"], [BATCH], ["cronjobs/status"]),
        rule(["update"], [BATCH], ["cronjobs/finalizers"]),
        rule(["list", "delete"], [""], ["pods"]),
        events_rule(),
    ),
    "daemon-set-controller": (
        rule(READ, [APPS], ["daemonsets"]),
        rule(["update"], [APPS], ["daemonsets/status"]),
        rule(["update"], [APPS], ["daemonsets/finalizers"]),
        rule(["list", "watch"], [""], ["nodes"]),
        rule(["list", "watch", "create", "delete", "patch"], [""], ["pods"]),
        rule(["create"], [""], ["pods/binding"]),
        rule(["get", "list", "watch", "create", "delete", "update", "patch"], [APPS],
             ["controllerrevisions"]),
        events_rule(),
    ),
    "deployment-controller": (
        rule(["get", "list", "watch", "update"], [APPS], ["deployments"]),
        rule(["update"], [APPS], ["deployments/status"]),
        rule(["update"], [APPS], ["deployments/finalizers"]),
        rule(["get", "list", "watch", "create", "update", "patch", "delete"], [APPS],
             ["replicasets"]),
        # Update stays until pods no longer need it for adoption.
        rule(["get", "list", "watch", "update"], [""], ["pods"]),
        events_rule(),
    ),
    "disruption-controller": (
        rule(READ, [APPS], ["deployments"]),
        rule(READ, [APPS], ["replicasets"]),
        rule(READ, [""], ["replicationcontrollers"]),
        rule(READ, [POLICY], ["poddisruptionbudgets"]),
        rule(READ, [APPS], ["statefulsets"]),
        rule(["update"], [POLICY], ["poddisruptionbudgets/status"]),
        rule(["patch", "update"], [""], ["pods/status"]),
        rule(["get"], ["*"], ["*/scale"]),
        events_rule(),
    ),
    "endpoint-controller": (
        rule(READ, [""], ["services", "pods"]),
        rule(["get", "list", "create", "update", "delete"], [""], ["endpoints"]),
        rule(["create"], [""], ["endpoints/restricted"]),
        events_rule(),
    ),
    "endpointslice-controller": (
        rule(READ, [""], ["services", "pods", "nodes"]),
        # Slices owned by a service block its deletion, which takes its finalizers.
        rule(["update"], [""], ["services/finalizers"]),
        rule(["get", "list", "create", "update", "delete"], [DISCOVERY], ["endpointslices"]),
        events_rule(),
    ),
    "endpointslicemirroring-controller": (
        rule(READ, [""], ["services", "endpoints"]),
        rule(["update"], [""], ["services/finalizers"]),
        rule(["update"], [""], ["endpoints/finalizers"]),
        rule(["get", "list", "create", "update", "delete"], [DISCOVERY], ["endpointslices"]),
        events_rule(),
    ),
    "expand-controller": (
        rule(["get", "list", "watch", "update", "patch"], [""], ["persistentvolumes"]),
        rule(["update", "patch"], [""], ["persistentvolumeclaims/status"]),
        rule(READ, [""], ["persistentvolumeclaims"]),
        rule(READ, [STORAGE], ["storageclasses"]),
        rule(["get"], [""], ["services", "endpoints"]),
        rule(["get"], [""], ["secrets"]),
        events_rule(),
    ),
    "ephemeral-volume-controller": (
        rule(READ, [""], ["pods"]),
        rule(["update"], [""], ["pods/finalizers"]),
        rule(["get", "list", "watch", "create"], [""], ["persistentvolumeclaims"]),
        events_rule(),
    ),
    # Lists, watches and updates any resource to find and remove dependents.
    "generic-garbage-collector": (
        rule(["get", "list", "watch", "patch", "update", "delete"], ["*"], ["*"]),
        events_rule(),
    ),
    "horizontal-pod-autoscaler": (
        rule(READ, [AUTOSCALING], ["horizontalpodautoscalers"]),
        rule(["update"], [AUTOSCALING], ["horizontalpodautoscalers/status"]),
        rule(["get", "update"], ["*"], ["*/scale"]),
        rule(["list"], [""], ["pods"]),
        rule(["list"], [METRICS], ["pods"]),
        events_rule(),
    ),
    "job-controller": (
        rule(["get", "list", "watch", "update", "patch"], [BATCH], ["jobs"]),
        rule(["update"], [BATCH], ["jobs/status"]),
        rule(["update"], [BATCH], ["jobs/finalizers"]),
        rule(["list", "watch", "create", "delete", "patch"], [""], ["pods"]),
        events_rule(),
    ),
    "namespace-controller": (
        rule(["get", "list", "watch", "delete"], [""], ["namespaces"]),
        rule(["update"], [""], ["namespaces/finalize", "namespaces/status"]),
        rule(["get", "list", "delete", "deletecollection"], ["*"], ["*"]),
    ),
    "node-controller": (
        rule(["get", "list", "update", "delete", "patch"], [""], ["nodes"]),
        rule(["patch", "update"], [""], ["nodes/status"]),
        # Evicting pods from unreachable nodes.
        rule(["patch", "update"], [""], ["pods/status"]),
        rule(["list", "get", "delete"], [""], ["pods"]),
        events_rule(),
    ),
    "persistent-volume-binder": (
        rule(["get", "list", "watch", "update", "create", "delete"], [""], ["persistentvolumes"]),
        rule(["update"], [""], ["persistentvolumes/status"]),
        rule(["get", "list", "watch", "update"], [""], ["persistentvolumeclaims"]),
        rule(["update"], [""], ["persistentvolumeclaims/status"]),
        rule(["list", "watch", "get", "create", "delete"], [""], ["pods"]),
        rule(READ, [STORAGE], ["storageclasses"]),
        rule(["get", "create", "update", "delete"], [""], ["endpoints"]),
        rule(["get", "create", "delete"], [""], ["services"]),
        rule(["get"], [""], ["secrets"]),
        rule(["get", "list"], [""], ["nodes"]),
        # Following recycler pods.
        rule(["watch"], [""], ["events"]),
        events_rule(),
    ),
    "pod-garbage-collector": (
        rule(["list", "watch", "delete"], [""], ["pods"]),
        rule(["get", "list"], [""], ["nodes"]),
        rule(["patch"], [""], ["pods/status"]),
    ),
    "replicaset-controller": (
        rule(["get", "list", "watch", "update"], [APPS], ["replicasets"]),
        rule(["update"], [APPS], ["replicasets/status"]),
        rule(["update"], [APPS], ["replicasets/finalizers"]),
        rule(["list", "watch", "patch", "create", "delete"], [""], ["pods"]),
        events_rule(),
    ),
    "replication-controller": (
        rule(["get", "list", "watch", "update"], [""], ["replicationcontrollers"]),
        rule(["update"], [""], ["replicationcontrollers/status"]),
        rule(["update"], [""], ["replicationcontrollers/finalizers"]),
        rule(["list", "watch", "patch", "create", "delete"], [""], ["pods"]),
        events_rule(),
    ),
    # Quota may count anything, so it sees everything.
    "resourcequota-controller": (
        rule(["list", "watch"], ["*"], ["*"]),
        rule(["update"], [""], ["resourcequotas/status"]),
        events_rule(),
    ),
    "service-account-controller": (
        rule(["create"], [""], ["serviceaccounts"]),
        events_rule(),
    ),
    "statefulset-controller": (
        rule(["list", "watch"], [""], ["pods"]),
        rule(READ, [APPS], ["statefulsets"]),
        rule(["update"], [APPS], ["statefulsets/status"]),
        rule(["update"], [APPS], ["statefulsets/finalizers"]),
        rule(["get", "create", "delete", "update", "patch"], [""], ["pods"]),
        rule(["get", "create", "delete", "update", "patch", "list", "watch"], [APPS],
             ["controllerrevisions"]),
        rule(["get", "create"], [""], ["persistentvolumeclaims"]),
        events_rule(),
        # Deleting the claims of removed replicas, when the set asks for it.
        rule(["update", "delete"], [""], ["persistentvolumeclaims"]),
    ),
    "ttl-controller": (
        rule(["update", "patch", "list", "watch"], [""], ["nodes"]),
        events_rule(),
    ),
    # Signing, approving and cleaning up certificate signing requests.
    "certificate-controller": (
        rule(["get", "list", "watch", "delete"], [CERTIFICATES], [_CSR]),
        rule(["update"], [CERTIFICATES], [_CSR + "/status", _CSR + "/approval"]),
        rule(["approve"], [CERTIFICATES], ["signers"],
             names=[SIGNER_KUBE_APISERVER_CLIENT_ORCHLET, SIGNER_ORCHLET_SERVING]),
        rule(["sign"], [CERTIFICATES], ["signers"], names=SIGNERS),
        rule(["create"], [AUTHORIZATION], ["subjectaccessreviews"]),
        events_rule(),
    ),
    "pvc-protection-controller": (
        rule(["get", "list", "watch", "update"], [""], ["persistentvolumeclaims"]),
        rule(["list", "watch", "get"], [""], ["pods"]),
        events_rule(),
    ),
    "pv-protection-controller": (
        rule(["get", "list", "watch", "update"], [""], ["persistentvolumes"]),
        events_rule(),
    ),
    "ttl-after-finished-controller": (
        rule(["get", "list", "watch", "delete"], [BATCH], ["jobs"]),
        events_rule(),
    ),
    # Publishing the cluster CA to every namespace.
    "root-ca-cert-publisher": (
        rule(["create", "update"], [""], ["configmaps"]),
        events_rule(),
    ),
    "legacy-service-account-token-cleaner": (
        rule(["get"], [""], ["configmaps"], names=[LEGACY_TOKEN_TRACKING_CONFIGMAP]),
        rule(["patch", "delete"], [""], ["secrets"]),
    ),
}


def controller_role_name(controller):
    return CONTROLLER_ROLE_PREFIX + controller


CONTROLLER_ROLES = tuple(cluster_role(controller_role_name(name), rules)
                         for name, rules in CONTROLLER_RULES.items())

CONTROLLER_ROLE_BINDINGS = tuple(
    cluster_role_binding(controller_role_name(name), service_account(CONTROLLER_NAMESPACE, name))
    for name in CONTROLLER_RULES)
