# -*- test-case-name: tests.controllers.test_endpointslices -*-
"""
The EndpointSlice controller: the pods each Service with a selector picks,
in EndpointSlices of at most 100 endpoints.

As upstream (C{staging/.../endpointslice}): one slice holds endpoints of one
address type (C{IPv4}, C{IPv6}) serving the same ports; each endpoint names
its pod (C{targetRef}) and node and has C{ready}, C{serving} and
C{terminating} conditions (terminating pods stay, not ready). Slices are
named C{<service>-<random>} (C{generateName}), owned by the Service (the
garbage collector removes them with it) and labelled
C{orch.io/service-name} and C{endpointslice.orch.io/managed-by}, besides the
Service's own labels. A Service with no endpoint gets one empty placeholder
slice, so clients can tell "no endpoints" from "not yet reconciled".

Updates keep churn low: an endpoint stays in the slice that holds it,
gone ones are removed, and new ones fill slices with room before new slices
are made. Only slices whose content changes are written.
"""

from orchd.api.errors import StatusError
from orchd.api.selectors import parse_label_selector
from orchd.controllers import servicepods as sp
from orchd.registry.context import RequestContext
from orchd.registry.options import ListOptions

#: Seconds before looking again at a Service whose write met a conflict.
RETRY = 0.5
MANAGER = "endpointslice-controller"
SERVICE_NAME = "orch.io/service-name"
MANAGED_BY = "endpointslice.orch.io/managed-by"
CONTROLLER_NAME = "endpointslice-controller.orch.io"
MAX_PER_SLICE = 100


def _slice_keep(obj):
    labels = obj["metadata"].get("labels") or {}
    return labels.get(SERVICE_NAME), labels.get(MANAGED_BY)


def slice_endpoint(pod, service, ip):
    tolerate = bool(service["spec"].get("publishNotReadyAddresses"))
    serving = tolerate or pod["status"]["ready"]
    terminating = bool(pod["metadata"]["deletionTimestamp"])
    endpoint = {"addresses": [ip],
                "conditions": {"ready": tolerate or (serving and not terminating),
                               "serving": serving, "terminating": terminating},
                "targetRef": sp.target_ref(pod)}
    if pod["spec"]["nodeName"]:
        endpoint["nodeName"] = pod["spec"]["nodeName"]
    hostname = sp.hostname_of(pod, service)
    if hostname:
        endpoint["hostname"] = hostname
    return endpoint


def _identity(endpoint):
    ref = endpoint.get("targetRef") or {}
    return ref.get("name"), tuple(endpoint.get("addresses") or ())


def desired_groups(service, pods):
    """C{{(addressType, ports): {identity: endpoint}}} for the service's pods."""
    types = sp.service_families(service) or (sp.IPV4, sp.IPV6)
    with_ports = not sp.is_headless(service) or bool(service["spec"].get("ports"))
    groups = {}
    for pod in pods:
        if not sp.should_be_endpoint(pod, include_terminating=True):
            continue
        ports = sp.endpoint_ports(pod, service)
        if with_ports and not ports:
            continue
        for address_type in types:
            ips = [ip for ip in pod["status"]["ips"] if sp.family(ip) == address_type]
            if ips:
                endpoint = slice_endpoint(pod, service, ips[0])
                groups.setdefault((address_type, ports), {})[_identity(endpoint)] = endpoint
    if not groups:
        groups[(types[0], ())] = {}         # the placeholder
    return groups


def _port_tuple(port):
    return (port.get("name") or "", port.get("port"), port.get("protocol") or "TCP",
            port.get("appProtocol"))


def _port_dict(port):
    name, number, protocol, app_protocol = port
    result = {"name": name, "port": number, "protocol": protocol}
    if app_protocol:
        result["appProtocol"] = app_protocol
    return result


def group_of(endpoint_slice):
    ports = tuple(sorted((_port_tuple(p) for p in endpoint_slice.get("ports") or ()),
                         key=lambda p: (p[0], p[1], p[2])))
    return endpoint_slice.get("addressType"), ports


def slice_labels(service):
    labels = {key: value for key, value in (service["metadata"].get("labels") or {}).items()
              if key not in (SERVICE_NAME, MANAGED_BY)}
    labels[SERVICE_NAME] = service["metadata"]["name"]
    labels[MANAGED_BY] = CONTROLLER_NAME
    if sp.is_headless(service):
        labels[sp.HEADLESS] = ""
    return labels


def plan(service, existing, groups, limit=MAX_PER_SLICE):
    """
    What to write: C{(updates, creates, deletes)}; updates are whole
    slices, creates lists of C{(group, endpoints)}, deletes slice names.
    """
    uid, labels = service["metadata"].get("uid"), slice_labels(service)
    updates, creates, deletes = [], [], []
    by_group = {}
    for endpoint_slice in sorted(existing, key=lambda s: s["metadata"]["name"]):
        owners = [ref.get("uid") for ref in endpoint_slice["metadata"].get("ownerReferences") or ()]
        if uid in owners and group_of(endpoint_slice) in groups:
            by_group.setdefault(group_of(endpoint_slice), []).append(endpoint_slice)
        else:
            deletes.append(endpoint_slice["metadata"]["name"])
    for group in sorted(groups):
        wanted = dict(groups[group])
        slices, kept = by_group.get(group, []), []
        for endpoint_slice in slices:
            endpoints = [wanted.pop(_identity(e)) for e in endpoint_slice.get("endpoints") or ()
                         if _identity(e) in wanted]
            kept.append((endpoint_slice, endpoints))
        new = [wanted[identity] for identity in sorted(wanted)]
        changed = [(s, e) for s, e in kept if e != (s.get("endpoints") or [])]
        unchanged = [(s, e) for s, e in kept if e == (s.get("endpoints") or [])]
        # Slices written anyway take new endpoints first, as upstream.
        for _, endpoints in changed:
            room = max(0, limit - len(endpoints))
            endpoints.extend(new[:room])
            del new[:room]
        while new:
            target = _slice_to_fill(unchanged, len(new), limit) if len(new) < limit else None
            if target is None:
                creates.append((group, new[:limit]))
                del new[:limit]
            else:
                target[1].extend(new)
                new = []
        for endpoint_slice, endpoints in kept:
            placeholder = not groups[group] and endpoint_slice is slices[0]
            if not endpoints and not placeholder:
                deletes.append(endpoint_slice["metadata"]["name"])
            elif (endpoints != (endpoint_slice.get("endpoints") or [])
                  or endpoint_slice["metadata"].get("labels") != labels):
                updates.append(dict(endpoint_slice, endpoints=endpoints,
                                    metadata=dict(endpoint_slice["metadata"], labels=labels)))
        if not slices and not groups[group]:
            creates.append((group, []))
    return updates, creates, deletes


def _slice_to_fill(candidates, count, limit):
    """The unchanged slice left fullest by taking C{count} more endpoints, or None."""
    fitting = [(s, e) for s, e in candidates if len(e) + count <= limit]
    return max(fitting, key=lambda pair: len(pair[1]), default=None)


def new_slice(service, group, endpoints):
    meta = service["metadata"]
    address_type, ports = group
    return {"apiVersion": "discovery.orch.io/v1", "kind": "EndpointSlice",
            "metadata": {"generateName": f"{meta['name']}-", "namespace": meta["namespace"],
                         "labels": slice_labels(service),
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Service",
                                              "name": meta["name"], "uid": meta["uid"],
                                              "controller": True, "blockOwnerDeletion": True}]},
            "addressType": address_type, "endpoints": endpoints,
            "ports": [_port_dict(port) for port in ports]}


class EndpointSliceController(sp.ServicePodsController):
    """
    @param catalog: the L{orchd.registry.catalog.Catalog}.
    @param clock: an C{IReactorTime}.
    @param limit: most endpoints per slice.
    """

    name = "endpointslice"

    def __init__(self, catalog, clock, limit=MAX_PER_SLICE):
        super().__init__(catalog, clock)
        self._limit = limit
        self._slices = catalog.resource("discovery.orch.io", "endpointslices")
        self.follow("discovery.orch.io", "endpointslices", self._slice_changed, keep=_slice_keep)

    def _slice_changed(self, type, obj, old):
        service, manager = _slice_keep(obj)
        namespace = obj["metadata"].get("namespace", "")
        if manager == CONTROLLER_NAME and service and self.service(namespace, service):
            # Our own writes come back here too; their sync finds nothing to do,
            # while another writer's edits or deletions are undone.
            self._queue.add(f"{namespace}/{service}")

    def _context(self, namespace):
        return RequestContext(self._catalog.system_context().user, namespace,
                              field_manager=MANAGER)

    async def _sync(self, key):
        namespace, name = key.split("/", 1)
        service = self.service(namespace, name)
        if (service is None or sp.selector_of(service) is None
                or service["spec"].get("type") == "ExternalName"):
            return          # the garbage collector removes the slices of a deleted Service
        selector = parse_label_selector(f"{SERVICE_NAME}={name},{MANAGED_BY}={CONTROLLER_NAME}")
        ctx = self._context(namespace)
        existing = (await self._slices.list(ctx, ListOptions(label_selector=selector)))["items"]
        groups = desired_groups(service, self.selected_pods(service))
        updates, creates, deletes = plan(service, existing, groups, self._limit)
        try:
            for group, endpoints in creates:
                await self._slices.create(ctx, new_slice(service, group, endpoints))
            for endpoint_slice in updates:
                await self._slices.update(ctx, endpoint_slice["metadata"]["name"], endpoint_slice)
            for slice_name in deletes:
                await self._slices.delete(ctx, slice_name)
        except StatusError as e:
            # 409: a slice changed meanwhile (or a generated name was taken),
            # so look again; 403/404: the namespace is going, or a slice went.
            if e.code == 409:
                self._queue.add_after(key, RETRY)
            elif e.code not in (403, 404):
                raise
