# -*- test-case-name: tests.controllers.test_endpoints -*-
"""
The endpoints controller: each Service with a selector has an Endpoints
object of the same name listing the pods it selects.

As upstream (C{pkg/controller/endpoint}): ready pods go to C{addresses},
others that may still become ready to C{notReadyAddresses} (all are ready
with C{publishNotReadyAddresses}); pods serving the same ports share a
subset; every address names its pod (C{targetRef}) and node. The Endpoints
copies the Service's labels, plus C{service.orch.io/headless} for headless
services. Services without a selector are left alone: their Endpoints are
the user's. The Endpoints goes when its Service goes (it has no owner
reference, so this controller deletes it).

More than 1000 addresses are truncated to 1000 (ready ones kept first,
each subset keeping its share) and the Endpoints is annotated
C{endpoints.orch.io/over-capacity: truncated}; the annotation goes once the
count is back within the limit. EndpointSlices carry the full list.

Traffic policy C{Local}: a Service whose C{internalTrafficPolicy} or
C{externalTrafficPolicy} is C{Local} sends traffic arriving at a node only
to that node's endpoints, and drops it (or does not forward it) when there
is none ready (the specification's Errors table). Where that happens is
reported on the Endpoints as the annotation
C{endpoints.orch.io/nodes-without-local-endpoints}: the names of the
C{Ready} Nodes that have no ready endpoint of the Service, sorted and
comma-separated. It is absent when every Ready node has one, and on
Services whose policies are both C{Cluster}.
"""

from orchd.api.errors import StatusError
from orchd.controllers import servicepods as sp
from orchd.controllers.base import name_only
from orchd.registry.context import RequestContext
from orchd.storage.interfaces import DELETED

#: Seconds before looking again at a Service whose write met a conflict.
RETRY = 0.5
MANAGER = "endpoint-controller"
#: Upstream's maxCapacity of an Endpoints object.
MAX_CAPACITY = 1000
OVER_CAPACITY = "endpoints.orch.io/over-capacity"
NO_LOCAL_ENDPOINTS = "endpoints.orch.io/nodes-without-local-endpoints"


def _port_dict(port):
    name, number, protocol, app_protocol = port
    result = {"name": name, "port": number, "protocol": protocol} if name else \
        {"port": number, "protocol": protocol}
    if app_protocol:
        result["appProtocol"] = app_protocol
    return result


def _address(pod, service):
    ips = pod["status"]["ips"]
    families = sp.service_families(service)
    if families:
        ips = [ip for ip in ips if sp.family(ip) == families[0]]
    if not ips:
        return None
    address = {"ip": ips[0], "nodeName": pod["spec"]["nodeName"], "targetRef": sp.target_ref(pod)}
    if not address["nodeName"]:
        del address["nodeName"]
    hostname = sp.hostname_of(pod, service)
    if hostname:
        address["hostname"] = hostname
    return address


def build_subsets(service, pods):
    """The service's subsets: addresses grouped by the ports they serve, sorted."""
    tolerate = bool(service["spec"].get("publishNotReadyAddresses"))
    headless_without_ports = sp.is_headless(service) and not service["spec"].get("ports")
    groups = {}
    for pod in pods:
        if not sp.should_be_endpoint(pod, include_terminating=False):
            continue
        address = _address(pod, service)
        if address is None:
            continue
        ports = () if headless_without_ports else sp.endpoint_ports(pod, service)
        if not ports and not headless_without_ports:
            continue
        ready, not_ready = groups.setdefault(ports, ([], []))
        (ready if tolerate or pod["status"]["ready"] else not_ready).append(address)
    subsets = []
    for ports in sorted(groups):
        ready, not_ready = groups[ports]
        subset = {}
        for field, addresses in (("addresses", ready), ("notReadyAddresses", not_ready)):
            if addresses:
                subset[field] = sorted(addresses, key=_address_order)
        if ports:
            subset["ports"] = [_port_dict(port) for port in ports]
        subsets.append(subset)
    return subsets


def _address_order(address):
    return address["ip"], address["targetRef"]["name"]


def truncate(subsets, capacity=MAX_CAPACITY):
    """
    Cut the subsets down to C{capacity} addresses as upstream does; returns
    True when they were over it.
    """
    ready = sum(len(s.get("addresses", ())) for s in subsets)
    not_ready = sum(len(s.get("notReadyAddresses", ())) for s in subsets)
    if ready + not_ready <= capacity:
        return False
    truncate_ready = ready > capacity
    room, total = (capacity, ready) if truncate_ready else (capacity - ready, not_ready)
    left = room
    for subset in subsets:
        field = "addresses" if truncate_ready else "notReadyAddresses"
        addresses = subset.get(field, [])
        share = min(-(-len(addresses) * room // total), left)
        subset[field] = addresses[:share]
        if truncate_ready:
            subset.pop("notReadyAddresses", None)
        if not subset[field]:
            del subset[field]
        left -= share
    return True


def _same(current, wanted):
    """Whether the stored Endpoints already says what this controller would write."""
    return ((current.get("subsets") or []) == (wanted.get("subsets") or [])
            and all((current["metadata"].get(field) or {}) == (wanted["metadata"].get(field) or {})
                    for field in ("labels", "annotations")))


def is_local(service):
    spec = service["spec"]
    return "Local" in (spec.get("internalTrafficPolicy"), spec.get("externalTrafficPolicy"))


def nodes_without_local_endpoints(subsets, ready_nodes):
    """The Ready nodes on which no ready address of the subsets lives, sorted."""
    served = {address.get("nodeName") for subset in subsets
              for address in subset.get("addresses", ())}
    return sorted(set(ready_nodes) - served)


class EndpointsController(sp.ServicePodsController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    """

    name = "endpoint"

    def __init__(self, catalog, clock, capacity=MAX_CAPACITY):
        super().__init__(catalog, clock)
        self._capacity = capacity
        self._endpoints = catalog.resource("", "endpoints")
        self.follow("", "endpoints", self._endpoints_changed, keep=name_only)
        self._nodes = self.follow("", "nodes", self._node_changed, keep=sp.node_ready)

    def _endpoints_changed(self, type, obj, old):
        meta = obj["metadata"]
        if type == DELETED and self.service(meta.get("namespace", ""), meta["name"]):
            self._queue.add(sp.service_key(meta))

    def _node_changed(self, type, obj, old):
        if type != DELETED and old == sp.node_ready(obj):
            return
        for service in self.services():
            if is_local(service) and sp.selector_of(service) is not None:
                self._queue.add(sp.service_key(service["metadata"]))

    def ready_nodes(self):
        return [name for name, ready in self._nodes.cache.values() if ready]

    def _context(self, namespace):
        return RequestContext(self._catalog.system_context().user, namespace,
                              field_manager=MANAGER)

    async def _sync(self, key):
        namespace, name = key.split("/", 1)
        service = self.service(namespace, name)
        if service is None:
            await self._delete(namespace, name)
            return
        if sp.selector_of(service) is None:
            return
        current = await self.get_or_none(self._endpoints, namespace, name)
        wanted = self.desired(service, current)
        if current is not None and _same(current, wanted):
            return
        try:
            if current is None:
                await self._endpoints.create(self._context(namespace), wanted)
            else:
                await self._endpoints.update(self._context(namespace), name, wanted)
        except StatusError as e:
            # 409: changed meanwhile, so look again; 403/404: the namespace is going.
            if e.code == 409:
                self._queue.add_after(key, RETRY)
            elif e.code not in (403, 404):
                raise

    def desired(self, service, current):
        """The Endpoints the service calls for, keeping C{current}'s other annotations."""
        meta = service["metadata"]
        subsets = build_subsets(service, self.selected_pods(service))
        annotations = dict((current or {}).get("metadata", {}).get("annotations") or {})
        for key in (OVER_CAPACITY, NO_LOCAL_ENDPOINTS):
            annotations.pop(key, None)
        if is_local(service):
            missing = nodes_without_local_endpoints(subsets, self.ready_nodes())
            if missing:
                annotations[NO_LOCAL_ENDPOINTS] = ",".join(missing)
        if truncate(subsets, self._capacity):
            annotations[OVER_CAPACITY] = "truncated"
        labels = dict(meta.get("labels") or {})
        if sp.is_headless(service):
            labels[sp.HEADLESS] = ""
        else:
            labels.pop(sp.HEADLESS, None)
        obj = {"apiVersion": "v1", "kind": "Endpoints",
               "metadata": dict((current or {}).get("metadata") or
                                {"name": meta["name"], "namespace": meta["namespace"]}),
               "subsets": subsets}
        if not subsets:
            del obj["subsets"]
        obj["metadata"]["labels"] = labels
        obj["metadata"]["annotations"] = annotations
        for field in ("labels", "annotations"):
            if not obj["metadata"][field]:
                del obj["metadata"][field]
        return obj

    async def _delete(self, namespace, name):
        try:
            await self._endpoints.delete(self._context(namespace), name)
        except StatusError as e:
            if e.code != 404:
                raise
