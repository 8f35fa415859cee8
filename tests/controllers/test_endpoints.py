"""The endpoints controller: a Service's Endpoints list the pods it selects."""

import orjson
from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.endpoints import (
    NO_LOCAL_ENDPOINTS, OVER_CAPACITY, EndpointsController, truncate,
)
from tests.support import APIHarness

PODS = "/api/v1/namespaces/default/pods"
SERVICES = "/api/v1/namespaces/default/services"
ENDPOINTS = "/api/v1/namespaces/default/endpoints"
NODES = "/api/v1/nodes"
MERGE = {b"content-type": [b"application/merge-patch+json"]}


def service(name="web", selector=None, ports=None, **spec):
    spec.setdefault("selector", {"app": "web"} if selector is None else selector)
    spec["ports"] = ports if ports is not None else [{"name": "http", "port": 80,
                                                      "targetPort": 8080}]
    return {"metadata": {"name": name, "labels": {"tier": "front"}}, "spec": spec}


def pod_status(ip, ready=True):
    return {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}


def pod(name, labels=None, node="n1", ports=()):
    return {"metadata": {"name": name, "labels": {"app": "web"} if labels is None else labels},
            "spec": {"nodeName": node, "containers": [
                {"name": "c", "image": "busybox", "ports": list(ports)}]}}


class ServicePodsCase(SynchronousTestCase):
    """A controller of Services and their pods (C{controller_class}) over an API harness."""

    controller_class = None

    def setUp(self):
        self.api = APIHarness()
        self.controller = self.controller_class(self.api.catalog, self.api.clock)
        self.controller.startService()
        self.addCleanup(self.controller.stopService)
        self.successResultOf(self.controller.started)

    def call(self, method, path, body=None, code=None, headers=None):
        result, obj, _ = self.api.call(method, path, body, headers=headers)
        if code is not None:
            self.assertEqual(result, code, obj)
        return obj

    def add_pod(self, name, ip, ready=True, **kwargs):
        self.call("POST", PODS, pod(name, **kwargs), 201)
        self.set_status(name, pod_status(ip, ready))

    def set_status(self, name, status):
        self.call("PATCH", f"{PODS}/{name}/status", {"status": status}, 200, MERGE)


class EndpointsTests(ServicePodsCase):
    controller_class = EndpointsController

    def endpoints(self, name="web"):
        code, obj, _ = self.api.call("GET", f"{ENDPOINTS}/{name}")
        return obj if code == 200 else None

    def addresses(self, field="addresses", name="web"):
        return sorted((a["ip"], a["targetRef"]["name"])
                      for subset in (self.endpoints(name) or {}).get("subsets") or ()
                      for a in subset.get(field, ()))

    def test_ready_and_not_ready(self):
        """Ready pods are addresses, the others notReadyAddresses, with their pod and node."""
        self.add_pod("a", "10.88.0.1")
        self.add_pod("b", "10.88.0.2", ready=False)
        self.add_pod("other", "10.88.0.3", labels={"app": "db"})
        self.call("POST", NODES, {"metadata": {"name": "unused"}}, 201)
        self.call("POST", PODS, pod("no-ip"), 201)
        self.call("POST", SERVICES, service(), 201)
        endpoints = self.endpoints()
        self.assertEqual(endpoints["metadata"]["labels"], {"tier": "front"})
        [subset] = endpoints["subsets"]
        self.assertEqual(subset["ports"], [{"name": "http", "port": 8080, "protocol": "TCP"}])
        address = subset["addresses"][0]
        self.assertEqual(address["nodeName"], "n1")
        self.assertEqual(address["targetRef"]["kind"], "Pod")
        self.assertEqual(self.addresses(), [("10.88.0.1", "a")])
        self.assertEqual(self.addresses("notReadyAddresses"), [("10.88.0.2", "b")])
        # Readiness changes move the pod; no annotations on a Cluster-policy service.
        self.set_status("b", pod_status("10.88.0.2"))
        self.assertEqual(self.addresses(), [("10.88.0.1", "a"), ("10.88.0.2", "b")])
        self.assertNotIn("annotations", self.endpoints()["metadata"])

    def test_pod_deletion_and_relabel(self):
        """Deleted and relabelled pods leave; the selector's change picks other pods."""
        self.call("POST", SERVICES, service(), 201)
        self.add_pod("a", "10.88.0.1")
        self.add_pod("b", "10.88.0.2")
        self.call("DELETE", f"{PODS}/a", None, 200)
        self.assertEqual(self.addresses(), [("10.88.0.2", "b")])
        self.call("PATCH", f"{PODS}/b", {"metadata": {"labels": {"app": "db"}}}, 200, MERGE)
        self.assertEqual(self.endpoints().get("subsets"), None)
        self.call("PATCH", f"{SERVICES}/web", {"spec": {"selector": {"app": "db"}}}, 200, MERGE)
        self.assertEqual(self.addresses(), [("10.88.0.2", "b")])

    def test_named_target_port(self):
        """A named targetPort resolves per pod; pods without the name are left out."""
        self.call("POST", SERVICES, service(ports=[{"port": 80, "targetPort": "web"}]), 201)
        self.add_pod("a", "10.88.0.1", ports=[{"name": "web", "containerPort": 9000}])
        self.add_pod("b", "10.88.0.2", ports=[{"name": "web", "containerPort": 9001}])
        self.add_pod("c", "10.88.0.3")
        subsets = self.endpoints()["subsets"]
        self.assertEqual([(s["ports"][0]["port"], [a["ip"] for a in s["addresses"]])
                          for s in subsets], [(9000, ["10.88.0.1"]), (9001, ["10.88.0.2"])])

    def test_headless_and_hostname(self):
        """Headless services' Endpoints are labelled; a pod's hostname for its subdomain."""
        body = service(clusterIP="None", ports=[])
        self.call("POST", SERVICES, body, 201)
        named = pod("a")
        named["spec"].update(hostname="a", subdomain="web")
        self.call("POST", PODS, named, 201)
        self.set_status("a", pod_status("10.88.0.1"))
        endpoints = self.endpoints()
        self.assertEqual(endpoints["metadata"]["labels"]["service.orch.io/headless"], "")
        [subset] = endpoints["subsets"]
        self.assertNotIn("ports", subset)
        self.assertEqual(subset["addresses"][0]["hostname"], "a")

    def test_no_selector_left_alone(self):
        """A Service without a selector keeps the user's Endpoints, until it is deleted."""
        self.call("POST", SERVICES, service(name="manual", selector={}), 201)
        self.add_pod("a", "10.88.0.1")
        self.assertIsNone(self.endpoints("manual"))
        user = {"metadata": {"name": "manual"},
                "subsets": [{"addresses": [{"ip": "192.0.2.1"}], "ports": [{"port": 80}]}]}
        self.call("POST", ENDPOINTS, user, 201)
        self.add_pod("b", "10.88.0.2")
        self.assertEqual(self.endpoints("manual")["subsets"], user["subsets"])
        self.call("DELETE", f"{SERVICES}/manual", None, 200)
        self.assertIsNone(self.endpoints("manual"))

    def test_service_deletion_and_recreation(self):
        """The Endpoints goes with its Service, and comes back when deleted by hand."""
        self.call("POST", SERVICES, service(), 201)
        self.add_pod("a", "10.88.0.1")
        self.call("DELETE", f"{ENDPOINTS}/web", None, 200)
        self.assertEqual(self.addresses(), [("10.88.0.1", "a")])
        self.call("DELETE", f"{SERVICES}/web", None, 200)
        self.assertIsNone(self.endpoints())

    def test_over_capacity(self):
        """More than 1000 addresses: 1000 kept and annotated; the mark goes below 1000."""
        store = self.api.store
        prefix = self.api.catalog.resource("", "pods").info.key_prefix("default")
        for index in range(1001):
            body = pod(f"p{index}")
            body["metadata"].update(namespace="default", uid=f"uid-{index}")
            body["status"] = pod_status(f"10.88.{index // 256}.{index % 256}")
            self.successResultOf(store.create(f"{prefix}p{index}", orjson.dumps(body)))
        self.call("POST", SERVICES, service(), 201)
        endpoints = self.endpoints()
        self.assertEqual(endpoints["metadata"]["annotations"], {OVER_CAPACITY: "truncated"})
        self.assertEqual(len(self.addresses()), 1000)
        self.call("DELETE", f"{PODS}/p0", None, 200)
        self.call("DELETE", f"{PODS}/p1", None, 200)
        self.assertNotIn("annotations", self.endpoints()["metadata"])
        self.assertEqual(len(self.addresses()), 999)

    def test_truncate_keeps_ready_first(self):
        """Not-ready addresses are cut first; ready ones are shared out by subset."""
        def addresses(count):
            return [{"ip": str(i)} for i in range(count)]
        subsets = [{"addresses": addresses(3), "notReadyAddresses": addresses(4)},
                   {"addresses": addresses(2), "notReadyAddresses": addresses(4)}]
        self.assertTrue(truncate(subsets, 7))
        self.assertEqual([(len(s["addresses"]), len(s.get("notReadyAddresses", ())))
                          for s in subsets], [(3, 1), (2, 1)])
        subsets = [{"addresses": addresses(6), "notReadyAddresses": addresses(1)},
                   {"addresses": addresses(4)}]
        self.assertTrue(truncate(subsets, 5))
        self.assertEqual([(len(s["addresses"]), "notReadyAddresses" in s) for s in subsets],
                         [(3, False), (2, False)])
        self.assertFalse(truncate([{"addresses": addresses(5)}], 5))

    def ready_node(self, name, ready=True):
        self.call("POST", NODES, {"metadata": {"name": name}}, 201)
        condition = {"type": "Ready", "status": "True" if ready else "False"}
        self.call("PATCH", f"{NODES}/{name}/status",
                  {"status": {"conditions": [condition]}}, 200, MERGE)

    def test_local_traffic_policy(self):
        """A Local-policy Service's Endpoints name the Ready nodes without a ready endpoint."""
        for name in ("n1", "n2", "n3"):
            self.ready_node(name)
        self.ready_node("down", ready=False)
        self.call("POST", SERVICES, service(internalTrafficPolicy="Local"), 201)
        self.add_pod("a", "10.88.0.1", node="n1")
        self.add_pod("b", "10.88.0.2", node="n2", ready=False)
        annotations = self.endpoints()["metadata"]["annotations"]
        self.assertEqual(annotations, {NO_LOCAL_ENDPOINTS: "n2,n3"})
        # A new Ready node, and a pod becoming ready.
        self.ready_node("n4")
        self.set_status("b", pod_status("10.88.0.2"))
        self.assertEqual(self.endpoints()["metadata"]["annotations"],
                         {NO_LOCAL_ENDPOINTS: "n3,n4"})
        # Every Ready node served: no annotation.
        self.add_pod("c", "10.88.0.3", node="n3")
        self.call("DELETE", f"{NODES}/n4", None, 200)
        self.assertNotIn("annotations", self.endpoints()["metadata"])
        # A node going NotReady is not reported; back to Cluster policy, nothing is.
        self.call("DELETE", f"{PODS}/c", None, 200)
        self.assertEqual(self.endpoints()["metadata"]["annotations"], {NO_LOCAL_ENDPOINTS: "n3"})
        self.ready_node("n5", ready=False)
        self.call("PATCH", f"{SERVICES}/web", {"spec": {"internalTrafficPolicy": "Cluster"}},
                  200, MERGE)
        self.assertNotIn("annotations", self.endpoints()["metadata"])

    def test_external_local_policy(self):
        """externalTrafficPolicy Local is reported the same way."""
        self.ready_node("n1")
        self.call("POST", SERVICES, service(type="NodePort", externalTrafficPolicy="Local"), 201)
        self.assertEqual(self.endpoints()["metadata"]["annotations"], {NO_LOCAL_ENDPOINTS: "n1"})
