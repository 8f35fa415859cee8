# -*- test-case-name: tests.api.test_discovery,tests.api.test_versions,tests.api.test_meta -*-
"""
Every resource kind the API serves: one row each.

A row names the group, version, plural resource, kind, scope, short names,
verbs and subresources; what a kind does beyond generic storage lives in
its strategy (C{orchd.registry.kinds}). Adding a kind is one row here.
"""

STANDARD_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
NO_COLLECTION_DELETE = ("create", "delete", "get", "list", "patch", "update", "watch")
CREATE_ONLY = ("create",)
READ_ONLY = ("get", "list")

#: Verbs of the subresources the generic registry serves.
SUBRESOURCE_VERBS = {
    "status": ("get", "patch", "update"),
    "finalize": ("update",),
    "approval": ("get", "patch", "update"),
    "token": ("create",),
    "proxy": ("create", "delete", "get", "patch", "update"),
    "log": ("get",),
}

#: Subresources answered with a raw stream from elsewhere (the node agent),
#: not with API objects: an L{orchd.registry.catalog.IStreamConnector} serves them.
STREAM_SUBRESOURCES = frozenset(("proxy", "log"))

# Name rules, as the upstream validators name them.
SUBDOMAIN = "subdomain"          # RFC 1123 subdomain, at most 253 characters
LABEL = "label"                  # RFC 1123 label, at most 63 characters
DNS1035 = "dns1035"              # RFC 1035 label: starts with a letter
PATH_SEGMENT = "path-segment"    # anything that is a valid URL path segment


class KindInfo:
    """
    One served resource: C{(group, version, resource)} and what describes it.

    @ivar stored: False for kinds answered without storage (reviews, bindings).
    @ivar name_rule: which rule object names must follow.
    """

    __slots__ = (
        "group", "version", "resource", "kind", "namespaced", "short_names", "verbs",
        "subresources", "categories", "name_rule", "stored", "singular",
    )

    def __init__(self, group, version, resource, kind, namespaced, short_names=(),
                 verbs=STANDARD_VERBS, subresources=(), categories=(), name_rule=SUBDOMAIN,
                 stored=True):
        self.group = group
        self.version = version
        self.resource = resource
        self.kind = kind
        self.namespaced = namespaced
        self.short_names = tuple(short_names)
        self.verbs = tuple(verbs)
        self.subresources = tuple(subresources)
        self.categories = tuple(categories)
        self.name_rule = name_rule
        self.stored = stored
        self.singular = kind.lower()

    @property
    def group_version(self):
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self):
        """The C{apiVersion} objects of this kind carry."""
        return self.group_version

    @property
    def list_kind(self):
        return self.kind + "List"

    @property
    def qualified_resource(self):
        """C{configmaps}, C{deployments.apps}: the name used in messages."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def stage(self):
        """C{alpha}, C{beta} or C{stable}, read off the version name."""
        if "alpha" in self.version:
            return "alpha"
        if "beta" in self.version:
            return "beta"
        return "stable"

    @property
    def has_status(self):
        return "status" in self.subresources

    def key_prefix(self, namespace=None):
        """
        The storage prefix of this resource, or of one namespace of it.

        Keys are C{/registry/[<group>/]<resource>/[<namespace>/]<name>}; the
        core group has no segment of its own.
        """
        base = f"/registry/{self.group}/{self.resource}/" if self.group else f"/registry/{self.resource}/"
        if namespace:
            return f"{base}{namespace}/"
        return base

    def key(self, namespace, name):
        return f"{self.key_prefix(namespace if self.namespaced else None)}{name}"

    def __repr__(self):
        return f"<KindInfo {self.group_version} {self.resource}>"


def subresource_kind(info, subresource):
    """
    The kind a subresource sends and answers: its parent's, except for the
    subresources that take an object of their own (C{serviceaccounts/token}
    takes a TokenRequest).
    """
    own = _SUBRESOURCE_KINDS.get((info.group, info.resource, subresource))
    if own is None:
        return info
    group, version, kind = own
    return KindInfo(group, version, f"{info.resource}/{subresource}", kind, info.namespaced,
                    verbs=SUBRESOURCE_VERBS[subresource], stored=False)


def _ns(group, version, resource, kind, **kw):
    return KindInfo(group, version, resource, kind, True, **kw)


def _cluster(group, version, resource, kind, **kw):
    return KindInfo(group, version, resource, kind, False, **kw)


CORE = ""
ADMISSION = "admissionregistration.orch.io"
APIEXTENSIONS = "apiextensions.orch.io"
APIREGISTRATION = "apiregistration.orch.io"
APPS = "apps"
AUTHENTICATION = "authentication.orch.io"
AUTHORIZATION = "authorization.orch.io"
AUTOSCALING = "autoscaling"
BATCH = "batch"
CERTIFICATES = "certificates.orch.io"
COORDINATION = "coordination.orch.io"
DISCOVERY = "discovery.orch.io"
EVENTS = "events.orch.io"
FLOWCONTROL = "flowcontrol.apiserver.orch.io"
NETWORKING = "networking.orch.io"
NODE = "node.orch.io"
POLICY = "policy"
RBAC = "rbac.authorization.orch.io"
SCHEDULING = "scheduling.orch.io"
STORAGE = "storage.orch.io"

#: (group, resource, subresource) -> (group, version, kind) of the objects it takes.
_SUBRESOURCE_KINDS = {
    ("", "serviceaccounts", "token"): ("authentication.orch.io", "v1", "TokenRequest"),
}

_ALL = ("all",)
_STATUS = ("status",)

#: The resource-kinds table of the specification, plus the few non-stable
#: versions that C{--runtime-config} can switch on.
KINDS = (
    # core v1
    _ns(CORE, "v1", "bindings", "Binding", verbs=CREATE_ONLY, stored=False),
    _ns(CORE, "v1", "configmaps", "ConfigMap", short_names=("cm",)),
    _ns(CORE, "v1", "endpoints", "Endpoints", short_names=("ep",)),
    _ns(CORE, "v1", "events", "Event", short_names=("ev",)),
    _ns(CORE, "v1", "limitranges", "LimitRange", short_names=("limits",)),
    _ns(CORE, "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",),
        subresources=_STATUS),
    _ns(CORE, "v1", "pods", "Pod", short_names=("po",), subresources=("status", "log"),
        categories=_ALL),
    _ns(CORE, "v1", "podtemplates", "PodTemplate"),
    _ns(CORE, "v1", "replicationcontrollers", "ReplicationController", short_names=("rc",),
        subresources=_STATUS, categories=_ALL),
    _ns(CORE, "v1", "resourcequotas", "ResourceQuota", short_names=("quota",),
        subresources=_STATUS),
    _ns(CORE, "v1", "secrets", "Secret"),
    _ns(CORE, "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",),
        subresources=("token",)),
    _ns(CORE, "v1", "services", "Service", short_names=("svc",), subresources=_STATUS,
        categories=_ALL, name_rule=DNS1035),
    _cluster(CORE, "v1", "componentstatuses", "ComponentStatus", short_names=("cs",),
             verbs=READ_ONLY, stored=False),
    _cluster(CORE, "v1", "namespaces", "Namespace", short_names=("ns",),
             verbs=NO_COLLECTION_DELETE, subresources=("status", "finalize"), name_rule=LABEL),
    _cluster(CORE, "v1", "nodes", "Node", short_names=("no",), subresources=("status", "proxy")),
    _cluster(CORE, "v1", "persistentvolumes", "PersistentVolume", short_names=("pv",),
             subresources=_STATUS),
    # admissionregistration.orch.io/v1
    _cluster(ADMISSION, "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
    _cluster(ADMISSION, "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration"),
    # apiextensions.orch.io/v1
    _cluster(APIEXTENSIONS, "v1", "customresourcedefinitions", "CustomResourceDefinition",
             short_names=("crd", "crds"), subresources=_STATUS),
    # apiregistration.orch.io/v1
    _cluster(APIREGISTRATION, "v1", "apiservices", "APIService", subresources=_STATUS),
    # apps/v1
    _ns(APPS, "v1", "controllerrevisions", "ControllerRevision"),
    _ns(APPS, "v1", "daemonsets", "DaemonSet", short_names=("ds",), subresources=_STATUS,
        categories=_ALL),
    _ns(APPS, "v1", "deployments", "Deployment", short_names=("deploy",), subresources=_STATUS,
        categories=_ALL),
    _ns(APPS, "v1", "replicasets", "ReplicaSet", short_names=("rs",), subresources=_STATUS,
        categories=_ALL),
    _ns(APPS, "v1", "statefulsets", "StatefulSet", short_names=("sts",), subresources=_STATUS,
        categories=_ALL),
    # authentication.orch.io
    _cluster(AUTHENTICATION, "v1", "tokenreviews", "TokenReview", verbs=CREATE_ONLY, stored=False),
    _cluster(AUTHENTICATION, "v1", "selfsubjectreviews", "SelfSubjectReview", verbs=CREATE_ONLY,
             stored=False),
    _cluster(AUTHENTICATION, "v1beta1", "tokenreviews", "TokenReview", verbs=CREATE_ONLY,
             stored=False),
    # authorization.orch.io
    _ns(AUTHORIZATION, "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview",
        verbs=CREATE_ONLY, stored=False),
    _cluster(AUTHORIZATION, "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
             verbs=CREATE_ONLY, stored=False),
    _cluster(AUTHORIZATION, "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview",
             verbs=CREATE_ONLY, stored=False),
    _cluster(AUTHORIZATION, "v1", "subjectaccessreviews", "SubjectAccessReview",
             verbs=CREATE_ONLY, stored=False),
    _cluster(AUTHORIZATION, "v1beta1", "subjectaccessreviews", "SubjectAccessReview",
             verbs=CREATE_ONLY, stored=False),
    # autoscaling/v2
    _ns(AUTOSCALING, "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler",
        short_names=("hpa",), subresources=_STATUS, categories=_ALL),
    # batch/v1
    _ns(BATCH, "v1", "cronjobs", "CronJob", short_names=("cj",), subresources=_STATUS,
        categories=_ALL),
    _ns(BATCH, "v1", "jobs", "Job", subresources=_STATUS, categories=_ALL),
    # certificates.orch.io/v1
    _cluster(CERTIFICATES, "v1", "certificatesigningrequests", "CertificateSigningRequest",
             short_names=("csr",), subresources=("status", "approval")),
    # coordination.orch.io
    _ns(COORDINATION, "v1", "leases", "Lease"),
    _ns(COORDINATION, "v1alpha2", "leasecandidates", "LeaseCandidate"),
    # discovery.orch.io/v1
    _ns(DISCOVERY, "v1", "endpointslices", "EndpointSlice"),
    # events.orch.io/v1
    _ns(EVENTS, "v1", "events", "Event", short_names=("ev",)),
    # flowcontrol.apiserver.orch.io/v1beta2 (beta: off unless enabled)
    _cluster(FLOWCONTROL, "v1beta2", "flowschemas", "FlowSchema", subresources=_STATUS),
    _cluster(FLOWCONTROL, "v1beta2", "prioritylevelconfigurations", "PriorityLevelConfiguration",
             subresources=_STATUS),
    # networking.orch.io/v1
    _ns(NETWORKING, "v1", "ingresses", "Ingress", short_names=("ing",), subresources=_STATUS),
    _ns(NETWORKING, "v1", "networkpolicies", "NetworkPolicy", short_names=("netpol",)),
    _cluster(NETWORKING, "v1", "ingressclasses", "IngressClass"),
    # node.orch.io/v1
    _cluster(NODE, "v1", "runtimeclasses", "RuntimeClass"),
    # policy/v1
    _ns(POLICY, "v1", "poddisruptionbudgets", "PodDisruptionBudget", short_names=("pdb",),
        subresources=_STATUS),
    # rbac.authorization.orch.io/v1
    _ns(RBAC, "v1", "roles", "Role", name_rule=PATH_SEGMENT),
    _ns(RBAC, "v1", "rolebindings", "RoleBinding", name_rule=PATH_SEGMENT),
    _cluster(RBAC, "v1", "clusterroles", "ClusterRole", name_rule=PATH_SEGMENT),
    _cluster(RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", name_rule=PATH_SEGMENT),
    # scheduling.orch.io/v1
    _cluster(SCHEDULING, "v1", "priorityclasses", "PriorityClass", short_names=("pc",)),
    # storage.orch.io/v1
    _ns(STORAGE, "v1", "csistoragecapacities", "CSIStorageCapacity"),
    _cluster(STORAGE, "v1", "csidrivers", "CSIDriver"),
    _cluster(STORAGE, "v1", "csinodes", "CSINode"),
    _cluster(STORAGE, "v1", "storageclasses", "StorageClass", short_names=("sc",)),
    _cluster(STORAGE, "v1", "volumeattachments", "VolumeAttachment", subresources=_STATUS),
)


def group_versions(kinds=KINDS):
    """Every group/version of C{kinds}, in table order, without repeats."""
    seen = {}
    for info in kinds:
        seen.setdefault((info.group, info.version), None)
    return list(seen)


def key_prefix_of(group, resource, kinds=KINDS):
    """The storage prefix of a resource (the same for each of its versions)."""
    for info in kinds:
        if info.group == group and info.resource == resource:
            return info.key_prefix()
    raise LookupError(f"{resource}.{group}" if group else resource)
