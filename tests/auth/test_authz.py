"""Authorization: the union, the fixed first steps and the modes."""

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.auth.attributes import Attributes
from orchd.auth.authz.always import AlwaysAllow, AlwaysDeny, PrivilegedGroups
from orchd.app.config import Config
from orchd.auth.authz.factory import Authorization, build_modes
from orchd.auth.authz.union import UnionAuthorizer
from orchd.auth.interfaces import AuthorizerError, Decision, IAuthorizer
from orchd.auth.user import MASTERS, UserInfo
from zope.interface.verify import verifyObject

from orchd.storage.memory import MemoryStore
from tests.support import ADMIN, APIHarness

ALICE = UserInfo("alice", ("devs",))


class Failing:
    """An authorizer whose remote service is down."""

    def authorize(self, attributes):
        raise AuthorizerError("remote down")


def chain(*modes):
    """The union for C{modes}, as the server builds it."""
    config = Config(authorization_mode=modes)
    return UnionAuthorizer([PrivilegedGroups()] + build_modes(config, None, Clock(), None))


def decide(authorizer, attributes):
    return Deferred.fromCoroutine(authorizer.authorize(attributes))


class UnionTests(SynchronousTestCase):
    def test_interfaces(self):
        """Every authorizer provides IAuthorizer."""
        for authorizer in (AlwaysAllow(), AlwaysDeny(), PrivilegedGroups(),
                           UnionAuthorizer([])):
            verifyObject(IAuthorizer, authorizer)

    def test_first_opinion_decides(self):
        """Deny before allow denies; no opinion passes on."""
        attrs = Attributes(ALICE, "get", resource="pods", namespace="a")
        union = UnionAuthorizer([PrivilegedGroups(), AlwaysDeny(), AlwaysAllow()])
        self.assertEqual(self.successResultOf(decide(union, attrs))[0], Decision.DENY)
        union = UnionAuthorizer([PrivilegedGroups(), AlwaysAllow(), AlwaysDeny()])
        self.assertEqual(self.successResultOf(decide(union, attrs))[0], Decision.ALLOW)

    def test_no_opinion(self):
        """When nobody decides, the union has no opinion (the server then says 403)."""
        attrs = Attributes(ALICE, "get", resource="pods")
        self.assertEqual(self.successResultOf(decide(UnionAuthorizer([PrivilegedGroups()]),
                                                     attrs))[0], Decision.NO_OPINION)

    def test_errors(self):
        """A module that cannot decide passes on; with no decision at all the union raises."""
        attrs = Attributes(ALICE, "get", resource="pods")
        union = UnionAuthorizer([Failing(), AlwaysDeny()])
        self.assertEqual(self.successResultOf(decide(union, attrs))[0], Decision.DENY)
        error = self.failureResultOf(decide(UnionAuthorizer([Failing()]), attrs),
                                     AuthorizerError).value
        self.assertEqual(str(error), "remote down")

    def test_error_is_500(self):
        """Through the server an undecided error is a 500, not a 403; reviews report it."""
        api = APIHarness(user=ALICE, authorizers=[PrivilegedGroups(), Failing()])
        code, status, _ = api.call("GET", "/api/v1/namespaces/default/configmaps")
        self.assertEqual((code, status["message"]), (500, "Internal error occurred: remote down"))
        api = APIHarness(user=ALICE, authorizers=[PrivilegedGroups(), Failing(), AlwaysAllow()])
        code, review, _ = api.call(
            "POST", "/apis/authorization.orch.io/v1/subjectaccessreviews",
            {"spec": {"user": "bob", "resourceAttributes": {"verb": "get"}}})
        self.assertEqual(review["status"], {"allowed": True})
        api = APIHarness(user=ADMIN, authorizers=[PrivilegedGroups(), Failing()])
        code, review, _ = api.call(
            "POST", "/apis/authorization.orch.io/v1/subjectaccessreviews",
            {"spec": {"user": "bob", "resourceAttributes": {"verb": "get"}}})
        self.assertEqual(review["status"], {"allowed": False, "evaluationError": "remote down"})

    def test_masters_always_allowed(self):
        """system:masters passes even AlwaysDeny."""
        admin = UserInfo("root", (MASTERS,))
        union = chain("AlwaysDeny")
        attrs = Attributes(admin, "delete", resource="namespaces", name="x")
        self.assertEqual(self.successResultOf(decide(union, attrs))[0], Decision.ALLOW)

    def test_modes_in_order(self):
        """Every mode is built, in the order given, behind system:masters."""
        policy = self.mktemp()
        with open(policy, "w") as f:
            f.write('{"user": "alice"}\n')
        config = Config(authorization_mode=("Node", "RBAC", "ABAC", "AlwaysAllow"),
                        authorization_policy_file=policy)
        store = MemoryStore()
        authorization = Authorization(config, store, Clock())
        names = [type(a).__name__ for a in authorization.modes]
        self.assertEqual(names, ["NodeAuthorizer", "RBACAuthorizer", "ABACAuthorizer",
                                 "AlwaysAllow"])
        authorization.startService()
        self.successResultOf(authorization.started)
        self.successResultOf(authorization.stopService())

    def test_bad_mode_file(self):
        """A policy file that cannot be used is a ValueError naming it."""
        policy = self.mktemp()
        with open(policy, "w") as f:
            f.write("not json\n")
        config = Config(authorization_mode=("ABAC",), authorization_policy_file=policy)
        error = self.assertRaises(ValueError, Authorization, config, MemoryStore(), Clock())
        self.assertIn(policy, str(error))

    def test_denial_wording(self):
        """Denials read as upstream's for namespaced, cluster and non-resource requests."""
        self.assertEqual(
            Attributes(ALICE, "list", resource="secrets", namespace="a").describe_denial(),
            'User "alice" cannot list resource "secrets" in API group "" in the namespace "a"')
        self.assertEqual(
            Attributes(ALICE, "get", resource="nodes", subresource="proxy",
                       name="n").describe_denial(),
            'User "alice" cannot get resource "nodes/proxy" in API group "" at the cluster scope')
        self.assertEqual(Attributes(ALICE, "get", False, "/x").describe_denial(),
                         'User "alice" cannot get path "/x"')
