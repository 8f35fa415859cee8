"""The scheduler's cache: nodes and what their pods use, kept one change at a time."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.scheduler.cache import NodeSpec, SchedulerCache
from orchd.scheduler.podinfo import PodInfo
from tests.scheduler.support import node, pod


class NodeSpecTests(SynchronousTestCase):
    def test_parsed(self):
        """Labels, taints by effect, cordon and allocatable are read once."""
        spec = NodeSpec(node("n1", cpu="2", taints=[
            {"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"},
            {"key": "c", "effect": "PreferNoSchedule"}], unschedulable=True))
        self.assertEqual([t["key"] for t in spec.hard_taints], ["a", "b"])
        self.assertEqual([t["key"] for t in spec.soft_taints], ["c"])
        self.assertEqual(spec.allocatable["cpu"], 2000)
        self.assertTrue(spec.unschedulable)

    def test_equality_ignores_status_noise(self):
        """Versions differing only in what the scheduler does not read are equal."""
        first, second = node("n1"), node("n1")
        second["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        second["metadata"]["resourceVersion"] = "9"
        self.assertEqual(NodeSpec(first), NodeSpec(second))
        second["metadata"]["labels"]["zone"] = "a"
        self.assertNotEqual(NodeSpec(first), NodeSpec(second))


class SchedulerCacheTests(SynchronousTestCase):
    def setUp(self):
        self.cache = SchedulerCache()
        self.cache.set_node(NodeSpec(node("n1")))

    def test_pods_counted(self):
        """Bound pods add their requests, scoring requests, count, ports and owner."""
        self.cache.set_pod(PodInfo(pod("a", cpu="1", memory="1Gi", node_name="n1", owner="rs",
                                       ports=[{"hostPort": 80}])))
        self.cache.set_pod(PodInfo(pod("b", node_name="n1", owner="rs")))
        info = self.cache.node_info("n1")
        self.assertEqual((info.requested, info.non_zero_cpu, info.non_zero_memory,
                          info.pod_count, info.owners["rs"]),
                         ({"cpu": 1000, "memory": 2 ** 30}, 1100, 2 ** 30 + 200 * 2 ** 20, 2, 2))
        self.assertTrue(info.port_in_use("0.0.0.0", "TCP", 80))

    def test_update_replaces(self):
        """A new version of a pod replaces the old one's counts; a finished pod counts nothing."""
        self.cache.set_pod(PodInfo(pod("a", cpu="1", node_name="n1")))
        self.cache.set_pod(PodInfo(pod("a", cpu="2", node_name="n1")))
        info = self.cache.node_info("n1")
        self.assertEqual((info.requested["cpu"], info.pod_count), (2000, 1))
        self.cache.set_pod(PodInfo(pod("a", cpu="2", node_name="n1", phase="Succeeded")))
        self.assertEqual((info.requested["cpu"], info.pod_count, info.pods), (0, 0, {}))

    def test_remove(self):
        """A deleted pod gives back everything it used."""
        self.cache.set_pod(PodInfo(pod("a", cpu="1", node_name="n1", ports=[{"hostPort": 80}],
                                       owner="rs")))
        self.assertEqual(self.cache.remove_pod("default/a"), "n1")
        info = self.cache.node_info("n1")
        self.assertEqual((info.requested["cpu"], info.pod_count, info.ports, dict(info.owners)),
                         (0, 0, {}, {}))
        self.assertIsNone(self.cache.remove_pod("default/a"))

    def test_assume_then_confirm(self):
        """An assumed pod is counted once, and still once when its binding is reported."""
        pending = PodInfo(pod("a", cpu="1"))
        self.cache.assume(pending, "n1")
        self.assertIn("default/a", self.cache.assumed)
        self.cache.set_pod(PodInfo(pod("a", cpu="1", node_name="n1")))
        self.assertEqual(self.cache.assumed, set())
        self.assertEqual(self.cache.node_info("n1").pod_count, 1)

    def test_assume_then_forget(self):
        """A failed binding forgets the assumption; a confirmed pod is not forgotten."""
        self.cache.assume(PodInfo(pod("a", cpu="1")), "n1")
        self.cache.forget("default/a")
        self.assertEqual(self.cache.node_info("n1").pod_count, 0)
        self.cache.set_pod(PodInfo(pod("b", node_name="n1")))
        self.cache.forget("default/b")
        self.assertEqual(self.cache.node_info("n1").pod_count, 1)

    def test_bound_elsewhere(self):
        """A pod assumed on one node but reported on another moves there."""
        self.cache.set_node(NodeSpec(node("n2")))
        self.cache.assume(PodInfo(pod("a", cpu="1")), "n1")
        self.cache.set_pod(PodInfo(pod("a", cpu="1", node_name="n2")))
        self.assertEqual((self.cache.node_info("n1").pod_count,
                          self.cache.node_info("n2").pod_count), (0, 1))

    def test_pods_before_their_node(self):
        """Pods on a node not seen yet are counted once it appears; the node list waits for it."""
        self.cache.set_pod(PodInfo(pod("a", cpu="1", node_name="late")))
        self.assertEqual([n.name for n in self.cache.node_list()], ["n1"])
        self.cache.set_node(NodeSpec(node("late")))
        self.assertEqual([n.name for n in self.cache.node_list()], ["late", "n1"])
        self.assertEqual(self.cache.node_info("late").requested["cpu"], 1000)

    def test_node_removed(self):
        """A removed node leaves the list; its pods' counts stay until they go."""
        self.cache.set_pod(PodInfo(pod("a", node_name="n1")))
        self.cache.remove_node("n1")
        self.assertEqual(self.cache.node_list(), [])
        self.assertEqual(self.cache.node_info("n1").pod_count, 1)
        self.cache.remove_pod("default/a")
        self.assertIsNone(self.cache.node_info("n1"))
