"""The ReplicaSet and ReplicationController controllers, driven through the API in memory."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.replicaset import ReplicaSetController
from orchd.controllers.retry import Backoff
from tests.controllers.workloadsupport import (
    PODS, RC, RS, CatalogView, WorkloadHarness, pod, replica_set,
)

COST = "controller.orch.io/pod-deletion-cost"


class ReplicaSetTests(SynchronousTestCase):
    def setUp(self):
        self.h = WorkloadHarness(self)
        self.controller = None

    def create(self, body=None, **kw):
        if self.controller is None:
            self.controller = self.h.replica_sets()
        return self.h.call("POST", RS, body or replica_set(**kw), 201)

    def rs(self, name="web"):
        return self.h.get(f"{RS}/{name}")

    def scale(self, replicas, name="web"):
        self.h.patch(f"{RS}/{name}", {"spec": {"replicas": replicas}})

    def test_creates_pods_from_template(self):
        """Pods are created to match spec.replicas, named <rs>-xxxxx, labelled and owned."""
        rs = self.create()
        pods = self.h.pods()
        self.assertEqual(len(pods), 3)
        for p in pods:
            meta = p["metadata"]
            self.assertTrue(meta["name"].startswith("web-"))
            self.assertEqual(len(meta["name"]), len("web-") + 5)
            self.assertEqual(meta["labels"], {"app": "web"})
            self.assertEqual(meta["ownerReferences"], [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                "uid": rs["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}])
            self.assertEqual(p["spec"]["containers"][0]["image"], "nginx")
        self.assertEqual(sorted(self.h.events("ReplicaSet")),
                         [("SuccessfulCreate", f"Created pod: {p['metadata']['name']}")
                          for p in pods])

    def test_status_counts(self):
        """The status counts replicas, fully labelled, ready and available pods, and the generation."""
        self.create()
        status = self.rs()["status"]
        self.assertEqual(status, {"replicas": 3, "fullyLabeledReplicas": 3,
                                  "observedGeneration": 1})
        names = self.h.pod_names()
        self.h.set_pod_status(names[0])
        self.h.set_pod_status(names[1], ready=False)
        status = self.rs()["status"]
        self.assertEqual((status["replicas"], status["readyReplicas"],
                          status["availableReplicas"]), (3, 1, 1))

    def test_available_after_min_ready_seconds(self):
        """With minReadySeconds a ready pod counts as available only once ready for longer."""
        self.create(replicas=1, minReadySeconds=10)
        self.h.make_ready()
        status = self.rs()["status"]
        self.assertEqual((status["readyReplicas"], status.get("availableReplicas", 0)), (1, 0))
        self.h.clock.advance(10)
        self.assertEqual(self.rs()["status"].get("availableReplicas", 0), 0)
        self.h.clock.advance(1)
        self.assertEqual(self.rs()["status"]["availableReplicas"], 1)

    def test_scale_down_and_up(self):
        """Scaling down deletes the surplus, scaling up creates more; observedGeneration follows."""
        self.create(replicas=5)
        self.scale(2)
        self.assertEqual(len(self.h.pods()), 2)
        rs = self.rs()
        self.assertEqual((rs["status"]["replicas"], rs["status"]["observedGeneration"]), (2, 2))
        self.assertEqual(len([e for e in self.h.events() if e[0] == "SuccessfulDelete"]), 3)
        self.scale(4)
        self.assertEqual(len(self.h.pods()), 4)

    def test_deleted_pod_replaced(self):
        """A pod deleted by someone else is replaced."""
        self.create(replicas=2)
        name = self.h.pod_names()[0]
        self.h.call("DELETE", f"{PODS}/{name}", code=200)
        names = self.h.pod_names()
        self.assertEqual(len(names), 2)
        self.assertNotIn(name, names)

    def test_finished_and_terminating_pods_do_not_count(self):
        """Succeeded pods and pods being deleted are not active: replacements are made."""
        self.create(replicas=2)
        first, second = self.h.pod_names()
        self.h.set_pod_status(first, phase="Succeeded", ready=False)
        self.h.patch(f"{PODS}/{second}", {"metadata": {"finalizers": ["test.orch.io/hold"]}})
        self.h.call("DELETE", f"{PODS}/{second}", code=200)
        self.assertEqual(len(self.h.pods()), 2)
        self.assertNotIn(first, self.h.pod_names())
        self.assertNotIn(second, self.h.pod_names())
        self.assertEqual(self.rs()["status"]["replicas"], 2)

    def test_deletion_order(self):
        """Scale-down removes unscheduled, then pending, then not ready, then cheaper pods first."""
        self.create(replicas=5)
        unscheduled, pending, not_ready, costly, cheap = self.h.pod_names()
        self.h.set_pod_status(pending, phase="Pending", ready=False)
        self.h.set_pod_status(not_ready, ready=False)
        for name, cost in ((costly, "10"), (cheap, "-5")):
            self.h.patch(f"{PODS}/{name}", {"metadata": {"annotations": {COST: cost}}})
            self.h.set_pod_status(name)
        expected = [unscheduled, pending, not_ready, cheap]
        for count in (4, 3, 2, 1):
            self.scale(count)
            gone = expected.pop(0)
            self.assertNotIn(gone, self.h.pod_names())
            self.assertEqual(len(self.h.pod_names()), count)
        self.assertEqual(self.h.pod_names(), [costly])

    def test_doubled_up_pods_go_first(self):
        """Among equal pods, one sharing its node with more of the set's pods goes first."""
        self.create(replicas=3)
        a, b, c = self.h.pod_names()
        since = self.h.clock.seconds()
        self.h.set_pod_status(a, node="n1", since=since)
        self.h.set_pod_status(b, node="n2", since=since)
        self.h.set_pod_status(c, node="n2", since=since)
        self.scale(2)
        remaining = self.h.pod_names()
        self.assertIn(a, remaining)
        self.assertEqual(len(remaining), 2)

    def test_adopts_matching_orphans(self):
        """An orphan pod matching the selector is adopted instead of a new pod being made."""
        self.h.call("POST", PODS, pod("orphan"), 201)
        rs = self.create(replicas=2)
        orphan = self.h.get(f"{PODS}/orphan")
        self.assertEqual(orphan["metadata"]["ownerReferences"][0]["uid"], rs["metadata"]["uid"])
        self.assertEqual(len(self.h.pods()), 2)
        self.h.call("POST", PODS, pod("late"), 201)
        self.assertEqual(len(self.h.pods()), 2, "an adopted surplus pod is deleted")

    def test_ignores_pods_of_other_controllers(self):
        """A matching pod controlled by another owner is neither adopted nor counted."""
        other = {"apiVersion": "v1", "kind": "ReplicationController", "name": "x",
                 "uid": "4f3c", "controller": True}
        self.h.call("POST", PODS, pod("taken", owner=other), 201)
        self.create(replicas=1)
        self.assertEqual(self.h.get(f"{PODS}/taken")["metadata"]["ownerReferences"], [other])
        self.assertEqual(len(self.h.pods()), 2)

    def test_releases_pods_that_stop_matching(self):
        """A pod relabelled out of the selector is released and replaced."""
        self.create(replicas=1)
        name = self.h.pod_names()[0]
        self.h.patch(f"{PODS}/{name}", {"metadata": {"labels": {"app": "debug"}}})
        released = self.h.get(f"{PODS}/{name}")
        self.assertNotIn("ownerReferences", released["metadata"])
        self.assertEqual(len([p for p in self.h.pods()
                              if p["metadata"]["labels"] == {"app": "web"}]), 1)

    def test_no_adoption_while_being_deleted(self):
        """A replica set being deleted adopts nothing."""
        body = replica_set(replicas=0)
        body["metadata"]["finalizers"] = ["test.orch.io/hold"]
        self.h.call("POST", RS, body, 201)
        self.h.call("DELETE", f"{RS}/web", code=200)
        self.assertTrue(self.rs()["metadata"].get("deletionTimestamp"))
        self.h.call("POST", PODS, pod("orphan"), 201)
        self.assertNotIn("ownerReferences", self.h.get(f"{PODS}/orphan")["metadata"])

    def test_no_adoption_of_a_pod_being_deleted(self):
        """An orphan being deleted is not adopted."""
        body = pod("leaving")
        body["metadata"]["finalizers"] = ["test.orch.io/hold"]
        self.h.call("POST", PODS, body, 201)
        self.h.call("DELETE", f"{PODS}/leaving", code=200)
        self.create(replicas=1)
        self.assertNotIn("ownerReferences", self.h.get(f"{PODS}/leaving")["metadata"])
        self.assertEqual(len(self.h.pods()), 1)

    def test_failed_creates_slow_start_and_condition(self):
        """A refused create stops the slow start, sets ReplicaFailure and records FailedCreate."""
        self.h.refuse.allowed = 3
        self.create(replicas=10)
        # Batches of 1 and 2 pass, the batch of 4 fails: each later sync tries once more.
        self.assertEqual(len(self.h.pods()), 3)
        status = self.rs()["status"]
        [condition] = status["conditions"]
        self.assertEqual((condition["type"], condition["status"], condition["reason"]),
                         ("ReplicaFailure", "True", "FailedCreate"))
        self.assertIn("exceeded quota", condition["message"])
        failed = [m for r, m in self.h.events() if r == "FailedCreate"]
        self.assertGreaterEqual(len(failed), 4)
        self.assertTrue(failed[0].startswith('Error creating: pods "web-'), failed[0])
        self.assertIn('" is forbidden: exceeded quota: compute', failed[0])
        self.assertEqual(self.controller.expectations.pending("default/web"), (0, 0))
        self.h.refuse.allowed = None
        self.h.clock.advance(1)
        self.assertEqual(len(self.h.pods()), 10)
        self.assertNotIn("conditions", self.rs()["status"])

    def test_burst_and_expectations_with_lagging_informer(self):
        """While the informer has not seen the new pods, no sync creates more of them."""
        view = CatalogView(self.h.api.catalog)
        self.controller = controller = self.h.start(
            ReplicaSetController(view, self.h.clock, burst=4))
        view.reads.holding = True
        self.create(replicas=6)
        self.assertEqual(len(self.h.pods()), 4, "at most burst pods per sync")
        self.assertEqual(controller.expectations.pending("default/web"), (4, 0))
        self.h.patch(f"{RS}/web", {"metadata": {"labels": {"touched": "1"}}})
        self.assertEqual(len(self.h.pods()), 4, "a lagging cache doubles nothing")
        view.reads.release()
        self.assertEqual(len(self.h.pods()), 6)
        self.assertEqual(controller.expectations.pending("default/web"), (0, 0))

    def test_deletions_awaited_then_expire(self):
        """Deletions not yet seen hold the owner back, for five minutes at most."""
        view = CatalogView(self.h.api.catalog)
        self.controller = controller = self.h.start(ReplicaSetController(view, self.h.clock))
        self.create(replicas=2)
        view.reads.holding = True
        self.h.patch(f"{RS}/web", {"spec": {"replicas": 1}})
        self.assertEqual(len(self.h.pods()), 1)
        self.assertEqual(controller.expectations.pending("default/web"), (0, 1))
        self.h.patch(f"{RS}/web", {"spec": {"replicas": 0}})
        self.assertEqual(len(self.h.pods()), 1, "no deletion while one is awaited")
        self.h.clock.advance(300)
        self.assertFalse(controller.expectations.satisfied("default/web"))
        self.h.clock.advance(1)
        self.assertTrue(controller.expectations.satisfied("default/web"))

    def test_deleted_replica_set_forgets_expectations(self):
        """Deleting a replica set drops what its controller expected of it."""
        self.h.refuse.allowed = 0
        self.create(replicas=2)
        self.h.call("DELETE", f"{RS}/web", code=200)
        self.assertEqual(self.controller.expectations.pending("default/web"), (0, 0))


class ReplicationControllerTests(SynchronousTestCase):
    def setUp(self):
        self.h = WorkloadHarness(self)
        self.h.start(ReplicaSetController.for_replication_controllers(
            self.h.api.catalog, self.h.clock))

    def test_replication_controller(self):
        """A ReplicationController's selector map picks its pods, owned as v1 ReplicationController."""
        rc = self.h.call("POST", RC, {
            "apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "old"},
            "spec": {"replicas": 2, "selector": {"app": "old"},
                     "template": {"metadata": {"labels": {"app": "old"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
            201)
        pods = self.h.pods()
        self.assertEqual(len(pods), 2)
        ref = pods[0]["metadata"]["ownerReferences"][0]
        self.assertEqual((ref["apiVersion"], ref["kind"], ref["uid"]),
                         ("v1", "ReplicationController", rc["metadata"]["uid"]))
        self.assertEqual(self.h.get(f"{RC}/old")["status"]["replicas"], 2)

    def test_selector_defaults_to_template_labels(self):
        """A ReplicationController without a selector selects its template's labels."""
        self.h.call("POST", RC, {
            "apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "old"},
            "spec": {"replicas": 1,
                     "template": {"metadata": {"labels": {"app": "old"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
            201)
        self.assertEqual(len(self.h.pods()), 1)
        self.h.call("POST", PODS, pod("extra", labels={"app": "old"}), 201)
        self.assertEqual(len(self.h.pods()), 1)


class BackoffTests(SynchronousTestCase):
    def test_doubles_to_bound_and_resets(self):
        """Retry delays double per failure up to the bound and start over after a success."""
        backoff = Backoff(base=1, maximum=5)
        self.assertEqual([backoff.failed("k") for _ in range(5)], [1, 2, 4, 5, 5])
        backoff.succeeded("k")
        self.assertEqual(backoff.failed("k"), 1)
