"""Escalation prevention, through the whole server with RBAC deciding."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.auth.rbac.rules import rule
from orchd.auth.user import AUTHENTICATED, UserInfo
from tests.support import ADMIN, APIHarness

RBAC = "rbac.authorization.orch.io"
APIS = f"/apis/{RBAC}/v1"
ALICE = UserInfo("alice", ("devs", AUTHENTICATED))
WRITE = ["get", "list", "watch", "create", "update", "patch", "delete"]


class EscalationTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness(rbac=True)
        # alice may write RBAC objects (no escalate or bind: "*" would include
        # them) and read pods, nothing more.
        self.admin_post(f"{APIS}/clusterroles", cluster_role(
            "rbac-writer", rule(WRITE, [RBAC], ["roles", "rolebindings", "clusterroles",
                                                 "clusterrolebindings"])))
        self.admin_post(f"{APIS}/clusterroles", cluster_role(
            "pod-reader", rule(["get", "list"], [""], ["pods"])))
        for role in ("rbac-writer", "pod-reader"):
            self.admin_post(f"{APIS}/clusterrolebindings", cluster_binding(
                f"alice-{role}", role, "alice"))

    def admin_post(self, path, body):
        code, obj, _ = self.api.as_user(ADMIN).call("POST", path, body)
        self.assertIn(code, (200, 201), obj)
        return obj

    def alice(self, method, path, body=None):
        return self.api.as_user(ALICE).call(method, path, body)[:2]

    def test_role_within_held_rules(self):
        """A role granting what the user holds is created."""
        code, obj = self.alice("POST", f"{APIS}/namespaces/default/roles",
                               role("r", rule(["get"], [""], ["pods"])))
        self.assertEqual(code, 201, obj)

    def test_role_beyond_held_rules(self):
        """A role granting more is refused with upstream's message, naming what is missing."""
        code, obj = self.alice("POST", f"{APIS}/namespaces/default/roles",
                               role("r", rule(["get", "delete", "patch"], [""], ["pods"])))
        self.assertEqual(code, 403, obj)
        self.assertEqual(obj["message"],
                         f'roles.{RBAC} "r" is forbidden: user "alice" '
                         f'(groups=["devs" "{AUTHENTICATED}"]) is attempting to grant RBAC '
                         'permissions not currently held:\n'
                         '{APIGroups:[""], Resources:["pods"], Verbs:["delete" "patch"]}')
        self.assertEqual(self.alice("GET", f"{APIS}/namespaces/default/roles/r")[0], 404)

    def test_escalate_verb(self):
        """The escalate verb on roles lifts the check."""
        self.admin_post(f"{APIS}/clusterroles", cluster_role(
            "escalator", rule(["escalate"], [RBAC], ["roles"])))
        self.admin_post(f"{APIS}/clusterrolebindings", cluster_binding(
            "alice-escalator", "escalator", "alice"))
        code, obj = self.alice("POST", f"{APIS}/namespaces/default/roles",
                               role("r", rule(["*"], ["*"], ["*"])))
        self.assertEqual(code, 201, obj)

    def test_update_checked_too(self):
        """Widening a role by update is refused; a change of finalizers only is not."""
        self.alice("POST", f"{APIS}/namespaces/default/roles",
                   role("r", rule(["get"], [""], ["pods"])))
        code, obj = self.alice("PUT", f"{APIS}/namespaces/default/roles/r",
                               role("r", rule(["get"], [""], ["secrets"])))
        self.assertEqual(code, 403, obj)
        self.admin_post(f"{APIS}/namespaces/default/roles",
                        role("wide", rule(["*"], [""], ["secrets"])))
        code, obj = self.patch_finalizers("wide")
        self.assertEqual(code, 200, obj)

    def patch_finalizers(self, name):
        return self.api.as_user(ALICE).call(
            "PATCH", f"{APIS}/namespaces/default/roles/{name}",
            {"metadata": {"finalizers": ["example.com/hold"]}},
            content_type=b"application/merge-patch+json")[:2]

    def test_aggregated_cluster_role_needs_full_authority(self):
        """An aggregated ClusterRole may gather anything, so it needs everything."""
        body = cluster_role("agg")
        body["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}
        code, obj = self.alice("POST", f"{APIS}/clusterroles", body)
        self.assertEqual(code, 403, obj)

    def test_binding_needs_the_roles_rules(self):
        """Binding a role one holds the rules of works; cluster-admin does not."""
        code, obj = self.alice("POST", f"{APIS}/namespaces/default/rolebindings",
                               binding("b", "ClusterRole", "pod-reader", "bob"))
        self.assertEqual(code, 201, obj)
        code, obj = self.alice("POST", f"{APIS}/namespaces/default/rolebindings",
                               binding("b2", "ClusterRole", "rbac-writer-plus", "bob"))
        self.assertEqual(code, 404, obj)
        self.admin_post(f"{APIS}/clusterroles", cluster_role(
            "cluster-admin", rule(["*"], ["*"], ["*"]), rule(["*"], urls=["*"])))
        code, obj = self.alice("POST", f"{APIS}/clusterrolebindings",
                               cluster_binding("b3", "cluster-admin", "alice"))
        self.assertEqual(code, 403, obj)
        self.assertIn("attempting to grant RBAC permissions not currently held", obj["message"])

    def test_bind_verb(self):
        """The bind verb on a named role lifts the check for that role only."""
        for name in ("cluster-admin", "other-admin"):
            self.admin_post(f"{APIS}/clusterroles", cluster_role(name, rule(["*"], ["*"], ["*"])))
        self.admin_post(f"{APIS}/clusterroles", cluster_role(
            "binder", rule(["bind"], [RBAC], ["clusterroles"], names=["cluster-admin"])))
        self.admin_post(f"{APIS}/clusterrolebindings", cluster_binding(
            "alice-binder", "binder", "alice"))
        code, obj = self.alice("POST", f"{APIS}/clusterrolebindings",
                               cluster_binding("b", "cluster-admin", "bob"))
        self.assertEqual(code, 201, obj)
        code, obj = self.alice("POST", f"{APIS}/clusterrolebindings",
                               cluster_binding("b2", "other-admin", "bob"))
        self.assertEqual(code, 403, obj)

    def test_masters_skip_checks(self):
        """system:masters may grant anything."""
        self.admin_post(f"{APIS}/namespaces/default/roles", role("r", rule(["*"], ["*"], ["*"])))


def role(name, *rules):
    return {"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": {"name": name},
            "rules": list(rules)}


def cluster_role(name, *rules):
    return {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": list(rules)}


def _subjects(user):
    return [{"kind": "User", "name": user, "apiGroup": RBAC}]


def binding(name, kind, role_name, user):
    return {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC, "kind": kind, "name": role_name},
            "subjects": _subjects(user)}


def cluster_binding(name, role_name, user):
    return {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role_name},
            "subjects": _subjects(user)}
