"""NodeAffinity: nodeSelector, required and preferred node affinity, as upstream matches them."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.scheduler.framework import UNRESOLVABLE, NodeStatus, PreFilterRejected
from orchd.scheduler.nodeaffinity import NodeAffinity, compile_term
from tests.scheduler.support import node_info, pod_info

REJECTED = NodeStatus(UNRESOLVABLE, "node(s) didn't match Pod's node affinity/selector")


def required(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}


def expression(key, operator, *values):
    requirement = {"key": key, "operator": operator}
    if values:
        requirement["values"] = list(values)
    return {"matchExpressions": [requirement]}


def name_in(*names):
    return {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}
                            for n in names]}


class TermTests(SynchronousTestCase):
    def check(self, term, labels, name="n1"):
        compiled = compile_term(term)
        return compiled is not None and compiled.matches(labels, name)

    def test_operators(self):
        """In, NotIn, Exists, DoesNotExist, Gt and Lt match labels as upstream's selector."""
        labels = {"zone": "a", "cores": "8"}
        self.assertTrue(self.check(expression("zone", "In", "a", "b"), labels))
        self.assertFalse(self.check(expression("zone", "In", "b"), labels))
        self.assertTrue(self.check(expression("zone", "NotIn", "b"), labels))
        self.assertTrue(self.check(expression("missing", "NotIn", "b"), labels))
        self.assertTrue(self.check(expression("zone", "Exists"), labels))
        self.assertFalse(self.check(expression("zone", "DoesNotExist"), labels))
        self.assertTrue(self.check(expression("cores", "Gt", "4"), labels))
        self.assertFalse(self.check(expression("cores", "Gt", "8"), labels))
        self.assertTrue(self.check(expression("cores", "Lt", "+9"), labels))
        self.assertFalse(self.check(expression("zone", "Lt", "9"), labels))
        self.assertFalse(self.check(expression("missing", "Gt", "1"), labels))

    def test_requirements_are_anded(self):
        """Every requirement of a term must hold."""
        term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                     {"key": "disk", "operator": "Exists"}]}
        self.assertFalse(self.check(term, {"zone": "a"}))
        self.assertTrue(self.check(term, {"zone": "a", "disk": "ssd"}))

    def test_unparseable_terms_match_nothing(self):
        """Empty terms, unknown operators and malformed values match no node."""
        for term in ({}, {"matchExpressions": []}, expression("zone", "Near", "a"),
                     expression("zone", "In"), expression("zone", "Exists", "a"),
                     expression("cores", "Gt", "many"), expression("cores", "Gt", "1", "2"),
                     expression("cores", "Gt", "99999999999999999999"),
                     {"matchFields": [{"key": "metadata.uid", "operator": "In",
                                       "values": ["n1"]}]},
                     {"matchFields": [{"key": "metadata.name", "operator": "In",
                                       "values": ["n1", "n2"]}]},
                     {"matchExpressions": "zone"}, "term"):
            self.assertIsNone(compile_term(term), term)

    def test_match_fields(self):
        """matchFields compares metadata.name with In and NotIn."""
        self.assertTrue(self.check(name_in("n1"), {}, "n1"))
        self.assertFalse(self.check(name_in("n1"), {}, "n2"))
        not_in = {"matchFields": [{"key": "metadata.name", "operator": "NotIn",
                                   "values": ["n1"]}]}
        self.assertTrue(self.check(not_in, {}, "n2"))
        self.assertFalse(self.check(not_in, {}, "n1"))


class NodeAffinityFilterTests(SynchronousTestCase):
    plugin = NodeAffinity()

    def test_node_selector(self):
        """Every nodeSelector label must be on the node with the same value."""
        pod = pod_info(node_selector={"disk": "ssd"})
        self.assertIsNone(self.plugin.filter(pod, node_info("n1", labels={"disk": "ssd"})))
        self.assertEqual(self.plugin.filter(pod, node_info("n1", labels={"disk": "hdd"})),
                         REJECTED)
        self.assertEqual(self.plugin.filter(pod, node_info("n1")), REJECTED)

    def test_terms_are_ored(self):
        """One matching required term is enough; a broken term does not spoil the others."""
        pod = pod_info(affinity=required(expression("zone", "Near", "x"),
                                         expression("zone", "In", "a")))
        self.assertIsNone(self.plugin.filter(pod, node_info("n1", labels={"zone": "a"})))
        self.assertEqual(self.plugin.filter(pod, node_info("n1", labels={"zone": "b"})),
                         REJECTED)

    def test_no_terms_match_nothing(self):
        """A required selector with no terms fits no node."""
        self.assertEqual(self.plugin.filter(pod_info(affinity=required()), node_info("n1")),
                         REJECTED)

    def test_prefilter_names(self):
        """Terms that all name nodes limit the pod to the union of their names."""
        pod = pod_info(affinity=required(name_in("n1"), name_in("n3")))
        self.assertEqual(self.plugin.prefilter(pod), {"n1", "n3"})

    def test_prefilter_all_nodes(self):
        """A term naming no node (or no required affinity) leaves every node open."""
        self.assertIsNone(self.plugin.prefilter(pod_info()))
        pod = pod_info(affinity=required(name_in("n1"), expression("zone", "Exists")))
        self.assertIsNone(self.plugin.prefilter(pod))

    def test_prefilter_conflict(self):
        """Name requirements that cannot meet reject the pod before any node is tried."""
        pod = pod_info(affinity=required(name_in("n1", "n2")))
        with self.assertRaises(PreFilterRejected) as caught:
            self.plugin.prefilter(pod)
        self.assertEqual((caught.exception.code, caught.exception.message),
                         (UNRESOLVABLE, "pod affinity terms conflict"))

    def test_preferred_score(self):
        """Matching preferred terms add their weights; the best node scores 100."""
        pod = pod_info(affinity={"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 30, "preference": expression("zone", "In", "a")},
                {"weight": 10, "preference": expression("disk", "Exists")},
                {"weight": 0, "preference": expression("zone", "Exists")}]}})
        nodes = [node_info("n1", labels={"zone": "a", "disk": "ssd"}),
                 node_info("n2", labels={"zone": "a"}), node_info("n3")]
        scores = [self.plugin.score(pod, n) for n in nodes]
        self.assertEqual(scores, [40, 30, 0])
        self.plugin.normalize(pod, scores)
        self.assertEqual(scores, [100, 75, 0])
