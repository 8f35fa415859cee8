"""Node status: the Node's description and its reports (on change, else every 5 min)."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd import __version__
from orchd.orchlet.nodestatus import NodeStatus, conditions, probe_machine
from tests.orchlet.fakes import FakeAPI

HEALTHY = {"Ready": True, "MemoryPressure": True, "DiskPressure": True, "PIDPressure": True,
           "NetworkUnavailable": True}


class ConditionTests(SynchronousTestCase):
    def test_healthy(self):
        result = {c["type"]: c for c in conditions(HEALTHY, "T1")}
        self.assertEqual(sorted(result), ["DiskPressure", "MemoryPressure", "NetworkUnavailable",
                                          "PIDPressure", "Ready"])
        self.assertEqual(result["Ready"], {
            "type": "Ready", "status": "True", "reason": "OrchletReady",
            "message": "orchlet is posting ready status", "lastHeartbeatTime": "T1",
            "lastTransitionTime": "T1"})
        self.assertEqual((result["MemoryPressure"]["status"], result["MemoryPressure"]["reason"]),
                         ("False", "OrchletHasSufficientMemory"))
        self.assertEqual(result["DiskPressure"]["reason"], "OrchletHasNoDiskPressure")
        self.assertEqual(result["PIDPressure"]["reason"], "OrchletHasSufficientPID")

    def test_transition_time_kept_until_change(self):
        first = conditions(HEALTHY, "T1")
        second = {c["type"]: c for c in conditions(dict(HEALTHY, DiskPressure=False), "T2", first)}
        self.assertEqual(second["Ready"]["lastTransitionTime"], "T1")
        self.assertEqual(second["Ready"]["lastHeartbeatTime"], "T2")
        self.assertEqual(second["DiskPressure"]["status"], "True")
        self.assertEqual(second["DiskPressure"]["lastTransitionTime"], "T2")

    def test_probe_machine(self):
        self.assertEqual(set(probe_machine(".")), set(HEALTHY))


class NodeStatusTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.api = FakeAPI()
        self.health = dict(HEALTHY)
        self.status = NodeStatus(self.clock, self.api, "n1", "127.0.0.1", "fake://1.0",
                                 ".", lambda: 10250,
                                 probe=lambda: dict(self.health))

    def posts(self):
        return len(self.api.calls("PATCH"))

    def test_node(self):
        """The Node carries labels, addresses, capacity, nodeInfo and the endpoint port."""
        node = self.status.node()
        self.assertEqual(node["metadata"]["labels"]["orch.io/hostname"], "n1")
        self.assertIn("orch.io/os", node["metadata"]["labels"])
        self.assertIn("orch.io/arch", node["metadata"]["labels"])
        status = node["status"]
        self.assertEqual(status["daemonEndpoints"], {"kubeletEndpoint": {"Port": 10250}})
        self.assertEqual(status["addresses"], [{"type": "InternalIP", "address": "127.0.0.1"},
                                               {"type": "Hostname", "address": "n1"}])
        self.assertEqual(status["capacity"]["pods"], "110")
        self.assertTrue(status["capacity"]["memory"].endswith("Ki"))
        self.assertEqual(set(status["allocatable"]),
                         {"cpu", "memory", "pods", "ephemeral-storage"})
        info = status["nodeInfo"]
        self.assertEqual(info["kubeletVersion"], f"v{__version__}")
        self.assertEqual(info["containerRuntimeVersion"], "fake://1.0")
        self.assertEqual(len(status["conditions"]), 5)

    def test_reports_on_change_and_every_5_minutes(self):
        self.status.start()
        self.clock.advance(0)
        self.assertEqual(self.posts(), 1)
        method, path, body, ctype = self.api.requests[0]
        self.assertEqual(path, "/api/v1/nodes/n1/status")
        self.assertEqual(ctype, "application/merge-patch+json")
        for _ in range(29):
            self.clock.advance(10)
        self.assertEqual(self.posts(), 1)        # nothing changed for 290 s
        self.clock.advance(10)
        self.assertEqual(self.posts(), 2)        # 300 s: the periodic report
        self.health["MemoryPressure"] = False
        self.clock.advance(10)
        self.assertEqual(self.posts(), 3)        # a condition changed
        memory = [c for c in self.api.requests[-1][2]["status"]["conditions"]
                  if c["type"] == "MemoryPressure"][0]
        self.assertEqual(memory["status"], "True")
        self.clock.advance(10)
        self.assertEqual(self.posts(), 3)

    def test_reports_at_their_phase(self):
        """With a phase, the periodic reports come at that point of the common 5-minute cycle."""
        self.status.report_phase = 150.0
        self.clock.advance(1000)            # registered at 1000: 200 s into a cycle
        self.status.start()
        self.clock.advance(0)
        self.assertEqual(self.posts(), 1)
        self.assertEqual(self.status.next_report(1000), 1050)
        self.assertEqual(self.status.next_report(1050), 1350)
        for _ in range(4):
            self.clock.advance(10)
        self.assertEqual(self.posts(), 1)        # 1040: not yet
        self.clock.advance(10)
        self.assertEqual(self.posts(), 2)        # 1050: the node's point of the cycle
        for _ in range(29):
            self.clock.advance(10)
        self.assertEqual(self.posts(), 2)
        self.clock.advance(10)
        self.assertEqual(self.posts(), 3)        # 1350, a cycle later

    def test_failed_post_is_retried(self):
        self.api.answer = lambda method, path, body: (503, {})
        self.status.start()
        self.clock.advance(0)
        self.clock.advance(0.2)
        self.assertEqual(self.posts(), 2)
        self.api.answer = lambda method, path, body: (200, body)
        self.clock.advance(0.4)
        self.assertEqual(self.posts(), 3)
        self.clock.advance(10)
        self.assertEqual(self.posts(), 3)
