"""The audit policy: reading a Policy file and the first rule that matches a request."""

import json

from twisted.trial.unittest import SynchronousTestCase

from orchd.auth.user import UserInfo
from orchd.server.audit.policy import AuditPolicyError, Policy
from orchd.server.requestinfo import parse_request_info

ALICE = UserInfo("alice", ("devs", "system:authenticated"))
NODE = UserInfo("system:node:n1", ("system:nodes",))


def info(method, path, query=None):
    return parse_request_info(method, path, query or {})


def policy(*rules, **top):
    return Policy.from_document({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                                 "rules": list(rules), **top})


def level(pol, user, method, path, query=None):
    return pol.decide(user, info(method, path, query)).level


class MatchingTests(SynchronousTestCase):
    def test_catch_all_first_rule(self):
        """A first rule with no criterion decides every request, anonymous ones included."""
        pol = policy({"level": "Metadata"}, {"level": "RequestResponse", "users": ["alice"]})
        self.assertTrue(pol.rules[0].matches_everything)
        self.assertFalse(pol.rules[1].matches_everything)
        self.assertEqual(level(pol, ALICE, b"GET", "/api/v1/pods"), "Metadata")
        self.assertEqual(level(pol, None, b"GET", "/healthz"), "Metadata")

    def test_criterion_first_rule_is_walked(self):
        """A first rule with any criterion is matched, and a request it misses goes on."""
        for first in ({"namespaces": ["kube-system"]}, {"nonResourceURLs": ["/healthz"]},
                      {"verbs": ["watch"]}, {"userGroups": ["devs"]}):
            pol = policy({"level": "None", **first}, {"level": "Request"})
            self.assertFalse(pol.rules[0].matches_everything, first)
            self.assertEqual(level(pol, NODE, b"GET", "/api/v1/namespaces/x/pods"), "Request")

    def test_first_match_wins(self):
        """Rules are tried in order and the first that matches decides; no match is None."""
        pol = policy({"level": "None", "users": ["system:node:n1"]},
                     {"level": "RequestResponse", "resources": [{"group": "",
                                                                  "resources": ["secrets"]}]},
                     {"level": "Metadata", "verbs": ["get", "list"]})
        self.assertEqual(level(pol, NODE, b"GET", "/api/v1/namespaces/a/secrets/s"), "None")
        self.assertEqual(level(pol, ALICE, b"GET", "/api/v1/namespaces/a/secrets/s"),
                         "RequestResponse")
        self.assertEqual(level(pol, ALICE, b"GET", "/api/v1/namespaces/a/pods"), "Metadata")
        self.assertEqual(level(pol, ALICE, b"POST", "/api/v1/namespaces/a/pods"), "None")

    def test_table(self):
        """Each criterion matches as upstream's checker does."""
        cases = [
            # (rule, user, method, path, query, matches)
            ({"users": ["alice"]}, ALICE, b"GET", "/api/v1/pods", None, True),
            ({"users": ["bob"]}, ALICE, b"GET", "/api/v1/pods", None, False),
            ({"userGroups": ["devs"]}, ALICE, b"GET", "/api/v1/pods", None, True),
            ({"userGroups": ["ops"]}, ALICE, b"GET", "/api/v1/pods", None, False),
            ({"userGroups": ["ops"]}, None, b"GET", "/api/v1/pods", None, False),
            ({"verbs": ["watch"]}, ALICE, b"GET", "/api/v1/pods", {b"watch": [b"1"]}, True),
            ({"verbs": ["list"]}, ALICE, b"GET", "/api/v1/pods", {b"watch": [b"1"]}, False),
            ({"verbs": ["deletecollection"]}, ALICE, b"DELETE", "/api/v1/namespaces/a/pods",
             None, True),
            # resources, with subresources and names
            ({"resources": [{"group": "", "resources": ["pods"]}]}, ALICE, b"GET",
             "/api/v1/namespaces/a/pods/p", None, True),
            ({"resources": [{"group": "", "resources": ["pods"]}]}, ALICE, b"GET",
             "/api/v1/namespaces/a/pods/p/log", None, False),
            ({"resources": [{"group": "", "resources": ["pods/log"]}]}, ALICE, b"GET",
             "/api/v1/namespaces/a/pods/p/log", None, True),
            ({"resources": [{"group": "", "resources": ["pods/*"]}]}, ALICE, b"GET",
             "/api/v1/namespaces/a/pods/p/status", None, True),
            ({"resources": [{"group": "", "resources": ["pods/*"]}]}, ALICE, b"GET",
             "/api/v1/namespaces/a/pods/p", None, True),
            ({"resources": [{"group": "", "resources": ["pods/*"]}]}, ALICE, b"GET",
             "/api/v1/namespaces/a/services/s", None, False),
            ({"resources": [{"group": "apps", "resources": ["*/scale"]}]}, ALICE, b"PUT",
             "/apis/apps/v1/namespaces/a/deployments/d/scale", None, True),
            ({"resources": [{"group": "apps", "resources": ["*/scale"]}]}, ALICE, b"PUT",
             "/apis/apps/v1/namespaces/a/deployments/d", None, False),
            ({"resources": [{"group": "", "resources": ["*"]}]}, ALICE, b"GET",
             "/api/v1/namespaces/a/pods/p/log", None, True),
            ({"resources": [{"group": "", "resources": ["*"]}]}, ALICE, b"GET",
             "/apis/apps/v1/namespaces/a/deployments", None, False),
            ({"resources": [{"group": "apps"}]}, ALICE, b"GET",
             "/apis/apps/v1/namespaces/a/deployments", None, True),
            ({"resources": [{"group": "", "resources": ["configmaps"],
                             "resourceNames": ["cfg"]}]}, ALICE, b"GET",
             "/api/v1/namespaces/a/configmaps/cfg", None, True),
            ({"resources": [{"group": "", "resources": ["configmaps"],
                             "resourceNames": ["cfg"]}]}, ALICE, b"GET",
             "/api/v1/namespaces/a/configmaps/other", None, False),
            # upstream group names in a policy match the renamed groups
            ({"resources": [{"group": "rbac.authorization.k8s.io"}]}, ALICE, b"GET",
             "/apis/rbac.authorization.orch.io/v1/clusterroles", None, True),
            # namespaces; "" is cluster-scoped
            ({"namespaces": ["a"]}, ALICE, b"GET", "/api/v1/namespaces/a/pods", None, True),
            ({"namespaces": ["a"]}, ALICE, b"GET", "/api/v1/namespaces/b/pods", None, False),
            ({"namespaces": [""]}, ALICE, b"GET", "/api/v1/nodes", None, True),
            ({"namespaces": [""]}, ALICE, b"GET", "/api/v1/namespaces/a/pods", None, False),
            ({"namespaces": ["a"]}, ALICE, b"GET", "/healthz", None, False),
            # non-resource URLs, with a trailing *
            ({"nonResourceURLs": ["/healthz*"]}, ALICE, b"GET", "/healthz/etcd", None, True),
            ({"nonResourceURLs": ["/healthz"]}, ALICE, b"GET", "/healthz/etcd", None, False),
            ({"nonResourceURLs": ["*"]}, ALICE, b"GET", "/version", None, True),
            ({"nonResourceURLs": ["*"]}, ALICE, b"GET", "/api/v1/pods", None, False),
            ({"nonResourceURLs": ["/api*"]}, ALICE, b"GET", "/apis", None, True),
            ({}, ALICE, b"GET", "/version", None, True),
        ]
        for rule, user, method, path, query, expected in cases:
            pol = policy({"level": "Metadata", **rule})
            got = level(pol, user, method, path, query) == "Metadata"
            self.assertEqual(got, expected, f"{rule} {method} {path} {query}")

    def test_omit_stages_combined(self):
        """The top-level omitStages are added to each rule's own."""
        pol = policy({"level": "Metadata", "omitStages": ["ResponseStarted"]},
                     omitStages=["RequestReceived"])
        decision = pol.decide(ALICE, info(b"GET", "/api/v1/pods"))
        self.assertEqual(decision.omit_stages, {"RequestReceived", "ResponseStarted"})

    def test_omit_managed_fields(self):
        """A rule's omitManagedFields wins over the top level's, which is the default."""
        pol = policy({"level": "Request", "verbs": ["create"], "omitManagedFields": False},
                     {"level": "Request"}, omitManagedFields=True)
        self.assertFalse(pol.decide(ALICE, info(b"POST", "/api/v1/namespaces/a/pods"))
                         .omit_managed_fields)
        self.assertTrue(pol.decide(ALICE, info(b"GET", "/api/v1/pods")).omit_managed_fields)

    def test_orch_api_version(self):
        """audit.orch.io/v1 is read like audit.k8s.io/v1."""
        pol = Policy.from_document({"apiVersion": "audit.orch.io/v1", "kind": "Policy",
                                    "rules": [{"level": "Request"}]})
        self.assertEqual(level(pol, ALICE, b"GET", "/version"), "Request")


class LoadingTests(SynchronousTestCase):
    def write(self, text):
        path = self.mktemp()
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_yaml_file(self):
        """A published-style YAML policy file is read."""
        path = self.write(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages:\n  - RequestReceived\n"
            "rules:\n  - level: None\n    nonResourceURLs: ['/healthz*', '/version']\n"
            "  - level: RequestResponse\n    resources:\n    - group: ''\n"
            "      resources: ['pods/log', 'pods/status']\n  - level: Metadata\n")
        pol = Policy.load(path)
        self.assertEqual(len(pol.rules), 3)
        self.assertEqual(level(pol, ALICE, b"GET", "/healthz"), "None")
        self.assertEqual(level(pol, ALICE, b"GET", "/api/v1/namespaces/a/pods/p/log"),
                         "RequestResponse")

    def test_bad_files(self):
        """Each bad policy is refused with a message naming the field."""
        cases = [
            ("[1, 2]", "must be a mapping"),
            ("apiVersion: v1\nkind: Policy\nrules: [{level: None}]", "apiVersion"),
            ("apiVersion: audit.k8s.io/v1\nkind: Pod\nrules: [{level: None}]", "kind"),
            ("apiVersion: audit.k8s.io/v1\nkind: Policy", "rules: Required value"),
            ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Everything}]",
             "rules[0].level: Unsupported value: 'Everything'"),
            ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, "
             "omitStages: [Sometimes]}]", "rules[0].omitStages[0]"),
            ("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [X]\n"
             "rules: [{level: None}]", "omitStages[0]"),
            ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, users: alice}]",
             "rules[0].users: must be a list"),
            ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, "
             "nonResourceURLs: ['/a'], namespaces: [x]}]", "both regular resources"),
            ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, "
             "nonResourceURLs: ['/a*b']}]", "nonResourceURLs[0]"),
            ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, "
             "resources: [{resources: ['*/*']}]}]", "resources[0].resources[0]"),
            ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, verb: [get]}]",
             "rules[0].verb: unknown field"),
            ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, "
             "omitManagedFields: yes please}]", "omitManagedFields"),
            ("rules: [{level: None}\n", "invalid YAML"),
            ("a: &a [*a]", "invalid YAML"),
        ]
        for text, says in cases:
            with self.assertRaises(AuditPolicyError, msg=text) as caught:
                Policy.load(self.write(text))
            self.assertIn(says, str(caught.exception), text)

    def test_json_file(self):
        """A JSON policy file is read too."""
        path = self.write(json.dumps({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                                      "rules": [{"level": "Metadata"}]}))
        self.assertEqual(level(Policy.load(path), ALICE, b"GET", "/version"), "Metadata")

    def test_missing_file(self):
        """An unreadable file is an error naming it."""
        with self.assertRaises(AuditPolicyError) as caught:
            Policy.load("/nonexistent/policy.yaml")
        self.assertIn("cannot read /nonexistent/policy.yaml", str(caught.exception))
