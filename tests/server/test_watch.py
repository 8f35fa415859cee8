"""Watches over the in-memory server: events, selectors, bookmarks, expiry, slow clients."""

import orjson
import treq
from twisted.trial.unittest import SynchronousTestCase

from orchd.storage import watchcache
from tests.support import APIHarness

CM = "/api/v1/namespaces/default/configmaps"
MERGE = b"application/merge-patch+json"


class Stream:
    """A watch response read as it arrives."""

    def __init__(self, api, path, headers=None):
        self.api = api
        self.chunks = []
        self.response = api.treq.get("https://orchd" + path, headers=headers)
        self.pump()
        self.response = self._result(self.response)
        self.failure = None
        self.done = treq.collect(self.response, self.chunks.append)
        self.done.addErrback(self._broken)
        self.pump()

    def _broken(self, failure):
        self.failure = failure

    @staticmethod
    def _result(d):
        out = []
        d.addBoth(out.append)
        assert out, "no response yet"
        return out[0]

    def pump(self, seconds=0.25):
        self.api.clock.advance(seconds)
        self.api.treq.flush()

    def events(self):
        self.pump()
        lines = b"".join(self.chunks).split(b"\n")
        return [orjson.loads(line) for line in lines if line.strip()]

    def summary(self):
        return [(e["type"], e["object"].get("metadata", {}).get("name")) for e in self.events()]

    @property
    def ended(self):
        return self.done.called


class WatchTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.api.call("POST", CM, {"metadata": {"name": "a", "labels": {"app": "web"}}})

    def create(self, name, **labels):
        return self.api.call("POST", CM, {"metadata": {"name": name, "labels": labels}})[1]

    def test_initial_state_then_changes(self):
        """Without resourceVersion a watch starts with ADDED for what exists, then streams."""
        stream = Stream(self.api, CM + "?watch=true")
        self.assertEqual(stream.response.code, 200)
        self.assertEqual(stream.response.headers.getRawHeaders(b"content-type"),
                         [b"application/json"])
        self.assertEqual(stream.summary(), [("ADDED", "a")])
        self.create("b")
        self.api.call("PATCH", CM + "/b", {"data": {"k": "v"}}, content_type=MERGE)
        self.api.call("DELETE", CM + "/b")
        self.assertEqual(stream.summary(), [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "b"),
                                            ("DELETED", "b")])
        events = stream.events()
        self.assertEqual(events[2]["object"]["data"], {"k": "v"})
        self.assertEqual(events[1]["object"]["kind"], "ConfigMap")
        versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events[1:]]
        self.assertEqual(versions, sorted(versions))

    def test_from_list_revision(self):
        """A watch from the list's resourceVersion sees only later changes."""
        _, listed, _ = self.api.call("GET", CM)
        self.create("b")
        stream = Stream(self.api, CM + "?watch=1&resourceVersion="
                        + listed["metadata"]["resourceVersion"])
        self.create("c")
        self.assertEqual(stream.summary(), [("ADDED", "b"), ("ADDED", "c")])

    def test_too_old_is_410_error_event(self):
        """A revision older than the kept history gets an ERROR event with 410, then the end."""
        self.patch(watchcache, "HISTORY", 3)
        api = APIHarness()
        for i in range(6):
            api.call("POST", CM, {"metadata": {"name": f"x{i}"}})
        stream = Stream(api, CM + "?watch=true&resourceVersion=2")
        events = stream.events()
        self.assertEqual([e["type"] for e in events], ["ERROR"])
        self.assertEqual((events[0]["object"]["code"], events[0]["object"]["reason"]),
                         (410, "Expired"))
        self.assertIn("too old resource version: 2", events[0]["object"]["message"])
        self.assertTrue(stream.ended)

    def test_selector_transitions(self):
        """Under a selector, leaving the selection is DELETED and entering it ADDED."""
        stream = Stream(self.api, CM + "?watch=true&labelSelector=app%3Dweb")
        self.create("other", app="db")
        self.api.call("PATCH", CM + "/other", {"metadata": {"labels": {"app": "web"}}},
                      content_type=MERGE)
        self.api.call("PATCH", CM + "/a", {"metadata": {"labels": {"app": "db"}}},
                      content_type=MERGE)
        self.assertEqual(stream.summary(),
                         [("ADDED", "a"), ("ADDED", "other"), ("DELETED", "a")])
        deleted = stream.events()[-1]["object"]
        self.assertEqual(deleted["metadata"]["labels"], {"app": "web"})

    def test_namespace_scope_and_all_namespaces(self):
        """A namespace's watch sees only its objects; the cluster-wide one sees all."""
        mine = Stream(self.api, CM + "?watch=true&resourceVersion=0")
        everyone = Stream(self.api, "/api/v1/configmaps?watch=true")
        self.api.call("POST", "/api/v1/namespaces/orch-system/configmaps",
                      {"metadata": {"name": "sys"}})
        self.assertEqual(mine.summary(), [("ADDED", "a")])
        self.assertEqual(everyone.summary(), [("ADDED", "a"), ("ADDED", "sys")])

    def test_single_object_watch(self):
        """A field selector on metadata.name watches one object (kubectl get x -w)."""
        stream = Stream(self.api, CM + "?watch=true&fieldSelector=metadata.name%3Db")
        self.create("b")
        self.create("c")
        self.assertEqual(stream.summary(), [("ADDED", "b")])

    def test_bookmarks(self):
        """allowWatchBookmarks brings a BOOKMARK within a minute, carrying the revision."""
        stream = Stream(self.api, CM + "?watch=true&allowWatchBookmarks=true")
        self.create("b")
        stream.pump(60)
        events = stream.events()
        self.assertEqual(events[-1]["type"], "BOOKMARK")
        self.assertEqual(events[-1]["object"]["metadata"]["resourceVersion"],
                         events[-2]["object"]["metadata"]["resourceVersion"])
        self.assertEqual(events[-1]["object"]["kind"], "ConfigMap")
        quiet = Stream(self.api, CM + "?watch=true")
        quiet.pump(60)
        self.assertNotIn("BOOKMARK", [e["type"] for e in quiet.events()])

    def test_send_initial_events(self):
        """A streaming list ends its initial events with the annotated bookmark."""
        stream = Stream(self.api, CM + "?watch=true&sendInitialEvents=true&allowWatchBookmarks="
                        "true&resourceVersionMatch=NotOlderThan&resourceVersion=")
        self.create("b")
        events = stream.events()
        self.assertEqual([e["type"] for e in events], ["ADDED", "BOOKMARK", "ADDED"])
        self.assertEqual(events[1]["object"]["metadata"]["annotations"],
                         {"k8s.io/initial-events-end": "true"})

    def test_not_older_than_future_is_504(self):
        """A NotOlderThan revision the store has not reached times out with 504."""
        d = self.api.treq.get("https://orchd" + CM + "?watch=true&sendInitialEvents=true&"
                              "allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&"
                              "resourceVersion=999")
        self.api.clock.advance(4)
        self.api.treq.flush()
        response = self.successResultOf(d)
        self.assertEqual(response.code, 504)
        body = orjson.loads(self.successResultOf(treq.content(response)))
        self.assertIn("Too large resource version: 999", body["message"])

    def test_watch_validation(self):
        """Watch options are validated as upstream (422 on ListOptions)."""
        for query, text in (
                ("resourceVersionMatch=NotOlderThan&resourceVersion=1",
                 "resourceVersionMatch is forbidden for watch unless sendInitialEvents"),
                ("sendInitialEvents=true&allowWatchBookmarks=true",
                 "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
                ("sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=1",
                 'Unsupported value: "Exact"')):
            code, status, _ = self.api.call("GET", f"{CM}?watch=true&{query}")
            self.assertEqual(code, 422, query)
            self.assertIn(text, status["message"])

    def test_timeout_ends_stream(self):
        """timeoutSeconds ends the stream cleanly."""
        stream = Stream(self.api, CM + "?watch=true&timeoutSeconds=5")
        stream.pump(4)
        self.assertFalse(stream.ended)
        stream.pump(2)
        self.assertTrue(stream.ended)
        self.assertEqual(self.api.catalog.caches["/registry/configmaps/"].watchers, set())

    def test_legacy_watch_path(self):
        """/api/v1/watch/... is a watch too."""
        stream = Stream(self.api, "/api/v1/watch/namespaces/default/configmaps")
        self.assertEqual(stream.summary(), [("ADDED", "a")])

    def test_list_from_cache(self):
        """resourceVersion=0 lists from the watch cache."""
        _, listed, _ = self.api.call("GET", CM + "?resourceVersion=0")
        self.assertEqual([i["metadata"]["name"] for i in listed["items"]], ["a"])


class SlowClientTests(SynchronousTestCase):
    def test_stuck_client_is_dropped_others_unaffected(self):
        """A watcher that stops reading is dropped past its bound; others get every event."""
        self.patch(watchcache, "MAX_QUEUED_BYTES", 20_000)
        api = APIHarness()
        cache = api.catalog.caches["/registry/configmaps/"]
        streams = [Stream(api, CM + "?watch=true"), Stream(api, CM + "?watch=true")]
        stuck, healthy = list(cache.watchers)
        # The connection's buffer is full: the transport pauses its producer.
        stuck.sink.pauseProducing()
        for i in range(40):
            api.call("POST", CM, {"metadata": {"name": f"big-{i}"}, "data": {"k": "x" * 1000}})
            streams[0].pump()
        self.assertTrue(stuck.stopped)
        self.assertEqual(cache.watchers, {healthy})
        counts = sorted(len(stream.summary()) for stream in streams)
        self.assertEqual(counts[1], 40)
        self.assertLess(counts[0], 40)

    def test_paused_client_catches_up(self):
        """A watcher paused briefly gets everything once its connection drains."""
        api = APIHarness()
        stream = Stream(api, CM + "?watch=true")
        (watcher,) = api.catalog.caches["/registry/configmaps/"].watchers
        watcher.sink.pauseProducing()
        for i in range(5):
            api.call("POST", CM, {"metadata": {"name": f"c{i}"}})
        self.assertEqual(stream.summary(), [])
        watcher.sink.resumeProducing()
        self.assertEqual(len(stream.summary()), 5)

    def test_disconnect_releases_watcher(self):
        """A client that goes away leaves nothing behind."""
        api = APIHarness()
        cache = api.catalog.caches["/registry/configmaps/"]
        stream = Stream(api, CM + "?watch=true")
        (watcher,) = cache.watchers
        watcher.sink.request.channel.transport.loseConnection()
        stream.pump()
        self.assertEqual(cache.watchers, set())
        self.assertTrue(watcher.stopped)


class SharedFanOutTests(SynchronousTestCase):
    def test_like_watches_share_a_group(self):
        """Watches with equal selectors share one group; another selector has its own."""
        api = APIHarness()
        cache = api.catalog.caches["/registry/configmaps/"]
        web = [Stream(api, CM + "?watch=true&labelSelector=app%3Dweb") for _ in range(3)]
        other = Stream(api, CM + "?watch=true&labelSelector=app%3Ddb")
        self.assertEqual(len(cache.groups), 2)
        api.call("POST", CM, {"metadata": {"name": "w", "labels": {"app": "web"}}})
        api.call("POST", CM, {"metadata": {"name": "d", "labels": {"app": "db"}}})
        for stream in web:
            self.assertEqual(stream.summary(), [("ADDED", "w")])
        self.assertEqual(other.summary(), [("ADDED", "d")])
        self.assertEqual(b"".join(web[0].chunks), b"".join(web[2].chunks))
