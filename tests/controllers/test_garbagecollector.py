"""The garbage collector, end to end through the API: background, foreground and orphan."""

from urllib.parse import quote

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.controllers.garbagecollector import GarbageCollector
from tests.support import APIHarness

NS = "/api/v1/namespaces"
CMS = "/api/v1/namespaces/default/configmaps"
CLUSTER_ROLES = "/apis/rbac.authorization.orch.io/v1/clusterroles"
MERGE_PATCH = b"application/merge-patch+json"
GHOST_UID = "6f1c0a7e-0000-4000-8000-000000000000"


def owner_ref(obj, block=None, api_version="v1", kind="ConfigMap"):
    """An owner reference to C{obj}."""
    ref = {"apiVersion": api_version, "kind": kind, "name": obj["metadata"]["name"],
           "uid": obj["metadata"]["uid"]}
    if block is not None:
        ref["blockOwnerDeletion"] = block
    return ref


def run_one_turn(clock):
    """Run the calls due now, but not those they schedule: one reactor turn."""
    due = [call for call in clock.getDelayedCalls() if call.getTime() <= clock.seconds()]
    for call in due:
        if call.active():
            clock.calls.remove(call)
            call.called = 1
            call.func(*call.args, **call.kw)
    return bool(due)


class GarbageCollectorTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def start(self, **kwargs):
        gc = GarbageCollector(self.api.catalog, self.api.clock, **kwargs)
        gc.startService()
        self.addCleanup(gc.stopService)
        self.successResultOf(gc.started)
        self.settle()
        return gc

    def settle(self):
        """Let the collector work until nothing is due (retries are not due yet)."""
        self.api.clock.advance(0)

    def create(self, name, owners=(), finalizers=(), collection=CMS):
        metadata = {"name": name}
        if owners:
            metadata["ownerReferences"] = list(owners)
        if finalizers:
            metadata["finalizers"] = list(finalizers)
        code, obj, _ = self.api.call("POST", collection, {"metadata": metadata})
        self.assertEqual(code, 201, obj)
        self.settle()
        return obj

    def delete(self, path, policy=None):
        body = None
        if policy is not None:
            body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy}
        code, obj, _ = self.api.call("DELETE", path, body)
        self.assertEqual(code, 200, obj)
        self.settle()
        return obj

    def get(self, path):
        return self.api.call("GET", path)[:2]

    def assertGone(self, path):
        self.assertEqual(self.get(path)[0], 404, path)

    def test_started_fires_after_lists(self):
        """C{started} fires once every informer has listed, and the graph holds the objects."""
        owner = self.create("owner")
        gc = self.start()
        self.assertIn(owner["metadata"]["uid"], gc._nodes)

    def test_background_deletes_dependents(self):
        """Deleting an owner deletes dependents; one with another owner just loses the reference."""
        self.start()
        owner = self.create("owner")
        other = self.create("other")
        only = self.create("only", [owner_ref(owner)])
        shared = self.create("shared", [owner_ref(owner), owner_ref(other)])
        self.delete(f"{CMS}/owner")
        self.assertGone(f"{CMS}/only")
        code, kept = self.get(f"{CMS}/shared")
        self.assertEqual(code, 200)
        self.assertEqual(kept["metadata"]["ownerReferences"], [owner_ref(other)])
        self.assertEqual(kept["metadata"]["uid"], shared["metadata"]["uid"])
        self.assertEqual(self.get(f"{CMS}/other")[0], 200)
        self.assertTrue(only)

    def test_dependent_with_living_owner_is_kept(self):
        """A dependent whose owner exists is left alone."""
        self.start()
        owner = self.create("owner")
        self.create("child", [owner_ref(owner)])
        code, child = self.get(f"{CMS}/child")
        self.assertEqual(code, 200)
        self.assertEqual(child["metadata"]["ownerReferences"], [owner_ref(owner)])

    def test_foreground_waits_for_blocking_dependents(self):
        """A foreground delete keeps the owner until its blocking dependents are gone."""
        self.start()
        owner = self.create("owner")
        self.create("blocker", [owner_ref(owner, block=True)], finalizers=["x.io/hold"])
        self.create("plain", [owner_ref(owner)])
        self.delete(f"{CMS}/owner", "Foreground")
        code, waiting = self.get(f"{CMS}/owner")
        self.assertEqual(code, 200)
        self.assertTrue(waiting["metadata"]["deletionTimestamp"])
        self.assertEqual(waiting["metadata"]["finalizers"], ["foregroundDeletion"])
        # The non-blocking dependent goes at once; the blocking one is being deleted.
        self.assertGone(f"{CMS}/plain")
        code, blocker = self.get(f"{CMS}/blocker")
        self.assertEqual(code, 200)
        self.assertTrue(blocker["metadata"]["deletionTimestamp"])
        self.api.call("PATCH", f"{CMS}/blocker", {"metadata": {"finalizers": None}},
                      content_type=MERGE_PATCH)
        self.settle()
        self.assertGone(f"{CMS}/blocker")
        self.assertGone(f"{CMS}/owner")

    def test_foreground_without_dependents(self):
        """A foreground delete of an object without dependents removes it."""
        self.start()
        self.create("alone")
        self.delete(f"{CMS}/alone", "Foreground")
        self.assertGone(f"{CMS}/alone")

    def test_foreground_chain(self):
        """A blocking dependent with dependents is deleted in the foreground: the chain waits."""
        self.start()
        top = self.create("top")
        middle = self.create("middle", [owner_ref(top, block=True)])
        self.create("bottom", [owner_ref(middle, block=True)], finalizers=["x.io/hold"])
        self.delete(f"{CMS}/top", "Foreground")
        code, middle_now = self.get(f"{CMS}/middle")
        self.assertEqual(code, 200)
        self.assertEqual(middle_now["metadata"]["finalizers"], ["foregroundDeletion"])
        self.assertEqual(self.get(f"{CMS}/top")[0], 200)
        self.api.call("PATCH", f"{CMS}/bottom", {"metadata": {"finalizers": None}},
                      content_type=MERGE_PATCH)
        self.settle()
        for name in ("bottom", "middle", "top"):
            self.assertGone(f"{CMS}/{name}")

    def test_orphan_strips_references(self):
        """An orphan delete keeps dependents, strips their references, then removes the owner."""
        self.start()
        owner = self.create("owner")
        other = self.create("other")
        self.create("a", [owner_ref(owner)])
        self.create("b", [owner_ref(owner, block=True), owner_ref(other)])
        self.delete(f"{CMS}/owner", "Orphan")
        self.assertGone(f"{CMS}/owner")
        code, a = self.get(f"{CMS}/a")
        self.assertEqual(code, 200)
        self.assertNotIn("ownerReferences", a["metadata"])
        code, b = self.get(f"{CMS}/b")
        self.assertEqual(code, 200)
        self.assertEqual(b["metadata"]["ownerReferences"], [owner_ref(other)])

    def test_orphan_finalizer_set_by_client(self):
        """An object carrying the orphan finalizer orphans its dependents on a plain delete."""
        self.start()
        owner = self.create("owner", finalizers=["orphan"])
        self.create("child", [owner_ref(owner)])
        self.delete(f"{CMS}/owner")
        self.assertGone(f"{CMS}/owner")
        code, child = self.get(f"{CMS}/child")
        self.assertEqual(code, 200)
        self.assertNotIn("ownerReferences", child["metadata"])

    def test_dangling_reference_to_never_existing_owner(self):
        """A dependent whose only owner never existed is deleted."""
        self.start()
        self.create("orphaned", [{"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost",
                                  "uid": GHOST_UID}])
        self.assertGone(f"{CMS}/orphaned")

    def test_dangling_reference_found_at_start(self):
        """Dangling references stored before the collector started are collected once synced."""
        self.create("orphaned", [{"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost",
                                  "uid": GHOST_UID}])
        owner = self.create("owner")
        self.create("child", [owner_ref(owner)])
        self.start()
        self.assertGone(f"{CMS}/orphaned")
        self.assertEqual(self.get(f"{CMS}/child")[0], 200)

    def test_reference_with_wrong_uid_dangles(self):
        """A reference whose uid differs from the named owner's counts as dangling."""
        self.start()
        owner = self.create("owner")
        wrong = dict(owner_ref(owner), uid=GHOST_UID)
        self.create("child", [wrong])
        self.assertGone(f"{CMS}/child")
        self.assertEqual(self.get(f"{CMS}/owner")[0], 200)

    def test_cluster_scoped_owner(self):
        """A cluster-scoped owner owns dependents in any namespace; deleting it collects them."""
        self.start()
        self.api.call("POST", NS, {"metadata": {"name": "team"}})
        role = self.create("owner-role", collection=CLUSTER_ROLES)
        ref = owner_ref(role, api_version="rbac.authorization.orch.io/v1", kind="ClusterRole")
        self.create("in-default", [ref])
        self.create("in-team", [ref], collection=f"{NS}/team/configmaps")
        self.assertEqual(self.get(f"{CMS}/in-default")[0], 200)
        self.assertEqual(self.get(f"{NS}/team/configmaps/in-team")[0], 200)
        self.delete(f"{CLUSTER_ROLES}/owner-role")
        self.assertGone(f"{CMS}/in-default")
        self.assertGone(f"{NS}/team/configmaps/in-team")

    def test_owner_in_another_namespace_dangles(self):
        """A namespaced owner is looked up in the dependent's namespace; elsewhere it dangles."""
        self.start()
        self.api.call("POST", NS, {"metadata": {"name": "team"}})
        owner = self.create("owner", collection=f"{NS}/team/configmaps")
        self.create("child", [owner_ref(owner)])
        self.assertGone(f"{CMS}/child")
        self.assertEqual(self.get(f"{NS}/team/configmaps/owner")[0], 200)
        selector = quote("reason=OwnerRefInvalidNamespace")
        _, events = self.get(f"{NS}/default/events?fieldSelector={selector}")
        self.assertEqual(len(events["items"]), 1)
        event = events["items"][0]
        self.assertEqual(event["type"], "Warning")
        self.assertEqual(event["involvedObject"]["name"], "child")
        self.assertEqual(event["message"], (
            f"ownerRef [v1/ConfigMap, namespace: default, name: owner, uid: "
            f"{owner['metadata']['uid']}] does not exist in namespace \"default\""))

    def test_cluster_scoped_dependent_of_namespaced_owner_is_kept(self):
        """A cluster-scoped object naming a namespaced owner is never collected for it."""
        self.start()
        self.create("child-role", [{"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost",
                                    "uid": GHOST_UID}], collection=CLUSTER_ROLES)
        self.assertEqual(self.get(f"{CLUSTER_ROLES}/child-role")[0], 200)
        selector = quote("involvedObject.name=child-role")
        _, events = self.get(f"{NS}/default/events?fieldSelector={selector}")
        self.assertEqual([e["reason"] for e in events["items"]], ["OwnerRefInvalidNamespace"])

    def test_owner_of_unknown_kind_is_kept(self):
        """A reference to a kind the server does not store never makes the dependent garbage."""
        self.start()
        self.create("child", [{"apiVersion": "example.io/v1", "kind": "Widget", "name": "w",
                               "uid": GHOST_UID}])
        self.assertEqual(self.get(f"{CMS}/child")[0], 200)

    def test_removing_blocking_reference_releases_owner(self):
        """Unblocking the last blocking dependent lets a foreground delete finish."""
        self.start()
        owner = self.create("owner")
        self.create("blocker", [owner_ref(owner, block=True)], finalizers=["x.io/hold"])
        self.delete(f"{CMS}/owner", "Foreground")
        self.assertEqual(self.get(f"{CMS}/owner")[0], 200)
        self.api.call("PATCH", f"{CMS}/blocker", {"metadata": {
            "ownerReferences": [owner_ref(owner, block=False)]}}, content_type=MERGE_PATCH)
        self.settle()
        self.assertGone(f"{CMS}/owner")

    def test_new_owner_saves_dependent(self):
        """A dependent that gained a living owner meanwhile only loses the dangling reference."""
        self.start()
        owner = self.create("owner")
        other = self.create("other")
        self.create("child", [owner_ref(owner)])
        # Both writes land before the collector gets its turn.
        self.api.call("PATCH", f"{CMS}/child", {"metadata": {
            "ownerReferences": [owner_ref(owner), owner_ref(other)]}}, content_type=MERGE_PATCH)
        self.api.call("DELETE", f"{CMS}/owner")
        self.settle()
        code, child = self.get(f"{CMS}/child")
        self.assertEqual(code, 200)
        self.assertEqual(child["metadata"]["ownerReferences"], [owner_ref(other)])

    def test_owner_added_during_delete_saves_dependent(self):
        """A delete is conditional on the owners read: an owner added meanwhile saves the object."""
        self.start()
        owner = self.create("owner")
        other = self.create("other")
        self.create("child", [owner_ref(owner)])
        provider = self.api.catalog.resource("", "configmaps")
        real_delete = provider.delete

        async def racing_delete(ctx, name, options=None):
            if name == "child":
                # Another client adopts the child between the collector's read and delete.
                provider.delete = real_delete
                self.api.call("PATCH", f"{CMS}/child", {"metadata": {"ownerReferences": [
                    owner_ref(owner), owner_ref(other)]}}, content_type=MERGE_PATCH)
            return await real_delete(ctx, name, options)

        provider.delete = racing_delete
        self.addCleanup(setattr, provider, "delete", real_delete)
        self.api.call("DELETE", f"{CMS}/owner")
        self.settle()
        # A conflict is contention, retried without logging an error.
        self.assertEqual(self.flushLoggedErrors(StatusError), [])
        self.api.clock.advance(1)
        code, child = self.get(f"{CMS}/child")
        self.assertEqual(code, 200)
        self.assertEqual(child["metadata"]["ownerReferences"], [owner_ref(other)])

    def test_conflicts_are_retried(self):
        """A write that conflicts is retried through the work queue with backoff."""
        self.start()
        owner = self.create("owner")
        self.create("child", [owner_ref(owner)])
        provider = self.api.catalog.resource("", "configmaps")
        real_delete = provider.delete
        failures = []

        async def conflicting_delete(ctx, name, options=None):
            if name == "child" and len(failures) < 2:
                # The collector retries once itself, then leaves it to the queue.
                failures.append(name)
                raise StatusError.conflict("configmaps", "", name, "try again")
            return await real_delete(ctx, name, options)

        provider.delete = conflicting_delete
        self.addCleanup(setattr, provider, "delete", real_delete)
        self.api.call("DELETE", f"{CMS}/owner")
        self.settle()
        self.assertEqual(self.get(f"{CMS}/child")[0], 200)
        # A conflict is contention, retried without logging an error.
        self.assertEqual(self.flushLoggedErrors(StatusError), [])
        self.api.clock.advance(1)
        self.assertGone(f"{CMS}/child")

    def test_large_graph_is_worked_through_incrementally(self):
        """No reactor turn makes more registry calls than the budget; the work still completes."""
        self.start(ops_per_turn=10)
        owner = self.create("owner")
        for index in range(40):
            self.api.call("POST", CMS, {"metadata": {
                "name": f"child-{index}", "ownerReferences": [owner_ref(owner)]}})
        self.settle()
        store = self.api.store
        writes = []
        real_delete = store.delete

        def counting_delete(key, expected_revision=None):
            writes.append(key)
            return real_delete(key, expected_revision)

        store.delete = counting_delete
        self.addCleanup(setattr, store, "delete", real_delete)
        self.api.call("DELETE", f"{CMS}/owner")
        per_turn, turns = [], 0
        while turns < 1000:
            before = len(writes)
            if not run_one_turn(self.api.clock):
                break
            per_turn.append(len(writes) - before)
            turns += 1
        self.assertLessEqual(max(per_turn), 10)
        self.assertGreater(len([n for n in per_turn if n]), 3)
        _, remaining = self.get(CMS)
        self.assertEqual(remaining["items"], [])

    def test_stop_cancels_pending_work(self):
        """After stopService nothing is scheduled on the clock."""
        before = set(self.api.clock.getDelayedCalls())
        gc = GarbageCollector(self.api.catalog, self.api.clock)
        gc.startService()
        self.create("orphaned", [{"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost",
                                  "uid": GHOST_UID}])
        gc.stopService()
        self.assertEqual(set(self.api.clock.getDelayedCalls()) - before, set())
