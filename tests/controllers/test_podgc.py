"""The pod garbage collector: a Node's deletion deletes the pods bound to it."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.podgc import PodGarbageCollector
from tests.support import APIHarness

NODES = "/api/v1/nodes"
PODS = "/api/v1/namespaces/default/pods"


def pod(name, node):
    return {"metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}}


class PodGCTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.clock = self.api.clock
        for name in ("n1", "n2"):
            self.api.call("POST", NODES, {"metadata": {"name": name}})

    def start(self):
        gc = PodGarbageCollector(self.api.catalog, self.clock)
        gc.startService()
        self.addCleanup(gc.stopService)
        self.successResultOf(gc.started)
        return gc

    def create(self, body):
        code, obj, _ = self.api.call("POST", PODS, body)
        self.assertEqual(code, 201, obj)

    def exists(self, name):
        return self.api.call("GET", f"{PODS}/{name}")[0] == 200

    def test_node_deletion_deletes_pods(self):
        """Deleting a Node deletes its pods at once, and only its pods; the names are free."""
        self.start()
        self.create(pod("a", "n1"))
        self.create(pod("b", "n2"))
        self.create({"metadata": {"name": "unbound"},
                     "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        self.assertEqual(self.api.call("DELETE", f"{NODES}/n1")[0], 200)
        self.assertFalse(self.exists("a"))
        self.assertTrue(self.exists("b"))
        self.assertTrue(self.exists("unbound"))
        self.create(pod("a", "n2"))

    def test_orphans_at_start(self):
        """Pods bound to a node missing at start are deleted after the quarantine."""
        self.create(pod("a", "gone"))
        self.create(pod("b", "n1"))
        self.start()
        self.clock.advance(39)
        self.assertTrue(self.exists("a"))
        self.clock.advance(1)
        self.assertFalse(self.exists("a"))
        self.assertTrue(self.exists("b"))

    def test_node_registered_in_quarantine(self):
        """A pod bound before its Node registers stays when the Node comes in time."""
        self.start()
        self.create(pod("a", "n3"))
        self.clock.advance(10)
        self.api.call("POST", NODES, {"metadata": {"name": "n3"}})
        self.clock.advance(60)
        self.assertTrue(self.exists("a"))

    def test_terminating_on_out_of_service_node(self):
        """A pod being deleted on a not-ready node goes once the node is tainted out-of-service."""
        self.start()
        self.create(pod("a", "n1"))
        self.create(pod("b", "n1"))
        self.create(pod("c", "n2"))
        for name in ("a", "c"):
            self.assertEqual(self.api.call("DELETE", f"{PODS}/{name}")[0], 200)
        self.clock.advance(60)
        self.assertTrue(self.exists("a"))              # no agent: Terminating, as upstream
        taint = {"key": "node.orch.io/out-of-service", "value": "nodeshutdown",
                 "effect": "NoExecute"}
        code, body, _ = self.api.call("PATCH", f"{NODES}/n1", {"spec": {"taints": [taint]}},
                                      content_type=b"application/merge-patch+json")
        self.assertEqual(code, 200, body)
        self.assertFalse(self.exists("a"))
        self.assertTrue(self.exists("b"))              # not being deleted: left alone
        self.assertTrue(self.exists("c"))              # n2 is not out of service
        self.assertEqual(self.api.call("DELETE", f"{PODS}/b")[0], 200)
        self.assertFalse(self.exists("b"))
