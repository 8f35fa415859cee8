"""One node's pods: run on change, status written, graceful deletion finished, retries."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.orchlet.podworker import PodWorker
from orchd.orchlet.runtime import IRuntimeObserver
from orchd.orchlet.simulated import SimulatedRuntime
from tests.orchlet.fakes import FakeAPI, FakeRuntime
from tests.support import APIHarness

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
            {"type": "PodScheduled", "status": "True",
             "lastTransitionTime": "2024-01-01T00:00:00Z"},
            {"type": "example.com/gate", "status": "False"}]}
        self.worker.replace([pod("a", status=stored)])
        self.runtime.sync_pod(pod("a"))
        self.runtime.statuses[("ns", "a")] = (pod("a"), {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True",
             "lastTransitionTime": "2024-06-01T00:00:00Z"}]})
        self.settle()
        [(_, body)] = self.patches()
        self.assertEqual(body["status"]["conditions"], [
            {"type": "PodScheduled", "status": "True", "reason": None, "message": None,
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

    def test_pod_recreated_under_the_same_name_is_deleted_too(self):
        """A new pod of an old one's name, seen in the same pass as its DELETED, starts afresh."""
        self.worker.replace([pod("a", status={"phase": "Running"})])
        self.settle()
        self.worker.upsert(pod("a", rv="2", status={"phase": "Running"},
                               deletionTimestamp="2024-01-01T00:00:30Z",
                               deletionGracePeriodSeconds=30))
        self.settle()
        self.runtime.statuses[("ns", "a")] = (pod("a"), {"phase": "Succeeded"})
        self.runtime.stops[("ns", "a")].callback(None)
        self.settle()
        self.worker.remove(("ns", "a"))
        self.worker.upsert(pod("a", rv="7", uid="uid-a2", status={"phase": "Pending"}))
        self.settle()
        self.worker.upsert(pod("a", rv="8", uid="uid-a2", status={"phase": "Running"},
                               deletionTimestamp="2024-01-01T00:01:30Z",
                               deletionGracePeriodSeconds=30))
        self.settle()
        self.assertEqual(self.runtime.stopping, [("a", 30), ("a", 30)])
        self.settle()         # the fake's stop of "a" has fired already: stopped at once
        deletes = [body["preconditions"]["uid"] for method, _, body, _ in self.api.requests
                   if method == "DELETE"]
        self.assertEqual(deletes, ["uid-a", "uid-a2"])

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


class HarnessAPI:
    """The node agent's client, answered by an in-memory API server."""

    def __init__(self, harness):
        self.harness = harness
        self.requests = []

    async def request(self, method, path, body=None, content_type="application/json"):
        self.requests.append((method, path))
        code, answer, _ = self.harness.call(method, path, body,
                                            content_type=content_type.encode("ascii"))
        return code, answer


class WorkerAgainstServerTests(SynchronousTestCase):
    """The worker, the simulated runtime and a whole API server, on one clock."""

    def setUp(self):
        self.harness = APIHarness()
        self.clock = self.harness.clock
        self.api = HarnessAPI(self.harness)
        self.runtime = SimulatedRuntime(self.clock, host_ip="192.0.2.7")
        self.worker = PodWorker(self.clock, self.api, self.runtime, "n1")
        body = {"metadata": {"name": "web", "annotations": {
                    "orchlet.orch.io/ready-after": "2s", "orchlet.orch.io/stop-after": "1s"}},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]}}
        code, created, _ = self.harness.call("POST", "/api/v1/namespaces/default/pods", body)
        self.assertEqual(code, 201, created)
        self.feed()

    def stored(self):
        code, body, _ = self.harness.call("GET", "/api/v1/namespaces/default/pods/web")
        return body if code == 200 else None

    def feed(self):
        """Hand the worker the stored pod (what the watch would), and let it work."""
        found = self.stored()
        if found is None:
            self.worker.remove(("default", "web"))
        else:
            self.worker.upsert(found)
        self.clock.advance(0)

    def conditions(self):
        return {c["type"]: c for c in self.stored()["status"]["conditions"]}

    def patches(self):
        return [request for request in self.api.requests if request[0] == "PATCH"]

    def test_lifecycle_as_stored(self):
        """What is stored follows the pod: ContainerCreating, Running, Ready, no stale reasons."""
        self.assertEqual(self.stored()["status"]["containerStatuses"][0]["state"],
                         {"waiting": {"reason": "ContainerCreating"}})
        self.assertEqual(self.conditions()["Ready"]["reason"], "ContainersNotReady")
        for _ in range(3):
            self.clock.advance(1)
            self.feed()
        self.assertEqual(self.stored()["status"]["phase"], "Running")
        self.assertEqual(self.conditions()["Ready"], {
            "type": "Ready", "status": "True", "lastTransitionTime": "2023-11-14T22:13:23Z"})
        self.assertEqual(len(self.patches()), 3)       # creating, running, ready
        self.feed()
        self.assertEqual(len(self.patches()), 3)       # nothing new: nothing written

    def test_graceful_deletion_ends_with_the_node(self):
        """DELETE marks the pod; the worker stops it, writes its end and removes it."""
        for _ in range(3):
            self.clock.advance(1)
            self.feed()
        code, body, _ = self.harness.call("DELETE", "/api/v1/namespaces/default/pods/web")
        self.assertEqual((code, body["metadata"]["deletionGracePeriodSeconds"]), (200, 30))
        self.feed()
        self.assertEqual(self.conditions()["Ready"]["status"], "False")
        self.clock.advance(1)                  # stop-after: the container has stopped
        self.assertIsNone(self.stored())
        self.assertEqual(self.api.requests[-1][0], "DELETE")
        self.feed()
        self.assertIsNone(self.runtime.pod_status("default", "web"))
