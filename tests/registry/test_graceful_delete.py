"""Graceful deletion of pods through the whole API server: marked first, removed at grace 0."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.garbagecollector import GarbageCollector
from orchd.controllers.namespaces import NamespaceController
from orchd.registry.kinds.pod import grace_period
from tests.server.test_watch import Stream
from tests.support import APIHarness

PODS = "/api/v1/namespaces/default/pods"
T0 = "2023-11-14T22:13:20Z"


def pod(name="p", node="n1", **spec):
    body = {"metadata": {"name": name},
            "spec": dict({"containers": [{"name": "c", "image": "nginx"}]}, **spec)}
    if node:
        body["spec"]["nodeName"] = node
    return body


def delete_options(**fields):
    return dict({"apiVersion": "v1", "kind": "DeleteOptions"}, **fields)


class GracePeriodTests(SynchronousTestCase):
    def test_grace_period_rules(self):
        """The request's, else terminationGracePeriodSeconds, else 30; 0 off a node or done."""
        self.assertEqual(grace_period(pod(), None), 30)
        self.assertEqual(grace_period(pod(), 5), 5)
        self.assertEqual(grace_period(pod(terminationGracePeriodSeconds=12), None), 12)
        self.assertEqual(grace_period(pod(terminationGracePeriodSeconds=12), 0), 0)
        self.assertEqual(grace_period(pod(node=None), 20), 0)
        for phase in ("Succeeded", "Failed"):
            self.assertEqual(grace_period(dict(pod(), status={"phase": phase}), None), 0)
        self.assertEqual(grace_period(dict(pod(), status={"phase": "Running"}), None), 30)
        self.assertEqual(grace_period(pod(terminationGracePeriodSeconds="12"), None), 30)


class GracefulDeleteTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def create(self, body):
        code, created, _ = self.api.call("POST", PODS, body)
        self.assertEqual(code, 201, created)
        return created

    def delete(self, name="p", **options):
        code, body, _ = self.api.call("DELETE", f"{PODS}/{name}",
                                      delete_options(**options) if options else None)
        return code, body

    def get(self, name="p"):
        return self.api.call("GET", f"{PODS}/{name}")[:2]

    def test_bound_pod_is_marked_not_removed(self):
        """DELETE of a bound pod sets deletionTimestamp and the default grace, answering it."""
        created = self.create(pod())
        code, body = self.delete()
        self.assertEqual(code, 200, body)
        meta = body["metadata"]
        self.assertEqual(body["kind"], "Pod")
        self.assertEqual(meta["deletionTimestamp"], "2023-11-14T22:13:50Z")
        self.assertEqual(meta["deletionGracePeriodSeconds"], 30)
        self.assertEqual(meta["generation"], created["metadata"]["generation"] + 1)
        code, stored = self.get()
        self.assertEqual(code, 200)
        self.assertEqual(stored["metadata"]["deletionTimestamp"], meta["deletionTimestamp"])

    def test_grace_from_request_or_spec(self):
        """The request's gracePeriodSeconds wins over terminationGracePeriodSeconds."""
        self.create(pod("a", terminationGracePeriodSeconds=12))
        self.create(pod("b", terminationGracePeriodSeconds=12))
        _, body = self.delete("a")
        self.assertEqual(body["metadata"]["deletionGracePeriodSeconds"], 12)
        _, body = self.delete("b", gracePeriodSeconds=3)
        self.assertEqual(body["metadata"]["deletionGracePeriodSeconds"], 3)
        self.assertEqual(body["metadata"]["deletionTimestamp"], "2023-11-14T22:13:23Z")

    def test_negative_grace_is_one_second(self):
        """A negative gracePeriodSeconds is read as 1 s, as upstream's delete path does."""
        self.create(pod())
        code, body = self.delete(gracePeriodSeconds=-5)
        self.assertEqual(code, 200, body)
        self.assertEqual(body["metadata"]["deletionGracePeriodSeconds"], 1)

    def test_query_grace_period(self):
        """?gracePeriodSeconds= is read as the body's field is."""
        self.create(pod())
        code, body, _ = self.api.call("DELETE", f"{PODS}/p?gracePeriodSeconds=7")
        self.assertEqual(body["metadata"]["deletionGracePeriodSeconds"], 7)

    def test_second_delete_shortens_never_lengthens(self):
        """A later DELETE may shorten the grace (moving the timestamp), never lengthen it."""
        self.create(pod())
        self.api.clock.advance(10)
        _, first = self.delete()
        self.assertEqual(first["metadata"]["deletionTimestamp"], "2023-11-14T22:14:00Z")
        self.api.clock.advance(5)
        code, same = self.delete(gracePeriodSeconds=60)
        self.assertEqual(code, 200)
        self.assertEqual(same, first)             # pending: nothing written
        code, again = self.delete()
        self.assertEqual(again, first)
        code, shorter = self.delete(gracePeriodSeconds=5)
        self.assertEqual(shorter["metadata"]["deletionGracePeriodSeconds"], 5)
        self.assertEqual(shorter["metadata"]["deletionTimestamp"], "2023-11-14T22:13:35Z")
        self.assertNotEqual(shorter["metadata"]["resourceVersion"],
                            first["metadata"]["resourceVersion"])

    def test_grace_zero_removes(self):
        """Grace 0 (the node agent's final delete, or --force) removes the pod at once."""
        self.create(pod("a"))
        self.create(pod("b"))
        self.delete("a")
        code, body = self.delete("a", gracePeriodSeconds=0)
        self.assertEqual(code, 200, body)
        self.assertEqual(self.get("a")[0], 404)
        code, body = self.delete("b", gracePeriodSeconds=0)
        self.assertEqual(code, 200, body)
        self.assertEqual(self.get("b")[0], 404)

    def test_unbound_and_finished_pods_go_at_once(self):
        """A pod on no node, or in a terminal phase, is removed by the first DELETE."""
        self.create(pod("free", node=None))
        self.assertEqual(self.delete("free")[0], 200)
        self.assertEqual(self.get("free")[0], 404)
        self.create(pod("done"))
        code, _, _ = self.api.call("PATCH", f"{PODS}/done/status",
                                   {"status": {"phase": "Succeeded"}},
                                   content_type=b"application/merge-patch+json")
        self.assertEqual(code, 200)
        self.delete("done")
        self.assertEqual(self.get("done")[0], 404)

    def test_uid_precondition(self):
        """The final delete names the uid: a pod created anew under the name is refused (409)."""
        old = self.create(pod())
        self.delete(gracePeriodSeconds=0)
        self.create(pod())
        code, body = self.delete(gracePeriodSeconds=0,
                                 preconditions={"uid": old["metadata"]["uid"]})
        self.assertEqual(code, 409, body)
        self.assertEqual(self.get()[0], 200)

    def test_finalizers_hold_after_grace_zero(self):
        """Finalizers keep a pod whose grace ran out, until the last one is removed."""
        self.create(dict(pod(), metadata={"name": "p", "finalizers": ["example.com/hold"]}))
        self.delete()
        code, body = self.delete(gracePeriodSeconds=0)
        self.assertEqual(code, 200)
        self.assertEqual(body["metadata"]["deletionGracePeriodSeconds"], 0)
        self.assertEqual(self.get()[0], 200)
        code, _, _ = self.api.call("PATCH", f"{PODS}/p", {"metadata": {"finalizers": None}},
                                   content_type=b"application/merge-patch+json")
        self.assertEqual(code, 200)
        self.assertEqual(self.get()[0], 404)

    def test_finalizer_removed_during_grace_keeps_pod(self):
        """Removing the finalizers while the grace period runs does not remove the pod."""
        self.create(dict(pod(), metadata={"name": "p", "finalizers": ["example.com/hold"]}))
        self.delete()
        self.api.call("PATCH", f"{PODS}/p", {"metadata": {"finalizers": None}},
                      content_type=b"application/merge-patch+json")
        code, body = self.get()
        self.assertEqual(code, 200)
        self.assertEqual(body["metadata"]["deletionGracePeriodSeconds"], 30)
        self.delete(gracePeriodSeconds=0)
        self.assertEqual(self.get()[0], 404)

    def test_dry_run_marks_nothing(self):
        """A dry-run DELETE answers the marked pod but stores nothing."""
        self.create(pod())
        code, body = self.delete(dryRun=["All"])
        self.assertEqual(code, 200)
        self.assertEqual(body["metadata"]["deletionGracePeriodSeconds"], 30)
        self.assertNotIn("deletionTimestamp", self.get()[1]["metadata"])

    def test_delete_collection_marks_bound_pods(self):
        """DELETE of the collection removes unbound pods and marks bound ones."""
        self.create(pod("bound"))
        self.create(pod("free", node=None))
        code, body, _ = self.api.call("DELETE", PODS)
        self.assertEqual(code, 200, body)
        self.assertEqual(self.get("free")[0], 404)
        code, bound = self.get("bound")
        self.assertEqual(bound["metadata"]["deletionGracePeriodSeconds"], 30)

    def test_other_kinds_go_at_once(self):
        """Kinds without a grace period (config maps) are removed by the first DELETE."""
        self.api.call("POST", "/api/v1/namespaces/default/configmaps",
                      {"metadata": {"name": "c"}})
        code, _, _ = self.api.call("DELETE", "/api/v1/namespaces/default/configmaps/c")
        self.assertEqual(code, 200)
        self.assertEqual(self.api.call("GET", "/api/v1/namespaces/default/configmaps/c")[0],
                         404)

    def test_watch_sees_modified_then_deleted(self):
        """A watcher sees the mark (MODIFIED, with deletionTimestamp) and then the removal."""
        self.create(pod())
        stream = Stream(self.api, f"{PODS}?watch=true")
        self.delete()
        self.delete(gracePeriodSeconds=0)
        events = stream.events()
        self.assertEqual([e["type"] for e in events], ["ADDED", "MODIFIED", "DELETED"])
        self.assertEqual(events[1]["object"]["metadata"]["deletionGracePeriodSeconds"], 30)
        self.assertIn("deletionTimestamp", events[2]["object"]["metadata"])


class ControllersTests(SynchronousTestCase):
    """The namespace controller and the garbage collector with pods that take time to go."""

    def setUp(self):
        self.api = APIHarness()

    def start(self, controller):
        controller.startService()
        self.addCleanup(controller.stopService)
        return controller

    def node_agent_finishes(self, path):
        """What the node agent does last: delete with grace 0 and the pod's uid."""
        code, pod, _ = self.api.call("GET", path)
        self.assertEqual(code, 200, pod)
        code, body, _ = self.api.call("DELETE", path, delete_options(
            gracePeriodSeconds=0, preconditions={"uid": pod["metadata"]["uid"]}))
        self.assertEqual(code, 200, body)

    def test_namespace_waits_for_running_pods(self):
        """A namespace being deleted waits until its bound pods are gone, then goes."""
        self.start(NamespaceController(self.api.catalog, self.api.clock, recheck=5))
        self.api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "team"}})
        pods = "/api/v1/namespaces/team/pods"
        self.assertEqual(self.api.call("POST", pods, pod())[0], 201)
        self.assertEqual(self.api.call("POST", pods, pod("free", node=None))[0], 201)
        self.api.call("DELETE", "/api/v1/namespaces/team")
        self.assertEqual(self.api.call("GET", f"{pods}/free")[0], 404)
        code, running, _ = self.api.call("GET", f"{pods}/p")
        self.assertEqual(running["metadata"]["deletionGracePeriodSeconds"], 30)
        self.api.clock.advance(5)
        self.assertEqual(self.api.call("GET", "/api/v1/namespaces/team")[0], 200)
        self.node_agent_finishes(f"{pods}/p")
        self.api.clock.advance(5)
        self.assertEqual(self.api.call("GET", "/api/v1/namespaces/team")[0], 404)

    def test_foreground_owner_waits_for_its_pods(self):
        """Foreground deletion of an owner holds it until its running pod is really gone."""
        self.start(GarbageCollector(self.api.catalog, self.api.clock))
        code, owner, _ = self.api.call("POST", "/api/v1/namespaces/default/configmaps",
                                       {"metadata": {"name": "owner"}})
        body = pod()
        body["metadata"]["ownerReferences"] = [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}]
        self.assertEqual(self.api.call("POST", PODS, body)[0], 201)
        self.api.clock.advance(1)
        code, _, _ = self.api.call("DELETE", "/api/v1/namespaces/default/configmaps/owner",
                                   delete_options(propagationPolicy="Foreground"))
        self.assertEqual(code, 200)
        self.api.clock.advance(1)
        code, marked, _ = self.api.call("GET", f"{PODS}/p")
        self.assertEqual(marked["metadata"]["deletionGracePeriodSeconds"], 30)
        self.assertEqual(self.api.call("GET",
                                       "/api/v1/namespaces/default/configmaps/owner")[0], 200)
        self.node_agent_finishes(f"{PODS}/p")
        self.api.clock.advance(1)
        self.assertEqual(self.api.call("GET",
                                       "/api/v1/namespaces/default/configmaps/owner")[0], 404)
