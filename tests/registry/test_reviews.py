"""Access, rules and self reviews: answered in status, never stored."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.auth.rbac.rules import rule
from orchd.auth.user import AUTHENTICATED, UserInfo
from tests.support import ADMIN, APIHarness

RBAC = "rbac.authorization.orch.io"
AUTHZ = "/apis/authorization.orch.io/v1"
ALICE = UserInfo("alice", ("devs", AUTHENTICATED))


class ReviewTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness(rbac=True)
        self.post("/api/v1/namespaces", {"metadata": {"name": "a"}})
        self.post(f"/apis/{RBAC}/v1/clusterroles", {
            "metadata": {"name": "reviewer"},
            "rules": [rule(["create"], ["authorization.orch.io"], ["*"]),
                      rule(["create"], ["authentication.orch.io"], ["selfsubjectreviews"])]})
        self.post(f"/apis/{RBAC}/v1/clusterrolebindings", binding("alice-reviews", "reviewer"))
        self.post(f"/apis/{RBAC}/v1/namespaces/a/roles", {
            "metadata": {"name": "cm"}, "rules": [rule(["get", "list"], [""], ["configmaps"])]})
        self.post(f"/apis/{RBAC}/v1/namespaces/a/rolebindings",
                  dict(binding("alice-cm", "cm"), roleRef={"apiGroup": RBAC, "kind": "Role",
                                                           "name": "cm"}))

    def post(self, path, body, user=ADMIN):
        code, obj, _ = self.api.as_user(user).call("POST", path, body)
        if user is ADMIN and "reviews" not in path:
            self.assertEqual(code, 201, obj)
        return code, obj

    def review(self, resource, spec, user=ALICE, path=None):
        return self.post(path or f"{AUTHZ}/{resource}", {"spec": spec}, user)

    def test_self_access_review(self):
        """The caller's own permissions: allowed in a, not in b."""
        code, obj = self.review("selfsubjectaccessreviews", {"resourceAttributes": {
            "namespace": "a", "verb": "list", "resource": "configmaps"}})
        self.assertEqual(code, 201, obj)
        self.assertTrue(obj["status"]["allowed"])
        self.assertIn('RoleBinding "alice-cm/a"', obj["status"]["reason"])
        code, obj = self.review("selfsubjectaccessreviews", {"resourceAttributes": {
            "namespace": "b", "verb": "list", "resource": "configmaps"}})
        self.assertEqual(obj["status"], {"allowed": False})

    def test_subject_access_review_for_another_user(self):
        """An administrator asks about alice; alice's groups count."""
        spec = {"resourceAttributes": {"namespace": "a", "verb": "get", "resource": "configmaps"},
                "user": "someone", "groups": ["devs"]}
        code, obj = self.review("subjectaccessreviews", spec, user=ADMIN)
        self.assertEqual(code, 201, obj)
        self.assertFalse(obj["status"]["allowed"])
        spec["user"] = "alice"
        self.assertTrue(self.review("subjectaccessreviews", spec, user=ADMIN)[1]["status"]
                        ["allowed"])

    def test_non_resource_review(self):
        """Non-resource attributes are checked as paths."""
        code, obj = self.review("subjectaccessreviews", {
            "nonResourceAttributes": {"path": "/healthz", "verb": "get"},
            "user": "x", "groups": ["system:masters"]}, user=ADMIN)
        self.assertEqual(code, 201, obj)
        self.assertTrue(obj["status"]["allowed"])

    def test_validation(self):
        """Exactly one kind of attributes, a subject, and empty metadata; else 422."""
        code, obj = self.review("subjectaccessreviews", {"user": "x"}, user=ADMIN)
        self.assertEqual(code, 422, obj)
        self.assertEqual(obj["details"]["causes"][0]["field"], "spec.resourceAttributes")
        code, obj = self.review("subjectaccessreviews", {
            "resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/"}},
            user=ADMIN)
        self.assertEqual(code, 422, obj)
        self.assertEqual(sorted(c["field"] for c in obj["details"]["causes"]),
                         ["spec.nonResourceAttributes", "spec.user"])
        code, obj = self.post(f"{AUTHZ}/selfsubjectaccessreviews", {
            "metadata": {"name": "x"}, "spec": {"resourceAttributes": {"verb": "get"}}}, ALICE)
        self.assertEqual(code, 422, obj)
        code, obj = self.post(f"{AUTHZ}/selfsubjectaccessreviews", {
            "metadata": {"creationTimestamp": None},
            "spec": {"resourceAttributes": {"verb": "get"}}}, ALICE)
        self.assertEqual(code, 201, obj)

    def test_local_review_namespace(self):
        """A local review takes its namespace from the path; another namespace is a 400."""
        path = f"{AUTHZ}/namespaces/a/localsubjectaccessreviews"
        code, obj = self.review(None, {"resourceAttributes": {"verb": "get",
                                                              "resource": "configmaps"},
                                       "user": "alice"}, user=ADMIN, path=path)
        self.assertEqual(code, 201, obj)
        self.assertTrue(obj["status"]["allowed"])
        self.assertEqual(obj["spec"]["resourceAttributes"]["namespace"], "a")
        code, obj = self.review(None, {"resourceAttributes": {"verb": "get", "namespace": "b"},
                                       "user": "alice"}, user=ADMIN, path=path)
        self.assertEqual(code, 400, obj)

    def test_rules_review(self):
        """What alice may do in a: her role's rules and the cluster-wide ones."""
        code, obj = self.review("selfsubjectrulesreviews", {"namespace": "a"})
        self.assertEqual(code, 201, obj)
        resources = {r["resources"][0] for r in obj["status"]["resourceRules"]}
        self.assertEqual(resources, {"configmaps", "*", "selfsubjectreviews"})
        self.assertFalse(obj["status"]["incomplete"])
        self.assertEqual(self.review("selfsubjectrulesreviews", {})[0], 400)

    def test_self_subject_review(self):
        """Who am I: the caller's user info."""
        code, obj = self.post("/apis/authentication.orch.io/v1/selfsubjectreviews", {}, ALICE)
        self.assertEqual(code, 201, obj)
        self.assertEqual(obj["status"]["userInfo"],
                         {"username": "alice", "groups": ["devs", AUTHENTICATED]})

    def test_nothing_stored(self):
        """Reviews cannot be read back: create is their only verb."""
        self.review("selfsubjectaccessreviews", {"resourceAttributes": {"verb": "get"}})
        code, _ = self.api.as_user(ADMIN).call("GET", f"{AUTHZ}/selfsubjectaccessreviews")[:2]
        self.assertEqual(code, 405)


def binding(name, role):
    return {"metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": RBAC}]}
