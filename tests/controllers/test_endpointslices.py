"""The EndpointSlice controller: a Service's pods in slices of at most 100 endpoints."""

import orjson

from orchd.controllers.endpointslices import (
    CONTROLLER_NAME, MANAGED_BY, SERVICE_NAME, EndpointSliceController,
)
from orchd.controllers.garbagecollector import GarbageCollector
from tests.controllers.test_endpoints import (
    MERGE, PODS, SERVICES, ServicePodsCase, pod, pod_status, service,
)

SLICES = "/apis/discovery.orch.io/v1/namespaces/default/endpointslices"


class EndpointSliceTests(ServicePodsCase):
    controller_class = EndpointSliceController

    def slices(self, name="web"):
        return self.call("GET", f"{SLICES}?labelSelector={SERVICE_NAME}%3D{name}", None,
                         200)["items"]

    def endpoints(self, name="web"):
        return sorted((e["addresses"][0], e["targetRef"]["name"], e["conditions"]["ready"])
                      for s in self.slices(name) for e in s["endpoints"])

    def test_slice_content(self):
        """Each pod is an endpoint with its conditions, node and pod; the slice is labelled."""
        created = self.call("POST", SERVICES, service(), 201)
        self.add_pod("a", "10.88.0.1")
        self.add_pod("b", "10.88.0.2", ready=False)
        self.add_pod("other", "10.88.0.3", labels={"app": "db"})
        [endpoint_slice] = self.slices()
        meta = endpoint_slice["metadata"]
        self.assertTrue(meta["name"].startswith("web-"))
        self.assertEqual(len(meta["name"]), len("web-") + 5)
        self.assertEqual(meta["labels"], {"tier": "front", SERVICE_NAME: "web",
                                          MANAGED_BY: CONTROLLER_NAME})
        self.assertEqual(meta["ownerReferences"][0]["uid"], created["metadata"]["uid"])
        self.assertTrue(meta["ownerReferences"][0]["controller"])
        self.assertEqual(endpoint_slice["addressType"], "IPv4")
        self.assertEqual(endpoint_slice["ports"],
                         [{"name": "http", "port": 8080, "protocol": "TCP"}])
        first = endpoint_slice["endpoints"][0]
        self.assertEqual(first["nodeName"], "n1")
        self.assertEqual(first["targetRef"]["kind"], "Pod")
        self.assertEqual(first["conditions"], {"ready": True, "serving": True,
                                               "terminating": False})
        self.assertEqual(self.endpoints(), [("10.88.0.1", "a", True), ("10.88.0.2", "b", False)])

    def test_placeholder_and_changes(self):
        """No pods: one empty slice; pods come and go in place; a relabel moves them."""
        self.call("POST", SERVICES, service(), 201)
        [placeholder] = self.slices()
        self.assertEqual((placeholder["endpoints"], placeholder["ports"]), ([], []))
        self.add_pod("a", "10.88.0.1")
        self.add_pod("b", "10.88.0.2")
        [endpoint_slice] = self.slices()
        self.assertEqual(len(endpoint_slice["endpoints"]), 2)
        self.call("DELETE", f"{PODS}/a?gracePeriodSeconds=0", None, 200)
        self.assertEqual(self.endpoints(), [("10.88.0.2", "b", True)])
        self.call("PATCH", f"{PODS}/b", {"metadata": {"labels": {"app": "db"}}}, 200, MERGE)
        self.assertEqual(self.endpoints(), [])
        self.assertEqual(len(self.slices()), 1)
        self.call("PATCH", f"{SERVICES}/web", {"spec": {"selector": {"app": "db"}}}, 200, MERGE)
        self.assertEqual(self.endpoints(), [("10.88.0.2", "b", True)])

    def test_named_ports_split(self):
        """Pods serving a named port on different numbers are in different slices."""
        self.call("POST", SERVICES, service(ports=[{"name": "h", "port": 80,
                                                    "targetPort": "web"}]), 201)
        self.add_pod("a", "10.88.0.1", ports=[{"name": "web", "containerPort": 9000}])
        self.add_pod("b", "10.88.0.2", ports=[{"name": "web", "containerPort": 9001}])
        self.add_pod("c", "10.88.0.3")
        found = sorted((s["ports"][0]["port"], [e["targetRef"]["name"] for e in s["endpoints"]])
                       for s in self.slices())
        self.assertEqual(found, [(9000, ["a"]), (9001, ["b"])])

    def test_hundred_per_slice(self):
        """250 pods make three slices of 100, 100 and 50; removed pods free room in place."""
        store = self.api.store
        prefix = self.api.catalog.resource("", "pods").info.key_prefix("default")
        for index in range(250):
            body = pod(f"p{index:03}")
            body["metadata"].update(namespace="default", uid=f"uid-{index}")
            body["status"] = pod_status(f"10.88.{index // 256}.{index % 256}")
            self.successResultOf(store.create(f"{prefix}p{index:03}", orjson.dumps(body)))
        self.call("POST", SERVICES, service(), 201)
        slices = self.slices()
        self.assertEqual(sorted(len(s["endpoints"]) for s in slices), [50, 100, 100])
        self.assertEqual(len({e["targetRef"]["name"] for s in slices for e in s["endpoints"]}),
                         250)
        names = {s["metadata"]["name"] for s in slices}
        self.call("DELETE", f"{PODS}/p000?gracePeriodSeconds=0", None, 200)
        self.add_pod("extra", "10.88.9.9")
        slices = self.slices()
        self.assertEqual({s["metadata"]["name"] for s in slices}, names)
        self.assertEqual(sorted(len(s["endpoints"]) for s in slices), [50, 100, 100])

    def test_terminating_and_publish_not_ready(self):
        """Terminating pods stay, not ready; publishNotReadyAddresses makes all ready."""
        self.call("POST", SERVICES, service(publishNotReadyAddresses=True), 201)
        self.add_pod("a", "10.88.0.1", ready=False)
        self.assertEqual(self.endpoints(), [("10.88.0.1", "a", True)])
        self.call("PATCH", f"{SERVICES}/web", {"spec": {"publishNotReadyAddresses": None}},
                  200, MERGE)
        self.assertEqual(self.endpoints(), [("10.88.0.1", "a", False)])
        held = pod("b")
        held["metadata"]["finalizers"] = ["example.com/hold"]
        self.call("POST", PODS, held, 201)
        self.call("PATCH", f"{PODS}/b/status", {"status": pod_status("10.88.0.2")}, 200, MERGE)
        self.call("DELETE", f"{PODS}/b", None, 200)
        terminating = [e for s in self.slices() for e in s["endpoints"]
                       if e["targetRef"]["name"] == "b"]
        self.assertEqual(terminating[0]["conditions"],
                         {"ready": False, "serving": True, "terminating": True})

    def test_no_selector_and_external_name(self):
        """Services without a selector, or of type ExternalName, get no slices."""
        self.call("POST", SERVICES, service(name="manual", selector={}), 201)
        self.call("POST", SERVICES, service(name="alias", type="ExternalName",
                                            externalName="example.com"), 201)
        self.add_pod("a", "10.88.0.1")
        self.assertEqual(self.slices("manual"), [])
        self.assertEqual(self.slices("alias"), [])

    def test_edits_undone_and_gc(self):
        """A deleted slice comes back; the Service's deletion takes its slices (GC)."""
        gc = GarbageCollector(self.api.catalog, self.api.clock)
        gc.startService()
        self.addCleanup(gc.stopService)
        self.successResultOf(gc.started)
        self.call("POST", SERVICES, service(), 201)
        self.add_pod("a", "10.88.0.1")
        [endpoint_slice] = self.slices()
        self.call("DELETE", f"{SLICES}/{endpoint_slice['metadata']['name']}", None, 200)
        self.assertEqual(self.endpoints(), [("10.88.0.1", "a", True)])
        self.call("DELETE", f"{SERVICES}/web", None, 200)
        self.api.clock.advance(5)
        self.assertEqual(self.slices(), [])
