"""One node's pods: run on change, status written, graceful deletion finished, retries."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.orchlet.podworker import PodWorker
from orchd.orchlet.runtime import IRuntimeObserver
from tests.orchlet.fakes import FakeAPI, FakeRuntime

STATUS = "/api/v1/namespaces/ns/pods/{}/status"


def pod(name, rv="1", status=None, **meta):
    return {"metadata": dict({"namespace": "ns", "name": name, "resourceVersion": rv,
                              "uid": f"uid-{name}"}, **meta),
            "spec": {"nodeName": "n1"}, "status": status or {"phase": "Pending"}}


class Recorder:
    def __init__(self):
        self.events = []

    def record(self, obj, type, reason, message, field_path=None):
        self.events.append((obj["kind"], obj["metadata"]["name"], type, reason, message,
                            field_path))


class PodWorkerTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.answers = {}
        self.api = FakeAPI(self.answer)
        self.runtime = FakeRuntime()
        self.recorder = Recorder()
        self.worker = PodWorker(self.clock, self.api, self.runtime, "n1", self.recorder)

    def answer(self, method, path, body):
        if (method, path) in self.answers:
            return self.answers[(method, path)]
        if method == "PATCH":
            return 200, {"metadata": {}}
        return 200, body or {}

    def settle(self):
        self.clock.advance(0)

    def patches(self):
        return [(path, body) for method, path, body, _ in self.api.requests if method == "PATCH"]

    def test_observer(self):
        """The worker is the runtime's observer."""
        self.assertTrue(verifyObject(IRuntimeObserver, self.worker))
        self.assertIs(self.runtime.observer, self.worker)

    def test_new_pod_runs_and_reports(self):
        """A listed pod is synced and its status written as a strategic merge patch."""
        self.worker.replace([pod("a")])
        self.settle()
        self.assertEqual(self.runtime.synced, ["a"])
        [(method, path, body, ctype)] = self.api.requests
        self.assertEqual((method, path, ctype), ("PATCH", STATUS.format("a"),
                                                 "application/strategic-merge-patch+json"))
        self.assertEqual(body, {"status": {"phase": "Running"}})

    def test_unchanged_pod_is_left_alone(self):
        """The same object again is not synced again, and an equal status not written."""
        self.worker.replace([pod("a", status={"phase": "Running"})])
        self.settle()
        self.worker.upsert(pod("a", status={"phase": "Running"}))
        self.settle()
        self.assertEqual(self.runtime.synced, ["a"])
        self.assertEqual(self.api.requests, [])

    def test_marks_in_one_turn_are_handled_together(self):
        """Changes made in one reactor turn are handled once, in the next turn."""
        self.worker.upsert(pod("a"))
        self.worker.upsert(pod("a", rv="2"))
        self.assertEqual(self.runtime.synced, [])
        self.settle()
        self.assertEqual(self.runtime.synced, ["a"])

    def test_older_version_is_ignored(self):
        """A watch event older than the version already seen does not replace it."""
        self.worker.upsert(pod("a", rv="5"))
        self.worker.upsert(pod("a", rv="4"))
        self.assertEqual(self.worker.pods[("ns", "a")]["metadata"]["resourceVersion"], "5")

    def test_runtime_changes_are_reported(self):
        """A status the runtime changes by itself is written without any API change."""
        self.worker.replace([pod("a", status={"phase": "Running"})])
        self.settle()
        self.runtime.set_status("ns", "a", {"phase": "Succeeded"})
        self.settle()
        self.assertEqual(self.patches(), [
            (STATUS.format("a"), {"status": {"phase": "Succeeded"}})])

    def test_stored_conditions_of_others_kept(self):
        """The patch carries only the agent's conditions; the scheduler's time is kept."""
        stored = {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"},
            {"type": "example.com/gate", "status": "False"}]}
        self.worker.replace([pod("a", status=stored)])
        self.runtime.sync_pod(pod("a"))
        self.runtime.statuses[("ns", "a")] = (pod("a"), {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
             "lastTransitionTime": "2024-06-01T00:00:00Z"}]})
        self.settle()
        [(_, body)] = self.patches()
        self.assertEqual(body["status"]["conditions"], [
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
             "lastTransitionTime": "2024-01-01T00:00:00Z"}])

    def test_events_go_to_the_recorder(self):
        """Events the runtime reports are recorded about the Pod, with their field path."""
        self.worker.pod_event(pod("a"), "Normal", "Started", "Started container c",
                              "spec.containers{c}")
        self.assertEqual(self.recorder.events, [
            ("Pod", "a", "Normal", "Started", "Started container c", "spec.containers{c}")])

    def test_gone_pods_are_killed(self):
        """A pod deleted from the API (or missing from a relist) is killed in the runtime."""
        self.worker.replace([pod("a"), pod("b")])
        self.settle()
        self.worker.remove(("ns", "a"))
        self.worker.replace([])
        self.settle()
        self.assertEqual(sorted(self.runtime.killed), ["a", "b"])

    def test_graceful_deletion(self):
        """A deleted pod is stopped within its grace, its last status written, then deleted."""
        self.worker.replace([pod("a", status={"phase": "Running"})])
        self.settle()
        self.worker.upsert(pod("a", rv="2", status={"phase": "Running"},
                               deletionTimestamp="2024-01-01T00:00:30Z",
                               deletionGracePeriodSeconds=30))
        self.settle()
        self.assertEqual(self.runtime.stopping, [("a", 30)])
        self.assertEqual(self.api.calls("DELETE"), [])
        # A shorter grace period is passed on; the same one is not.
        self.worker.upsert(pod("a", rv="3", status={"phase": "Running"},
                               deletionTimestamp="2024-01-01T00:00:05Z",
                               deletionGracePeriodSeconds=5))
        self.settle()
        self.assertEqual(self.runtime.stopping, [("a", 30), ("a", 5)])
        self.runtime.statuses[("ns", "a")] = (pod("a"), {"phase": "Succeeded"})
        self.runtime.stops[("ns", "a")].callback(None)
        self.settle()
        self.assertEqual(self.patches(), [
            (STATUS.format("a"), {"status": {"phase": "Succeeded"}})])
        method, path, body, _ = self.api.requests[-1]
        self.assertEqual((method, path), ("DELETE", "/api/v1/namespaces/ns/pods/a"))
        self.assertEqual(body["gracePeriodSeconds"], 0)
        self.assertEqual(body["preconditions"], {"uid": "uid-a"})
        # The pod object changes again before its DELETED event: not deleted twice.
        self.worker.upsert(pod("a", rv="5", status={"phase": "Succeeded"},
                               deletionTimestamp="2024-01-01T00:00:05Z",
                               deletionGracePeriodSeconds=0))
        self.settle()
        self.assertEqual(len(self.api.calls("DELETE")), 1)
        self.worker.remove(("ns", "a"))
        self.settle()
        self.assertEqual(self.runtime.killed, ["a"])
        self.assertEqual(self.worker.stopping, {})

    def test_deleted_before_it_ran(self):
        """A pod first seen being deleted never runs: it is deleted at once."""
        self.worker.replace([pod("a", deletionTimestamp="2024-01-01T00:00:00Z",
                                 deletionGracePeriodSeconds=30)])
        self.settle()
        self.assertEqual(self.runtime.synced, [])
        self.assertEqual(self.api.calls(), [("DELETE", "/api/v1/namespaces/ns/pods/a")])

    def test_deleted_elsewhere_or_replaced(self):
        """404 (gone) and 409 (another uid by now) end the deletion without retries."""
        for code in (404, 409):
            name = f"p{code}"
            self.answers[("DELETE", f"/api/v1/namespaces/ns/pods/{name}")] = (code, {})
            self.worker.upsert(pod(name, deletionTimestamp="2024-01-01T00:00:00Z"))
        self.settle()
        self.clock.advance(60)
        self.assertEqual(len(self.api.calls("DELETE")), 2)

    def test_failures_are_retried_with_backoff(self):
        """A write that fails for a passing reason (5xx, no connection) is retried later."""
        self.answers[("PATCH", STATUS.format("a"))] = (503, "busy")
        self.worker.replace([pod("a")])
        self.settle()
        self.assertEqual(len(self.patches()), 1)
        self.clock.advance(0.2)
        self.assertEqual(len(self.patches()), 2)
        del self.answers[("PATCH", STATUS.format("a"))]
        self.clock.advance(0.4)
        self.assertEqual(len(self.patches()), 3)
        self.clock.advance(60)
        self.assertEqual(len(self.patches()), 3)

    def test_refused_write_is_not_retried(self):
        """A write the server refuses (4xx) is logged, not repeated."""
        self.answers[("PATCH", STATUS.format("a"))] = (422, {"message": "no"})
        self.worker.replace([pod("a")])
        self.settle()
        self.clock.advance(60)
        self.assertEqual(len(self.patches()), 1)

    def test_stop(self):
        """Once stopped, nothing more is handled."""
        self.successResultOf(self.worker.stop())
        self.worker.replace([pod("a")])
        self.clock.advance(1)
        self.assertEqual(self.runtime.synced, [])

    def test_stop_with_work_pending(self):
        """Stopping while pods are marked but not yet handled ends at once, handling nothing."""
        self.worker.replace([pod("a")])
        stopped = self.worker.stop()
        self.clock.advance(0)
        self.successResultOf(stopped)
        self.assertEqual(self.runtime.synced, [])
