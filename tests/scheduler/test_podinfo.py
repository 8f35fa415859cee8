"""What the scheduler reads of a pod."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.scheduler.podinfo import PodInfo
from tests.scheduler.support import pod


class PodInfoTests(SynchronousTestCase):
    def test_defaults(self):
        """A bare pod is pending, of the default scheduler, priority 0, without owner."""
        info = PodInfo(pod())
        self.assertEqual((info.key, info.assigned, info.scheduler_name, info.priority,
                          info.owner, info.terminal, info.deleting, info.gated),
                         ("default/web", False, "default-scheduler", 0, None, False, False,
                          False))

    def test_host_ports(self):
        """Host ports are listed with upstream's defaults (0.0.0.0, TCP); port 0 is none."""
        info = PodInfo(pod(ports=[{"hostPort": 8080}, {"hostPort": 53, "protocol": "UDP",
                                                        "hostIP": "10.0.0.1"},
                                  {"hostPort": 0}, {"containerPort": 80}]))
        self.assertEqual(info.host_ports, (("0.0.0.0", "TCP", 8080), ("10.0.0.1", "UDP", 53)))

    def test_controller_owner(self):
        """The owner counted for spreading is the controlling one."""
        obj = pod()
        obj["metadata"]["ownerReferences"] = [
            {"kind": "Other", "uid": "a"}, {"kind": "ReplicaSet", "uid": "b", "controller": True}]
        self.assertEqual(PodInfo(obj).owner, "b")

    def test_states(self):
        """Finished, deleted and gated pods are told apart; the PodScheduled condition is kept."""
        self.assertTrue(PodInfo(pod(phase="Succeeded")).terminal)
        self.assertTrue(PodInfo(pod(phase="Failed")).terminal)
        self.assertTrue(PodInfo(pod(schedulingGates=[{"name": "x"}])).gated)
        obj = pod()
        obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        obj["status"] = {"conditions": [{"type": "PodScheduled", "status": "False",
                                         "reason": "Unschedulable", "message": "m"}]}
        info = PodInfo(obj)
        self.assertTrue(info.deleting)
        self.assertEqual(info.condition, ("False", "Unschedulable", "m"))

    def test_signature(self):
        """The signature changes with the spec or labels, not with the status."""
        first = pod()
        changed_status = dict(pod(), status={"phase": "Pending"})
        changed_spec = pod(cpu="1")
        labelled = pod()
        labelled["metadata"]["labels"] = {"a": "b"}
        self.assertEqual(PodInfo(first).signature, PodInfo(changed_status).signature)
        self.assertNotEqual(PodInfo(first).signature, PodInfo(changed_spec).signature)
        self.assertNotEqual(PodInfo(first).signature, PodInfo(labelled).signature)

    def test_no_signature_once_bound(self):
        """A pod with a node has no signature (nothing compares it): bound pods are cheaper."""
        self.assertIsNone(PodInfo(pod(node_name="n1")).signature)
        self.assertIsNotNone(PodInfo(pod()).signature)

    def test_malformed(self):
        """A pod whose fields have the wrong types reads as having none of them."""
        info = PodInfo({"metadata": {"name": "x", "namespace": "d"}, "spec": {
            "containers": "c", "tolerations": "t", "nodeSelector": ["a"], "affinity": 1,
            "priority": True}, "status": "s"})
        self.assertEqual((info.requests, info.tolerations, info.node_selector, info.required,
                          info.priority), ({}, [], {}, None, 0))

    def test_reference(self):
        """Events name the pod by kind, namespace, name, uid and resourceVersion."""
        obj = pod()
        obj["metadata"]["resourceVersion"] = "7"
        self.assertEqual(PodInfo(obj).reference()["metadata"],
                         {"namespace": "default", "name": "web", "uid": "uid-default-web",
                          "resourceVersion": "7"})
