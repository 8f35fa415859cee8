"""One decision: filters, scores, the pick, and upstream's message when nothing fits."""

import random

from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.scheduler.framework import (
    UNRESOLVABLE, UNSCHEDULABLE, FilterPlugin, FitError, Framework, NodeStatus, NoNodesAvailable,
    PreFilterRejected, default_normalize, feasible_nodes_to_find, truncate,
)
from orchd.scheduler.interfaces import IFilterPlugin, IPreFilterPlugin, IScorePlugin
from orchd.scheduler.nodeaffinity import NodeAffinity
from orchd.scheduler.nodeports import NodePorts
from orchd.scheduler.noderesources import NodeResourcesFit
from orchd.scheduler.nodeunschedulable import NodeUnschedulable
from orchd.scheduler.scheduler import default_framework
from orchd.scheduler.selectorspread import SelectorSpread
from orchd.scheduler.tainttoleration import TaintToleration
from tests.scheduler.support import cache_of, node, pod, pod_info

NOT_READY = {"key": "node.orch.io/not-ready", "effect": "NoSchedule"}


def names_in(*names):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                "values": [name]}]} for name in names]}}}


class PluginContractTests(SynchronousTestCase):
    def test_interfaces(self):
        """Every plugin provides the interfaces of the extension points it is used at."""
        verifyObject(IPreFilterPlugin, NodeAffinity())
        for plugin in (NodeUnschedulable(), TaintToleration(), NodeAffinity(), NodePorts(),
                       NodeResourcesFit()):
            verifyObject(IFilterPlugin, plugin)
        for plugin in (NodeResourcesFit(), SelectorSpread(), TaintToleration(), NodeAffinity()):
            verifyObject(IScorePlugin, plugin)


class FitErrorMessageTests(SynchronousTestCase):
    """The messages of pods that fit nowhere, word for word as upstream writes them."""

    framework = default_framework(random.Random(0))

    def message(self, pod_obj, *nodes, bound=()):
        with self.assertRaises(FitError) as caught:
            self.framework.schedule(pod_info(**pod_obj) if isinstance(pod_obj, dict)
                                    else pod_obj, cache_of(*nodes, bound=bound))
        return caught.exception.message

    def test_taint_and_cpu(self):
        """One tainted node and two short of cpu: the issue's example."""
        message = self.message(dict(cpu="3"), node("n1", taints=[NOT_READY]), node("n2"),
                               node("n3"), bound=[pod("a", cpu="2", node_name="n2"),
                                                  pod("b", cpu="2", node_name="n3")])
        self.assertEqual(message, (
            "0/3 nodes are available: 1 node(s) had untolerated taint "
            "{node.orch.io/not-ready: }, 2 Insufficient cpu. preemption: 0/3 nodes are "
            "available: 1 Preemption is not helpful for scheduling, 2 No preemption victims "
            "found for incoming pod.."))

    def test_histogram_sorted_as_strings(self):
        """Entries sort as text, so 10 comes before 2, and one node may give two reasons."""
        nodes = [node(f"n{i:02}", cpu="1", memory="1Gi") for i in range(12)]
        nodes[0]["spec"]["unschedulable"] = True
        nodes[1]["spec"]["unschedulable"] = True
        message = self.message(dict(cpu="2", memory="2Gi"), *nodes)
        self.assertEqual(message, (
            "0/12 nodes are available: 10 Insufficient cpu, 10 Insufficient memory, "
            "2 node(s) were unschedulable. preemption: 0/12 nodes are available: "
            "10 No preemption victims found for incoming pod, 2 Preemption is not helpful "
            "for scheduling.."))

    def test_prefilter_narrowing(self):
        """Nodes a PreFilter left out are counted as not satisfying its plugin."""
        message = self.message(dict(cpu="2", affinity=names_in("n1")), node("n1", cpu="1"),
                               node("n2"), node("n3"), node("n4"))
        self.assertEqual(message, (
            "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't satisfy plugin(s) "
            "[NodeAffinity]. preemption: 0/4 nodes are available: 1 No preemption victims "
            "found for incoming pod, 3 Preemption is not helpful for scheduling.."))

    def test_prefilter_rejection(self):
        """A PreFilter rejection is the only reason given, and preemption cannot help."""
        affinity = names_in("n1")
        affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"][0]["matchFields"].append(
                {"key": "metadata.name", "operator": "In", "values": ["n2"]})
        message = self.message(dict(affinity=affinity), node("n1"), node("n2"))
        self.assertEqual(message, (
            "0/2 nodes are available: pod affinity terms conflict. preemption: 0/2 nodes are "
            "available: 2 Preemption is not helpful for scheduling.."))

    def test_preemption_never(self):
        """A pod that may not preempt says so instead of the preemption histogram."""
        message = self.message(dict(cpu="9", preemptionPolicy="Never"), node("n1"))
        self.assertEqual(message, (
            "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to "
            "preemptionPolicy=Never.."))

    def test_no_nodes(self):
        """Without nodes the error is upstream's "no nodes available to schedule pods"."""
        with self.assertRaises(NoNodesAvailable) as caught:
            self.framework.schedule(pod_info(), cache_of())
        self.assertEqual(caught.exception.message, "no nodes available to schedule pods")


class DecisionTests(SynchronousTestCase):
    def test_least_allocated_wins(self):
        """Of two fitting nodes the emptier one is chosen."""
        framework = default_framework(random.Random(1))
        cache = cache_of(node("busy"), node("idle"),
                         bound=[pod("a", cpu="3", node_name="busy")])
        self.assertEqual(framework.schedule(pod_info(cpu="100m"), cache).name, "idle")

    def test_ties_broken_at_random(self):
        """Equal nodes are all chosen sometimes, as the random source says."""
        framework = default_framework(random.Random(2))
        cache = cache_of(node("n1"), node("n2"), node("n3"))
        chosen = {framework.schedule(pod_info(), cache).name for _ in range(50)}
        self.assertEqual(chosen, {"n1", "n2", "n3"})

    def test_only_feasible_node(self):
        """A single feasible node is chosen without scoring."""
        framework = default_framework()
        cache = cache_of(node("n1", taints=[NOT_READY]), node("n2"))
        self.assertEqual(framework.schedule(pod_info(), cache).name, "n2")

    def test_named_nodes_only(self):
        """A pod naming its node by matchFields goes there even when others are emptier."""
        framework = default_framework()
        cache = cache_of(node("n1"), node("n2"), bound=[pod("a", cpu="3", node_name="n2")])
        self.assertEqual(framework.schedule(pod_info(affinity=names_in("n2")), cache).name, "n2")

    def test_partial_search_rotates(self):
        """Past 100 nodes the search stops at the feasible share and resumes after it."""
        seen = []

        class Recorder(FilterPlugin):
            name = "Recorder"

            def filter(self, pod, node):
                seen.append(node.name)

        framework = Framework((), (Recorder(),), ())
        cache = cache_of(*[node(f"n{i:03}") for i in range(200)])
        self.assertEqual(feasible_nodes_to_find(200), 100)
        framework.schedule(pod_info(), cache)
        framework.schedule(pod_info(), cache)
        self.assertEqual(seen[:100], [f"n{i:03}" for i in range(100)])
        self.assertEqual(seen[100:], [f"n{i:03}" for i in range(100, 200)])


class SkipTests(SynchronousTestCase):
    def test_irrelevant_plugins_skipped(self):
        """Filters and scores with nothing to say of a pod are not run for each node."""
        self.assertTrue(NodeAffinity().skip_filter(pod_info()))
        self.assertFalse(NodeAffinity().skip_filter(pod_info(node_selector={"a": "b"})))
        self.assertTrue(NodeAffinity().skip_score(pod_info(affinity=names_in("n1"))))
        self.assertTrue(NodePorts().skip_filter(pod_info()))
        self.assertFalse(NodePorts().skip_filter(pod_info(ports=[{"hostPort": 80}])))
        self.assertTrue(SelectorSpread().skip_score(pod_info()))
        self.assertFalse(SelectorSpread().skip_score(pod_info(owner="rs")))
        for plugin in (NodeUnschedulable(), TaintToleration(), NodeResourcesFit()):
            self.assertFalse(plugin.skip_filter(pod_info()))


class HelperTests(SynchronousTestCase):
    def test_feasible_share(self):
        """Upstream's adaptive share: all below 100, then 50% less 1% per 125 nodes, at least 5%."""
        self.assertEqual([feasible_nodes_to_find(n) for n in (3, 99, 100, 1000, 5000, 10000)],
                         [3, 99, 100, 420, 500, 500])

    def test_truncate(self):
        """Event messages longer than 1024 characters end with " ..." at 1024."""
        self.assertEqual(truncate("x" * 1024), "x" * 1024)
        cut = truncate("y" * 2000)
        self.assertEqual((len(cut), cut[-4:]), (1024, " ..."))

    def test_default_normalize(self):
        """Scores scale to 100 at the highest, reversed when fewest is best."""
        scores = [1, 2, 4]
        default_normalize(scores)
        self.assertEqual(scores, [25, 50, 100])
        scores = [1, 2, 4]
        default_normalize(scores, reverse=True)
        self.assertEqual(scores, [75, 50, 0])
        scores = [0, 0]
        default_normalize(scores)
        self.assertEqual(scores, [0, 0])

    def test_status_and_rejection(self):
        """Statuses compare by code and reasons; a rejection carries its message."""
        self.assertEqual(NodeStatus(UNSCHEDULABLE, "a"), NodeStatus(UNSCHEDULABLE, "a"))
        self.assertNotEqual(NodeStatus(UNSCHEDULABLE, "a"), NodeStatus(UNRESOLVABLE, "a"))
        self.assertEqual(str(PreFilterRejected(UNRESOLVABLE, "why")), "why")
