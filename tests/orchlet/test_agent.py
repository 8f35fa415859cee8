"""Registration: create the Node (or update it on 409), then start the loops."""

from twisted.internet.defer import DeferredSemaphore
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.orchlet.agent import NodeAgent
from tests.orchlet.fakes import FakeAPI, FakeRuntime

HEALTHY = {"Ready": True}


class NodeAgentTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.api = FakeAPI(self.answer)
        self.existing = False
        self.down = False
        self.agent = NodeAgent(self.clock, self.api, FakeRuntime(), "n1", "127.0.0.1", ".",
                               lambda: 4321, probe=lambda: HEALTHY)
        self.addCleanup(self.agent.stopService)

    def answer(self, method, path, body):
        if self.down:
            raise ConnectionRefusedError()
        if getattr(self, "busy", False) and path.endswith("/status"):
            return 429, {"reason": "TooManyRequests"}
        if (method, path) == ("POST", "/api/v1/nodes"):
            if self.existing:
                return 409, {"reason": "AlreadyExists"}
            return 201, dict(body, metadata=dict(body["metadata"], uid="u-1"))
        if method == "GET" and path.startswith("/api/v1/pods"):
            return 200, {"items": []}
        if method == "GET":
            return 404, {}
        return (201 if method == "POST" else 200), body

    def test_register(self):
        self.agent.startService()
        node = self.successResultOf(self.agent.registered)
        self.assertEqual(node["metadata"]["uid"], "u-1")
        self.clock.advance(0)
        calls = self.api.calls()
        self.assertEqual(calls[:2], [("POST", "/api/v1/nodes"),
                                     ("PATCH", "/api/v1/nodes/n1/status")])
        self.assertIn(("POST", "/apis/coordination.orch.io/v1/namespaces/orch-node-lease/leases"),
                      calls)
        lease = [b for m, p, b, _ in self.api.requests if p.endswith("/leases")][0]
        self.assertEqual(lease["metadata"]["ownerReferences"][0]["uid"], "u-1")
        self.assertTrue(any(p.startswith("/api/v1/pods?fieldSelector=spec.nodeName%3Dn1")
                            for _, p in calls))

    def test_existing_node_is_updated(self):
        self.existing = True
        self.agent.startService()
        self.successResultOf(self.agent.registered)
        self.assertEqual(self.api.calls()[:3], [("POST", "/api/v1/nodes"),
                                                ("PATCH", "/api/v1/nodes/n1"),
                                                ("PATCH", "/api/v1/nodes/n1/status")])
        labels = self.api.requests[1][2]["metadata"]["labels"]
        self.assertEqual(labels["orch.io/hostname"], "n1")

    def test_retried_with_backoff(self):
        self.down = True
        self.agent.startService()
        self.clock.advance(0.2)
        self.clock.advance(0.4)
        self.assertEqual(len(self.api.calls()), 3)
        self.assertNoResult(self.agent.registered)
        self.down = False
        self.clock.advance(0.8)
        self.successResultOf(self.agent.registered)

    def test_status_refused_at_registration(self):
        """A status post refused after the Node is created is retried by the status loop at once,
        not by registering again."""
        self.busy = True
        self.agent.startService()
        self.successResultOf(self.agent.registered)
        self.assertEqual(self.api.calls("POST")[:1], [("POST", "/api/v1/nodes")])
        self.clock.advance(0)         # still refused: the loop backs off
        self.busy = False
        self.clock.advance(0.2)
        self.assertEqual(self.api.calls("PATCH"), [("PATCH", "/api/v1/nodes/n1/status")] * 3)
        self.assertEqual(self.api.calls("POST").count(("POST", "/api/v1/nodes")), 1)
        self.assertIsNotNone(self.agent.status.reported)

    def test_stop_while_retrying(self):
        self.down = True
        self.agent.startService()
        self.successResultOf(self.agent.stopService())
        self.assertEqual(self.clock.getDelayedCalls(), [])


class SimulatedAgentTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.api = FakeAPI(NodeAgentTests.answer.__get__(self))
        self.existing = self.down = False

    def test_capacity_labels_and_no_watch(self):
        """A node given capacity and labels reports them, and opens no pod watch of its own."""
        gate = DeferredSemaphore(1)
        agent = NodeAgent(self.clock, self.api, FakeRuntime(), "n1-sim-0", "127.0.0.1", ".",
                          lambda: 0, probe=lambda: {}, capacity={"cpu": "4", "pods": "10"},
                          labels={"orchlet.orch.io/simulated": "true"}, watch_pods=False,
                          stagger=3, registration_gate=gate)
        agent.startService()
        self.addCleanup(agent.stopService)
        self.successResultOf(agent.registered)
        _, _, node, _ = self.api.requests[0]
        self.assertEqual(node["metadata"]["labels"]["orchlet.orch.io/simulated"], "true")
        self.assertEqual(node["metadata"]["labels"]["orch.io/hostname"], "n1-sim-0")
        self.assertEqual(node["status"]["capacity"], {"cpu": "4", "pods": "10"})
        self.assertEqual(node["status"]["allocatable"], {"cpu": "4", "pods": "10"})
        self.assertEqual(node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"], 0)
        self.assertIsNone(agent.watch)
        self.clock.advance(2.9)
        self.assertFalse(any(p.endswith("/leases") for _, p in self.api.calls()))
        self.clock.advance(0.1)
        self.assertTrue(any(p.endswith("/leases") for _, p in self.api.calls()))
        self.assertFalse(any(p.startswith("/api/v1/pods") for _, p in self.api.calls()))

    def test_stop_while_waiting_for_the_gate(self):
        """An agent stopped while others hold the registration gate never registers."""
        gate = DeferredSemaphore(1)
        self.successResultOf(gate.acquire())            # another node's registration
        agent = NodeAgent(self.clock, self.api, FakeRuntime(), "n1-sim-1", "127.0.0.1", ".",
                          lambda: 0, probe=lambda: {}, watch_pods=False,
                          registration_gate=gate)
        agent.startService()
        self.successResultOf(agent.stopService())
        gate.release()
        self.clock.advance(10)
        self.assertEqual(self.api.calls(), [])
        self.assertEqual(gate.tokens, 1)
        self.assertNoResult(agent.registered)

    def test_stagger_asked_at_registration(self):
        """A callable stagger is asked when the node registers: its slot in a common cycle."""
        self.clock.advance(1000)
        asked = []

        def slot():
            asked.append(self.clock.seconds())
            return 7.5
        agent = NodeAgent(self.clock, self.api, FakeRuntime(), "n1-sim-2", "127.0.0.1", ".",
                          lambda: 0, probe=lambda: {}, watch_pods=False, stagger=slot)
        agent.startService()
        self.addCleanup(agent.stopService)
        self.successResultOf(agent.registered)
        self.assertEqual(asked, [1000])
        self.clock.advance(7.4)
        self.assertFalse(any(p.endswith("/leases") for _, p in self.api.calls()))
        self.clock.advance(0.1)
        self.assertTrue(any(p.endswith("/leases") for _, p in self.api.calls()))
