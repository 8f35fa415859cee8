# -*- test-case-name: tests.controllers.test_manager,tests.app.test_leadership,tests.controllers.test_nodelifecycle,tests.controllers.test_tokencleaner -*-
"""Which controllers run, from C{--controllers}: C{*}, names and C{-name}."""

from twisted.logger import Logger

from orchd.controllers.bootstrapsigner import BootstrapSigner
from orchd.controllers.clusterroleaggregation import ClusterRoleAggregation
from orchd.controllers.csrapproving import CSRApprovingController
from orchd.controllers.csrsigning import CSRSigningController
from orchd.controllers.cronjob import CronJobController
from orchd.controllers.daemonset import DaemonSetController
from orchd.controllers.deployment import DeploymentController
from orchd.controllers.disruption import DisruptionController
from orchd.controllers.endpoints import EndpointsController
from orchd.controllers.endpointslices import EndpointSliceController
from orchd.controllers.garbagecollector import GarbageCollector
from orchd.controllers.hpa import HorizontalPodAutoscalerController
from orchd.controllers.job import JobController
from orchd.controllers.namespaces import NamespaceController
from orchd.controllers.nodelifecycle import NodeLifecycleController
from orchd.controllers.persistentvolume import PersistentVolumeController
from orchd.controllers.podgc import PodGarbageCollector
from orchd.controllers.replicaset import ReplicaSetController
from orchd.controllers.rootca import RootCAPublisher
from orchd.controllers.serviceaccounts import ServiceAccountsController
from orchd.controllers.statefulset import StatefulSetController
from orchd.controllers.tainteviction import TaintEvictionController
from orchd.controllers.tokencleaner import TokenCleaner
from orchd.controllers.tokens import TokensController
from orchd.controllers.volumeprotection import PVCProtectionController, PVProtectionController
from orchd.controllers.ttlafterfinished import TTLAfterFinishedController

log = Logger()


class ControllerEnvironment:
    """
    What controllers are built from.

    @ivar catalog: the L{orchd.registry.catalog.Catalog} they read and write through.
    @ivar clock: an C{IReactorTime}.
    @ivar pki: the L{orchd.app.pki.PKI} (cluster CA, service-account keys).
    @ivar config: the L{orchd.app.config.Config}.
    @ivar authorizer: the server's authorizer, for controllers that ask it
        about other users (the CSR approver); None when there is none.
    """

    def __init__(self, catalog, clock, pki=None, config=None, authorizer=None):
        self.catalog = catalog
        self.clock = clock
        self.pki = pki
        self.config = config
        self.authorizer = authorizer


def _plain(factory):
    """A factory of a controller that needs only the catalog and the clock."""
    return lambda env: factory(env.catalog, env.clock)


_PODS, _NODES = ("", "pods"), ("", "nodes")

#: Controller name -> (factory(ControllerEnvironment), on by default, the
#: resources it works on: it is not started when the API serves one of them
#: not, as upstream skips a controller whose resources are disabled).
CONTROLLERS = {
    "namespace": (_plain(NamespaceController), True, (("", "namespaces"),)),
    "garbagecollector": (_plain(GarbageCollector), True, ()),
    "clusterrole-aggregation": (_plain(ClusterRoleAggregation), True,
                                (("rbac.authorization.orch.io", "clusterroles"),)),
    "serviceaccount": (_plain(ServiceAccountsController), True, (("", "serviceaccounts"),)),
    "serviceaccount-token": (TokensController.from_environment, True,
                             (("", "serviceaccounts"), ("", "secrets"))),
    "root-ca-cert-publisher": (RootCAPublisher.from_environment, True, (("", "configmaps"),)),
    "bootstrapsigner": (_plain(BootstrapSigner), False, (("", "secrets"), ("", "configmaps"))),
    "tokencleaner": (_plain(TokenCleaner), False, (("", "secrets"),)),
    "csrsigning": (CSRSigningController.from_environment, True,
                   (("certificates.orch.io", "certificatesigningrequests"),)),
    "csrapproving": (CSRApprovingController.from_environment, True,
                     (("certificates.orch.io", "certificatesigningrequests"),)),
    "nodelifecycle": (NodeLifecycleController.from_environment, True, (_NODES, _PODS)),
    "taint-eviction-controller": (_plain(TaintEvictionController), True, (_NODES, _PODS)),
    "podgc": (_plain(PodGarbageCollector), True, (_NODES, _PODS)),
    "endpoint": (_plain(EndpointsController), True,
                 (("", "services"), ("", "endpoints"), _PODS)),
    "endpointslice": (_plain(EndpointSliceController), True,
                      (("", "services"), ("discovery.orch.io", "endpointslices"), _PODS)),
    "replicaset": (_plain(ReplicaSetController), True, (("apps", "replicasets"), _PODS)),
    "replicationcontroller": (_plain(ReplicaSetController.for_replication_controllers), True,
                              (("", "replicationcontrollers"), _PODS)),
    "deployment": (_plain(DeploymentController), True,
                   (("apps", "deployments"), ("apps", "replicasets"), _PODS)),
    "daemonset": (_plain(DaemonSetController), True,
                  (("apps", "daemonsets"), ("apps", "controllerrevisions"), _NODES, _PODS)),
    "statefulset": (_plain(StatefulSetController), True,
                    (("apps", "statefulsets"), ("apps", "controllerrevisions"), _PODS,
                     ("", "persistentvolumeclaims"))),
    "persistentvolume-binder": (PersistentVolumeController.from_environment, True,
                                (("", "persistentvolumeclaims"), ("", "persistentvolumes"),
                                 ("storage.orch.io", "storageclasses"))),
    "pvc-protection": (_plain(PVCProtectionController), True,
                       (("", "persistentvolumeclaims"), _PODS)),
    "pv-protection": (_plain(PVProtectionController), True, (("", "persistentvolumes"),)),
    "disruption": (_plain(DisruptionController), True,
                   (("policy", "poddisruptionbudgets"), _PODS)),
    "job": (_plain(JobController), True, (("batch", "jobs"), _PODS)),
    "ttl-after-finished": (_plain(TTLAfterFinishedController), True, (("batch", "jobs"),)),
    "cronjob": (_plain(CronJobController), True, (("batch", "cronjobs"), ("batch", "jobs"))),
    "horizontalpodautoscaling": (HorizontalPodAutoscalerController.from_environment, True,
                                 (("autoscaling", "horizontalpodautoscalers"), _PODS)),
}


class UnknownControllerError(ValueError):
    """C{--controllers} names a controller that does not exist."""


def selected_controllers(names, known=CONTROLLERS):
    """
    The controller names C{names} selects, in table order.

    @raise UnknownControllerError: for a name that is not a controller.
    """
    for name in names:
        bare = name.lstrip("-")
        if bare != "*" and bare not in known:
            raise UnknownControllerError(
                f"--controllers: {bare!r} is not a known controller "
                f"(known: {', '.join(sorted(known))})")
    selected = []
    for name, (_, default, _) in known.items():
        if f"-{name}" in names:
            continue
        if name in names or ("*" in names and default):
            selected.append(name)
    return selected


def build_controllers(names, env, known=CONTROLLERS):
    """
    One service per selected controller, built from C{env} (a
    L{ControllerEnvironment}); those whose resources the API does not serve
    (C{--runtime-config}) are left out, and logged.
    """
    built = []
    for name in selected_controllers(names, known):
        factory, _, needs = known[name]
        missing = [f"{resource}.{group}" if group else resource for group, resource in needs
                   if env.catalog.resource(group, resource) is None]
        if missing:
            log.info("Not starting controller {name}: the API does not serve {missing}",
                     name=name, missing=", ".join(missing))
            continue
        built.append(factory(env))
    return built
