"""Tests for Service defaults, validation and cluster IP / node port allocation."""

from twisted.trial.unittest import SynchronousTestCase

from tests.support import APIHarness

SERVICES = "/api/v1/namespaces/default/services"
MERGE_PATCH = b"application/merge-patch+json"


class ServiceTestCase(SynchronousTestCase):
    cidr = "10.0.0.0/27"

    def setUp(self):
        self.api = APIHarness(service_cluster_ip_range=self.cidr)

    def create(self, name, **spec):
        spec.setdefault("ports", [{"port": 80}])
        return self.api.call("POST", SERVICES, {"metadata": {"name": name}, "spec": spec})[:2]

    def created(self, name, **spec):
        code, obj = self.create(name, **spec)
        self.assertEqual(code, 201, obj)
        return obj["spec"]

    def invalid(self, name, **spec):
        code, obj = self.create(name, **spec)
        self.assertEqual(code, 422, obj)
        return {cause["field"]: cause["message"] for cause in obj["details"]["causes"]}


class DefaultsTests(ServiceTestCase):
    def test_defaults(self):
        spec = self.created("a")
        self.assertEqual(spec["type"], "ClusterIP")
        self.assertEqual(spec["sessionAffinity"], "None")
        self.assertEqual(spec["internalTrafficPolicy"], "Cluster")
        self.assertNotIn("externalTrafficPolicy", spec)
        self.assertEqual(spec["ports"], [{"port": 80, "protocol": "TCP", "targetPort": 80}])
        self.assertEqual(spec["ipFamilies"], ["IPv4"])
        self.assertEqual(spec["ipFamilyPolicy"], "SingleStack")
        self.assertEqual(spec["clusterIPs"], [spec["clusterIP"]])

    def test_client_ip_timeout(self):
        spec = self.created("a", sessionAffinity="ClientIP")
        self.assertEqual(spec["sessionAffinityConfig"], {"clientIP": {"timeoutSeconds": 10800}})

    def test_node_port_defaults(self):
        spec = self.created("a", type="NodePort")
        self.assertEqual(spec["externalTrafficPolicy"], "Cluster")
        self.assertTrue(30000 <= spec["ports"][0]["nodePort"] <= 32767)


class ValidationTests(ServiceTestCase):
    def test_session_affinity(self):
        self.assertIn("spec.sessionAffinity", self.invalid("a", sessionAffinity="Sticky"))

    def test_timeout_bounds(self):
        for timeout in (0, 86401, -1):
            errors = self.invalid("a", sessionAffinity="ClientIP",
                                  sessionAffinityConfig={"clientIP": {"timeoutSeconds": timeout}})
            self.assertIn("spec.sessionAffinityConfig.clientIP.timeoutSeconds", errors)
        self.created("b", sessionAffinity="ClientIP",
                     sessionAffinityConfig={"clientIP": {"timeoutSeconds": 86400}})

    def test_config_without_affinity(self):
        self.assertIn("spec.sessionAffinityConfig", self.invalid(
            "a", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 5}}))

    def test_traffic_policies(self):
        self.assertIn("spec.internalTrafficPolicy",
                      self.invalid("a", internalTrafficPolicy="Nearby"))
        self.assertIn("spec.externalTrafficPolicy",
                      self.invalid("a", externalTrafficPolicy="Local"))
        self.assertIn("spec.externalTrafficPolicy",
                      self.invalid("a", type="NodePort", externalTrafficPolicy="Near"))
        self.created("b", type="NodePort", externalTrafficPolicy="Local",
                     internalTrafficPolicy="Local")

    def test_protocols(self):
        spec = self.created("a", ports=[{"port": 53, "protocol": "UDP"},
                                        {"port": 53, "protocol": "SCTP", "name": "x"}][:1])
        self.assertEqual(spec["ports"][0]["protocol"], "UDP")
        self.assertIn("spec.ports[0].protocol",
                      self.invalid("b", ports=[{"port": 53, "protocol": "ICMP"}]))

    def test_ports(self):
        errors = self.invalid("a", ports=[{"port": 0, "name": "a"}, {"port": 80},
                                          {"port": 81, "name": "a", "targetPort": "Bad_Name"}])
        self.assertIn("spec.ports[0].port", errors)
        self.assertIn("spec.ports[1].name", errors)
        self.assertIn("spec.ports[2].name", errors)
        self.assertIn("spec.ports[2].targetPort", errors)
        self.assertIn("spec.ports", self.invalid("b", ports=[]))
        self.assertIn("spec.ports[1]", self.invalid(
            "c", ports=[{"port": 80, "name": "a"}, {"port": 80, "name": "b"}]))

    def test_app_protocol(self):
        self.created("a", ports=[{"port": 80, "appProtocol": "orch.io/h2c"}])
        self.assertIn("spec.ports[0].appProtocol",
                      self.invalid("b", ports=[{"port": 80, "appProtocol": "not valid!"}]))

    def test_node_port_on_cluster_ip(self):
        self.assertIn("spec.ports[0].nodePort",
                      self.invalid("a", ports=[{"port": 80, "nodePort": 30001}]))

    def test_type(self):
        self.assertIn("spec.type", self.invalid("a", type="Magic"))

    def test_cluster_ip_immutable(self):
        self.created("a")
        code, obj, _ = self.api.call("PATCH", SERVICES + "/a",
                                     {"spec": {"clusterIP": "10.0.0.9",
                                               "clusterIPs": ["10.0.0.9"]}},
                                     content_type=b"application/merge-patch+json")
        self.assertEqual(code, 422, obj)

    def test_ports_merge_by_port(self):
        self.created("a", ports=[{"port": 80, "name": "http"}])
        code, obj, _ = self.api.call(
            "PATCH", SERVICES + "/a", {"spec": {"ports": [{"port": 443, "name": "https"}]}},
            content_type=b"application/strategic-merge-patch+json")
        self.assertEqual(code, 200, obj)
        self.assertEqual([p["port"] for p in obj["spec"]["ports"]], [80, 443])


class AllocationTests(ServiceTestCase):
    def test_dynamic_upper_band(self):
        spec = self.created("a")
        self.assertGreaterEqual(int(spec["clusterIP"].rsplit(".", 1)[1]), 17)

    def test_requested(self):
        self.assertEqual(self.created("a", clusterIP="10.0.0.3")["clusterIP"], "10.0.0.3")
        errors = self.invalid("b", clusterIP="10.0.0.3")
        self.assertIn("provided IP is already allocated", errors["spec.clusterIPs"])
        errors = self.invalid("c", clusterIP="10.0.1.3")
        self.assertIn("is not in the valid range", errors["spec.clusterIPs"])

    def test_exhaustion_and_release(self):
        for i in range(30):
            self.created(f"s{i}")
        code, obj = self.create("full")
        self.assertEqual(code, 500)
        self.assertEqual(obj["message"],
                         "Internal error occurred: failed to allocate a serviceIP: range is full")
        self.assertEqual(self.api.call("DELETE", SERVICES + "/s3")[0], 200)
        self.created("again")

    def test_failed_create_gives_back(self):
        """A create that fails after allocating (name taken) releases the IP."""
        self.created("a", clusterIP="10.0.0.4")
        code, _ = self.create("a", clusterIP="10.0.0.5")
        self.assertEqual(code, 409)
        self.created("b", clusterIP="10.0.0.5")

    def test_headless(self):
        spec = self.created("h", clusterIP="None", selector={"app": "x"})
        self.assertEqual(spec["clusterIPs"], ["None"])
        for i in range(30):
            self.created(f"s{i}")

    def test_external_name(self):
        spec = self.created("e", type="ExternalName", externalName="example.com", ports=[])
        self.assertNotIn("clusterIP", spec)

    def test_node_ports(self):
        spec = self.created("a", type="NodePort",
                            ports=[{"port": 80, "name": "a", "nodePort": 30080},
                                   {"port": 81, "name": "b"}])
        self.assertEqual(spec["ports"][0]["nodePort"], 30080)
        errors = self.invalid("b", type="NodePort", ports=[{"port": 80, "nodePort": 30080}])
        self.assertIn("provided port is already allocated", errors["spec.ports[0].nodePort"])
        # Back to ClusterIP (dropping node ports) frees them.
        code, obj, _ = self.api.call(
            "PUT", SERVICES + "/a",
            {"metadata": {"name": "a"},
             "spec": {"type": "ClusterIP", "ports": [{"port": 80, "name": "a"}]}})
        self.assertEqual(code, 200, obj)
        self.assertEqual(obj["spec"]["clusterIP"], spec["clusterIP"])
        self.created("b", type="NodePort", ports=[{"port": 80, "nodePort": 30080}])

    def test_update_keeps_node_ports(self):
        spec = self.created("a", type="NodePort")
        code, obj, _ = self.api.call(
            "PUT", SERVICES + "/a",
            {"metadata": {"name": "a"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}})
        self.assertEqual(code, 200, obj)
        self.assertEqual(obj["spec"]["ports"][0]["nodePort"], spec["ports"][0]["nodePort"])
        self.assertEqual(obj["spec"]["clusterIP"], spec["clusterIP"])


class IPv6Tests(ServiceTestCase):
    cidr = "fd00::/123"

    def test_ipv6(self):
        spec = self.created("a")
        self.assertEqual(spec["ipFamilies"], ["IPv6"])
        self.assertTrue(spec["clusterIP"].startswith("fd00::"))
        self.assertIn("spec.ipFamilies[0]", self.invalid("b", ipFamilies=["IPv4"]))


class SharedStoreTests(SynchronousTestCase):
    def test_two_servers_one_store(self):
        """Two API servers over one store never hand out the same cluster IP."""
        one = APIHarness(service_cluster_ip_range="10.0.0.0/29")
        two = APIHarness(service_cluster_ip_range="10.0.0.0/29", store=one.store)
        ips = []
        for i in range(3):
            for api in (one, two):
                code, obj, _ = api.call("POST", SERVICES, {
                    "metadata": {"name": f"s{len(ips)}"}, "spec": {"ports": [{"port": 80}]}})
                self.assertEqual(code, 201, obj)
                ips.append(obj["spec"]["clusterIP"])
        self.assertEqual(len(set(ips)), 6)
        code, _, _ = two.call("DELETE", SERVICES + "/s0")
        self.assertEqual(code, 200)
        code, obj, _ = one.call("POST", SERVICES, {"metadata": {"name": "last"},
                                                   "spec": {"ports": [{"port": 80}]}})
        self.assertEqual(obj["spec"]["clusterIP"], ips[0])


class ServiceStatusTests(SynchronousTestCase):
    def test_load_balancer_always_there(self):
        """A Service's status has loadBalancer from its creation and through status writes."""
        api = APIHarness()
        services = SERVICES
        code, svc, _ = api.call("POST", services, {"metadata": {"name": "s"},
                                                   "spec": {"ports": [{"port": 80}]},
                                                   "status": {"conditions": []}})
        self.assertEqual((code, svc["status"]), (201, {"loadBalancer": {}}))
        code, svc, _ = api.call("PATCH", services + "/s/status", {"status": None},
                                content_type=MERGE_PATCH)
        self.assertEqual((code, svc["status"]), (200, {"loadBalancer": {}}))
