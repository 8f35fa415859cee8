# -*- test-case-name: tests.controllers.test_endpoints,tests.controllers.test_endpointslices -*-
"""
What the Endpoints and EndpointSlice controllers share: Services, the pods
their selectors pick, and the rules that turn a pod into an endpoint.

Both controllers work one Service at a time, keyed C{namespace/name}. A
pod's change queues every Service of its namespace whose selector matched
it before or matches it now, so a relabelled pod leaves one Service and
joins another. The pods are cached trimmed to what an endpoint is made of
(labels, node, hostname, container ports, IPs, readiness), which keeps the
cache small on clusters with many pods. The rules follow upstream's
C{pkg/api/v1/pod} and C{endpointslice/util}: a pod without an IP is no
endpoint; a pod is ready when its C{Ready} condition is C{True}; a pod that
finished for good (C{Never} or C{OnFailure} restart policy) is dropped; a
service port's C{targetPort} is a number or the name of a container port.
"""

import ipaddress
from collections import defaultdict

from orchd.controllers.base import QueuedController
from orchd.storage.interfaces import DELETED

#: Label on the Endpoints and EndpointSlices of headless services.
HEADLESS = "service.orch.io/headless"
IPV4, IPV6 = "IPv4", "IPv6"


def service_key(meta):
    return f"{meta.get('namespace', '')}/{meta['name']}"


def selector_of(service):
    """The service's selector, or None for a service without one (left alone)."""
    selector = (service.get("spec") or {}).get("selector")
    return selector if isinstance(selector, dict) and selector else None


def selects(selector, labels):
    return selector is not None and all((labels or {}).get(k) == v for k, v in selector.items())


def keep_service(service):
    """What the controllers read of a Service."""
    meta = service["metadata"]
    return {"metadata": {key: meta[key] for key in ("name", "namespace", "uid", "labels")
                         if key in meta},
            "spec": service.get("spec") or {}}


def keep_pod(pod):
    """What an endpoint is made of."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    ports = [{"name": port.get("name"), "containerPort": port.get("containerPort"),
              "protocol": port.get("protocol") or "TCP"}
             for container in spec.get("containers") or () for port in container.get("ports") or ()]
    return {
        "metadata": {"name": meta["name"], "namespace": meta.get("namespace", ""),
                     "uid": meta.get("uid", ""), "labels": meta.get("labels") or {},
                     "deletionTimestamp": meta.get("deletionTimestamp")},
        "spec": {"nodeName": spec.get("nodeName"), "hostname": spec.get("hostname"),
                 "subdomain": spec.get("subdomain"), "restartPolicy": spec.get("restartPolicy"),
                 "ports": ports},
        "status": {"phase": status.get("phase"), "ready": is_pod_ready(status),
                   "ips": pod_ips(status)},
    }


def is_pod_ready(status):
    """Upstream's IsPodReady: the C{Ready} condition is C{True}."""
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
               for c in status.get("conditions") or ())


def pod_ips(status):
    ips = [entry.get("ip") for entry in status.get("podIPs") or () if isinstance(entry, dict)]
    ips = [ip for ip in ips if ip]
    if not ips and status.get("podIP"):
        ips = [status["podIP"]]
    return ips


def family(ip):
    try:
        return IPV6 if ipaddress.ip_address(ip).version == 6 else IPV4
    except ValueError:
        return None


def service_families(service):
    """The service's IP families in order, or () when it names none (headless)."""
    spec = service["spec"]
    families = [f for f in spec.get("ipFamilies") or () if f in (IPV4, IPV6)]
    if families:
        return tuple(families)
    cluster_ip = spec.get("clusterIP")
    found = family(cluster_ip) if cluster_ip and cluster_ip != "None" else None
    return (found,) if found else ()


def is_headless(service):
    """Upstream's C{!IsServiceIPSet}: no cluster IP, or C{None}."""
    return (service["spec"].get("clusterIP") or "None") == "None"


def should_be_endpoint(pod, include_terminating):
    """Upstream's ShouldPodBeInEndpoints."""
    if not pod["status"]["ips"]:
        return False
    if not include_terminating and pod["metadata"]["deletionTimestamp"]:
        return False
    policy, phase = pod["spec"]["restartPolicy"] or "Always", pod["status"]["phase"]
    if policy == "Never":
        return phase not in ("Failed", "Succeeded")
    if policy == "OnFailure":
        return phase != "Succeeded"
    return True


def find_port(pod, service_port):
    """The pod's port for a service port (upstream's FindPort), or None."""
    target = service_port.get("targetPort")
    protocol = service_port.get("protocol") or "TCP"
    if target is None or target == "" or target == 0:
        target = service_port.get("port")
    if isinstance(target, int):
        return target
    for port in pod["spec"]["ports"]:
        if port["name"] == target and port["protocol"] == protocol:
            return port["containerPort"]
    return None


def endpoint_ports(pod, service):
    """The (name, port, protocol, appProtocol) the pod serves the service on."""
    ports = []
    for service_port in service["spec"].get("ports") or ():
        number = find_port(pod, service_port)
        if number is not None:
            ports.append((service_port.get("name") or "", number,
                          service_port.get("protocol") or "TCP", service_port.get("appProtocol")))
    return tuple(sorted(ports, key=lambda p: (p[0], p[1], p[2])))


def hostname_of(pod, service):
    """The pod's hostname when it names the service as its subdomain."""
    spec = pod["spec"]
    if spec["hostname"] and spec["subdomain"] == service["metadata"]["name"]:
        return spec["hostname"]
    return None


def target_ref(pod):
    meta = pod["metadata"]
    return {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"],
            "uid": meta["uid"]}


def node_ready(node):
    """A Node's name and whether its C{Ready} condition is C{True} (an informer C{keep})."""
    return node["metadata"]["name"], is_pod_ready(node.get("status") or {})


class ServicePodsController(QueuedController):
    """
    Follows Services and pods; queues C{namespace/name} of the Services a
    change touches and hands C{_sync} the cached Service and its pods.
    """

    def __init__(self, catalog, clock):
        super().__init__(catalog, clock)
        self._service_prefix = catalog.resource("", "services").info.key_prefix()
        self._service_cache = self.follow("", "services", self._service_changed, keep_service)
        self._pod_prefix = catalog.resource("", "pods").info.key_prefix()
        self._names = defaultdict(set)       # namespace -> service names
        self._pods_in = defaultdict(set)     # namespace -> pod names
        self._pod_cache = self.follow("", "pods", self._pod_changed, keep_pod)

    def _service_changed(self, type, obj, old):
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        if type == DELETED:
            self._names[namespace].discard(meta["name"])
        else:
            self._names[namespace].add(meta["name"])
        self._queue.add(service_key(meta))

    def _pod_changed(self, type, obj, old):
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        if type == DELETED:
            self._pods_in[namespace].discard(meta["name"])
        else:
            self._pods_in[namespace].add(meta["name"])
            if old is not None and keep_pod(obj) == old:
                return
        labels = [meta.get("labels") or {}]
        if old is not None:
            labels.append(old["metadata"]["labels"])
        for name in sorted(self._names.get(namespace, ())):
            service = self.service(namespace, name)
            if service is not None and any(selects(selector_of(service), each)
                                           for each in labels):
                self._queue.add(f"{namespace}/{name}")

    def service(self, namespace, name):
        """The cached Service, or None."""
        return self._service_cache.cache.get(f"{self._service_prefix}{namespace}/{name}")

    def services(self):
        """Every cached Service."""
        return self._service_cache.objects()

    def selected_pods(self, service):
        """The cached pods the service's selector picks, by name."""
        namespace = service["metadata"].get("namespace", "")
        selector = selector_of(service)
        pods = []
        for name in sorted(self._pods_in.get(namespace, ())):
            pod = self._pod_cache.cache.get(f"{self._pod_prefix}{namespace}/{name}")
            if pod is not None and selects(selector, pod["metadata"]["labels"]):
                pods.append(pod)
        return pods
