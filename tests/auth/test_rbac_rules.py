"""PolicyRule matching and covering, as upstream's evaluation helpers define them."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.auth.attributes import Attributes
from orchd.auth.rbac.noderules import NODE_RULES
from orchd.auth.rbac.rules import CompiledRule, describe, rule, uncovered
from orchd.auth.user import UserInfo

ALICE = UserInfo("alice")


def res(verb, resource, group="", subresource="", name="", namespace="ns"):
    return Attributes(ALICE, verb, api_group=group, resource=resource, subresource=subresource,
                      name=name, namespace=namespace)


def path(verb, url):
    return Attributes(ALICE, verb, is_resource_request=False, path=url)


class MatchTests(SynchronousTestCase):
    def allows(self, policy_rule, attributes):
        return CompiledRule(policy_rule).allows(attributes)

    def test_verbs_and_groups(self):
        """Verbs and groups match exactly or by *; "" is the core group."""
        r = rule(["get", "list"], [""], ["pods"])
        self.assertTrue(self.allows(r, res("get", "pods")))
        self.assertFalse(self.allows(r, res("delete", "pods")))
        self.assertFalse(self.allows(r, res("get", "pods", group="apps")))
        self.assertTrue(self.allows(rule(["*"], ["*"], ["pods"]), res("delete", "pods", "apps")))

    def test_subresources(self):
        """pods does not match pods/log; * and */scale do."""
        self.assertFalse(self.allows(rule(["get"], [""], ["pods"]),
                                     res("get", "pods", subresource="log")))
        self.assertTrue(self.allows(rule(["get"], [""], ["pods/log"]),
                                    res("get", "pods", subresource="log")))
        self.assertTrue(self.allows(rule(["get"], [""], ["*"]),
                                    res("get", "pods", subresource="log")))
        scale = rule(["update"], ["*"], ["*/scale"])
        self.assertTrue(self.allows(scale, res("update", "deployments", "apps", "scale")))
        self.assertFalse(self.allows(scale, res("update", "deployments", "apps")))

    def test_resource_names(self):
        """Names restrict to named requests: list and create carry no name."""
        r = rule(["get", "list", "create"], [""], ["configmaps"], names=["cluster-info"])
        self.assertTrue(self.allows(r, res("get", "configmaps", name="cluster-info")))
        self.assertFalse(self.allows(r, res("get", "configmaps", name="other")))
        self.assertFalse(self.allows(r, res("list", "configmaps")))
        self.assertFalse(self.allows(r, res("create", "configmaps")))

    def test_non_resource_urls(self):
        """Exact paths, * and a trailing * as a prefix; never for resource requests."""
        r = rule(["get"], urls=["/healthz", "/apis/*"])
        self.assertTrue(self.allows(r, path("get", "/healthz")))
        self.assertFalse(self.allows(r, path("get", "/healthz/ping")))
        self.assertTrue(self.allows(r, path("get", "/apis/apps/v1")))
        self.assertFalse(self.allows(r, path("get", "/apis")))
        self.assertFalse(self.allows(r, path("post", "/healthz")))
        self.assertTrue(self.allows(rule(["*"], urls=["*"]), path("delete", "/anything")))
        self.assertFalse(self.allows(r, res("get", "pods")))
        self.assertFalse(self.allows(rule(["get"], [""], ["*"]), path("get", "/healthz")))

    def test_malformed_fields_ignored(self):
        """A rule with non-list fields matches nothing rather than failing."""
        self.assertFalse(self.allows({"verbs": "get", "resources": ["pods"]}, res("get", "pods")))


class CoverTests(SynchronousTestCase):
    def test_covered(self):
        """Every piece covered by some rule: nothing is missing."""
        owner = [rule(["get", "list"], [""], ["pods", "configmaps"]), rule(["*"], ["apps"], ["*"])]
        self.assertEqual(uncovered(owner, [rule(["get"], [""], ["pods"]),
                                           rule(["delete"], ["apps"], ["deployments/scale"])]), [])

    def test_missing_pieces(self):
        """What is not held comes back piece by piece."""
        owner = [rule(["get"], [""], ["pods"])]
        missing = uncovered(owner, [rule(["get", "delete"], [""], ["pods"])])
        self.assertEqual(missing, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}])

    def test_names(self):
        """A rule limited to names covers only those names, never the unnamed rule."""
        owner = [rule(["get"], [""], ["secrets"], names=["a"])]
        self.assertEqual(uncovered(owner, [rule(["get"], [""], ["secrets"], names=["a"])]), [])
        self.assertEqual(len(uncovered(owner, [rule(["get"], [""], ["secrets"])])), 1)
        self.assertEqual(len(uncovered(owner, [rule(["get"], [""], ["secrets"], ["a", "b"])])), 1)

    def test_star_subresource_and_urls(self):
        """*/scale covers any scale subresource; URL prefixes cover longer paths."""
        owner = [rule(["update"], ["apps"], ["*/scale"]), rule(["get"], urls=["/logs/*"])]
        self.assertEqual(uncovered(owner, [rule(["update"], ["apps"], ["deployments/scale"]),
                                           rule(["get"], urls=["/logs/x"])]), [])
        self.assertEqual(len(uncovered(owner, [rule(["get"], urls=["/logs"])])), 1)

    def test_describe(self):
        """Upstream's compact rule string, used in escalation messages."""
        self.assertEqual(describe(rule(["delete"], [""], ["pods"])),
                         '{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}')
        self.assertEqual(describe(rule(["get"], urls=["/healthz"])),
                         '{NonResourceURLs:["/healthz"], Verbs:["get"]}')

    def test_node_rules_are_rules(self):
        """The node rules compile and allow what a node agent does."""
        compiled = [CompiledRule(r) for r in NODE_RULES]
        self.assertTrue(any(r.allows(res("update", "nodes", subresource="status", name="n"))
                            for r in compiled))
        self.assertFalse(any(r.allows(res("delete", "nodes", name="n")) for r in compiled))
