# -*- test-case-name: tests.registry.test_definitions -*-
"""
Every built-in kind the API serves: one row each.

A row names the group, version, plural resource, kind, scope, short names,
verbs and subresources of a kind, and whatever it has beyond the defaults:
its strategy (L{orchd.registry.kinds}), its schema
(L{orchd.api.schemadefs_core}, L{orchd.api.schemadefs_groups}), its
printer (L{orchd.api.printers}), its strategic merge patch metadata
(L{orchd.api.patchschema}) and its selectable fields. Adding a kind is one
row here; a kind with no rules of its own is just its names.

At start the rows that C{--runtime-config} enables are registered, in
table order, into the L{KindRegistry} the server follows
(L{builtin_registry}); a custom resource will be registered the same way.
"""

from orchd.api import autoscalingv1
from orchd.api import patchschema as patch
from orchd.api import schemadefs_core as core_schemas
from orchd.api import schemadefs_groups as group_schemas
from orchd.api.kinds import (
    ADMISSION, APIEXTENSIONS, APIREGISTRATION, APPS, AUTHENTICATION, AUTHORIZATION, AUTOSCALING,
    BATCH, CERTIFICATES, COORDINATION, CORE, CREATE_ONLY, DISCOVERY, DNS1035, EVENTS,
    FLOWCONTROL, LABEL, METRICS, NETWORKING, NO_COLLECTION_DELETE, NODE, PATH_SEGMENT, POLICY,
    RBAC, READ_ONLY, SCHEDULING, STORAGE, KindInfo,
)
from orchd.api.printers import cluster, core, events, networking, storage, workloads
from orchd.registry.converted import Conversion
from orchd.registry.definitions import KindDefinition, KindRegistry, enabled_definitions
from orchd.registry.kinds.batch import CronJobStrategy, JobStrategy
from orchd.registry.kinds.certificatesigningrequest import CertificateSigningRequestStrategy
from orchd.registry.kinds.configdata import ConfigMapStrategy, SecretStrategy
from orchd.registry.kinds.controllerrevision import ControllerRevisionStrategy
from orchd.registry.kinds.customresourcedefinition import CustomResourceDefinitionStrategy
from orchd.registry.kinds.disruptionbudget import PodDisruptionBudgetStrategy
from orchd.registry.kinds.event import (
    EVENT_FIELDS, EVENTS_V1_FIELDS, EventStrategy, EventsV1EventStrategy,
)
from orchd.registry.kinds.namespace import NamespaceStrategy
from orchd.registry.kinds.node import NodeStrategy
from orchd.registry.kinds.pod import POD_FIELDS, PodStrategy, PodTemplateStrategy
from orchd.registry.kinds.rbac import (
    ClusterRoleBindingStrategy, ClusterRoleStrategy, RoleBindingStrategy, RoleStrategy,
)
from orchd.registry.kinds.service import ServiceStrategy
from orchd.registry.kinds.volumes import PersistentVolumeClaimStrategy, PersistentVolumeStrategy
from orchd.registry.kinds.autoscaler import HorizontalPodAutoscalerStrategy
from orchd.registry.kinds.statusfields import IngressStrategy, VolumeAttachmentStrategy
from orchd.registry.kinds.webhookconfiguration import (
    MutatingWebhookConfigurationStrategy, WebhookConfigurationStrategy,
)
from orchd.registry.kinds.workloads import (
    DaemonSetStrategy, DeploymentStrategy, ReplicaSetStrategy, ReplicationControllerStrategy,
    StatefulSetStrategy,
)
from orchd.registry.strategy import DefaultStrategy


def _ns(group, version, resource, kind, strategy=DefaultStrategy, conversion=None, **kw):
    if conversion is not None:
        kw["storage_version"] = conversion.storage_version
    return KindDefinition(KindInfo(group, version, resource, kind, True, **kw), strategy,
                          conversion=conversion)


def _cluster(group, version, resource, kind, strategy=DefaultStrategy, conversion=None, **kw):
    if conversion is not None:
        kw["storage_version"] = conversion.storage_version
    return KindDefinition(KindInfo(group, version, resource, kind, False, **kw), strategy,
                          conversion=conversion)


_ALL = ("all",)
_STATUS = ("status",)
_REPLICAS = ("status.replicas",)
_SCALED = ("status", "scale")
_SCALE = {"scale": (AUTOSCALING, "v1", "Scale")}

#: The resource-kinds table of the specification, plus the few non-stable
#: versions that C{--runtime-config} can switch on.
DEFINITIONS = (
    # core v1
    _ns(CORE, "v1", "bindings", "Binding", verbs=CREATE_ONLY, stored=False),
    _ns(CORE, "v1", "configmaps", "ConfigMap", short_names=("cm",),
        strategy=ConfigMapStrategy, schema=core_schemas.CONFIG_MAP, printer=core.CONFIG_MAP),
    _ns(CORE, "v1", "endpoints", "Endpoints", short_names=("ep",), printer=core.ENDPOINTS),
    _ns(CORE, "v1", "events", "Event", short_names=("ev",), strategy=EventStrategy,
        schema=core_schemas.EVENT, printer=events.CORE_EVENT, selectable_fields=EVENT_FIELDS),
    _ns(CORE, "v1", "limitranges", "LimitRange", short_names=("limits",)),
    _ns(CORE, "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",),
        subresources=_STATUS, delete_answers_object=True,
        strategy=PersistentVolumeClaimStrategy, printer=storage.PERSISTENT_VOLUME_CLAIM,
        patch_schema=patch.PERSISTENT_VOLUME_CLAIM),
    _ns(CORE, "v1", "pods", "Pod", short_names=("po",), subresources=("status", "log", "binding", "eviction"),
        subresource_kinds={"binding": (CORE, "v1", "Binding"),
                           "eviction": (POLICY, "v1", "Eviction")}, categories=_ALL,
        delete_answers_object=True, strategy=PodStrategy, printer=core.POD,
        patch_schema=patch.POD, selectable_fields=POD_FIELDS),
    _ns(CORE, "v1", "podtemplates", "PodTemplate", strategy=PodTemplateStrategy,
        delete_answers_object=True, printer=core.POD_TEMPLATE, patch_schema=patch.POD_TEMPLATE),
    _ns(CORE, "v1", "replicationcontrollers", "ReplicationController", short_names=("rc",),
        subresources=_SCALED, subresource_kinds=_SCALE, categories=_ALL,
        strategy=ReplicationControllerStrategy, printer=core.REPLICATION_CONTROLLER,
        patch_schema=patch.REPLICATION_CONTROLLER, selectable_fields=_REPLICAS),
    _ns(CORE, "v1", "resourcequotas", "ResourceQuota", short_names=("quota",),
        subresources=_STATUS, delete_answers_object=True, printer=core.RESOURCE_QUOTA),
    _ns(CORE, "v1", "secrets", "Secret", strategy=SecretStrategy, schema=core_schemas.SECRET,
        printer=core.SECRET, selectable_fields=("type",)),
    _ns(CORE, "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",),
        subresources=("token",), delete_answers_object=True,
        subresource_kinds={"token": (AUTHENTICATION, "v1", "TokenRequest")},
        schema=core_schemas.SERVICE_ACCOUNT, printer=core.SERVICE_ACCOUNT,
        patch_schema=patch.SERVICE_ACCOUNT),
    _ns(CORE, "v1", "services", "Service", short_names=("svc",), subresources=_STATUS,
        categories=_ALL, delete_answers_object=True, name_rule=DNS1035,
        strategy=ServiceStrategy.for_catalog, schema=core_schemas.SERVICE, printer=core.SERVICE,
        patch_schema=patch.SERVICE),
    _cluster(CORE, "v1", "componentstatuses", "ComponentStatus", short_names=("cs",),
             verbs=READ_ONLY, stored=False, printer=core.COMPONENT_STATUS),
    _cluster(CORE, "v1", "namespaces", "Namespace", short_names=("ns",),
             verbs=NO_COLLECTION_DELETE, subresources=("status", "finalize"), name_rule=LABEL,
             strategy=NamespaceStrategy, schema=core_schemas.NAMESPACE, printer=core.NAMESPACE,
             patch_schema=patch.NAMESPACE, selectable_fields=("status.phase",)),
    _cluster(CORE, "v1", "nodes", "Node", short_names=("no",), subresources=("status", "proxy"),
             strategy=NodeStrategy, schema=core_schemas.NODE, printer=core.NODE,
             patch_schema=patch.NODE, selectable_fields=("spec.unschedulable",)),
    _cluster(CORE, "v1", "persistentvolumes", "PersistentVolume", short_names=("pv",),
             subresources=_STATUS, delete_answers_object=True,
             strategy=PersistentVolumeStrategy, printer=storage.PERSISTENT_VOLUME),
    # admissionregistration.orch.io/v1
    _cluster(ADMISSION, "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
             strategy=MutatingWebhookConfigurationStrategy, printer=cluster.MUTATING_WEBHOOK_CONFIGURATION),
    _cluster(ADMISSION, "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
             strategy=WebhookConfigurationStrategy, printer=cluster.VALIDATING_WEBHOOK_CONFIGURATION),
    # apiextensions.orch.io/v1
    _cluster(APIEXTENSIONS, "v1", "customresourcedefinitions", "CustomResourceDefinition",
             short_names=("crd", "crds"), subresources=_STATUS,
             strategy=CustomResourceDefinitionStrategy),
    # apiregistration.orch.io/v1
    _cluster(APIREGISTRATION, "v1", "apiservices", "APIService", subresources=_STATUS,
             printer=cluster.API_SERVICE, patch_schema=patch.API_SERVICE),
    # apps/v1
    _ns(APPS, "v1", "controllerrevisions", "ControllerRevision",
        strategy=ControllerRevisionStrategy, schema=group_schemas.CONTROLLER_REVISION,
        printer=workloads.CONTROLLER_REVISION),
    _ns(APPS, "v1", "daemonsets", "DaemonSet", short_names=("ds",), subresources=_STATUS,
        categories=_ALL, strategy=DaemonSetStrategy, printer=workloads.DAEMON_SET,
        patch_schema=patch.DAEMON_SET),
    _ns(APPS, "v1", "deployments", "Deployment", short_names=("deploy",), subresources=_SCALED,
        subresource_kinds=_SCALE, categories=_ALL, strategy=DeploymentStrategy,
        printer=workloads.DEPLOYMENT, patch_schema=patch.DEPLOYMENT),
    _ns(APPS, "v1", "replicasets", "ReplicaSet", short_names=("rs",), subresources=_SCALED,
        subresource_kinds=_SCALE, categories=_ALL, strategy=ReplicaSetStrategy,
        printer=workloads.REPLICA_SET, patch_schema=patch.REPLICA_SET,
        selectable_fields=_REPLICAS),
    _ns(APPS, "v1", "statefulsets", "StatefulSet", short_names=("sts",), subresources=_SCALED,
        subresource_kinds=_SCALE, categories=_ALL, strategy=StatefulSetStrategy,
        printer=workloads.STATEFUL_SET, patch_schema=patch.STATEFUL_SET),
    # authentication.orch.io
    _cluster(AUTHENTICATION, "v1", "tokenreviews", "TokenReview", verbs=CREATE_ONLY, stored=False,
             schema=group_schemas.TOKEN_REVIEW_V1),
    _cluster(AUTHENTICATION, "v1", "selfsubjectreviews", "SelfSubjectReview", verbs=CREATE_ONLY,
             stored=False, schema=group_schemas.SELF_SUBJECT_REVIEW_V1),
    _cluster(AUTHENTICATION, "v1beta1", "tokenreviews", "TokenReview", verbs=CREATE_ONLY,
             stored=False, schema=group_schemas.TOKEN_REVIEW_V1BETA1),
    # authorization.orch.io
    _ns(AUTHORIZATION, "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview",
        verbs=CREATE_ONLY, stored=False, schema=group_schemas.LOCAL_SUBJECT_ACCESS_REVIEW_V1),
    _cluster(AUTHORIZATION, "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
             verbs=CREATE_ONLY, stored=False, schema=group_schemas.SELF_SUBJECT_ACCESS_REVIEW_V1),
    _cluster(AUTHORIZATION, "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview",
             verbs=CREATE_ONLY, stored=False, schema=group_schemas.SELF_SUBJECT_RULES_REVIEW_V1),
    _cluster(AUTHORIZATION, "v1", "subjectaccessreviews", "SubjectAccessReview",
             verbs=CREATE_ONLY, stored=False, schema=group_schemas.SUBJECT_ACCESS_REVIEW_V1),
    _cluster(AUTHORIZATION, "v1beta1", "subjectaccessreviews", "SubjectAccessReview",
             verbs=CREATE_ONLY, stored=False, schema=group_schemas.SUBJECT_ACCESS_REVIEW_V1BETA1),
    # autoscaling/v2
    _ns(AUTOSCALING, "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler",
        short_names=("hpa",), subresources=_STATUS, categories=_ALL,
        strategy=HorizontalPodAutoscalerStrategy, printer=workloads.HORIZONTAL_POD_AUTOSCALER),
    # autoscaling/v1: the same objects, stored as v2 and converted
    _ns(AUTOSCALING, "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler",
        short_names=("hpa",), subresources=_STATUS, categories=_ALL,
        strategy=HorizontalPodAutoscalerStrategy,
        printer=workloads.HORIZONTAL_POD_AUTOSCALER_V1,
        conversion=Conversion("v2", autoscalingv1.to_v2, autoscalingv1.to_v1)),
    # metrics.orch.io/v1beta1: usage from the node agents, kept in memory
    # (orchd/registry/resourcemetrics.py)
    _cluster(METRICS, "v1beta1", "nodes", "NodeMetrics", verbs=READ_ONLY, stored=False),
    _ns(METRICS, "v1beta1", "pods", "PodMetrics", verbs=READ_ONLY, stored=False),
    # batch/v1
    _ns(BATCH, "v1", "cronjobs", "CronJob", short_names=("cj",), subresources=_STATUS,
        categories=_ALL, strategy=CronJobStrategy, printer=workloads.CRON_JOB,
        patch_schema=patch.CRON_JOB),
    _ns(BATCH, "v1", "jobs", "Job", subresources=_STATUS, categories=_ALL, strategy=JobStrategy,
        printer=workloads.JOB, patch_schema=patch.JOB, selectable_fields=("status.successful",)),
    # certificates.orch.io/v1
    _cluster(CERTIFICATES, "v1", "certificatesigningrequests", "CertificateSigningRequest",
             short_names=("csr",), subresources=("status", "approval"),
             strategy=CertificateSigningRequestStrategy,
             printer=cluster.CERTIFICATE_SIGNING_REQUEST, selectable_fields=("spec.signerName",)),
    # coordination.orch.io
    _ns(COORDINATION, "v1", "leases", "Lease", schema=group_schemas.LEASE, printer=cluster.LEASE),
    _ns(COORDINATION, "v1alpha2", "leasecandidates", "LeaseCandidate",
        printer=cluster.LEASE_CANDIDATE),
    # discovery.orch.io/v1
    _ns(DISCOVERY, "v1", "endpointslices", "EndpointSlice", printer=networking.ENDPOINT_SLICE),
    # events.orch.io/v1
    _ns(EVENTS, "v1", "events", "Event", short_names=("ev",), strategy=EventsV1EventStrategy,
        schema=group_schemas.EVENTS_EVENT, printer=events.EVENTS_EVENT,
        selectable_fields=EVENTS_V1_FIELDS),
    # flowcontrol.apiserver.orch.io/v1beta2 (beta: off unless enabled)
    _cluster(FLOWCONTROL, "v1beta2", "flowschemas", "FlowSchema", subresources=_STATUS,
             printer=cluster.FLOW_SCHEMA),
    _cluster(FLOWCONTROL, "v1beta2", "prioritylevelconfigurations", "PriorityLevelConfiguration",
             subresources=_STATUS, printer=cluster.PRIORITY_LEVEL_CONFIGURATION),
    # networking.orch.io/v1
    _ns(NETWORKING, "v1", "ingresses", "Ingress", short_names=("ing",), subresources=_STATUS,
        strategy=IngressStrategy, printer=networking.INGRESS),
    _ns(NETWORKING, "v1", "networkpolicies", "NetworkPolicy", short_names=("netpol",),
        printer=networking.NETWORK_POLICY),
    _cluster(NETWORKING, "v1", "ingressclasses", "IngressClass", printer=networking.INGRESS_CLASS),
    # node.orch.io/v1
    _cluster(NODE, "v1", "runtimeclasses", "RuntimeClass", printer=cluster.RUNTIME_CLASS),
    # policy/v1
    _ns(POLICY, "v1", "poddisruptionbudgets", "PodDisruptionBudget", short_names=("pdb",),
        subresources=_STATUS, strategy=PodDisruptionBudgetStrategy,
        printer=workloads.POD_DISRUPTION_BUDGET, patch_schema=patch.POD_DISRUPTION_BUDGET),
    # rbac.authorization.orch.io/v1
    _ns(RBAC, "v1", "roles", "Role", name_rule=PATH_SEGMENT, strategy=RoleStrategy,
        schema=group_schemas.ROLE),
    _ns(RBAC, "v1", "rolebindings", "RoleBinding", name_rule=PATH_SEGMENT,
        strategy=RoleBindingStrategy, schema=group_schemas.ROLE_BINDING,
        printer=cluster.ROLE_BINDING),
    _cluster(RBAC, "v1", "clusterroles", "ClusterRole", name_rule=PATH_SEGMENT,
             strategy=ClusterRoleStrategy, schema=group_schemas.CLUSTER_ROLE),
    _cluster(RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", name_rule=PATH_SEGMENT,
             strategy=ClusterRoleBindingStrategy, schema=group_schemas.CLUSTER_ROLE_BINDING,
             printer=cluster.CLUSTER_ROLE_BINDING),
    # scheduling.orch.io/v1
    _cluster(SCHEDULING, "v1", "priorityclasses", "PriorityClass", short_names=("pc",),
             printer=cluster.PRIORITY_CLASS),
    # storage.orch.io/v1
    _ns(STORAGE, "v1", "csistoragecapacities", "CSIStorageCapacity",
        printer=storage.CSI_STORAGE_CAPACITY),
    _cluster(STORAGE, "v1", "csidrivers", "CSIDriver", delete_answers_object=True,
             printer=storage.CSI_DRIVER),
    _cluster(STORAGE, "v1", "csinodes", "CSINode", delete_answers_object=True,
             printer=storage.CSI_NODE),
    _cluster(STORAGE, "v1", "storageclasses", "StorageClass", short_names=("sc",),
             delete_answers_object=True, printer=storage.STORAGE_CLASS),
    _cluster(STORAGE, "v1", "volumeattachments", "VolumeAttachment", subresources=_STATUS,
             delete_answers_object=True, strategy=VolumeAttachmentStrategy,
             printer=storage.VOLUME_ATTACHMENT),
)

#: The KindInfo of every row, in table order: every kind the server knows,
#: served or not (C{--runtime-config} keys and encryption rules name them).
KINDS = tuple(definition.info for definition in DEFINITIONS)


def builtin_registry(runtime_config_text=None, definitions=DEFINITIONS):
    """
    A new L{KindRegistry} with the rows that C{--runtime-config} enables
    registered, in table order.

    @param runtime_config_text: the flag's text; empty or C{None} for defaults.
    @raise ValueError: for a key that names no group, version or resource of
        the table (see L{orchd.api.versions}).
    """
    registry = KindRegistry()
    for definition in enabled_definitions(runtime_config_text, definitions):
        registry.register(definition)
    return registry
