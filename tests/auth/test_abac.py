"""Tests for L{orchd.auth.authz.abac}: the policy file and how its rules match."""

import json

from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.auth.attributes import Attributes
from orchd.auth.authz.abac import ABACAuthorizer, Policy, parse_policies, parse_policy
from orchd.auth.interfaces import Decision, IAuthorizer
from orchd.auth.user import ANONYMOUS_USER, AUTHENTICATED, UNAUTHENTICATED, UserInfo

V1BETA1 = "abac.authorization.orch.io/v1beta1"


def versioned(**spec):
    return json.dumps({"apiVersion": V1BETA1, "kind": "Policy", "spec": spec})


def user(name, *groups):
    return UserInfo(name, groups + (AUTHENTICATED,))


def resource(who, verb, resource_name, namespace="", api_group=""):
    return Attributes(who, verb, namespace=namespace, api_group=api_group,
                      resource=resource_name)


def path(who, verb, url):
    return Attributes(who, verb, is_resource_request=False, path=url)


class ParsingTests(SynchronousTestCase):
    def write(self, text):
        name = self.mktemp()
        with open(name, "w", encoding="utf-8") as stream:
            stream.write(text)
        return name

    def test_versioned(self):
        """A v1beta1 line keeps its spec fields as written."""
        policy, versioned_line = parse_policy(versioned(
            user="alice", group="devs", readonly=True, apiGroup="apps", namespace="a",
            resource="deployments", nonResourcePath="/x"))
        self.assertTrue(versioned_line)
        self.assertEqual(policy, Policy(user="alice", group="devs", readonly=True,
                                        api_group="apps", namespace="a",
                                        resource="deployments", non_resource_path="/x"))

    def test_versioned_star_subject(self):
        """In v1beta1, C{*} as user or group means every authenticated user."""
        for spec in ({"user": "*"}, {"group": "*"}, {"user": "alice", "group": "*"}):
            policy, _ = parse_policy(versioned(resource="pods", **spec))
            self.assertEqual((policy.user, policy.group), ("", AUTHENTICATED), spec)

    def test_flat_conversion(self):
        """The flat form fills in its defaults: all namespaces, resources and API groups."""
        policy, versioned_line = parse_policy('{"user": "bob", "readonly": true}')
        self.assertFalse(versioned_line)
        self.assertEqual(policy, Policy(user="bob", readonly=True, api_group="*",
                                        namespace="*", resource="*", non_resource_path="*"))
        policy, _ = parse_policy('{"group": "ops", "namespace": "a"}')
        self.assertEqual(policy, Policy(group="ops", api_group="*", namespace="a",
                                        resource="*"))
        policy, _ = parse_policy('{"resource": "events", "apiGroup": "ignored"}')
        self.assertEqual(policy, Policy(group=AUTHENTICATED, api_group="*", namespace="*",
                                        resource="events"))

    def test_flat_star_subject(self):
        """A flat rule with no subject, or C{*}, is for authenticated users only."""
        for line in ('{"resource": "pods"}', '{"user": "*", "resource": "pods"}',
                     '{"group": "*", "resource": "pods"}'):
            policy, _ = parse_policy(line)
            self.assertEqual((policy.user, policy.group), ("", AUTHENTICATED), line)

    def test_versioned_v0(self):
        """A line declaring the v0 version is read as the flat form."""
        policy, versioned_line = parse_policy(json.dumps(
            {"apiVersion": "abac.authorization.orch.io/v0", "kind": "Policy", "user": "x"}))
        self.assertTrue(versioned_line)
        self.assertEqual(policy.non_resource_path, "*")

    def test_comments_and_blank_lines(self):
        """Blank lines and lines starting with C{#} are skipped, indented or not."""
        name = self.write("\n# rules\n   # indented comment\n\n"
                          + versioned(user="a", resource="pods", namespace="*") + "\n"
                          + '  {"user": "b"}  \n')
        authorizer = ABACAuthorizer.from_file(name)
        verifyObject(IAuthorizer, authorizer)
        self.assertEqual(authorizer.authorize(resource(user("a"), "get", "pods", "x")),
                         (Decision.ALLOW, ""))
        self.assertEqual(authorizer.authorize(path(user("b"), "post", "/x")),
                         (Decision.ALLOW, ""))
        self.assertEqual(authorizer.authorize(resource(user("c"), "get", "pods", "x"))[0],
                         Decision.NO_OPINION)

    def test_empty_file(self):
        """An empty file is a valid policy that allows nothing."""
        authorizer = ABACAuthorizer.from_file(self.write(""))
        self.assertEqual(authorizer.authorize(resource(user("a"), "get", "pods", "x")),
                         (Decision.NO_OPINION, "No policy matched."))

    def test_bad_lines(self):
        """A bad line is refused with the file and its line number."""
        bad = [
            "{not json",
            "[1, 2]",
            json.dumps({"apiVersion": "abac.authorization.k8s.io/v1beta1", "kind": "Policy",
                        "spec": {"user": "a"}}),
            json.dumps({"apiVersion": V1BETA1, "kind": "Role", "spec": {"user": "a"}}),
            json.dumps({"apiVersion": V1BETA1, "kind": "Policy", "spec": "a"}),
            versioned(user=5),
            versioned(user="a", readonly="yes"),
            '{"user": ["a"]}',
            '{"spec": {"user": "a", "resource": "pods"}}',
        ]
        for line in bad:
            name = self.write("# header\n\n" + versioned(user="a") + "\n" + line + "\n")
            with self.assertRaises(ValueError) as caught:
                ABACAuthorizer.from_file(name)
            message = str(caught.exception)
            self.assertIn(f"policy file {name}, line 4: ", message, line)
            self.assertNotIn("\n", message)

    def test_missing_file(self):
        """A file that cannot be read is refused by name."""
        name = self.mktemp()
        with self.assertRaises(ValueError) as caught:
            ABACAuthorizer.from_file(name)
        self.assertIn(name, str(caught.exception))

    def test_unversioned_lines_counted(self):
        """parse_policies reports how many lines use the flat form."""
        policies, unversioned = parse_policies(
            ['{"user": "a"}', versioned(user="b"), "", '{"group": "c"}'])
        self.assertEqual((len(policies), unversioned), (3, 2))

    def test_unversioned_warning(self):
        """Loading a file with flat rules logs one warning naming the file."""
        events = []
        self.patch(ABACAuthorizer, "log", Logger(observer=events.append))
        name = self.write('{"user": "a"}\n' + versioned(user="b") + "\n")
        ABACAuthorizer.from_file(name)
        self.assertEqual([(e["log_level"].name, e["path"], e["count"]) for e in events],
                         [("warn", name, 1)])
        ABACAuthorizer.from_file(self.write(versioned(user="b")))
        self.assertEqual(len(events), 1)

    def test_null_fields(self):
        """Null fields read as absent."""
        policy, _ = parse_policy(versioned(user="a", readonly=None, namespace=None))
        self.assertEqual(policy, Policy(user="a"))


ALICE = user("alice", "devs")
BOB = user("bob")
CAROL = user("carol", "ops")
PATH_USER = user("pathy")

POLICY = [
    versioned(user="*", readonly=True, nonResourcePath="/version"),
    versioned(user="*", nonResourcePath="/hooks"),
    versioned(user="*", nonResourcePath="/logs/*"),
    versioned(user="pathy", nonResourcePath="*"),
    versioned(user="*", readonly=True, resource="events", namespace="*"),
    versioned(user="alice", resource="*", namespace="team-a"),
    versioned(user="bob", readonly=True, resource="*", namespace="team-a"),
    versioned(group="ops", resource="nodes", namespace=""),
    versioned(group="ops", apiGroup="*", resource="*", namespace="apps-any"),
    versioned(group="ops", apiGroup="apps", resource="*", namespace="apps-only"),
    versioned(group="ops", resource="*", namespace="core-only"),
    versioned(user="alice", group="admins", resource="*", namespace="*", apiGroup="*"),
    versioned(group=UNAUTHENTICATED, readonly=True, nonResourcePath="/public"),
]

#: (attributes, allowed)
CASES = [
    # Alice: everything in her namespace, any verb, subresources too.
    (resource(ALICE, "create", "pods", "team-a"), True),
    (resource(ALICE, "delete", "widgets", "team-a", "example.com"), False),
    (resource(ALICE, "delete", "widgets", "team-a"), True),
    (Attributes(ALICE, "get", namespace="team-a", resource="pods", subresource="log"), True),
    (resource(ALICE, "get", "pods", "team-b"), False),
    (resource(ALICE, "list", "pods"), False),
    # The user and group rule needs both.
    (resource(UserInfo("alice", ("admins", AUTHENTICATED)), "delete", "nodes"), True),
    (resource(user("mallory", "admins"), "delete", "nodes"), False),
    # Bob: read only in the namespace.
    (resource(BOB, "get", "pods", "team-a"), True),
    (resource(BOB, "list", "secrets", "team-a"), True),
    (resource(BOB, "watch", "pods", "team-a"), True),
    (resource(BOB, "update", "pods", "team-a"), False),
    (resource(BOB, "deletecollection", "pods", "team-a"), False),
    # Everyone authenticated reads events anywhere, cluster scope included.
    (resource(BOB, "list", "events", "elsewhere"), True),
    (resource(BOB, "list", "events"), True),
    (resource(BOB, "create", "events", "elsewhere"), False),
    (resource(ANONYMOUS_USER, "list", "events", "elsewhere"), False),
    # Empty namespace in a rule is cluster scope only.
    (resource(CAROL, "get", "nodes"), True),
    (resource(CAROL, "get", "nodes", "x"), False),
    # API groups: *, exact, and "" for the core group.
    (resource(CAROL, "get", "deployments", "apps-any", "apps"), True),
    (resource(CAROL, "get", "pods", "apps-any"), True),
    (resource(CAROL, "get", "deployments", "apps-only", "apps"), True),
    (resource(CAROL, "get", "pods", "apps-only"), False),
    (resource(CAROL, "get", "pods", "core-only"), True),
    (resource(CAROL, "get", "deployments", "core-only", "apps"), False),
    # Non-resource paths: exact, prefix wildcard, *; read only means get.
    (path(BOB, "get", "/version"), True),
    (path(BOB, "post", "/version"), False),
    (path(BOB, "head", "/version"), False),
    (path(BOB, "get", "/version/x"), False),
    (path(BOB, "put", "/hooks"), True),
    (path(BOB, "get", "/logs"), False),
    (path(BOB, "get", "/logs/"), True),
    (path(BOB, "delete", "/logs/a/b"), True),
    (path(BOB, "get", "/"), False),
    (path(PATH_USER, "get", "/anything/at/all"), True),
    (resource(PATH_USER, "get", "pods", "x"), False),
    # A resource rule never matches a path, nor a path rule a resource.
    (path(ALICE, "get", "/api"), False),
    # Anonymous users match only rules for system:unauthenticated.
    (path(ANONYMOUS_USER, "get", "/public"), True),
    (path(ANONYMOUS_USER, "get", "/hooks"), False),
    (path(BOB, "get", "/public"), False),
]


class MatchingTests(SynchronousTestCase):
    def setUp(self):
        self.authorizer = ABACAuthorizer(parse_policies(POLICY)[0])

    def test_table(self):
        """Each request is allowed exactly when some rule matches it."""
        for attributes, allowed in CASES:
            expected = (Decision.ALLOW, "") if allowed else (Decision.NO_OPINION,
                                                             "No policy matched.")
            self.assertEqual(self.authorizer.authorize(attributes), expected, attributes)

    def test_flat_rules(self):
        """Flat rules match as converted: no namespace or resource also opens every path."""
        authorizer = ABACAuthorizer(parse_policies([
            '{"readonly": true, "resource": "events"}',
            '{"user": "sched", "readonly": true, "resource": "pods"}',
            '{"user": "sched", "resource": "bindings"}',
            '{"user": "alice", "namespace": "proj"}',
            '{"user": "root"}',
        ])[0])
        sched, alice, root, other = user("sched"), user("alice"), user("root"), user("zed")
        cases = [
            (resource(sched, "list", "pods", "n"), True),
            (resource(sched, "list", "pods"), True),
            (resource(sched, "create", "pods", "n"), False),
            (resource(sched, "create", "bindings", "n"), True),
            (resource(alice, "update", "widgets", "proj", "example.com"), True),
            (resource(alice, "get", "pods", "other"), False),
            (path(alice, "get", "/api"), False),
            (resource(other, "get", "events", "n", "events.orch.io"), True),
            (resource(other, "get", "pods", "n"), False),
            (path(other, "get", "/"), False),
            (path(root, "post", "/anything"), True),
            (resource(root, "delete", "nodes"), True),
            (resource(ANONYMOUS_USER, "get", "events", "n"), False),
        ]
        for attributes, allowed in cases:
            decision, _ = authorizer.authorize(attributes)
            self.assertEqual(decision is Decision.ALLOW, allowed, attributes)

    def test_empty_subject_never_matches(self):
        """A versioned rule naming neither user nor group matches nobody."""
        authorizer = ABACAuthorizer(parse_policies([versioned(resource="*", namespace="*")])[0])
        for who in (BOB, ANONYMOUS_USER):
            self.assertEqual(authorizer.authorize(resource(who, "get", "pods", "a"))[0],
                             Decision.NO_OPINION)


class RulesForTests(SynchronousTestCase):
    def test_rules(self):
        """rules_for lists the rules whose subject and namespace apply, in file order."""
        authorizer = ABACAuthorizer(parse_policies(POLICY + [
            '{"user": "alice", "readonly": true}'])[0])
        read = ["get", "list", "watch"]
        self.assertEqual(authorizer.rules_for(ALICE, "team-a"), ([
            {"verbs": read, "apiGroups": [""], "resources": ["events"]},
            {"verbs": ["*"], "apiGroups": [""], "resources": ["*"]},
            {"verbs": read, "apiGroups": ["*"], "resources": ["*"]},
        ], [
            {"verbs": read, "nonResourceURLs": ["*"]},
        ], False))

    def test_rules_without_namespace(self):
        """Rules with no namespace, path rules among them, are listed for namespace "" only."""
        authorizer = ABACAuthorizer(parse_policies(POLICY + [
            '{"user": "alice", "readonly": true}'])[0])
        read = ["get", "list", "watch"]
        self.assertEqual(authorizer.rules_for(ALICE, ""), ([
            {"verbs": read, "apiGroups": [""], "resources": ["events"]},
            {"verbs": read, "apiGroups": ["*"], "resources": ["*"]},
        ], [
            {"verbs": read, "nonResourceURLs": ["/version"]},
            {"verbs": ["*"], "nonResourceURLs": ["/hooks"]},
            {"verbs": ["*"], "nonResourceURLs": ["/logs/*"]},
            {"verbs": read, "nonResourceURLs": ["*"]},
        ], False))
        self.assertEqual(authorizer.rules_for(ANONYMOUS_USER, ""), (
            [], [{"verbs": read, "nonResourceURLs": ["/public"]}], False))

    def test_other_namespace_and_group(self):
        """Rules for another namespace, or another subject, are left out."""
        authorizer = ABACAuthorizer(parse_policies(POLICY)[0])
        self.assertEqual(authorizer.rules_for(CAROL, "apps-only"), ([
            {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["events"]},
            {"verbs": ["*"], "apiGroups": ["apps"], "resources": ["*"]},
        ], [], False))
        self.assertEqual(authorizer.rules_for(ANONYMOUS_USER, "team-a"), ([], [], False))

    def test_file_round_trip(self):
        """A policy file loaded from disk answers as the parsed lines do."""
        name = self.mktemp()
        with open(name, "w", encoding="utf-8") as stream:
            stream.write("\n".join(POLICY))
        authorizer = ABACAuthorizer.from_file(name)
        for attributes, allowed in CASES:
            self.assertEqual(authorizer.authorize(attributes)[0] is Decision.ALLOW, allowed)
