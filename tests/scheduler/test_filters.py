"""The filter plugins: which nodes can take a pod, and upstream's reasons for the others."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.scheduler.cache import NodeInfo, NodeSpec
from orchd.scheduler.framework import UNRESOLVABLE, UNSCHEDULABLE, NodeStatus
from orchd.scheduler.nodeports import NodePorts
from orchd.scheduler.noderesources import NodeResourcesFit
from orchd.scheduler.nodeunschedulable import NodeUnschedulable
from orchd.scheduler.podinfo import PodInfo
from orchd.scheduler.tainttoleration import TaintToleration
from tests.scheduler.support import node, node_info, pod, pod_info

NOT_READY = {"key": "node.orch.io/not-ready", "effect": "NoSchedule"}


class NodeUnschedulableTests(SynchronousTestCase):
    plugin = NodeUnschedulable()

    def test_cordoned_node(self):
        """A cordoned node rejects pods, unresolvably; an open one takes them."""
        self.assertEqual(self.plugin.filter(pod_info(), node_info("n1", unschedulable=True)),
                         NodeStatus(UNRESOLVABLE, "node(s) were unschedulable"))
        self.assertIsNone(self.plugin.filter(pod_info(), node_info("n1")))

    def test_toleration(self):
        """A pod tolerating the unschedulable taint goes to a cordoned node (DaemonSet pods)."""
        for toleration in ({"key": "node.orch.io/unschedulable", "operator": "Exists",
                            "effect": "NoSchedule"}, {"operator": "Exists"}):
            self.assertIsNone(self.plugin.filter(pod_info(tolerations=[toleration]),
                                                 node_info("n1", unschedulable=True)))


class TaintTolerationFilterTests(SynchronousTestCase):
    plugin = TaintToleration()

    def test_untolerated_taint_named(self):
        """The first NoSchedule/NoExecute taint not tolerated is named, an empty value shown empty."""
        node = node_info("n1", taints=[{"key": "soft", "effect": "PreferNoSchedule"}, NOT_READY,
                                       {"key": "gpu", "value": "yes", "effect": "NoExecute"}])
        self.assertEqual(self.plugin.filter(pod_info(), node), NodeStatus(
            UNRESOLVABLE, "node(s) had untolerated taint {node.orch.io/not-ready: }"))
        tolerant = pod_info(tolerations=[{"key": "node.orch.io/not-ready", "operator": "Exists"}])
        self.assertEqual(self.plugin.filter(tolerant, node), NodeStatus(
            UNRESOLVABLE, "node(s) had untolerated taint {gpu: yes}"))

    def test_tolerated(self):
        """Tolerated taints, and PreferNoSchedule ones, let the pod in."""
        node = node_info("n1", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"},
                                       {"key": "soft", "effect": "PreferNoSchedule"}])
        self.assertIsNone(self.plugin.filter(pod_info(tolerations=[
            {"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]), node))
        self.assertEqual(self.plugin.filter(pod_info(tolerations=[
            {"key": "gpu", "operator": "Equal", "value": "no"}]), node).code, UNRESOLVABLE)

    def test_filter_nodes_judges_each_taint_set_once(self):
        """Over many nodes, nodes with equal taints get one verdict and different ones their own."""
        gpu = {"key": "gpu", "value": "yes", "effect": "NoSchedule"}
        nodes = [node_info("n1", taints=[NOT_READY]), node_info("n2"),
                 node_info("n3", taints=[gpu]), node_info("n4", taints=[dict(NOT_READY)]),
                 node_info("n5", taints=[gpu])]
        statuses = {}
        tolerant = pod_info(tolerations=[{"key": "gpu", "operator": "Exists"}])
        kept = self.plugin.filter_nodes(tolerant, nodes, statuses)
        self.assertEqual([n.name for n in kept], ["n2", "n3", "n5"])
        self.assertEqual(statuses, {
            name: NodeStatus(UNRESOLVABLE,
                             "node(s) had untolerated taint {node.orch.io/not-ready: }")
            for name in ("n1", "n4")})
        judged = []
        filter_one = self.plugin.filter
        self.patch(self.plugin, "filter", lambda p, n: judged.append(n.name) or filter_one(p, n))
        self.plugin.filter_nodes(tolerant, nodes, {})
        self.assertEqual(judged, ["n1", "n3"])


class NodePortsTests(SynchronousTestCase):
    plugin = NodePorts()
    REJECTED = NodeStatus(UNSCHEDULABLE, "node(s) didn't have free ports for the requested "
                                         "pod ports")

    def node(self, *ports):
        return node_info("n1", bound=[pod(f"p{i}", node_name="n1", ports=[p])
                                      for i, p in enumerate(ports)])

    def test_same_port_clashes(self):
        """A host port bound on all addresses is taken for every address, and the other way round."""
        wildcard = self.node({"hostPort": 80})
        self.assertEqual(self.plugin.filter(pod_info(ports=[{"hostPort": 80}]), wildcard),
                         self.REJECTED)
        self.assertEqual(self.plugin.filter(
            pod_info(ports=[{"hostPort": 80, "hostIP": "10.0.0.1"}]), wildcard), self.REJECTED)
        specific = self.node({"hostPort": 80, "hostIP": "10.0.0.1"})
        self.assertEqual(self.plugin.filter(pod_info(ports=[{"hostPort": 80}]), specific),
                         self.REJECTED)

    def test_no_clash(self):
        """Other ports, protocols and specific addresses do not clash."""
        node = self.node({"hostPort": 80, "hostIP": "10.0.0.1"})
        for ports in ([{"hostPort": 81}], [{"hostPort": 80, "protocol": "UDP"}],
                      [{"hostPort": 80, "hostIP": "10.0.0.2"}], []):
            self.assertIsNone(self.plugin.filter(pod_info(ports=ports), node), ports)

    def test_freed_when_pod_leaves(self):
        """A port is free again once the pod that bound it is no longer counted."""
        node = self.node({"hostPort": 80})
        node.remove("default/p0")
        self.assertIsNone(self.plugin.filter(pod_info(ports=[{"hostPort": 80}]), node))


class NodeResourcesFitTests(SynchronousTestCase):
    plugin = NodeResourcesFit()

    def test_fits(self):
        """Requests within what is left fit, exactly to the last millicore."""
        node = node_info("n1", cpu="2", bound=[pod("a", cpu="1500m", node_name="n1")])
        self.assertIsNone(self.plugin.filter(pod_info(cpu="500m"), node))

    def test_insufficient(self):
        """Each resource short is a reason of its own, in upstream's words."""
        node = node_info("n1", cpu="1", memory="1Gi",
                         bound=[pod("a", cpu="800m", node_name="n1")])
        big = pod("big", cpu="500m", memory="2Gi")
        big["spec"]["containers"][0]["resources"]["requests"]["example.com/tpu"] = "1"
        status = self.plugin.filter(PodInfo(big), node)
        self.assertEqual(status.code, UNSCHEDULABLE)
        self.assertEqual(sorted(status.reasons), ["Insufficient cpu", "Insufficient example.com/tpu",
                                                  "Insufficient memory"])

    def test_too_many_pods(self):
        """One pod more than allocatable pods is Too many pods, even with no requests."""
        node = node_info("n1", pods="1", bound=[pod("a", node_name="n1")])
        self.assertEqual(self.plugin.filter(pod_info(), node),
                         NodeStatus(UNSCHEDULABLE, "Too many pods"))

    def test_zero_requests_fit_anywhere(self):
        """A pod that requests nothing needs only a pod slot."""
        node = node_info("n1", cpu="0", memory="0")
        self.assertIsNone(self.plugin.filter(pod_info(), node))
        self.assertIsNone(self.plugin.filter(pod_info(cpu="0"), node))

    def test_node_without_allocatable(self):
        """A node that reports no allocatable takes no pod."""
        bare = node("n1")
        del bare["status"]
        spec = NodeSpec(bare)
        node_ = NodeInfo("n1")
        node_.node = spec
        self.assertEqual(self.plugin.filter(pod_info(cpu="1"), node_).reasons,
                         ("Too many pods", "Insufficient cpu"))
