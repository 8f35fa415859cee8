"""Nodes: the status a create keeps, its defaults, and its resource quantities."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.registry.kinds.node import NODE_INFO_FIELDS
from tests.support import APIHarness

NODES = "/api/v1/nodes"
MERGE_PATCH = b"application/merge-patch+json"


class NodeStatusTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def test_create_keeps_status(self):
        """A node registers with its status, as upstream's node strategy allows."""
        code, node, _ = self.api.call("POST", NODES, {"metadata": {"name": "n1"}, "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "nodeInfo": {"kubeletVersion": "v1.0.0"}}})
        self.assertEqual(code, 201, node)
        status = node["status"]
        self.assertEqual(status["capacity"], {"cpu": "4", "memory": "8Gi", "pods": "110"})
        self.assertEqual(status["allocatable"], status["capacity"])
        self.assertEqual(status["nodeInfo"]["kubeletVersion"], "v1.0.0")
        self.assertEqual(status["nodeInfo"]["kubeProxyVersion"], "")

    def test_bare_node(self):
        """A node created without status has every field upstream's typed status writes."""
        code, node, _ = self.api.call("POST", NODES, {"metadata": {"name": "n1"}})
        self.assertEqual(node["status"], {
            "nodeInfo": {field: "" for field in NODE_INFO_FIELDS},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}}})

    def test_status_write_keeps_the_fields(self):
        """A status write without nodeInfo gets its fields back, and canonical quantities."""
        self.api.call("POST", NODES, {"metadata": {"name": "n1"}})
        code, node, _ = self.api.call("PATCH", NODES + "/n1/status", {"status": {
            "nodeInfo": None, "capacity": {"cpu": "2000m", "memory": "1048576Ki"},
            "allocatable": {"cpu": "1.5", "memory": "1Gi"}}}, content_type=MERGE_PATCH)
        self.assertEqual(code, 200, node)
        self.assertEqual(sorted(node["status"]["nodeInfo"]), sorted(NODE_INFO_FIELDS))
        self.assertEqual(node["status"]["capacity"], {"cpu": "2", "memory": "1Gi"})
        self.assertEqual(node["status"]["allocatable"], {"cpu": "1500m", "memory": "1Gi"})

    def test_negative_and_malformed_quantities(self):
        """Negative capacity is 422 at upstream's path; text that is no quantity is a 400."""
        code, status, _ = self.api.call("POST", NODES, {"metadata": {"name": "n1"}, "status": {
            "capacity": {"cpu": "-1"}}})
        self.assertEqual((code, status["details"]["causes"][0]["field"]),
                         (422, "status.capacity.cpu"))
        self.assertEqual(status["details"]["causes"][0]["message"],
                         'Invalid value: "-1": must be greater than or equal to 0')
        self.api.call("POST", NODES, {"metadata": {"name": "n2"}})
        code, status, _ = self.api.call("PATCH", NODES + "/n2/status", {"status": {
            "allocatable": {"memory": "lots"}}}, content_type=MERGE_PATCH)
        self.assertEqual(code, 400)
        self.assertTrue(status["message"].startswith(
            'Node in version "v1" cannot be handled as a Node: quantities must match'))

    def test_spec_update_keeps_status(self):
        """Cordoning a node leaves its status alone."""
        self.api.call("POST", NODES, {"metadata": {"name": "n1"}, "status": {
            "capacity": {"cpu": "4"}}})
        code, node, _ = self.api.call("PATCH", NODES + "/n1", {"spec": {"unschedulable": True},
                                                              "status": {"capacity": None}},
                                      content_type=MERGE_PATCH)
        self.assertEqual((code, node["status"]["capacity"]), (200, {"cpu": "4"}))

