"""What workload controllers read of a pod: activity, readiness, availability, deletion cost."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.podstate import (
    controller_ref, deletion_cost, is_active, is_available, is_ready, keep_pod, max_restarts,
    parse_time, ready_since,
)

T0 = 1_700_000_000


def pod(phase="Running", ready=None, since="2023-11-14T22:13:20Z", **meta):
    status = {"phase": phase}
    if ready is not None:
        status["conditions"] = [{"type": "PodScheduled", "status": "True"},
                                {"type": "Ready", "status": "True" if ready else "False",
                                 "lastTransitionTime": since}]
    return {"metadata": dict({"name": "p", "namespace": "ns", "uid": "u"}, **meta),
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}, "status": status}


class PodStateTests(SynchronousTestCase):
    def test_parse_time(self):
        """RFC 3339 times parse to seconds, fractions included; garbage is None."""
        self.assertEqual(parse_time("2023-11-14T22:13:20Z"), T0)
        self.assertEqual(parse_time("2023-11-14T22:13:20.5Z"), T0 + 0.5)
        self.assertIsNone(parse_time("yesterday"))
        self.assertIsNone(parse_time(None))

    def test_active(self):
        """Finished pods and pods being deleted are not active."""
        self.assertTrue(is_active(pod("Pending")))
        self.assertFalse(is_active(pod("Succeeded")))
        self.assertFalse(is_active(pod("Failed")))
        self.assertFalse(is_active(pod(deletionTimestamp="2023-11-14T22:13:20Z")))

    def test_ready_and_available(self):
        """Available means ready for strictly longer than minReadySeconds."""
        ready = pod(ready=True)
        self.assertTrue(is_ready(ready))
        self.assertFalse(is_ready(pod(ready=False)))
        self.assertFalse(is_ready(pod()))
        self.assertEqual(ready_since(ready), T0)
        self.assertTrue(is_available(ready, 0, T0))
        self.assertFalse(is_available(ready, 10, T0 + 10))
        self.assertTrue(is_available(ready, 10, T0 + 10.5))
        self.assertFalse(is_available(pod(ready=True, since=None), 10, T0 + 100))

    def test_deletion_cost(self):
        """The deletion cost annotation reads as an int32; absent or invalid is 0."""
        key = "controller.orch.io/pod-deletion-cost"
        self.assertEqual(deletion_cost(pod(annotations={key: "-7"})), -7)
        self.assertEqual(deletion_cost(pod(annotations={key: "+7"})), 0)
        self.assertEqual(deletion_cost(pod(annotations={key: "99999999999"})), 0)
        self.assertEqual(deletion_cost(pod()), 0)

    def test_controller_ref(self):
        """Only a reference with controller true and a uid is the controller."""
        refs = [{"kind": "A", "uid": "1"}, {"kind": "B", "uid": "2", "controller": True}]
        self.assertEqual(controller_ref({"ownerReferences": refs})["kind"], "B")
        self.assertIsNone(controller_ref({"ownerReferences": refs[:1]}))

    def test_restarts(self):
        """The highest restart count of regular containers, then of restartable init containers."""
        p = pod()
        p["spec"]["initContainers"] = [{"name": "side", "restartPolicy": "Always"},
                                       {"name": "init"}]
        p["status"]["containerStatuses"] = [{"restartCount": 2}, {"restartCount": 5}]
        p["status"]["initContainerStatuses"] = [{"name": "side", "restartCount": 3},
                                                {"name": "init", "restartCount": 9}]
        self.assertEqual(max_restarts(p), (5, 3))

    def test_keep_pod_reads_alike(self):
        """A trimmed pod answers every helper as the whole pod does."""
        key = "controller.orch.io/pod-deletion-cost"
        full = pod(ready=True, annotations={key: "3", "other": "x"}, labels={"a": "b"},
                   ownerReferences=[{"kind": "ReplicaSet", "uid": "r", "controller": True}])
        full["spec"]["initContainers"] = [{"name": "side", "restartPolicy": "Always"}]
        full["status"]["containerStatuses"] = [{"restartCount": 4}]
        full["status"]["initContainerStatuses"] = [{"name": "side", "restartCount": 1}]
        kept = keep_pod(full)
        for helper in (is_active, is_ready, ready_since, deletion_cost, max_restarts):
            self.assertEqual(helper(kept), helper(full), helper.__name__)
        self.assertEqual(controller_ref(kept["metadata"]), controller_ref(full["metadata"]))
        self.assertNotIn("other", kept["metadata"]["annotations"])
        self.assertEqual(kept["spec"]["nodeName"], "n1")
