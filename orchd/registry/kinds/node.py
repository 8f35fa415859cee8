# -*- test-case-name: tests.registry.test_node -*-
"""
Nodes: their status as upstream keeps it.

A node agent registers its Node with its status, which a create keeps
(upstream's node strategy does). Every status has what upstream's typed
NodeStatus always writes, and the official client's models require: all
of C{nodeInfo}'s fields (empty when unknown: C{kubeProxyVersion} is one no
agent reports any more) and the kubelet endpoint's C{Port}. Capacity and
allocatable are resource lists: written in canonical form, allocatable
defaulting to capacity, and no value negative (C{status.capacity.cpu:
Invalid value: "-1": must be greater than or equal to 0}).
"""

from zope.interface import implementer

from orchd.registry.kinds.podspec import canonical_quantities, quantity_value_errors
from orchd.registry.strategy import DefaultStrategy, IStrategy

#: The fields of C{status.nodeInfo}, every one present in upstream's answers.
NODE_INFO_FIELDS = ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage",
                    "containerRuntimeVersion", "kubeletVersion", "kubeProxyVersion",
                    "operatingSystem", "architecture")


def default_node_status(node):
    """Upstream's defaults of a NodeStatus, in place (a status is made when there is none)."""
    status = node.get("status")
    if status is None:
        status = node["status"] = {}
    if not isinstance(status, dict):
        return
    info = status.get("nodeInfo")
    if info is None:
        info = status["nodeInfo"] = {}
    if isinstance(info, dict):
        for field in NODE_INFO_FIELDS:
            info.setdefault(field, "")
    endpoints = status.get("daemonEndpoints")
    if endpoints is None:
        endpoints = status["daemonEndpoints"] = {}
    if isinstance(endpoints, dict):
        kubelet = endpoints.get("kubeletEndpoint")
        if kubelet is None:
            kubelet = endpoints["kubeletEndpoint"] = {}
        if isinstance(kubelet, dict):
            kubelet.setdefault("Port", 0)
    canonical_quantities(status.get("capacity"), "Node")
    canonical_quantities(status.get("allocatable"), "Node")
    if status.get("allocatable") is None and isinstance(status.get("capacity"), dict):
        status["allocatable"] = dict(status["capacity"])


def node_resources_errors(node):
    """Upstream's C{ValidateNodeResources}: capacity and allocatable not negative."""
    status = node.get("status")
    errors = []
    for field in ("capacity", "allocatable"):
        resources = status.get(field) if isinstance(status, dict) else None
        if isinstance(resources, dict):
            for name in sorted(resources):
                errors += quantity_value_errors(name, resources[name],
                                                f"status.{field}.{name}")
    return errors


@implementer(IStrategy)
class NodeStrategy(DefaultStrategy):
    """A create keeps the status a node agent registers with; every status gets its defaults."""

    keep_status_on_create = True

    def prepare_for_create(self, ctx, obj):
        default_node_status(obj)

    def subresource_update(self, subresource, obj, old):
        old = super().subresource_update(subresource, obj, old)
        if subresource == "status":
            default_node_status(old)
        return old

    def validate(self, ctx, obj):
        return node_resources_errors(obj)

    def validate_update(self, ctx, obj, old):
        if obj.get("status") == old.get("status"):
            return []
        return node_resources_errors(obj)
