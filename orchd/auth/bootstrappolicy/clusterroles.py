# -*- test-case-name: tests.auth.test_bootstrappolicy -*-
"""
The cluster-wide bootstrap roles and their bindings.

Contents follow upstream's default policy with the vendor domain renamed.
Rules on API groups this server does not serve are left out (the
C{extensions} group, custom and external metrics and dynamic resource
allocation), as are
roles for kinds it does not have (cluster trust bundles).
"""

from orchd.api.kinds import (
    APPS,
    AUTHENTICATION,
    AUTHORIZATION,
    AUTOSCALING,
    BATCH,
    CERTIFICATES,
    COORDINATION,
    DISCOVERY,
    METRICS,
    NETWORKING,
    POLICY,
    RBAC,
    STORAGE,
)
from orchd.auth.bootstrappolicy.objects import (
    CONTROLLER_NAMESPACE,
    READ,
    READ_UPDATE,
    READ_WRITE,
    WRITE,
    aggregate_to,
    cluster_role,
    cluster_role_binding,
    events_rule,
    group,
    service_account,
    user,
)
from orchd.auth.rbac.noderules import NODE_RULES
from orchd.auth.rbac.rules import rule
from orchd.auth.user import AUTHENTICATED, MASTERS, UNAUTHENTICATED

# Groups and users the default bindings name.
MONITORING = "system:monitoring"
SERVICE_ACCOUNTS = "system:serviceaccounts"
KUBE_PROXY = "system:kube-proxy"
KUBE_CONTROLLER_MANAGER = "system:kube-controller-manager"
KUBE_SCHEDULER = "system:kube-scheduler"
BOOTSTRAPPERS = "system:bootstrappers"
NODES = "system:nodes"
#: The API server's user towards orchlets (orchd.app.orchletclient).
ORCHLET_API_CLIENT = "orch-apiserver-orchlet-client"

# The built-in certificate signers.
SIGNER_KUBE_APISERVER_CLIENT = "orch.io/kube-apiserver-client"
SIGNER_KUBE_APISERVER_CLIENT_ORCHLET = "orch.io/kube-apiserver-client-orchlet"
SIGNER_ORCHLET_SERVING = "orch.io/orchlet-serving"
SIGNER_LEGACY_UNKNOWN = "orch.io/legacy-unknown"
SIGNERS = (SIGNER_LEGACY_UNKNOWN, SIGNER_KUBE_APISERVER_CLIENT,
           SIGNER_KUBE_APISERVER_CLIENT_ORCHLET, SIGNER_ORCHLET_SERVING)

_CSR = "certificatesigningrequests"
_CERTIFICATES_PREFIX = f"system:{CERTIFICATES}:"

HEALTH_URLS = ("/livez", "/readyz", "/healthz")
VERSION_URLS = ("/version", "/version/")


def _approver(name, signer):
    """A role that lets the CSR approver approve requests for one signer."""
    return cluster_role(_CERTIFICATES_PREFIX + name, [
        rule(["approve"], [CERTIFICATES], ["signers"], names=[signer]),
    ])


# -- everyone's roles ------------------------------------------------------------

_GENERAL = (
    # Anything at all.
    cluster_role("cluster-admin", [
        rule(["*"], ["*"], ["*"]),
        rule(["*"], urls=["*"]),
    ]),
    # Enough to tell whether the server is ready and which API versions it serves.
    cluster_role("system:discovery", [
        rule(["get"], urls=HEALTH_URLS + VERSION_URLS + (
            "/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*")),
    ]),
    # The monitoring endpoints; the per-check health paths may say more than the totals.
    cluster_role("system:monitoring", [
        rule(["get"], urls=("/metrics", "/metrics/slis") + HEALTH_URLS
             + ("/livez/*", "/readyz/*", "/healthz/*")),
    ]),
    # What a user may learn about itself.
    cluster_role("system:basic-user", [
        rule(["create"], [AUTHORIZATION], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
        rule(["create"], [AUTHENTICATION], ["selfsubjectreviews"]),
    ]),
    # Information that is not sensitive, for signed-in and anonymous users alike.
    cluster_role("system:public-info-viewer", [
        rule(["get"], urls=HEALTH_URLS + VERSION_URLS),
    ]),
)

# -- user-facing roles, filled by aggregation ------------------------------------

_AGGREGATED = (
    # A namespace's administrator: edit, plus granting permissions to others.
    cluster_role("admin", aggregate_from="admin"),
    # Every user-level action in a namespace, but not its quota, limits or roles.
    cluster_role("edit", labels=aggregate_to("admin"), aggregate_from="edit"),
    # Reading what does not escalate (so not secrets) in a namespace.
    cluster_role("view", labels=aggregate_to("edit"), aggregate_from="view"),
    # Reading resource metrics (kubectl top), as metrics-server's manifest grants it.
    cluster_role("system:aggregated-metrics-reader",
                 labels={**aggregate_to("view"), **aggregate_to("edit"), **aggregate_to("admin")},
                 rules=[rule(READ, [METRICS], ["pods", "nodes"])]),
    cluster_role("system:aggregate-to-admin", labels=aggregate_to("admin"), rules=[
        rule(["create"], [AUTHORIZATION], ["localsubjectaccessreviews"]),
        rule(READ_WRITE, [RBAC], ["roles", "rolebindings"]),
    ]),
    cluster_role("system:aggregate-to-edit", labels=aggregate_to("edit"), rules=[
        # Reading what can escalate.
        rule(READ, [""], ["pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets",
                          "services/proxy"]),
        rule(["impersonate"], [""], ["serviceaccounts"]),
        rule(WRITE, [""], ["pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"]),
        rule(["create"], [""], ["pods/eviction"]),
        rule(WRITE, [""], ["replicationcontrollers", "replicationcontrollers/scale",
                           "serviceaccounts", "services", "services/proxy",
                           "persistentvolumeclaims", "configmaps", "secrets", "events"]),
        rule(["create"], [""], ["serviceaccounts/token"]),
        rule(WRITE, [APPS], ["statefulsets", "statefulsets/scale", "daemonsets", "deployments",
                             "deployments/scale", "deployments/rollback", "replicasets",
                             "replicasets/scale"]),
        rule(WRITE, [AUTOSCALING], ["horizontalpodautoscalers"]),
        rule(WRITE, [BATCH], ["jobs", "cronjobs"]),
        rule(WRITE, [POLICY], ["poddisruptionbudgets"]),
        rule(WRITE, [NETWORKING], ["networkpolicies", "ingresses"]),
        rule(READ_WRITE, [COORDINATION], ["leases"]),
    ]),
    cluster_role("system:aggregate-to-view", labels=aggregate_to("view"), rules=[
        rule(READ, [""], ["pods", "replicationcontrollers", "replicationcontrollers/scale",
                          "serviceaccounts", "services", "services/status", "endpoints",
                          "persistentvolumeclaims", "persistentvolumeclaims/status",
                          "configmaps"]),
        rule(READ, [""], ["limitranges", "resourcequotas", "bindings", "events", "pods/status",
                          "resourcequotas/status", "namespaces/status",
                          "replicationcontrollers/status", "pods/log"]),
        # Reading namespaces at namespace scope means reading that one namespace.
        rule(READ, [""], ["namespaces"]),
        rule(READ, [DISCOVERY], ["endpointslices"]),
        rule(READ, [APPS], ["controllerrevisions", "statefulsets", "statefulsets/status",
                            "statefulsets/scale", "daemonsets", "daemonsets/status",
                            "deployments", "deployments/status", "deployments/scale",
                            "replicasets", "replicasets/status", "replicasets/scale"]),
        rule(READ, [AUTOSCALING], ["horizontalpodautoscalers",
                                   "horizontalpodautoscalers/status"]),
        rule(READ, [BATCH], ["jobs", "cronjobs", "cronjobs/status", "jobs/status"]),
        rule(READ, [POLICY], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
        rule(READ, [NETWORKING], ["networkpolicies", "ingresses", "ingresses/status"]),
    ]),
)

# -- component roles -------------------------------------------------------------

_COMPONENTS = (
    cluster_role("system:heapster", [
        rule(READ, [""], ["events", "pods", "nodes", "namespaces"]),
    ]),
    # The node agent's rules; the Node authorizer grants them, the binding names no one.
    cluster_role("system:node", NODE_RULES),
    # Not bound: where the node problem detector runs varies.
    cluster_role("system:node-problem-detector", [
        rule(["get"], [""], ["nodes"]),
        rule(["patch"], [""], ["nodes/status"]),
        events_rule(),
    ]),
    # Requesting a node's first client certificate, and waiting for it.
    cluster_role("system:node-bootstrapper", [
        rule(["create", "get", "list", "watch"], [CERTIFICATES], [_CSR]),
    ]),
    # Delegating authentication and authorization to this server (non-mutating creates).
    cluster_role("system:auth-delegator", [
        rule(["create"], [AUTHENTICATION], ["tokenreviews"]),
        rule(["create"], [AUTHORIZATION], ["subjectaccessreviews"]),
    ]),
    # Seeing every service, to know whether the ones an APIService points to exist.
    cluster_role("system:kube-aggregator", [
        rule(READ, [""], ["services", "endpoints"]),
    ]),
    # Enough for a controller manager to start its informers and hand out identities.
    cluster_role("system:kube-controller-manager", [
        events_rule(),
        # Leader election.
        rule(["create"], [COORDINATION], ["leases"]),
        rule(["get", "update"], [COORDINATION], ["leases"], names=["kube-controller-manager"]),
        rule(["create"], [""], ["secrets", "serviceaccounts"]),
        rule(["delete"], [""], ["secrets"]),
        rule(["get"], [""], ["namespaces", "secrets", "serviceaccounts", "configmaps"]),
        rule(["update"], [""], ["secrets", "serviceaccounts"]),
        rule(["create"], [AUTHENTICATION], ["tokenreviews"]),
        rule(["create"], [AUTHORIZATION], ["subjectaccessreviews"]),
        # Every shared informer.
        rule(["list", "watch"], ["*"], ["*"]),
        rule(["create"], [""], ["serviceaccounts/token"]),
    ]),
    cluster_role("system:kube-dns", [
        rule(["list", "watch"], [""], ["endpoints", "services"]),
    ]),
    # An out-of-tree persistent volume provisioner.
    cluster_role("system:persistent-volume-provisioner", [
        rule(["get", "list", "watch", "create", "delete"], [""], ["persistentvolumes"]),
        # Update sets lock annotations on claims.
        rule(["get", "list", "watch", "update"], [""], ["persistentvolumeclaims"]),
        rule(READ, [STORAGE], ["storageclasses"]),
        # Watching for provisioning success and failure.
        rule(["watch"], [""], ["events"]),
        events_rule(),
    ]),
    # Letting the CSR approver approve node client certificates.
    cluster_role(_CERTIFICATES_PREFIX + "certificatesigningrequests:nodeclient", [
        rule(["create"], [CERTIFICATES], [_CSR + "/nodeclient"]),
    ]),
    cluster_role(_CERTIFICATES_PREFIX + "certificatesigningrequests:selfnodeclient", [
        rule(["create"], [CERTIFICATES], [_CSR + "/selfnodeclient"]),
    ]),
    cluster_role("system:volume-scheduler", [
        rule(READ_UPDATE, [""], ["persistentvolumes"]),
        rule(READ, [STORAGE], ["storageclasses"]),
        rule(READ_UPDATE, [""], ["persistentvolumeclaims"]),
    ]),
    _approver("legacy-unknown-approver", SIGNER_LEGACY_UNKNOWN),
    _approver("orchlet-serving-approver", SIGNER_ORCHLET_SERVING),
    _approver("kube-apiserver-client-approver", SIGNER_KUBE_APISERVER_CLIENT),
    _approver("kube-apiserver-client-orchlet-approver", SIGNER_KUBE_APISERVER_CLIENT_ORCHLET),
    # The service-account issuer's OpenID discovery documents (with and without the slash
    # that clients generated from older published documents add).
    cluster_role("system:service-account-issuer-discovery", [
        rule(["get"], urls=["/.well-known/openid-configuration",
                            "/.well-known/openid-configuration/",
                            "/openid/v1/jwks", "/openid/v1/jwks/"]),
    ]),
    # Everything a node agent's own API offers (upstream's system:kubelet-api-admin).
    cluster_role("system:orchlet-api-admin", [
        rule(READ, [""], ["nodes"]),
        rule(["proxy"], [""], ["nodes"]),
        rule(["*"], [""], ["nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log",
                           "nodes/spec"]),
        rule(["*"], [""], ["nodes/pods", "nodes/healthz", "nodes/configz"]),
    ]),
    # A service proxy.
    cluster_role("system:node-proxier", [
        rule(["list", "watch"], [""], ["services", "endpoints"]),
        rule(READ, [""], ["nodes"]),
        events_rule(),
        rule(["list", "watch"], [DISCOVERY], ["endpointslices"]),
    ]),
    cluster_role("system:kube-scheduler", [
        events_rule(),
        # Leader election.
        rule(["create"], [COORDINATION], ["leases"]),
        rule(["get", "update", "list", "watch"], [COORDINATION], ["leases"],
             names=["kube-scheduler"]),
        rule(READ_WRITE, [COORDINATION], ["leasecandidates"]),
        rule(READ, [""], ["nodes"]),
        rule(["get", "list", "watch", "delete"], [""], ["pods"]),
        rule(["create"], [""], ["pods/binding", "bindings"]),
        rule(["patch", "update"], [""], ["pods/status"]),
        # What selects pods.
        rule(READ, [""], ["services", "replicationcontrollers"]),
        rule(READ, [APPS], ["replicasets"]),
        rule(READ, [APPS], ["statefulsets"]),
        # What pods use, or what applies to them.
        rule(READ, [POLICY], ["poddisruptionbudgets"]),
        rule(READ, [""], ["persistentvolumeclaims", "persistentvolumes"]),
        rule(["create"], [AUTHENTICATION], ["tokenreviews"]),
        rule(["create"], [AUTHORIZATION], ["subjectaccessreviews"]),
        # Volume limits.
        rule(READ, [STORAGE], ["csinodes"]),
        rule(READ, [STORAGE], ["volumeattachments"]),
        # Namespace selectors of pod affinity.
        rule(READ, [""], ["namespaces"]),
        rule(READ, [STORAGE], ["csidrivers"]),
        rule(READ, [STORAGE], ["csistoragecapacities"]),
    ]),
)

CLUSTER_ROLES = _GENERAL + _AGGREGATED + _COMPONENTS

CLUSTER_ROLE_BINDINGS = (
    cluster_role_binding("cluster-admin", group(MASTERS)),
    cluster_role_binding("system:monitoring", group(MONITORING)),
    cluster_role_binding("system:discovery", group(AUTHENTICATED)),
    cluster_role_binding("system:basic-user", group(AUTHENTICATED)),
    cluster_role_binding("system:public-info-viewer", group(AUTHENTICATED),
                         group(UNAUTHENTICATED)),
    cluster_role_binding("system:node-proxier", user(KUBE_PROXY)),
    cluster_role_binding("system:kube-controller-manager", user(KUBE_CONTROLLER_MANAGER)),
    cluster_role_binding("system:kube-dns", service_account(CONTROLLER_NAMESPACE, "kube-dns")),
    cluster_role_binding("system:kube-scheduler", user(KUBE_SCHEDULER)),
    cluster_role_binding("system:volume-scheduler", user(KUBE_SCHEDULER)),
    # The API server reaches orchlets (nodes/proxy, pods/log) as this user.
    cluster_role_binding("system:orchlet-api-admin", user(ORCHLET_API_CLIENT)),
    # Kept, but naming no one: the Node authorizer grants nodes their rules.
    cluster_role_binding("system:node"),
    # Every workload may read where its service-account tokens come from.
    cluster_role_binding("system:service-account-issuer-discovery", group(SERVICE_ACCOUNTS)),
    # Joining nodes (bootstrap token users) request their client certificates, which the
    # approver approves; nodes renew their own the same way (kubeadm's bindings).
    cluster_role_binding("system:node-bootstrapper", group(BOOTSTRAPPERS)),
    cluster_role_binding(_CERTIFICATES_PREFIX + "certificatesigningrequests:nodeclient",
                         group(BOOTSTRAPPERS),
                         name=_CERTIFICATES_PREFIX + "bootstrap-autoapprove"),
    cluster_role_binding(_CERTIFICATES_PREFIX + "certificatesigningrequests:selfnodeclient",
                         group(NODES),
                         name=_CERTIFICATES_PREFIX + "node-autoapprove-certificate-rotation"),
)
