"""The node agent's events: written over its own client, correlated as client-go does."""

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.orchlet.events import APIEventRecorder
from tests.orchlet.fakes import FakeAPI

POD = {"kind": "Pod", "apiVersion": "v1",
       "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "resourceVersion": "4"}}
EVENTS = "/api/v1/namespaces/ns/events"


class APIEventRecorderTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.answers = {}
        self.api = FakeAPI(lambda method, path, body: self.answers.get(
            method, (201 if method == "POST" else 200, body)))
        self.recorder = APIEventRecorder(self.clock, self.api, "n1")

    def test_event_posted(self):
        """An event is POSTed about the pod and its container, from the orchlet on n1."""
        self.successResultOf(self.recorder.record(POD, "Normal", "Started",
                                                  "Started container app",
                                                  "spec.containers{app}"))
        [(method, path, event, _)] = self.api.requests
        self.assertEqual((method, path), ("POST", EVENTS))
        self.assertEqual(event["involvedObject"], {
            "kind": "Pod", "namespace": "ns", "name": "web", "uid": "u1", "apiVersion": "v1",
            "resourceVersion": "4", "fieldPath": "spec.containers{app}"})
        self.assertEqual(event["source"], {"component": "orchlet", "host": "n1"})
        self.assertEqual((event["reportingComponent"], event["reportingInstance"]),
                         ("orchlet", "n1"))
        self.assertEqual((event["type"], event["reason"], event["message"], event["count"]),
                         ("Normal", "Started", "Started container app", 1))
        self.assertTrue(event["metadata"]["name"].startswith("web."))

    def test_repeat_raises_count(self):
        """The same event again is a merge patch of count and lastTimestamp."""
        self.recorder.record(POD, "Normal", "BackOff", "Back-off pulling image")
        self.clock.advance(10)
        self.recorder.record(POD, "Normal", "BackOff", "Back-off pulling image")
        (_, _, first, _), (method, path, patch, ctype) = self.api.requests
        self.assertEqual((method, path, ctype), ("PATCH", f"{EVENTS}/{first['metadata']['name']}",
                                                 "application/merge-patch+json"))
        self.assertEqual(patch, {"count": 2, "lastTimestamp": "2023-11-14T22:13:30Z",
                                 "message": "Back-off pulling image"})

    def test_expired_repeat_is_written_again(self):
        """A repeat whose event is gone (404) is created anew, with its count."""
        self.recorder.record(POD, "Normal", "BackOff", "again")
        self.answers["PATCH"] = (404, {})
        self.recorder.record(POD, "Normal", "BackOff", "again")
        method, _, event, _ = self.api.requests[-1]
        self.assertEqual((method, event["count"]), ("POST", 2))

    def test_refusal_is_not_raised(self):
        """A refused or failed write is logged; recording still completes."""
        self.answers["POST"] = (403, {"message": "namespace is terminating"})
        self.successResultOf(self.recorder.record(POD, "Normal", "Pulled", "x"))

        def broken(method, path, body):
            raise ConnectionRefusedError()
        self.api.answer = broken
        self.successResultOf(self.recorder.record(POD, "Normal", "Pulled", "y"))
        self.flushLoggedErrors()

    def test_stop_waits_for_writes_then_drops(self):
        """stop() fires once the write under way ends; later events are not written."""
        pending = Deferred()

        async def slow(method, path, body=None, content_type="application/json"):
            self.api.requests.append((method, path, body, content_type))
            return await pending
        self.api.request = slow
        self.recorder.record(POD, "Normal", "Pulled", "x")
        stopped = self.recorder.stop()
        self.assertNoResult(stopped)
        pending.callback((201, {}))
        self.successResultOf(stopped)
        self.successResultOf(self.recorder.record(POD, "Normal", "Started", "y"))
        self.assertEqual(len(self.api.requests), 1)
