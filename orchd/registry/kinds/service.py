# -*- test-case-name: tests.registry.test_service -*-
"""
Services: defaults and validation of the spec, and the IPs and ports they hold.

Defaults are upstream's (type ClusterIP, sessionAffinity None with a 10800
second ClientIP timeout, TCP ports whose targetPort is the port, traffic
policies Cluster, single-stack IP family fields of the cluster's family);
the status always has C{loadBalancer}, as upstream writes it.
The cluster IP and node ports come from L{orchd.registry.servicealloc}
just before the store write; an update keeps what the old object held when
the new one leaves it out, and the first cluster IP never changes except
to or from ExternalName.
"""

from zope.interface import implementer

from orchd.api.errors import FieldError
from orchd.registry.kinds.servicevalidation import (
    TYPES, affinity_errors, cluster_ip_errors, externally_accessible, family_of, ports_errors,
    traffic_policy_errors,
)
from orchd.registry.servicealloc import has_cluster_ip, needs_health_check
from orchd.registry.strategy import DefaultStrategy, IStrategy

DEFAULT_AFFINITY_TIMEOUT = 10800


def set_defaults(spec, family):
    """Upstream's defaults of a ServiceSpec (C{family}: the cluster's IP family)."""
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["sessionAffinity"] == "ClientIP":
        client = spec.setdefault("sessionAffinityConfig", {}).setdefault("clientIP", {})
        if isinstance(client, dict):
            client.setdefault("timeoutSeconds", DEFAULT_AFFINITY_TIMEOUT)
    for port in spec.get("ports") or ():
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            if port.get("targetPort") in (None, 0, ""):
                port["targetPort"] = port.get("port")
    kind = spec["type"]
    if kind == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    if kind == "ExternalName":
        return
    spec.setdefault("internalTrafficPolicy", "Cluster")
    if externally_accessible(spec):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if spec.get("clusterIP") and not spec.get("clusterIPs"):
        spec["clusterIPs"] = [spec["clusterIP"]]
    elif spec.get("clusterIPs") and not spec.get("clusterIP"):
        spec["clusterIP"] = spec["clusterIPs"][0]
    headless = spec.get("clusterIP") == "None"
    if headless and not spec.get("selector"):
        spec.setdefault("ipFamilyPolicy", "RequireDualStack")
    else:
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    if not spec.get("ipFamilies"):
        spec["ipFamilies"] = [family_of(ip) or family
                              for ip in (spec.get("clusterIPs") or [""])[:1]]
    if headless and spec["ipFamilyPolicy"] != "SingleStack" and len(spec["ipFamilies"]) == 1:
        spec["ipFamilies"].append("IPv6" if spec["ipFamilies"][0] == "IPv4" else "IPv4")


def keep_allocated(spec, old_spec):
    """An update that leaves out the cluster IP or node ports keeps the old ones."""
    if has_cluster_ip(spec) and has_cluster_ip(old_spec):
        if not spec.get("clusterIP") and not spec.get("clusterIPs"):
            for field in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                if field in old_spec:
                    spec.setdefault(field, old_spec[field])
    if spec.get("type") in ("NodePort", "LoadBalancer"):
        old_ports = {(p.get("port"), p.get("protocol") or "TCP"): p.get("nodePort")
                     for p in old_spec.get("ports") or () if isinstance(p, dict)}
        for port in spec.get("ports") or ():
            if isinstance(port, dict) and not port.get("nodePort"):
                held = old_ports.get((port.get("port"), port.get("protocol") or "TCP"))
                if held:
                    port["nodePort"] = held
    if needs_health_check(spec) and needs_health_check(old_spec) \
            and not spec.get("healthCheckNodePort") and old_spec.get("healthCheckNodePort"):
        spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]


@implementer(IStrategy)
class ServiceStrategy(DefaultStrategy):
    """
    @param allocators: the L{orchd.registry.servicealloc.ServiceAllocators}.
    """

    def __init__(self, allocators):
        self.allocators = allocators

    @classmethod
    def for_catalog(cls, catalog):
        """The strategy of the catalog's Services: its cluster IPs and node ports."""
        return cls(catalog.allocators)

    def prepare_for_create(self, ctx, obj):
        if isinstance(obj.get("spec"), dict) or "spec" not in obj:
            set_defaults(obj.setdefault("spec", {}), self.allocators.family)
        obj["status"] = {"loadBalancer": {}}

    def subresource_update(self, subresource, obj, old):
        """A status write; C{status.loadBalancer} is always there, as upstream writes it."""
        old = super().subresource_update(subresource, obj, old)
        status = old.get("status")
        if status is None:
            old["status"] = {"loadBalancer": {}}
        elif isinstance(status, dict):
            status.setdefault("loadBalancer", {})
        return old

    def prepare_for_update(self, ctx, obj, old):
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            keep_allocated(spec, old.get("spec") or {})
            set_defaults(spec, self.allocators.family)

    def validate(self, ctx, obj):
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [FieldError.type_invalid("spec", spec, "must be an object")]
        if spec.get("type") not in TYPES:
            return [FieldError.not_supported("spec.type", spec.get("type"), TYPES)]
        return (ports_errors(spec) + affinity_errors(spec) + traffic_policy_errors(spec)
                + cluster_ip_errors(spec, self.allocators.family))

    def validate_update(self, ctx, obj, old):
        errors = self.validate(ctx, obj)
        spec, old_spec = obj.get("spec") or {}, old.get("spec") or {}
        if "ExternalName" in (spec.get("type"), old_spec.get("type")):
            return errors
        for field in ("clusterIPs", "ipFamilies"):
            new, before = spec.get(field) or [], old_spec.get(field) or []
            if before and new[:1] != before[:1]:
                errors.append(FieldError.invalid(f"spec.{field}[0]", new, "may not change "
                                                 "once set"))
        return errors

    async def begin_create(self, ctx, obj):
        return await self.allocators.allocate_create(obj)

    async def begin_update(self, ctx, obj, old):
        return await self.allocators.allocate_update(obj, old)

    async def after_delete(self, ctx, obj):
        await self.allocators.release(obj)
