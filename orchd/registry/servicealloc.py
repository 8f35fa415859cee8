# -*- test-case-name: tests.registry.test_service -*-
"""
What a Service holds from the shared ranges: its cluster IP and node ports.

The Service strategy asks here just before the store write, so that what
a failed write took can be given back (L{Allocation.revert}) and what an
update gives up is only released once the write has succeeded
(L{Allocation.commit}). Headless (C{clusterIP: None}) and ExternalName
services take no IP.
"""

import ipaddress

import orjson
from twisted.logger import Logger

from orchd.api.errors import FieldError, StatusError
from orchd.registry.allocator import (
    DEFAULT_NODE_PORTS, AllocationError, IPRange, PortRange, RangeFull,
)

SERVICES_PREFIX = "/registry/services/"
DEFAULT_SERVICE_RANGE = "10.96.0.0/12"
_NODE_PORT_TYPES = ("NodePort", "LoadBalancer")


def has_cluster_ip(spec):
    """True for a service that holds a cluster IP."""
    if (spec.get("type") or "ClusterIP") == "ExternalName":
        return False
    ips = spec.get("clusterIPs") or [spec.get("clusterIP") or ""]
    return ips[0] != "None"


def node_ports(spec):
    """The node ports a service holds (health check port included)."""
    ports = {p.get("nodePort") for p in spec.get("ports") or () if isinstance(p, dict)}
    if needs_health_check(spec) and spec.get("healthCheckNodePort"):
        ports.add(spec["healthCheckNodePort"])
    return {p for p in ports if isinstance(p, int) and p > 0}


def needs_health_check(spec):
    return spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def should_allocate_node_ports(spec):
    kind = spec.get("type")
    return kind == "NodePort" or (
        kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts", True) is not False)


class Allocation:
    """What one write took (given back on revert) and gives up (freed on commit)."""

    log = Logger()

    def __init__(self):
        self.taken = []
        self.freed = []

    async def commit(self):
        await self._release(self.freed)

    async def revert(self):
        await self._release(self.taken)

    async def _release(self, values):
        for pool, value in values:
            try:
                await pool.release(value)
            except Exception:
                self.log.failure("releasing {value} failed", value=value)


class ServiceAllocators:
    """
    The cluster IP range (C{--service-cluster-ip-range}) and node port range.

    @param network: the service CIDR (text or ip_network).
    """

    def __init__(self, store, network=DEFAULT_SERVICE_RANGE, node_ports=DEFAULT_NODE_PORTS,
                 random_source=None):
        self.store = store
        self.ips = IPRange(store, network, seed=self._ips_in_use, random_source=random_source)
        self.ports = PortRange(store, *node_ports, seed=self._ports_in_use,
                               random_source=random_source)

    @property
    def family(self):
        return self.ips.family

    async def _services(self):
        listed = await self.store.list(SERVICES_PREFIX)
        return [(orjson.loads(kv.value).get("spec") or {}) for kv in listed.items]

    async def _ips_in_use(self):
        return [ip for spec in await self._services() if has_cluster_ip(spec)
                for ip in spec.get("clusterIPs") or [spec.get("clusterIP")] if ip]

    async def _ports_in_use(self):
        return [port for spec in await self._services() for port in node_ports(spec)]

    # -- create, update, delete --------------------------------------------

    async def allocate_create(self, obj):
        """Fill in and take the cluster IP and node ports of a new service."""
        spec = obj.setdefault("spec", {})
        done = Allocation()
        try:
            if has_cluster_ip(spec):
                await self._cluster_ip(obj, spec, done)
            await self._node_ports(obj, spec, set(), done)
        except BaseException:
            await done.revert()
            raise
        return done

    async def allocate_update(self, obj, old):
        """Take what an update adds; C{commit} frees what it drops."""
        spec = obj.setdefault("spec", {})
        old_spec = old.get("spec") or {}
        done = Allocation()
        try:
            if has_cluster_ip(spec) and not has_cluster_ip(old_spec):
                if old_spec.get("type") == "ExternalName":
                    await self._cluster_ip(obj, spec, done)
            elif has_cluster_ip(old_spec) and not has_cluster_ip(spec):
                done.freed.extend((self.ips, ip) for ip in old_spec.get("clusterIPs") or ())
            held = node_ports(old_spec)
            await self._node_ports(obj, spec, held, done)
            kept = node_ports(spec)
            done.freed.extend((self.ports, port) for port in sorted(held - kept))
        except BaseException:
            await done.revert()
            raise
        return done

    async def release(self, obj):
        """Give back everything a deleted service held."""
        done = Allocation()
        spec = obj.get("spec") or {}
        if has_cluster_ip(spec):
            done.freed.extend((self.ips, ip) for ip in spec.get("clusterIPs") or ())
        done.freed.extend((self.ports, port) for port in sorted(node_ports(spec)))
        await done.commit()

    # -- the pieces --------------------------------------------------------

    async def _cluster_ip(self, obj, spec, done):
        ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
        if ips:
            ip = ips[0]
            try:
                await self.ips.allocate(ip)
            except AllocationError as e:
                raise _invalid(obj, FieldError.invalid(
                    "spec.clusterIPs", ips, f"failed to allocate IP {ip}: {e}")) from None
            ip = str(ipaddress.ip_address(ip))
        else:
            try:
                ip = await self.ips.allocate_next()
            except RangeFull as e:
                raise StatusError.internal(f"failed to allocate a serviceIP: {e}") from None
        done.taken.append((self.ips, ip))
        spec["clusterIP"] = ip
        spec["clusterIPs"] = [ip] + list(ips[1:])

    async def _node_ports(self, obj, spec, held, done):
        """
        Node ports for each port of a NodePort or LoadBalancer service;
        ports of one number (e.g. TCP and UDP) share one node port.
        C{held}: ports the service already holds (an update).
        """
        if spec.get("type") not in _NODE_PORT_TYPES:
            return
        by_port = {}
        for i, port in enumerate(spec.get("ports") or ()):
            wanted = port.get("nodePort") or by_port.get(port.get("port"))
            if wanted:
                if wanted not in held and (self.ports, wanted) not in done.taken:
                    await self._take_port(obj, f"spec.ports[{i}].nodePort", wanted, done)
                port["nodePort"] = wanted
            elif should_allocate_node_ports(spec):
                port["nodePort"] = await self._next_port(done, "nodePort")
            else:
                continue
            by_port.setdefault(port.get("port"), port["nodePort"])
        if needs_health_check(spec):
            wanted = spec.get("healthCheckNodePort")
            if wanted:
                if wanted not in held and (self.ports, wanted) not in done.taken:
                    await self._take_port(obj, "spec.healthCheckNodePort", wanted, done)
            else:
                spec["healthCheckNodePort"] = await self._next_port(done, "HealthCheck NodePort")

    async def _take_port(self, obj, path, port, done):
        try:
            await self.ports.allocate(port)
        except AllocationError as e:
            raise _invalid(obj, FieldError.invalid(path, port, str(e))) from None
        done.taken.append((self.ports, port))

    async def _next_port(self, done, what):
        try:
            port = await self.ports.allocate_next()
        except RangeFull as e:
            raise StatusError.internal(f"failed to allocate a {what}: {e}") from None
        done.taken.append((self.ports, port))
        return port


def _invalid(obj, error):
    name = (obj.get("metadata") or {}).get("name", "")
    return StatusError.invalid("Service", "", name, [error])

