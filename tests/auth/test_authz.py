"""Authorization: the union, the fixed first steps and the modes."""

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from orchd.auth.attributes import Attributes
from orchd.auth.authz.always import AlwaysAllow, AlwaysDeny, PrivilegedGroups
from orchd.auth.authz.factory import UnavailableModeError, build_authorizer
from orchd.auth.authz.public import AnonymousPublicInfo
from orchd.auth.authz.union import UnionAuthorizer
from orchd.auth.interfaces import Decision, IAuthorizer
from orchd.auth.user import ANONYMOUS_USER, MASTERS, UserInfo
from zope.interface.verify import verifyObject

ALICE = UserInfo("alice", ("devs",))


def decide(authorizer, attributes):
    return Deferred.fromCoroutine(authorizer.authorize(attributes))


class UnionTests(SynchronousTestCase):
    def test_interfaces(self):
        """Every authorizer provides IAuthorizer."""
        for authorizer in (AlwaysAllow(), AlwaysDeny(), PrivilegedGroups(),
                           AnonymousPublicInfo(), UnionAuthorizer([])):
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

    def test_masters_always_allowed(self):
        """system:masters passes even AlwaysDeny."""
        admin = UserInfo("root", (MASTERS,))
        union = build_authorizer(["AlwaysDeny"])
        attrs = Attributes(admin, "delete", resource="namespaces", name="x")
        self.assertEqual(self.successResultOf(decide(union, attrs))[0], Decision.ALLOW)

    def test_anonymous_public_paths(self):
        """Anonymous may get health and version paths, and the cluster-info config map."""
        union = build_authorizer(["AlwaysAllow"])
        allowed = [
            Attributes(ANONYMOUS_USER, "get", False, "/healthz"),
            Attributes(ANONYMOUS_USER, "get", False, "/readyz/etcd"),
            Attributes(ANONYMOUS_USER, "get", False, "/version"),
            Attributes(ANONYMOUS_USER, "get", resource="configmaps", namespace="orch-public",
                       name="cluster-info"),
        ]
        denied = [
            Attributes(ANONYMOUS_USER, "post", False, "/healthz"),
            Attributes(ANONYMOUS_USER, "get", False, "/apis"),
            Attributes(ANONYMOUS_USER, "get", False, "/healthzx"),
            Attributes(ANONYMOUS_USER, "list", resource="configmaps", namespace="orch-public"),
            Attributes(ANONYMOUS_USER, "get", resource="secrets", namespace="orch-public",
                       name="cluster-info"),
        ]
        for attrs in allowed:
            self.assertEqual(self.successResultOf(decide(union, attrs))[0], Decision.ALLOW, attrs)
        for attrs in denied:
            self.assertEqual(self.successResultOf(decide(union, attrs))[0], Decision.DENY, attrs)

    def test_unavailable_mode(self):
        """A mode not provided in this version is refused by name."""
        self.assertRaises(UnavailableModeError, build_authorizer, ["RBAC"])

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
