"""The event recorder, and field selectors on events through the API."""

from urllib.parse import quote

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.events import EventRecorder, LRUCache
from orchd.registry.kinds.event import EventStrategy, EventsV1EventStrategy
from tests.support import APIHarness

NS = "/api/v1/namespaces"
EVENTS = "/api/v1/namespaces/default/events"
CMS = "/api/v1/namespaces/default/configmaps"


class RecorderTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.recorder = EventRecorder(self.api.catalog, self.api.clock, "test-controller",
                                      host="node-1")
        _, self.cm, _ = self.api.call("POST", CMS, {"metadata": {"name": "x"}})

    def events(self, namespace="default", selector=""):
        query = f"?fieldSelector={quote(selector)}" if selector else ""
        code, listed, _ = self.api.call("GET", f"{NS}/{namespace}/events{query}")
        self.assertEqual(code, 200, listed)
        return listed["items"]

    def record(self, obj, type, reason, message):
        self.assertIsNone(self.successResultOf(self.recorder.record(obj, type, reason, message)))

    def test_record_creates_event(self):
        """An event carries the involved object, reason, message, source, times, count and type."""
        self.record(self.cm, "Normal", "Synced", "all good")
        [event] = self.events()
        meta = self.cm["metadata"]
        self.assertRegex(event["metadata"]["name"], r"^x\.[0-9a-f]{16}$")
        self.assertEqual(event["metadata"]["namespace"], "default")
        self.assertEqual(event["involvedObject"], {
            "kind": "ConfigMap", "namespace": "default", "name": "x", "uid": meta["uid"],
            "apiVersion": "v1", "resourceVersion": meta["resourceVersion"]})
        self.assertEqual(event["reason"], "Synced")
        self.assertEqual(event["message"], "all good")
        self.assertEqual(event["source"], {"component": "test-controller", "host": "node-1"})
        self.assertEqual(event["firstTimestamp"], "2023-11-14T22:13:20Z")
        self.assertEqual(event["lastTimestamp"], "2023-11-14T22:13:20Z")
        self.assertEqual(event["count"], 1)
        self.assertEqual(event["type"], "Normal")
        self.assertEqual(event["reportingComponent"], "test-controller")
        self.assertEqual(event["reportingInstance"], "node-1")
        self.assertEqual((event["kind"], event["apiVersion"]), ("Event", "v1"))

    def test_names_are_unique(self):
        """Two events recorded at the same instant get different names."""
        self.record(self.cm, "Normal", "A", "one")
        self.record(self.cm, "Normal", "B", "two")
        names = {event["metadata"]["name"] for event in self.events()}
        self.assertEqual(len(names), 2)

    def test_repeat_aggregates_into_count(self):
        """The same event again raises count and lastTimestamp on the existing event."""
        self.record(self.cm, "Warning", "Failed", "it broke")
        self.api.clock.advance(30)
        self.record(self.cm, "Warning", "Failed", "it broke")
        [event] = self.events()
        self.assertEqual(event["count"], 2)
        self.assertEqual(event["firstTimestamp"], "2023-11-14T22:13:20Z")
        self.assertEqual(event["lastTimestamp"], "2023-11-14T22:13:50Z")

    def test_different_message_is_another_event(self):
        """An event differing in message is a separate event."""
        self.record(self.cm, "Warning", "Failed", "it broke")
        self.record(self.cm, "Warning", "Failed", "it broke again")
        self.assertEqual(sorted(e["message"] for e in self.events()),
                         ["it broke", "it broke again"])

    def test_repeat_after_window_is_new_event(self):
        """A repeat after the deduplication window starts a new event."""
        recorder = EventRecorder(self.api.catalog, self.api.clock, "c", window=60)
        self.successResultOf(recorder.record(self.cm, "Normal", "R", "m"))
        self.api.clock.advance(61)
        self.successResultOf(recorder.record(self.cm, "Normal", "R", "m"))
        self.assertEqual([e["count"] for e in self.events()], [1, 1])

    def test_deleted_event_is_written_again(self):
        """A repeat of an event deleted meanwhile creates it again with the running count."""
        self.record(self.cm, "Normal", "R", "m")
        [event] = self.events()
        self.api.call("DELETE", f"{EVENTS}/{event['metadata']['name']}")
        self.record(self.cm, "Normal", "R", "m")
        [again] = self.events()
        self.assertEqual(again["metadata"]["name"], event["metadata"]["name"])
        self.assertEqual(again["count"], 2)

    def test_similar_events_are_combined(self):
        """From the tenth distinct message on, similar events fold into one combined event."""
        for index in range(12):
            self.record(self.cm, "Warning", "Failed", f"error {index}")
        events = self.events()
        prefix = "(combined from similar events): "
        combined = [e for e in events if e["message"].startswith(prefix)]
        self.assertEqual(len(events), 10)
        self.assertEqual(len(combined), 1)
        self.assertEqual(combined[0]["count"], 3)
        self.assertEqual(combined[0]["message"], "(combined from similar events): error 11")

    def test_spam_is_limited(self):
        """A source may send 25 events about one object, then one every 5 minutes."""
        for _ in range(30):
            self.record(self.cm, "Normal", "Tick", "again")
        [event] = self.events()
        self.assertEqual(event["count"], 25)
        self.api.clock.advance(300)
        self.record(self.cm, "Normal", "Tick", "again")
        self.record(self.cm, "Normal", "Tick", "again")
        [event] = self.events()
        self.assertEqual(event["count"], 26)

    def test_cluster_scoped_object_goes_to_default(self):
        """Events about cluster-scoped objects are recorded in the default namespace."""
        _, ns, _ = self.api.call("POST", NS, {"metadata": {"name": "team"}})
        self.record(ns, "Normal", "Created", "namespace made")
        [event] = self.events()
        self.assertEqual(event["involvedObject"]["kind"], "Namespace")
        self.assertNotIn("namespace", event["involvedObject"])
        self.assertTrue(event["metadata"]["name"].startswith("team."))

    def test_unsupported_type_is_not_recorded(self):
        """A type other than Normal or Warning is refused without raising."""
        self.record(self.cm, "Error", "Bad", "nope")
        self.assertEqual(self.events(), [])

    def test_failures_are_logged_not_raised(self):
        """An event the server refuses (namespace missing) is dropped; the caller sees success."""
        ghost = {"kind": "ConfigMap", "apiVersion": "v1",
                 "metadata": {"name": "y", "namespace": "missing", "uid": "u"}}
        self.record(ghost, "Normal", "R", "m")
        self.assertEqual(self.events(), [])

    def test_events_not_served(self):
        """Without the events resource, recording does nothing and does not raise."""
        api = APIHarness(runtime_config="v1/events=false")
        self.assertIsNone(api.catalog.resource("", "events"))
        recorder = EventRecorder(api.catalog, api.clock, "c")
        self.assertIsNone(self.successResultOf(recorder.record(self.cm, "Normal", "R", "m")))

    def test_record_returns_before_writing(self):
        """record returns at once; events recorded during a slow write follow it in order."""
        provider = self.api.catalog.resource("", "events")
        real_create = provider.create
        gate = Deferred()

        async def slow_create(ctx, obj):
            await gate
            return await real_create(ctx, obj)

        provider.create = slow_create
        first = self.recorder.record(self.cm, "Normal", "First", "1")
        second = self.recorder.record(self.cm, "Normal", "Second", "2")
        self.assertNoResult(first)
        self.assertNoResult(second)
        self.assertEqual(self.events(), [])
        provider.create = real_create
        gate.callback(None)
        self.successResultOf(first)
        self.successResultOf(second)
        self.assertEqual(sorted(e["reason"] for e in self.events()), ["First", "Second"])


    def slow_creates(self):
        """Event creates wait for the returned Deferred; the list of names being created."""
        provider = self.api.catalog.resource("", "events")
        real_create = provider.create
        gate, started = Deferred(), []

        async def slow_create(ctx, obj):
            started.append(obj["reason"])
            await gate
            return await real_create(ctx, obj)

        provider.create = slow_create
        self.addCleanup(setattr, provider, "create", real_create)
        return gate, started

    def test_concurrent_writes(self):
        """A recorder with concurrency 2 has two events' writes under way at once, not a third."""
        recorder = EventRecorder(self.api.catalog, self.api.clock, "c", concurrency=2)
        gate, started = self.slow_creates()
        recorded = [recorder.record(self.cm, "Normal", reason, reason) for reason in "ABC"]
        self.assertEqual(started, ["A", "B"])
        gate.callback(None)
        for done in recorded:
            self.successResultOf(done)
        self.assertEqual(sorted(e["reason"] for e in self.events()), ["A", "B", "C"])

    def test_concurrent_repeat_waits_for_create(self):
        """A repeat recorded while its event is still being created raises the count after it."""
        recorder = EventRecorder(self.api.catalog, self.api.clock, "c", concurrency=4)
        gate, started = self.slow_creates()
        first = recorder.record(self.cm, "Warning", "Failed", "it broke")
        self.api.clock.advance(5)
        second = recorder.record(self.cm, "Warning", "Failed", "it broke")
        self.assertEqual(started, ["Failed"])
        gate.callback(None)
        self.successResultOf(first)
        self.successResultOf(second)
        [event] = self.events()
        self.assertEqual(event["count"], 2)
        self.assertEqual(event["lastTimestamp"], "2023-11-14T22:13:25Z")


class FieldSelectorTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        recorder = EventRecorder(self.api.catalog, self.api.clock, "test-controller")
        other = EventRecorder(self.api.catalog, self.api.clock, "other-controller")
        _, x, _ = self.api.call("POST", CMS, {"metadata": {"name": "x"}})
        _, z, _ = self.api.call("POST", CMS, {"metadata": {"name": "z"}})
        recorder.record(x, "Warning", "y", "x is failing")
        recorder.record(x, "Normal", "Synced", "x is fine")
        other.record(z, "Warning", "y", "z is failing")

    def select(self, selector, path=EVENTS):
        code, listed, _ = self.api.call("GET", f"{path}?fieldSelector={quote(selector)}")
        self.assertEqual(code, 200, listed)
        return sorted(item.get("message") or item.get("note") for item in listed["items"])

    def test_involved_object_name(self):
        """involvedObject.name selects events about one object."""
        self.assertEqual(self.select("involvedObject.name=x"), ["x is failing", "x is fine"])

    def test_reason(self):
        """reason selects by reason."""
        self.assertEqual(self.select("reason=y"), ["x is failing", "z is failing"])

    def test_type(self):
        """type=Warning selects warnings."""
        self.assertEqual(self.select("type=Warning"), ["x is failing", "z is failing"])

    def test_combined_and_negated(self):
        """Terms combine with AND, and != excludes."""
        self.assertEqual(self.select("type=Warning,involvedObject.name!=x"), ["z is failing"])

    def test_source_and_reporting_component(self):
        """source and reportingComponent select by the reporting component."""
        self.assertEqual(self.select("source=other-controller"), ["z is failing"])
        self.assertEqual(self.select("reportingComponent=test-controller"),
                         ["x is failing", "x is fine"])

    def test_involved_object_kind_and_namespace(self):
        """involvedObject.kind and involvedObject.namespace are selectable."""
        self.assertEqual(len(self.select("involvedObject.kind=ConfigMap,"
                                         "involvedObject.namespace=default")), 3)
        self.assertEqual(self.select("involvedObject.kind=Pod"), [])

    def test_unknown_field(self):
        """A field events do not support is a 400 with upstream's message."""
        code, status, _ = self.api.call("GET", f"{EVENTS}?fieldSelector=spec.foo%3Dbar")
        self.assertEqual(code, 400)
        self.assertEqual(status["message"], "field label not supported: spec.foo")

    def test_all_namespaces(self):
        """Selectors work across namespaces too."""
        self.assertEqual(self.select("involvedObject.name=z", path="/api/v1/events"),
                         ["z is failing"])

    def test_events_v1_selectors(self):
        """events.orch.io/v1 events are selected by regarding.*, reportingController and source."""
        path = "/apis/events.orch.io/v1/namespaces/default/events"
        for name, kind, controller in (("a", "Pod", "kubelet"), ("b", "Node", "")):
            code, created, _ = self.api.call("POST", path, {
                "metadata": {"name": f"{name}.1"}, "eventTime": "2023-11-14T22:13:20.000000Z",
                "regarding": {"kind": kind, "name": name, "namespace": "default"},
                "reason": "Started", "note": f"{name} note", "type": "Normal",
                "reportingController": controller, "reportingInstance": "i",
                "action": "Start", "deprecatedSource": {"component": "legacy"}})
            self.assertEqual(code, 201, created)
        self.assertEqual(self.select("regarding.name=a", path), ["a note"])
        self.assertEqual(self.select("regarding.kind=Node", path), ["b note"])
        self.assertEqual(self.select("reportingController=kubelet", path), ["a note"])
        self.assertEqual(self.select("source=legacy", path), ["a note", "b note"])
        code, status, _ = self.api.call("GET", f"{path}?fieldSelector=involvedObject.name%3Da")
        self.assertEqual((code, status["message"]),
                         (400, "field label not supported: involvedObject.name"))


class StrategyTests(SynchronousTestCase):
    def test_source_falls_back_to_reporting_component(self):
        """source is the source component, or else the reporting component."""
        strategy = EventStrategy()
        self.assertEqual(strategy.field_values({"source": {"component": "a"},
                                                "reportingComponent": "b"})["source"], "a")
        self.assertEqual(strategy.field_values({"reportingComponent": "b"})["source"], "b")
        self.assertEqual(strategy.field_values({})["source"], "")

    def test_events_v1_source(self):
        """For events.orch.io/v1, source is deprecatedSource.component or reportingController."""
        strategy = EventsV1EventStrategy()
        self.assertEqual(strategy.field_values({"reportingController": "c"})["source"], "c")
        values = strategy.field_values(
            {"deprecatedSource": {"component": "d"}, "regarding": {"uid": "u"}})
        self.assertEqual((values["source"], values["regarding.uid"], values["regarding.name"]),
                         ("d", "u", ""))


class LRUCacheTests(SynchronousTestCase):
    def test_least_recently_used_goes(self):
        """Past its size the cache forgets the entry used longest ago."""
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        self.assertEqual(cache.get("a"), 1)
        cache.put("c", 3)
        self.assertNotIn("b", cache)
        self.assertEqual((cache.get("a"), cache.get("c"), len(cache)), (1, 3, 2))
