"""The disruption controller: PodDisruptionBudget status from pods and their controllers."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.meta import rfc3339
from orchd.controllers.disruption import DisruptionController, desired_status, scaled_percent
from orchd.controllers.disruption import SyncError
from tests.controllers.workloadsupport import (
    DEPLOYMENTS, PODS, RS, WorkloadHarness, deployment, pod, replica_set,
)

PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
JOBS = "/apis/batch/v1/namespaces/default/jobs"


def budget(name="web", selector=None, **spec):
    spec["selector"] = {"matchLabels": {"app": "web"}} if selector is None else selector
    return {"metadata": {"name": name}, "spec": spec}


class RulesTests(SynchronousTestCase):
    def test_percentages_round_up(self):
        """Percentages of the expected count round up; only a percentage may be a string."""
        self.assertEqual(scaled_percent("50%", 3), 2)
        self.assertEqual(scaled_percent("10%", 1), 1)
        self.assertEqual(scaled_percent("0%", 7), 0)
        self.assertEqual(scaled_percent(2, 7), 2)
        for bad in ("2", "x%", True):
            self.assertRaises(SyncError, scaled_percent, bad, 7)

    def test_allowed_never_negative_and_zero_without_pods(self):
        """disruptionsAllowed is healthy minus desired, never below 0, and 0 when none expected."""
        self.assertEqual(desired_status(3, 1, 3, {}, 1)["disruptionsAllowed"], 2)
        self.assertEqual(desired_status(1, 3, 3, {}, 1)["disruptionsAllowed"], 0)
        self.assertEqual(desired_status(2, 0, 0, {}, 1)["disruptionsAllowed"], 0)


class DisruptionControllerTests(SynchronousTestCase):
    def setUp(self):
        self.h = WorkloadHarness(self)
        self.controller = self.h.start(DisruptionController(self.h.api.catalog, self.h.clock))

    def status(self, name="web"):
        return self.h.get(f"{PDBS}/{name}")["status"]

    def counts(self, name="web"):
        status = self.status(name)
        return (status["currentHealthy"], status["desiredHealthy"], status["expectedPods"],
                status["disruptionsAllowed"])

    def condition(self, name="web"):
        [condition] = self.status(name)["conditions"]
        return condition["status"], condition["reason"], condition["message"]

    def bare_pods(self, count, ready=True):
        for index in range(count):
            name = f"web-{index}"
            self.h.call("POST", PODS, pod(name), 201)
            self.h.set_pod_status(name, ready=ready)

    def test_min_available_integer_counts_pods(self):
        """minAvailable 2 over three ready pods: 3 healthy, 2 desired, 3 expected, 1 allowed."""
        self.bare_pods(3)
        self.h.call("POST", PDBS, budget(minAvailable=2), 201)
        self.assertEqual(self.counts(), (3, 2, 3, 1))
        status = self.status()
        self.assertEqual(status["observedGeneration"], 1)
        self.assertEqual(self.condition(), ("True", "SufficientPods", ""))
        self.assertNotIn("disruptedPods", status)

    def test_recomputed_when_pods_change(self):
        """A pod turning unready, a new pod and a deleted pod each update the budget."""
        self.bare_pods(2)
        self.h.call("POST", PDBS, budget(minAvailable=2), 201)
        self.assertEqual(self.counts(), (2, 2, 2, 0))
        self.assertEqual(self.condition()[:2], ("False", "InsufficientPods"))
        self.h.call("POST", PODS, pod("web-9"), 201)
        self.assertEqual(self.counts(), (2, 2, 3, 0))
        self.h.set_pod_status("web-9")
        self.assertEqual(self.counts(), (3, 2, 3, 1))
        self.h.set_pod_status("web-0", ready=False)
        self.assertEqual(self.counts(), (2, 2, 3, 0))
        self.h.call("DELETE", f"{PODS}/web-1?gracePeriodSeconds=0", code=200)
        self.assertEqual(self.counts(), (1, 2, 2, 0))

    def test_relabelled_pod_leaves_the_budget(self):
        """A pod whose labels stop matching no longer counts."""
        self.bare_pods(2)
        self.h.call("POST", PDBS, budget(minAvailable=1), 201)
        self.assertEqual(self.counts(), (2, 1, 2, 1))
        self.h.patch(f"{PODS}/web-0", {"metadata": {"labels": {"app": "other"}}})
        self.assertEqual(self.counts(), (1, 1, 1, 0))

    def test_max_unavailable_uses_the_deployment_scale(self):
        """maxUnavailable counts the Deployment's replicas (through its ReplicaSet), not pods."""
        self.h.deployments()
        self.h.replica_sets()
        self.h.call("POST", DEPLOYMENTS, deployment(replicas=4), 201)
        self.h.make_ready()
        self.h.call("POST", PDBS, budget(maxUnavailable="25%"), 201)
        self.assertEqual(self.counts(), (4, 3, 4, 1))
        self.h.patch(f"{DEPLOYMENTS}/web", {"spec": {"replicas": 6}})
        self.assertEqual(self.counts()[1:3], (4, 6))

    def test_min_available_percent_uses_replica_set_scale(self):
        """A minAvailable percentage counts the ReplicaSet's replicas, rounded up."""
        self.h.replica_sets()
        self.h.call("POST", RS, replica_set(replicas=3), 201)
        self.h.make_ready()
        self.h.call("POST", PDBS, budget(minAvailable="50%"), 201)
        self.assertEqual(self.counts(), (3, 2, 3, 1))

    def test_controller_without_scale_fails_safe(self):
        """A pod controlled by a Job with a percentage budget: SyncFailed, nothing allowed."""
        job = self.h.call("POST", JOBS, {
            "metadata": {"name": "batch"},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}, 201)
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "batch",
                 "uid": job["metadata"]["uid"], "controller": True}
        self.h.call("POST", PODS, pod("web-0", owner=owner), 201)
        self.h.set_pod_status("web-0")
        self.h.call("POST", PDBS, budget(maxUnavailable=1), 201)
        self.assertEqual(self.status()["disruptionsAllowed"], 0)
        self.assertEqual(self.condition(), (
            "False", "SyncFailed", "jobs.batch does not implement the scale subresource"))

    def test_missing_controller_fails_safe(self):
        """A pod whose controller is gone: SyncFailed naming the pod."""
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "uid": "u-1",
                 "controller": True}
        self.h.call("POST", PODS, pod("web-0", owner=owner), 201)
        self.h.call("POST", PDBS, budget(minAvailable="50%"), 201)
        self.assertEqual(self.condition(),
                         ("False", "SyncFailed", 'found no controllers for pod "web-0"'))

    def test_unmanaged_pods_with_percentage(self):
        """Pods without a controller count for nothing in a percentage, with a warning event."""
        self.bare_pods(2)
        self.h.call("POST", PDBS, budget(maxUnavailable="50%"), 201)
        self.assertEqual(self.counts(), (2, 0, 0, 0))
        self.assertIn("UnmanagedPods", [reason for reason, _ in self.h.events(
            "PodDisruptionBudget")])

    def test_no_pods_event(self):
        """A budget that selects no pods says so in an event."""
        self.h.call("POST", PDBS, budget(minAvailable=1), 201)
        self.assertEqual(self.counts(), (0, 1, 0, 0))
        self.assertIn(("NoPods", "No matching pods found"), self.h.events("PodDisruptionBudget"))

    def test_empty_selector_selects_every_pod(self):
        """An empty selector counts every pod of the namespace."""
        self.bare_pods(2)
        self.h.call("POST", PODS, pod("other", labels={"app": "other"}), 201)
        self.h.set_pod_status("other")
        self.h.call("POST", PDBS, budget(minAvailable=1, selector={}), 201)
        self.assertEqual(self.counts(), (3, 1, 3, 2))

    def test_disrupted_pods_leave_the_healthy_count_for_two_minutes(self):
        """An eviction's disruptedPods entry keeps its pod unhealthy until it expires."""
        self.bare_pods(3)
        self.h.call("POST", PDBS, budget(minAvailable=1), 201)
        self.assertEqual(self.counts(), (3, 1, 3, 2))
        self.h.call("POST", f"{PODS}/web-0/eviction", {
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-0"}}, 201)
        # The pod is terminating: gone from the count, its entry dropped.
        self.assertEqual(self.counts(), (2, 1, 3, 1))
        self.assertNotIn("disruptedPods", self.status())
        stamp = rfc3339(self.h.clock.seconds())
        self.h.patch(f"{PDBS}/web/status", {"status": {"disruptedPods": {"web-1": stamp}}})
        self.assertEqual(self.counts(), (1, 1, 3, 0))
        self.assertEqual(self.status()["disruptedPods"], {"web-1": stamp})
        self.h.clock.advance(121)
        self.assertEqual(self.counts(), (2, 1, 3, 1))
        self.assertNotIn("disruptedPods", self.status())
        self.assertIn("NotDeleted", [reason for reason, _ in self.h.events("Pod")])

    def test_generation_observed(self):
        """A spec change is observed: observedGeneration follows the budget's generation."""
        self.bare_pods(2)
        self.h.call("POST", PDBS, budget(minAvailable=1), 201)
        self.h.patch(f"{PDBS}/web", {"spec": {"minAvailable": 2}})
        status = self.status()
        self.assertEqual(status["observedGeneration"], 2)
        self.assertEqual(self.counts(), (2, 2, 2, 0))

    def test_stale_disruption_target_is_reset(self):
        """DisruptionTarget=True on a pod still not deleted two minutes later is reset to False."""
        self.bare_pods(2)
        stamp = rfc3339(self.h.clock.seconds())
        for name in ("web-0", "web-1"):
            self.h.patch(f"{PODS}/{name}/status", {"status": {"conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": stamp},
                {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                 "lastTransitionTime": stamp}]}})
        self.h.call("DELETE", f"{PODS}/web-1", code=200)      # going: its condition stands

        def target(name):
            pod = self.h.get(f"{PODS}/{name}")
            return [c["status"] for c in pod["status"]["conditions"]
                    if c["type"] == "DisruptionTarget"]

        self.h.clock.advance(119)
        self.assertEqual((target("web-0"), target("web-1")), (["True"], ["True"]))
        self.h.clock.advance(2)
        self.assertEqual((target("web-0"), target("web-1")), (["False"], ["True"]))
