"""Which writes a webhook's rules, selectors and policies cover."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.interfaces import CREATE, DELETE, UPDATE, AdmissionAttributes
from orchd.admission.webhook.matching import (
    Rule, Webhook, namespace_labels_source, resource_matches,
)
from orchd.api.kinds import KindInfo
from orchd.auth.user import UserInfo

PODS = KindInfo("", "v1", "pods", "Pod", True)
NAMESPACES = KindInfo("", "v1", "namespaces", "Namespace", False)
NODES = KindInfo("", "v1", "nodes", "Node", False)


def attributes(info=PODS, operation=CREATE, subresource="", obj=None, old=None, name="x"):
    return AdmissionAttributes(operation, info, "default" if info.namespaced else "", name,
                               obj, old, UserInfo("u"), subresource=subresource)


def rule(**fields):
    spec = {"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["pods"]}
    spec.update(fields)
    return Rule(spec)


class ResourceTests(SynchronousTestCase):
    def test_wildcards(self):
        """C{*} covers resources, C{*/*} subresources too, C{x/*} and C{*/y} one side each."""
        cases = [(["*"], "pods", "", True), (["*"], "pods", "status", False),
                 (["*/*"], "pods", "status", True), (["pods/*"], "pods", "log", True),
                 (["pods/*"], "pods", "", False), (["*/status"], "nodes", "status", True),
                 (["*/status"], "nodes", "proxy", False), (["pods"], "pods", "status", False),
                 (["pods/status"], "pods", "status", True), (["pods"], "nodes", "", False)]
        for patterns, resource, subresource, expected in cases:
            self.assertEqual(resource_matches(patterns, resource, subresource), expected,
                             (patterns, resource, subresource))


class RuleTests(SynchronousTestCase):
    def test_operation_group_version(self):
        """A rule covers only its operations, groups and versions (or any, with C{*})."""
        self.assertTrue(rule().matches(CREATE, "", "v1", "pods", "", True))
        self.assertFalse(rule(operations=["UPDATE"]).matches(CREATE, "", "v1", "pods", "", True))
        self.assertFalse(rule(apiGroups=["apps"]).matches(CREATE, "", "v1", "pods", "", True))
        self.assertFalse(rule(apiVersions=["v2"]).matches(CREATE, "", "v1", "pods", "", True))
        self.assertTrue(rule(apiGroups=["*"], apiVersions=["*"]).matches(
            DELETE, "", "v1", "pods", "", True))

    def test_scope(self):
        """Cluster covers cluster-scoped kinds, Namespaced namespaced ones, C{*} both."""
        cluster, namespaced = rule(scope="Cluster"), rule(scope="Namespaced")
        self.assertFalse(cluster.matches(CREATE, "", "v1", "pods", "", True))
        self.assertTrue(namespaced.matches(CREATE, "", "v1", "pods", "", True))
        self.assertTrue(cluster.matches(CREATE, "", "v1", "pods", "", False))

    def test_equivalent_group(self):
        """The k8s.io spelling of a group covers its orch.io name only when asked."""
        upstream = rule(apiGroups=["apps.k8s.io"], resources=["deployments"])
        self.assertFalse(upstream.matches(CREATE, "apps.orch.io", "v1", "deployments", "", True))
        self.assertTrue(upstream.matches(CREATE, "apps.orch.io", "v1", "deployments", "", True,
                                         equivalent=True))


def webhook(**fields):
    spec = {"name": "w.example.com", "rules": [{
        "operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}
    spec.update(fields)
    return Webhook("config", 0, spec, False)


class WebhookTests(SynchronousTestCase):
    def test_match_policy(self):
        """Equivalent matches another served version (and names it); Exact does not."""
        hook = webhook(rules=[{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v2"],
                               "resources": ["pods"]}])
        served = lambda group, resource: ["v1", "v2"]     # noqa: E731
        self.assertEqual(hook.matching_rule(attributes(), served), ("", "v2"))
        self.assertIsNone(hook.matching_rule(attributes(), lambda group, resource: ["v1"]))
        exact = webhook(matchPolicy="Exact", rules=hook.rules and [
            {"operations": ["*"], "apiGroups": [""], "apiVersions": ["v2"],
             "resources": ["pods"]}])
        self.assertIsNone(exact.matching_rule(attributes(), served))

    def test_object_selector(self):
        """The object selector matches the new or the old object's labels."""
        hook = webhook(objectSelector={"matchLabels": {"a": "b"}})
        labelled = {"metadata": {"labels": {"a": "b"}}}
        self.assertTrue(hook.object_matches(attributes(obj=labelled)))
        self.assertTrue(hook.object_matches(attributes(operation=DELETE, old=labelled)))
        self.assertTrue(hook.object_matches(attributes(operation=UPDATE, obj={"metadata": {}},
                                                       old=labelled)))
        self.assertFalse(hook.object_matches(attributes(obj={"metadata": {}})))
        self.assertTrue(webhook(objectSelector={}).object_matches(attributes(obj={})))

    def test_namespace_labels_source(self):
        """A Namespace's own labels, a namespaced object's namespace, nothing for cluster kinds."""
        namespace = {"metadata": {"name": "x", "labels": {"a": "b"}}}
        self.assertEqual(namespace_labels_source(attributes(NAMESPACES, obj=namespace)),
                         ({"a": "b"}, None))
        self.assertEqual(namespace_labels_source(attributes(NAMESPACES, DELETE, old=namespace)),
                         ({"a": "b"}, None))
        self.assertEqual(namespace_labels_source(attributes(obj={})), (None, "default"))
        self.assertEqual(namespace_labels_source(attributes(NODES, obj={})), (None, None))

    def test_broken_condition_remembered(self):
        """A stored condition that does not compile leaves the webhook marked broken."""
        hook = webhook(matchConditions=[{"name": "c", "expression": "object.x =="}])
        self.assertIn("compilation failed", hook.broken)
