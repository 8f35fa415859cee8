"""Authorization end to end: several users' certificates over real TLS, RBAC by default."""

from treq.client import HTTPClient
from twisted.internet import reactor
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, HTTPConnectionPool

from orchd.client.orchconfig import load_orchconfig
from orchd.tls.client import ClientTLSPolicy
from tests.integration.support import RunningControlPlane, sleep

RBAC = "rbac.authorization.orch.io"
CM = "/api/v1/namespaces/default/configmaps"
BINDINGS = f"/apis/{RBAC}/v1/namespaces/default/rolebindings"


def binding(name, role, user, kind="ClusterRole"):
    return {"metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC, "kind": kind, "name": role},
            "subjects": [{"kind": "User", "name": user, "apiGroup": RBAC}]}


class AuthorizationTests(TestCase):
    timeout = 60

    async def setUp(self):
        self.server = await RunningControlPlane(self).start()

    async def eventually(self, method, path, body, client, code, tries=50):
        """Repeat a request until it answers C{code} (policy and aggregation follow writes)."""
        for _ in range(tries):
            got, answer = await self.server.call(method, path, body, client=client)
            if got == code:
                return answer
            await sleep(0.1)
        self.fail(f"{method} {path} never answered {code}: last {got} {answer}")

    async def test_forbidden_until_bound(self):
        """403 with upstream's wording, then a RoleBinding to edit, then 201."""
        carol = self.server.user_client("carol", "team")
        code, status = await self.server.call("POST", CM, {"metadata": {"name": "c"}},
                                              client=carol)
        self.assertEqual(code, 403, status)
        self.assertEqual(status["message"],
                         'configmaps is forbidden: User "carol" cannot create resource '
                         '"configmaps" in API group "" in the namespace "default"')
        code, created = await self.server.call("POST", BINDINGS,
                                               binding("carol-edit", "edit", "carol"))
        self.assertEqual(code, 201, created)
        await self.eventually("POST", CM, {"metadata": {"name": "c"}}, carol, 201)
        code, _ = await self.server.call("GET", "/api/v1/namespaces/orch-system/configmaps",
                                         client=carol)
        self.assertEqual(code, 403)

    async def test_escalation_refused(self):
        """A namespace admin may bind view, but not cluster-admin."""
        dana = self.server.user_client("dana")
        code, created = await self.server.call("POST", BINDINGS,
                                               binding("dana-admin", "admin", "dana"))
        self.assertEqual(code, 201, created)
        await self.eventually("POST", BINDINGS, binding("erin-view", "view", "erin"), dana, 201)
        code, status = await self.server.call(
            "POST", BINDINGS, binding("erin-root", "cluster-admin", "erin"), client=dana)
        self.assertEqual(code, 403, status)
        self.assertIn('user "dana" (groups=["system:authenticated"]) is attempting to grant '
                      'RBAC permissions not currently held', status["message"])

    async def test_access_reviews(self):
        """A user asks what it may do; an administrator asks for it."""
        frank = self.server.user_client("frank")
        review = {"spec": {"resourceAttributes": {"namespace": "default", "verb": "list",
                                                  "resource": "secrets"}}}
        code, answer = await self.server.call(
            "POST", "/apis/authorization.orch.io/v1/selfsubjectaccessreviews", review,
            client=frank)
        self.assertEqual(code, 201, answer)
        self.assertFalse(answer["status"]["allowed"])
        code, answer = await self.server.call(
            "POST", "/apis/authorization.orch.io/v1/selfsubjectrulesreviews",
            {"spec": {"namespace": "default"}}, client=frank)
        self.assertEqual(code, 201, answer)
        granted = {r for rule in answer["status"]["resourceRules"] for r in rule["resources"]}
        self.assertIn("selfsubjectaccessreviews", granted)
        review["spec"]["user"] = "orch-admin"
        review["spec"]["groups"] = ["system:masters"]
        code, answer = await self.server.call(
            "POST", "/apis/authorization.orch.io/v1/subjectaccessreviews", review)
        self.assertTrue(answer["status"]["allowed"])

    async def test_impersonation(self):
        """The admin acts as gina and is refused as she is; gina cannot act as the admin."""
        gina = self.server.user_client("gina")
        code, status = await self.server.call("GET", CM, headers={b"Impersonate-User": [b"gina"]})
        self.assertEqual(code, 403, status)
        self.assertIn('User "gina" cannot list', status["message"])
        code, status = await self.server.call(
            "GET", CM, headers={b"Impersonate-User": [b"orch-admin"],
                                b"Impersonate-Group": [b"system:masters"]}, client=gina)
        self.assertEqual(code, 403, status)
        self.assertEqual(status["message"],
                         'users "orch-admin" is forbidden: User "gina" cannot impersonate '
                         'resource "users" in API group "" at the cluster scope')

    async def test_anonymous_cluster_info(self):
        """Anonymous users may read the cluster-info config map and nothing else there."""
        pool = HTTPConnectionPool(reactor, persistent=False)
        ca = load_orchconfig(self.server.plane.pki.admin_orchconfig_path).ca_pem
        anonymous = HTTPClient(Agent(reactor, contextFactory=ClientTLSPolicy(ca), pool=pool))
        await self.server.call("POST", "/api/v1/namespaces/orch-public/configmaps",
                               {"metadata": {"name": "cluster-info"}})
        code, _ = await self.server.call(
            "GET", "/api/v1/namespaces/orch-public/configmaps/cluster-info", client=anonymous)
        self.assertEqual(code, 200)
        code, _ = await self.server.call(
            "GET", "/api/v1/namespaces/orch-public/configmaps", client=anonymous)
        self.assertEqual(code, 403)
