"""The score plugins: least allocated, spreading an owner's pods, PreferNoSchedule taints."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.scheduler.noderesources import NodeResourcesFit
from orchd.scheduler.selectorspread import SelectorSpread
from orchd.scheduler.tainttoleration import TaintToleration
from tests.scheduler.support import node_info, pod, pod_info

SOFT = {"key": "soft", "effect": "PreferNoSchedule"}


class LeastAllocatedTests(SynchronousTestCase):
    plugin = NodeResourcesFit()

    def test_share_left(self):
        """The score is the share of cpu and memory left once the pod is placed, averaged."""
        node = node_info("n1", cpu="4", memory="4Gi",
                         bound=[pod("a", cpu="1", memory="1Gi", node_name="n1")])
        # cpu: (4000 - 2000) * 100 / 4000 = 50; memory: (4 - 2) * 100 / 4 = 50
        self.assertEqual(self.plugin.score(pod_info(cpu="1", memory="1Gi"), node), 50)

    def test_unset_requests_count(self):
        """Pods without requests count as 100m and 200Mi, so empty nodes win."""
        empty = node_info("n1", cpu="1", memory="1000Mi")
        busy = node_info("n2", cpu="1", memory="1000Mi", bound=[pod("a", node_name="n2")])
        pod_ = pod_info()
        self.assertEqual(self.plugin.score(pod_, empty), (90 + 80) // 2)
        self.assertEqual(self.plugin.score(pod_, busy), (80 + 60) // 2)

    def test_over_committed_resource_scores_zero(self):
        """A resource requested past its allocatable counts 0; one the node lacks is left out."""
        node = node_info("n1", cpu="100m", memory="0")
        self.assertEqual(self.plugin.score(pod_info(cpu="1"), node), 0)
        node = node_info("n1", cpu="1", memory="0")
        self.assertEqual(self.plugin.score(pod_info(cpu="500m"), node), 50)


class SelectorSpreadTests(SynchronousTestCase):
    plugin = SelectorSpread()

    def test_fewest_peers_best(self):
        """Nodes with fewer pods of the same owner score higher; none of them is 100."""
        nodes = [node_info("n1", bound=[pod("a", owner="rs", node_name="n1"),
                                        pod("b", owner="rs", node_name="n1")]),
                 node_info("n2", bound=[pod("c", owner="rs", node_name="n2"),
                                        pod("d", owner="other", node_name="n2")]),
                 node_info("n3")]
        new = pod_info("e", owner="rs")
        scores = [self.plugin.score(new, n) for n in nodes]
        self.plugin.normalize(new, scores)
        self.assertEqual(scores, [0, 50, 100])

    def test_no_peers_anywhere(self):
        """When no node has a peer, every node scores 100."""
        scores = [self.plugin.score(pod_info(owner="rs"), node_info("n1"))]
        self.plugin.normalize(pod_info(owner="rs"), scores)
        self.assertEqual(scores, [100])

    def test_pods_without_owner_not_spread(self):
        """A pod without a controller scores 0 everywhere: spreading has no say."""
        node = node_info("n1", bound=[pod("a", node_name="n1")])
        scores = [self.plugin.score(pod_info("b"), node)]
        self.plugin.normalize(pod_info("b"), scores)
        self.assertEqual(scores, [0])


class TaintTolerationScoreTests(SynchronousTestCase):
    plugin = TaintToleration()

    def test_fewest_untolerated_best(self):
        """Nodes with untolerated PreferNoSchedule taints score lower, the worst 0."""
        nodes = [node_info("n1", taints=[SOFT, dict(SOFT, key="other")]),
                 node_info("n2", taints=[SOFT]), node_info("n3")]
        scores = [self.plugin.score(pod_info(), n) for n in nodes]
        self.assertEqual(scores, [2, 1, 0])
        self.plugin.normalize(pod_info(), scores)
        self.assertEqual(scores, [0, 50, 100])

    def test_tolerated(self):
        """A toleration of that effect (or of none) removes the penalty; NoSchedule ones do not."""
        node = node_info("n1", taints=[SOFT])
        self.assertEqual(self.plugin.score(pod_info(tolerations=[{"key": "soft",
                                                                  "operator": "Exists"}]),
                                           node), 0)
        self.assertEqual(self.plugin.score(pod_info(tolerations=[
            {"key": "soft", "operator": "Exists", "effect": "NoSchedule"}]), node), 1)

    def test_no_taints_anywhere(self):
        """Without PreferNoSchedule taints every node scores 100."""
        scores = [0, 0]
        self.plugin.normalize(pod_info(), scores)
        self.assertEqual(scores, [100, 100])
