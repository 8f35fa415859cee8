"""The RBAC mode over its in-memory policy index, fed by the store."""

import orjson
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.auth.attributes import Attributes
from orchd.auth.authz.rbac import RBACAuthorizer
from orchd.auth.interfaces import Decision, IAuthorizer
from orchd.auth.rbac.index import PolicyIndex
from orchd.auth.rbac.rules import rule
from orchd.auth.user import AUTHENTICATED, UserInfo
from orchd.storage.memory import MemoryStore

RBAC = "rbac.authorization.orch.io"
PREFIX = f"/registry/{RBAC}/"
ALICE = UserInfo("alice", ("devs", AUTHENTICATED))
BOB = UserInfo("bob", (AUTHENTICATED,))
SA = UserInfo("system:serviceaccount:team:builder",
              ("system:serviceaccounts", "system:serviceaccounts:team", AUTHENTICATED))


def res(user, verb, resource, namespace="", group="", name="", subresource=""):
    return Attributes(user, verb, api_group=group, resource=resource, namespace=namespace,
                      name=name, subresource=subresource)


def user_subject(name, kind="User"):
    return {"kind": kind, "name": name, "apiGroup": RBAC}


class RBACTests(SynchronousTestCase):
    def setUp(self):
        self.store = MemoryStore()
        self.index = PolicyIndex(self.store)
        self.successResultOf(self.index.start())
        self.addCleanup(self.index.stop)
        self.authorizer = RBACAuthorizer(self.index)

    def put(self, resource, name, body, namespace=""):
        key = f"{PREFIX}{resource}/{namespace + '/' if namespace else ''}{name}"
        meta = {"name": name}
        if namespace:
            meta["namespace"] = namespace
        value = orjson.dumps(dict(body, metadata=meta))
        current = self.successResultOf(self.store.get(key))
        if current is None:
            self.successResultOf(self.store.create(key, value))
        else:
            self.successResultOf(self.store.update(key, value, current.mod_revision))

    def remove(self, resource, name, namespace=""):
        key = f"{PREFIX}{resource}/{namespace + '/' if namespace else ''}{name}"
        self.successResultOf(self.store.delete(key))

    def cluster_role(self, name, *rules):
        self.put("clusterroles", name, {"rules": list(rules)})

    def role(self, namespace, name, *rules):
        self.put("roles", name, {"rules": list(rules)}, namespace)

    def cluster_binding(self, name, role, *subjects):
        self.put("clusterrolebindings", name, {
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
            "subjects": list(subjects)})

    def binding(self, namespace, name, kind, role, *subjects):
        self.put("rolebindings", name, {
            "roleRef": {"apiGroup": RBAC, "kind": kind, "name": role},
            "subjects": list(subjects)}, namespace)

    def decide(self, attributes):
        return self.authorizer.authorize(attributes)

    def test_interface(self):
        verifyObject(IAuthorizer, self.authorizer)

    def test_no_policy_no_opinion(self):
        """Nothing bound: no opinion and no reason (the server says 403)."""
        self.assertEqual(self.decide(res(ALICE, "get", "pods", "a")), (Decision.NO_OPINION, ""))

    def test_cluster_binding_by_user_and_group(self):
        """A ClusterRoleBinding grants everywhere, to a user or a group of it."""
        self.cluster_role("reader", rule(["get", "list"], [""], ["pods"]))
        self.cluster_binding("devs-read", "reader", user_subject("devs", "Group"))
        decision, reason = self.decide(res(ALICE, "list", "pods", "a"))
        self.assertEqual(decision, Decision.ALLOW)
        self.assertEqual(reason, 'RBAC: allowed by ClusterRoleBinding "devs-read" of '
                                 'ClusterRole "reader" to Group "devs"')
        self.assertEqual(self.decide(res(ALICE, "get", "pods"))[0], Decision.ALLOW)
        self.assertEqual(self.decide(res(BOB, "get", "pods", "a"))[0], Decision.NO_OPINION)
        self.assertEqual(self.decide(res(ALICE, "delete", "pods", "a"))[0], Decision.NO_OPINION)

    def test_role_binding_is_namespaced(self):
        """A ClusterRole bound by a RoleBinding grants only in that namespace."""
        self.cluster_role("editor", rule(["*"], [""], ["configmaps"]))
        self.binding("a", "alice-edit", "ClusterRole", "editor", user_subject("alice"))
        self.assertEqual(self.decide(res(ALICE, "create", "configmaps", "a"))[0], Decision.ALLOW)
        self.assertEqual(self.decide(res(ALICE, "create", "configmaps", "b"))[0],
                         Decision.NO_OPINION)
        self.assertEqual(self.decide(res(ALICE, "list", "configmaps"))[0], Decision.NO_OPINION)

    def test_role(self):
        """A Role binds only in its own namespace; its reason names the binding."""
        self.role("a", "secret-reader", rule(["get"], [""], ["secrets"], names=["db"]))
        self.binding("a", "rb", "Role", "secret-reader", user_subject("alice"))
        decision, reason = self.decide(res(ALICE, "get", "secrets", "a", name="db"))
        self.assertEqual(decision, Decision.ALLOW)
        self.assertIn('RoleBinding "rb/a" of Role "secret-reader" to User "alice"', reason)
        self.assertEqual(self.decide(res(ALICE, "get", "secrets", "a", name="other"))[0],
                         Decision.NO_OPINION)

    def test_service_account_subject(self):
        """A ServiceAccount subject matches its user; its namespace defaults to the binding's."""
        self.cluster_role("reader", rule(["get"], [""], ["pods"]))
        self.binding("team", "sa", "ClusterRole", "reader",
                     {"kind": "ServiceAccount", "name": "builder"})
        decision, reason = self.decide(res(SA, "get", "pods", "team"))
        self.assertEqual(decision, Decision.ALLOW)
        self.assertIn('ServiceAccount "team/builder"', reason)
        self.assertEqual(self.decide(res(SA, "get", "pods", "other"))[0], Decision.NO_OPINION)

    def test_non_resource_urls_cluster_only(self):
        """Non-resource URLs come from cluster bindings only."""
        self.cluster_role("health", rule(["get"], urls=["/healthz", "/logs/*"]))
        self.binding("a", "rb", "ClusterRole", "health", user_subject("bob"))
        attrs = Attributes(BOB, "get", is_resource_request=False, path="/logs/x")
        self.assertEqual(self.decide(attrs)[0], Decision.NO_OPINION)
        self.cluster_binding("crb", "health", user_subject("bob"))
        self.assertEqual(self.decide(attrs)[0], Decision.ALLOW)

    def test_follows_changes(self):
        """Edits and deletions of roles and bindings apply at once."""
        self.cluster_role("reader", rule(["get"], [""], ["pods"]))
        self.cluster_binding("b", "reader", user_subject("alice"))
        self.assertEqual(self.decide(res(ALICE, "get", "pods", "a"))[0], Decision.ALLOW)
        self.cluster_role("reader", rule(["get"], [""], ["services"]))
        self.assertEqual(self.decide(res(ALICE, "get", "pods", "a"))[0], Decision.NO_OPINION)
        self.assertEqual(self.decide(res(ALICE, "get", "services", "a"))[0], Decision.ALLOW)
        self.cluster_binding("b", "reader", user_subject("bob"))
        self.assertEqual(self.decide(res(ALICE, "get", "services", "a"))[0],
                         Decision.NO_OPINION)
        self.assertEqual(self.decide(res(BOB, "get", "services", "a"))[0], Decision.ALLOW)
        self.remove("clusterrolebindings", "b")
        self.assertEqual(self.decide(res(BOB, "get", "services", "a"))[0], Decision.NO_OPINION)
        self.assertEqual(self.index.cluster_grants, {})

    def test_missing_role_reported(self):
        """A binding to a missing role is an error in the reason, not an allow."""
        self.cluster_binding("b", "ghost", user_subject("alice"))
        decision, reason = self.decide(res(ALICE, "get", "pods", "a"))
        self.assertEqual(decision, Decision.NO_OPINION)
        self.assertEqual(reason, f'RBAC: clusterrole.{RBAC} "ghost" not found')

    def test_malformed_subjects_ignored(self):
        """Unknown kinds and namespaced users match nobody and are recorded as errors."""
        self.cluster_role("reader", rule(["get"], [""], ["pods"]))
        self.cluster_binding("b", "reader", {"kind": "Robot", "name": "alice"},
                             {"kind": "User", "name": "alice", "namespace": "x"})
        self.assertEqual(self.decide(res(ALICE, "get", "pods", "a"))[0], Decision.NO_OPINION)
        self.assertEqual(len(self.index.binding_errors[("", "b")]), 2)

    def test_rules_for(self):
        """What a user may do in a namespace, split into resource and URL rules."""
        self.cluster_role("reader", rule(["get"], [""], ["pods"]), rule(["get"], urls=["/x"]))
        self.role("a", "cm", rule(["list"], [""], ["configmaps"], names=["c"]))
        self.cluster_binding("b", "reader", user_subject("alice"))
        self.binding("a", "rb", "Role", "cm", user_subject("devs", "Group"))
        self.binding("a", "rb2", "Role", "ghost", user_subject("alice"))
        resource, non_resource, incomplete = self.authorizer.rules_for(ALICE, "a")
        self.assertEqual(sorted(r["resources"][0] for r in resource), ["configmaps", "pods"])
        self.assertEqual(non_resource, [{"verbs": ["get"], "nonResourceURLs": ["/x"]}])
        self.assertTrue(incomplete)
        self.assertEqual(len(self.authorizer.rules_for(ALICE, "b")[0]), 1)

    def test_remembered_answers_follow_the_policy(self):
        """A repeated request is answered anew once a role or binding changes."""
        attributes = res(ALICE, "get", "pods", "a", name="p")
        self.assertEqual(self.decide(attributes)[0], Decision.NO_OPINION)
        self.cluster_role("reader", rule(["list"], [""], ["pods"]))
        self.cluster_binding("b", "reader", user_subject("alice"))
        self.assertEqual(self.decide(attributes)[0], Decision.NO_OPINION)
        self.cluster_role("reader", rule(["get"], [""], ["pods"]))
        self.assertEqual(self.decide(attributes)[0], Decision.ALLOW)
        self.assertEqual(self.decide(res(ALICE, "get", "pods", "a", name="q"))[0], Decision.ALLOW)
        self.assertEqual(self.decide(res(BOB, "get", "pods", "a", name="p"))[0],
                         Decision.NO_OPINION)
        self.remove("clusterrolebindings", "b")
        self.assertEqual(self.decide(attributes)[0], Decision.NO_OPINION)

    def test_remembers_a_bounded_number(self):
        """The answers kept never exceed the bound; forgetting changes no answer."""
        authorizer = RBACAuthorizer(self.index, remembered=2)
        self.cluster_role("reader", rule(["get"], [""], ["pods"]))
        self.cluster_binding("b", "reader", user_subject("alice"))
        for name in "pqrst":
            self.assertEqual(authorizer.authorize(res(ALICE, "get", "pods", "a", name=name))[0],
                             Decision.ALLOW)
            self.assertLessEqual(len(authorizer._answers), 2)
        self.assertEqual(RBACAuthorizer(self.index, remembered=0).authorize(
            res(ALICE, "get", "pods", "a"))[0], Decision.ALLOW)
