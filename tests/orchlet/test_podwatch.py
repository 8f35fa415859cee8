"""Following pods: one list, then one watch, each pod handed to the worker of its node."""

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.orchlet.podwatch import PodWatch
from tests.orchlet.fakes import FakeAPI


def pod(name, node, rv="1"):
    return {"metadata": {"namespace": "ns", "name": name, "resourceVersion": rv},
            "spec": {"nodeName": node}}


class Worker:
    def __init__(self):
        self.calls = []

    def replace(self, pods):
        self.calls.append(("replace", sorted(p["metadata"]["name"] for p in pods)))

    def upsert(self, pod):
        self.calls.append(("upsert", pod["metadata"]["name"]))

    def remove(self, key):
        self.calls.append(("remove", key[1]))


class PodWatchTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.items = [pod("a", "n1"), pod("b", "n2"), pod("c", "elsewhere")]
        self.list_answer = None
        self.watch_answer = (200, None)
        self.api = FakeAPI(self.answer)
        self.workers = {"n1": Worker(), "n2": Worker()}
        self.watch = PodWatch(self.clock, self.api, "spec.nodeName!=", self.workers)

    def answer(self, method, path, body):
        if method == "GET":
            return self.list_answer or (200, {"metadata": {"resourceVersion": "7"},
                                              "items": self.items})
        return self.watch_answer

    def start(self):
        self.watch.start()
        self.addCleanup(self.watch.stop)

    def test_one_list_then_one_watch(self):
        """Listed pods go to their nodes' workers, others are dropped; the watch starts there."""
        self.start()
        self.assertEqual(self.workers["n1"].calls, [("replace", ["a"])])
        self.assertEqual(self.workers["n2"].calls, [("replace", ["b"])])
        [(_, list_path), (_, watch_path)] = self.api.calls()
        self.assertEqual(list_path, "/api/v1/pods?fieldSelector=spec.nodeName%21%3D")
        self.assertEqual(watch_path, list_path + "&watch=true&allowWatchBookmarks=true"
                                                 "&resourceVersion=7")
        self.clock.advance(3600)
        self.assertEqual(len(self.api.calls()), 2)

    def test_events_dispatched_by_node(self):
        """Watch events reach the worker of the pod's node and no other."""
        self.start()
        stream = self.api.stream
        stream.push("ADDED", pod("d", "n2", "8"))
        stream.push("MODIFIED", pod("a", "n1", "9"))
        stream.push("DELETED", pod("b", "n2", "10"))
        stream.push("ADDED", pod("e", "elsewhere", "11"))
        self.assertEqual(self.workers["n1"].calls[1:], [("upsert", "a")])
        self.assertEqual(self.workers["n2"].calls[1:], [("upsert", "d"), ("remove", "b")])
        self.assertEqual(self.watch.version, "11")

    def test_watch_resumes_from_last_version(self):
        """A watch that ends is opened again from the last version seen (a bookmark's too)."""
        self.start()
        self.api.stream.push("BOOKMARK", {"metadata": {"resourceVersion": "20"}})
        self.api.stream.stop()
        self.assertEqual(self.api.calls()[-1][1].rsplit("=", 1)[1], "20")
        self.assertEqual(self.watch.lists, 1)

    def test_gone_relists(self):
        """An ERROR event (410 Gone) ends the watch and everything is listed again."""
        self.start()
        self.api.stream.push("ERROR", {"code": 410, "message": "too old"})
        self.assertEqual(self.watch.lists, 2)
        self.assertEqual(self.workers["n1"].calls, [("replace", ["a"]), ("replace", ["a"])])

    def test_failed_list_backs_off(self):
        """A failed list is tried again after 0.2 s, then 0.4 s."""
        self.list_answer = (500, "down")
        self.start()
        self.assertEqual(len(self.api.calls("GET")), 1)
        self.clock.advance(0.2)
        self.assertEqual(len(self.api.calls("GET")), 2)
        self.list_answer = None
        self.clock.advance(0.4)
        self.assertEqual(self.watch.lists, 1)
        self.assertEqual(self.workers["n1"].calls, [("replace", ["a"])])

    def test_refused_watch_relists_later(self):
        """A refused watch means listing again after a back-off."""
        self.watch_answer = (403, "no")
        self.start()
        self.clock.advance(0.2)
        self.assertEqual(self.watch.lists, 2)

    def test_relist_on_demand(self):
        """relist() ends the watch so that a new worker gets its pods."""
        self.start()
        self.workers["n3"] = Worker()
        self.items.append(pod("f", "n3"))
        self.watch.relist()
        self.assertEqual(self.workers["n3"].calls, [("replace", ["f"])])

    def test_stop(self):
        """Stopping ends the watch and the loop."""
        self.start()
        self.successResultOf(self.watch.stop())
        self.assertTrue(self.api.stream.ended.called)
        self.clock.advance(60)
        self.assertEqual(len(self.api.calls()), 2)

    def test_stop_while_the_watch_opens(self):
        """A stop that comes while the watch is being opened ends that watch once it answers."""
        opening = Deferred()
        watch = self.api.watch

        async def slow_watch(path, on_event):
            await opening
            return await watch(path, on_event)

        self.api.watch = slow_watch
        self.start()
        stopped = self.watch.stop()
        self.assertNoResult(stopped)
        opening.callback(None)
        self.successResultOf(stopped)
        self.assertTrue(self.api.stream.ended.called)

    def test_stop_while_listing(self):
        """A stop that comes while the pods are being listed opens no watch."""
        listing = Deferred()
        request = self.api.request

        async def slow_request(method, path, body=None, content_type="application/json"):
            await listing
            return await request(method, path, body, content_type)

        self.api.request = slow_request
        self.start()
        stopped = self.watch.stop()
        listing.callback(None)
        self.successResultOf(stopped)
        self.assertEqual(self.api.calls("WATCH"), [])
