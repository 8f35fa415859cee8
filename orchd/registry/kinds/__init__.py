"""
The strategies of kinds that have rules of their own.

Every other kind gets L{orchd.registry.strategy.DefaultStrategy}; kinds
whose only rule is a set of well-known field selectors just name them in
L{SELECTABLE_FIELDS}.
"""

from orchd.registry.kinds.certificatesigningrequest import CertificateSigningRequestStrategy
from orchd.registry.kinds.configdata import ConfigMapStrategy, SecretStrategy
from orchd.registry.kinds.controllerrevision import ControllerRevisionStrategy
from orchd.registry.kinds.event import EventStrategy, EventsV1EventStrategy
from orchd.registry.kinds.namespace import NamespaceStrategy
from orchd.registry.kinds.pod import PodStrategy
from orchd.registry.kinds.rbac import (
    ClusterRoleBindingStrategy, ClusterRoleStrategy, RoleBindingStrategy, RoleStrategy,
)
from orchd.registry.kinds.service import ServiceStrategy
from orchd.registry.strategy import DefaultStrategy

_STRATEGIES = {
    ("", "Namespace"): NamespaceStrategy,
    ("", "Pod"): PodStrategy,
    ("", "ConfigMap"): ConfigMapStrategy,
    ("", "Secret"): SecretStrategy,
    ("apps", "ControllerRevision"): ControllerRevisionStrategy,
    ("", "Event"): EventStrategy,
    ("events.orch.io", "Event"): EventsV1EventStrategy,
    ("certificates.orch.io", "CertificateSigningRequest"): CertificateSigningRequestStrategy,
    ("rbac.authorization.orch.io", "Role"): RoleStrategy,
    ("rbac.authorization.orch.io", "ClusterRole"): ClusterRoleStrategy,
    ("rbac.authorization.orch.io", "RoleBinding"): RoleBindingStrategy,
    ("rbac.authorization.orch.io", "ClusterRoleBinding"): ClusterRoleBindingStrategy,
}

#: Field selectors beyond metadata.name and metadata.namespace, as upstream has them.
SELECTABLE_FIELDS = {
    ("", "Pod"): ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                  "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                  "status.podIP", "status.nominatedNodeName"),
    ("", "Node"): ("spec.unschedulable",),
    ("", "ReplicationController"): ("status.replicas",),
    ("apps", "ReplicaSet"): ("status.replicas",),
    ("batch", "Job"): ("status.successful",),
}


def strategy_for(info, allocators=None):
    """
    A fresh strategy for the kind of C{info}.

    @param allocators: the L{orchd.registry.servicealloc.ServiceAllocators}
        that Services take their cluster IPs and node ports from.
    """
    key = (info.group, info.kind)
    if key == ("", "Service"):
        strategy = ServiceStrategy(allocators)
    else:
        strategy = _STRATEGIES.get(key, DefaultStrategy)()
    if key in SELECTABLE_FIELDS:
        strategy.selectable_fields = SELECTABLE_FIELDS[key]
    return strategy
