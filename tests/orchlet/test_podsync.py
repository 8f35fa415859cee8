"""Pod sync: relisted pods go to the runtime; their status goes back to the API."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.orchlet.podsync import PodSync
from tests.orchlet.fakes import FakeAPI, FakeRuntime


def pod(name, rv="1", **meta):
    return {"metadata": dict({"namespace": "ns", "name": name, "resourceVersion": rv,
                              "uid": f"uid-{name}"}, **meta),
            "spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}}


class PodSyncTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.items = []
        self.api = FakeAPI(self.answer)
        self.runtime = FakeRuntime()
        self.sync = PodSync(self.clock, self.api, self.runtime, "n1")

    def answer(self, method, path, body):
        if method == "GET":
            return 200, {"items": self.items}
        return 200, body or {}

    def test_new_pods_run_and_report(self):
        self.items = [pod("a")]
        self.successResultOf(self.sync.sync())
        self.assertEqual(self.runtime.synced, ["a"])
        self.assertEqual(self.api.calls("PATCH"), [("PATCH", "/api/v1/namespaces/ns/pods/a/status")])
        self.assertEqual(self.api.requests[-1][2], {"status": {"phase": "Running"}})
        self.successResultOf(self.sync.sync())
        self.assertEqual(self.runtime.synced, ["a"])          # unchanged: not synced again
        self.assertEqual(len(self.api.calls("PATCH")), 1)     # status unchanged: not written
        self.items = [pod("a", rv="2")]
        self.successResultOf(self.sync.sync())
        self.assertEqual(self.runtime.synced, ["a", "a"])

    def test_gone_pods_are_killed(self):
        self.items = [pod("a")]
        self.successResultOf(self.sync.sync())
        self.items = []
        self.successResultOf(self.sync.sync())
        self.assertEqual(self.runtime.killed, ["a"])

    def test_deleting_pods_are_killed_and_deleted(self):
        self.items = [pod("a")]
        self.successResultOf(self.sync.sync())
        self.items = [pod("a", rv="2", deletionTimestamp="2024-01-01T00:00:00Z")]
        self.successResultOf(self.sync.sync())
        self.assertEqual(self.runtime.killed, ["a"])
        method, path, body, _ = self.api.requests[-1]
        self.assertEqual((method, path), ("DELETE", "/api/v1/namespaces/ns/pods/a"))
        self.assertEqual(body["gracePeriodSeconds"], 0)
        self.assertEqual(body["preconditions"], {"uid": "uid-a"})

    def test_relist_interval(self):
        self.sync.start()
        self.clock.advance(0)
        self.clock.advance(2)
        self.assertEqual(len(self.api.calls("GET")), 2)
        self.assertIn("fieldSelector=spec.nodeName%3Dn1", self.api.requests[0][1])
        self.successResultOf(self.sync.stop())
