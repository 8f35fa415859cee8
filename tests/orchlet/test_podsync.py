"""Pod sync: listed and watched pods go to the runtime; their status goes back to the API."""

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
            return 200, {"metadata": {"resourceVersion": "7"}, "items": self.items}
        if method == "WATCH":
            return self.watch_answer
        return 200, body or {}

    watch_answer = (200, None)

    def relist(self):
        """Make the next pass list again, as after the watch ended."""
        if self.sync.stream is not None:
            self.sync.stream.stop()

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
        self.relist()
        self.successResultOf(self.sync.sync())
        self.assertEqual(self.runtime.synced, ["a", "a"])

    def test_gone_pods_are_killed(self):
        self.items = [pod("a")]
        self.successResultOf(self.sync.sync())
        self.items = []
        self.relist()
        self.successResultOf(self.sync.sync())
        self.assertEqual(self.runtime.killed, ["a"])

    def test_deleting_pods_are_killed_and_deleted(self):
        self.items = [pod("a")]
        self.successResultOf(self.sync.sync())
        self.items = [pod("a", rv="2", deletionTimestamp="2024-01-01T00:00:00Z")]
        self.relist()
        self.successResultOf(self.sync.sync())
        self.assertEqual(self.runtime.killed, ["a"])
        method, path, body, _ = self.api.requests[-1]
        self.assertEqual((method, path), ("DELETE", "/api/v1/namespaces/ns/pods/a"))
        self.assertEqual(body["gracePeriodSeconds"], 0)
        self.assertEqual(body["preconditions"], {"uid": "uid-a"})

    def test_lists_once_then_watches(self):
        """One list, then a watch from its resourceVersion; passes every interval list nothing."""
        self.sync.start()
        self.clock.advance(0)
        self.clock.advance(2)
        self.clock.advance(2)
        self.assertEqual(self.api.calls("GET"), [("GET", "/api/v1/pods?fieldSelector="
                                                         "spec.nodeName%3Dn1")])
        [(_, path)] = self.api.calls("WATCH")
        self.assertTrue(path.endswith("&watch=true&allowWatchBookmarks=true&resourceVersion=7"))
        self.successResultOf(self.sync.stop())
        self.assertTrue(self.api.stream.ended.called)

    def test_watched_changes_sync_at_once(self):
        """An event starts a pass without waiting for the interval; DELETED kills the pod."""
        self.sync.start()
        self.clock.advance(0)
        self.api.stream.push("ADDED", pod("a"))
        self.assertEqual(self.runtime.synced, ["a"])
        self.api.stream.push("MODIFIED", pod("a", rv="2"))
        self.assertEqual(self.runtime.synced, ["a", "a"])
        self.api.stream.push("BOOKMARK", {"metadata": {"resourceVersion": "9"}})
        self.api.stream.push("DELETED", pod("a", rv="3"))
        self.assertEqual(self.runtime.killed, ["a"])
        self.assertEqual(len(self.api.calls("GET")), 1)
        self.successResultOf(self.sync.stop())

    def test_lists_again_after_the_watch_ends(self):
        """An ERROR event (410) ends the watch; the next pass lists and watches again."""
        self.sync.start()
        self.clock.advance(0)
        self.api.stream.push("ERROR", {"kind": "Status", "code": 410, "message": "too old"})
        self.assertIsNone(self.sync.stream)
        self.items = [pod("b")]
        self.clock.advance(2)
        self.assertEqual(len(self.api.calls("GET")), 2)
        self.assertEqual(len(self.api.calls("WATCH")), 2)
        self.assertEqual(self.runtime.synced, ["b"])
        self.successResultOf(self.sync.stop())

    def test_refused_watch_falls_back_to_listing(self):
        """When the watch is refused, each pass lists."""
        self.watch_answer = (403, "forbidden")
        self.sync.start()
        self.clock.advance(0)
        self.clock.advance(2)
        self.assertEqual(len(self.api.calls("GET")), 2)
        self.successResultOf(self.sync.stop())
