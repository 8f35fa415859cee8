"""The autoscaler's arithmetic: replica proposals, stabilization and rate limits as upstream's."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.meta import rfc3339
from orchd.controllers import hpacalc as calc

NOW = 1_700_000_000.0


def pod(name, cpu="1", phase="Running", ready=True, started=NOW - 600, changed=NOW - 590,
        deleting=False):
    meta = {"name": name, "namespace": "default"}
    if deleting:
        meta["deletionTimestamp"] = rfc3339(NOW)
    requests = {} if cpu is None else {"cpu": cpu, "memory": "100Mi"}
    return {"metadata": meta,
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
            "status": {"phase": phase, "startTime": rfc3339(started),
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "lastTransitionTime": rfc3339(changed)}]}}


def metrics(**values):
    return {name: calc.PodMetric(value, NOW - 5, 15) for name, value in values.items()}


def propose(pods, used, target=50, current=None, resource="cpu", kind=calc.UTILIZATION):
    current = len(pods) if current is None else current
    return calc.replicas_for(current, pods, metrics(**used), resource, kind, target, NOW)


class ReplicaProposalTests(SynchronousTestCase):
    """One resource metric's replica count."""

    def test_scale_up(self):
        """80% used of requests against a 50% target: ceil(1.6 * 3) = 5 replicas."""
        pods = [pod("a"), pod("b"), pod("c")]
        replicas, utilization, average, _ = propose(pods, {"a": 800, "b": 800, "c": 800})
        self.assertEqual((replicas, utilization, average), (5, 80, 800))

    def test_scale_down(self):
        """20% against 50%: ceil(0.4 * 4) = 2."""
        pods = [pod(n) for n in "abcd"]
        self.assertEqual(propose(pods, dict.fromkeys("abcd", 200))[0], 2)

    def test_tolerance(self):
        """A ratio within 10% of the target keeps the count."""
        pods = [pod("a"), pod("b")]
        self.assertEqual(propose(pods, {"a": 540, "b": 540})[0], 2)
        self.assertEqual(propose(pods, {"a": 560, "b": 560})[0], 3)

    def test_missing_metrics_on_scale_down(self):
        """On a scale-down a pod without metrics counts as using its request (at least 100%)."""
        pods = [pod("a"), pod("b"), pod("c")]
        # a and b at 10%; c assumed at 100%: (100+100+1000)/3000 = 40% -> ceil(0.8 * 3) = 3.
        self.assertEqual(propose(pods, {"a": 100, "b": 100})[0], 3)
        pods = [pod(n) for n in "abcde"]
        # Four at 0%, one assumed at 100%: 20% against 50% -> ceil(0.4 * 5) = 2.
        self.assertEqual(propose(pods, dict.fromkeys("abcd", 0))[0], 2)

    def test_unready_pods_on_scale_up(self):
        """Pods not ready yet count as using nothing on a scale-up; pending ones too."""
        pods = [pod("a"), pod("b", ready=False, started=NOW - 60, changed=NOW - 60),
                pod("c", phase="Pending")]
        # a at 100% alone would be ceil(2 * 1) = 2; with b and c at 0: 33% -> 0.67, a flip.
        self.assertEqual(propose(pods, {"a": 1000, "b": 1000})[0], 3)
        pods = [pod("a"), pod("b"), pod("c", phase="Pending")]
        # (1000+1000+0)/3000 = 66% -> ceil(1.33 * 3) = 4.
        self.assertEqual(propose(pods, {"a": 1000, "b": 1000})[0], 4)

    def test_ignored_pods(self):
        """Failed pods and pods being deleted are left out."""
        pods = [pod("a"), pod("b", phase="Failed"), pod("c", deleting=True)]
        self.assertEqual(propose(pods, {"a": 1000, "b": 5000, "c": 5000}, current=3)[0], 2)

    def test_average_value(self):
        """An AverageValue target divides the average usage by it."""
        pods = [pod("a"), pod("b")]
        replicas, utilization, average, _ = propose(
            pods, {"a": 300_000, "b": 500_000}, target=200_000, kind=calc.AVERAGE_VALUE)
        self.assertEqual((replicas, utilization, average), (4, None, 400_000))

    def test_errors(self):
        """No pods, no metrics and a container without a request are upstream's errors."""
        with self.assertRaises(calc.MetricError) as e:
            propose([], {})
        self.assertEqual(str(e.exception),
                         "no pods returned by selector while calculating replica count")
        with self.assertRaises(calc.MetricError) as e:
            propose([pod("a")], {})
        self.assertIn("did not receive metrics", str(e.exception))
        with self.assertRaises(calc.MetricError) as e:
            propose([pod("a", cpu=None)], {"a": 1})
        self.assertEqual(str(e.exception), "missing request for cpu in container c of Pod a")

    def test_container_requests(self):
        """A container's own request is what its utilization is measured against."""
        two = pod("a")
        two["spec"]["containers"].append({"name": "side", "resources": {"requests": {
            "cpu": "250m"}}})
        self.assertEqual(calc.pod_requests([two], "cpu"), {"a": 1250})
        self.assertEqual(calc.pod_requests([two], "cpu", "side"), {"a": 250})

    def test_milli(self):
        """Quantities are read in thousandths, rounded up."""
        self.assertEqual([calc.milli(q) for q in ("250m", "1", "64Mi", "1n")],
                         [250, 1000, 64 * 2**20 * 1000, 1])


class BehaviorTests(SynchronousTestCase):
    """Stabilization and rate limits."""

    def test_default_stabilization(self):
        """Without behavior a scale-down waits for the highest recommendation of 5 minutes."""
        memory = calc.Recommendations()
        memory.record_initial(5, NOW)
        self.assertEqual(calc.stabilize_default(memory, 2, NOW + 60), 5)
        self.assertEqual(calc.stabilize_default(memory, 2, NOW + 299), 5)
        self.assertEqual(calc.stabilize_default(memory, 2, NOW + 301), 2)

    def test_default_limits(self):
        """Without behavior a step at most doubles (at least to 4), within min and max."""
        self.assertEqual(calc.limit_default(2, 10, 1, 20)[:2], (4, "ScaleUpLimit"))
        self.assertEqual(calc.limit_default(5, 30, 1, 20)[:2], (10, "ScaleUpLimit"))
        self.assertEqual(calc.limit_default(5, 30, 1, 8)[:2], (8, "TooManyReplicas"))
        self.assertEqual(calc.limit_default(5, 0, 2, 8)[:2], (2, "TooFewReplicas"))
        self.assertEqual(calc.limit_default(5, 7, 2, 8)[:2], (7, "DesiredWithinRange"))

    def test_policies(self):
        """Pods and Percent policies over their periods; Max picks the larger change."""
        memory = calc.Recommendations()
        up = calc.default_rules(None, up=True)
        self.assertEqual(calc.scale_up_limit(2, memory, up, NOW), 6)      # +4 pods beats +100%
        self.assertEqual(calc.scale_up_limit(10, memory, up, NOW), 20)    # +100% beats +4
        memory.record_change(10, 20, NOW, 15)
        # Within the period the start is 10 again: the limit stays 20.
        self.assertEqual(calc.scale_up_limit(20, memory, up, NOW + 5), 20)
        self.assertEqual(calc.scale_up_limit(20, memory, up, NOW + 16), 40)
        minimum = dict(up, selectPolicy="Min")
        self.assertEqual(calc.scale_up_limit(10, calc.Recommendations(), minimum, NOW), 14)
        disabled = dict(up, selectPolicy="Disabled")
        self.assertEqual(calc.scale_up_limit(10, memory, disabled, NOW), 10)
        down = calc.default_rules({"policies": [{"type": "Pods", "value": 1,
                                                 "periodSeconds": 60}]}, up=False)
        self.assertEqual(calc.scale_down_limit(10, calc.Recommendations(), down, NOW), 9)

    def test_limit_with_behavior(self):
        """The rate limit and the bounds name the reason that held a change back."""
        memory = calc.Recommendations()
        up = calc.default_rules(None, up=True)
        down = calc.default_rules({"policies": [{"type": "Percent", "value": 50,
                                                 "periodSeconds": 60}]}, up=False)
        self.assertEqual(calc.limit_with_behavior(memory, 2, 50, 1, 100, up, down, NOW)[:2],
                         (6, "ScaleUpLimit"))
        self.assertEqual(calc.limit_with_behavior(memory, 2, 50, 1, 5, up, down, NOW)[:2],
                         (5, "TooManyReplicas"))
        self.assertEqual(calc.limit_with_behavior(memory, 10, 1, 1, 20, up, down, NOW)[:2],
                         (5, "ScaleDownLimit"))
        self.assertEqual(calc.limit_with_behavior(memory, 10, 1, 8, 20, up, down, NOW)[:2],
                         (8, "TooFewReplicas"))

    def test_stabilization_windows(self):
        """Scale-up takes the lowest of its window, scale-down the highest of its own."""
        up = calc.default_rules({"stabilizationWindowSeconds": 60}, up=True)
        down = calc.default_rules({"stabilizationWindowSeconds": 120}, up=False)
        memory = calc.Recommendations()
        memory.record_initial(3, NOW)
        replicas, reason, _ = calc.stabilize_with_behavior(memory, 3, 8, up, down, NOW + 10)
        self.assertEqual((replicas, reason), (3, "ScaleUpStabilized"))
        replicas, _, _ = calc.stabilize_with_behavior(memory, 3, 8, up, down, NOW + 70)
        self.assertEqual(replicas, 8)
        replicas, reason, _ = calc.stabilize_with_behavior(memory, 8, 2, up, down, NOW + 80)
        self.assertEqual((replicas, reason), (8, "ScaleDownStabilized"))
        replicas, _, _ = calc.stabilize_with_behavior(memory, 8, 2, up, down, NOW + 201)
        self.assertEqual(replicas, 2)
