"""Impersonation: the checks made, the user acted as, the errors, through the filter and the server."""

from twisted.internet.defer import Deferred, succeed
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.http_headers import Headers
from zope.interface import implementer

from orchd.api.errors import StatusError
from orchd.auth.authz.always import AlwaysAllow, AlwaysDeny, PrivilegedGroups
from orchd.auth.interfaces import Decision, IAuthorizer
from orchd.auth.user import ANONYMOUS, AUTHENTICATED, UNAUTHENTICATED, UserInfo
from orchd.server.filters.impersonation import ImpersonationFilter
from tests.support import ADMIN, ALICE, APIHarness

BOB = UserInfo("bob", ("devs", AUTHENTICATED))


@implementer(IAuthorizer)
class Recorder:
    """Records what it is asked; allows what C{allow} accepts, else gives no opinion."""

    def __init__(self, allow=lambda attributes: True):
        self.seen = []
        self._allow = allow

    async def authorize(self, attributes):
        self.seen.append(attributes)
        if self._allow(attributes):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""

    def rules_for(self, user, namespace):
        return [], [], False


class _Request:
    """Just the part of a request the filter reads."""

    def __init__(self, headers):
        self.requestHeaders = Headers(headers)


def _checks(recorder):
    return [(a.user.name, a.verb, a.api_group, a.api_version, a.resource, a.subresource,
             a.namespace, a.name) for a in recorder.seen]


class ImpersonationFilterTests(SynchronousTestCase):
    def setUp(self):
        self.authorizer = Recorder()
        self.filter = ImpersonationFilter(self.authorizer)

    def apply(self, headers, user=BOB):
        self.request = _Request(headers)
        acting = self.filter.apply(self.request, user)
        return succeed(acting) if acting is user else Deferred.fromCoroutine(acting)

    def acting(self, headers, user=BOB):
        return self.successResultOf(self.apply(headers, user))

    def error(self, headers, user=BOB):
        return self.failureResultOf(self.apply(headers, user), StatusError).value

    def test_no_headers_keeps_user(self):
        """Without Impersonate-* headers the user is returned as is, at once, and nothing is
        checked."""
        self.assertIs(self.filter.apply(_Request({b"Accept": [b"application/json"]}), BOB), BOB)
        self.assertEqual(self.authorizer.seen, [])

    def test_empty_user_alone_is_ignored(self):
        """An empty Impersonate-User with nothing else asks for nothing."""
        self.assertIs(self.acting({b"Impersonate-User": [b""]}), BOB)
        self.assertEqual(self.authorizer.seen, [])

    def test_user(self):
        """A plain user is checked as users in the core group and gains system:authenticated."""
        acting = self.acting({b"impersonate-user": [b"alice"]})
        self.assertEqual(acting, UserInfo("alice", (AUTHENTICATED,)))
        self.assertEqual(_checks(self.authorizer),
                         [("bob", "impersonate", "", "", "users", "", "", "alice")])
        self.assertTrue(self.authorizer.seen[0].is_resource_request)

    def test_everything(self):
        """User, groups, extras and uid are each checked, in that order, and all applied."""
        acting = self.acting({
            b"Impersonate-User": [b"alice"],
            b"Impersonate-Group": [b"g1", b"g2"],
            b"Impersonate-Extra-Scopes": [b"read", b"write"],
            b"Impersonate-Extra-Acme.com%2FProject": [b"p1"],
            b"Impersonate-Uid": [b"u-1"],
        })
        self.assertEqual(acting, UserInfo(
            "alice", ("g1", "g2", AUTHENTICATED), "u-1",
            {"scopes": ["read", "write"], "acme.com/project": ["p1"]}))
        auth = "authentication.orch.io"
        self.assertEqual(_checks(self.authorizer), [
            ("bob", "impersonate", "", "", "users", "", "", "alice"),
            ("bob", "impersonate", "", "", "groups", "", "", "g1"),
            ("bob", "impersonate", "", "", "groups", "", "", "g2"),
            ("bob", "impersonate", auth, "v1", "userextras", "scopes", "", "read"),
            ("bob", "impersonate", auth, "v1", "userextras", "scopes", "", "write"),
            ("bob", "impersonate", auth, "v1", "userextras", "acme.com/project", "", "p1"),
            ("bob", "impersonate", auth, "v1", "uids", "", "", "u-1"),
        ])

    def test_malformed_extra_key_kept(self):
        """An extra key with a malformed percent escape is kept as sent (lower-cased)."""
        acting = self.acting({b"Impersonate-User": [b"alice"],
                              b"Impersonate-Extra-A%zz%2f": [b"v"]})
        self.assertEqual(acting.extra, {"a%zz%2f": ["v"]})

    def test_service_account(self):
        """A service-account name is checked as serviceaccounts in its namespace, fixed groups."""
        acting = self.acting({b"Impersonate-User": [b"system:serviceaccount:default:builder"]})
        self.assertEqual(acting, UserInfo(
            "system:serviceaccount:default:builder",
            ("system:serviceaccounts", "system:serviceaccounts:default", AUTHENTICATED)))
        self.assertEqual(_checks(self.authorizer), [
            ("bob", "impersonate", "", "", "serviceaccounts", "", "default", "builder")])

    def test_service_account_with_groups(self):
        """Given groups replace a service account's fixed groups."""
        acting = self.acting({b"Impersonate-User": [b"system:serviceaccount:default:builder"],
                              b"Impersonate-Group": [b"g"]})
        self.assertEqual(acting.groups, ("g", AUTHENTICATED))

    def test_not_a_service_account_name(self):
        """A malformed service-account name is impersonated as a plain user."""
        for name in (b"system:serviceaccount:Default:x", b"system:serviceaccount:a:b:c",
                     b"system:serviceaccount:ns:"):
            self.authorizer.seen = []
            acting = self.acting({b"Impersonate-User": [name]})
            self.assertEqual(acting.groups, (AUTHENTICATED,))
            self.assertEqual(self.authorizer.seen[0].resource, "users")

    def test_authenticated_not_doubled(self):
        """system:authenticated or system:unauthenticated listed explicitly is not added to."""
        acting = self.acting({b"Impersonate-User": [b"alice"],
                              b"Impersonate-Group": [AUTHENTICATED.encode(), b"g"]})
        self.assertEqual(acting.groups, (AUTHENTICATED, "g"))
        acting = self.acting({b"Impersonate-User": [b"alice"],
                              b"Impersonate-Group": [UNAUTHENTICATED.encode()]})
        self.assertEqual(acting.groups, (UNAUTHENTICATED,))

    def test_anonymous(self):
        """Impersonating the anonymous user adds system:unauthenticated, once."""
        acting = self.acting({b"Impersonate-User": [ANONYMOUS.encode()]})
        self.assertEqual(acting, UserInfo(ANONYMOUS, (UNAUTHENTICATED,)))
        acting = self.acting({b"Impersonate-User": [ANONYMOUS.encode()],
                              b"Impersonate-Group": [b"g", UNAUTHENTICATED.encode()]})
        self.assertEqual(acting.groups, ("g", UNAUTHENTICATED))

    def test_headers_removed(self):
        """The impersonation headers are gone afterwards; others stay."""
        self.acting({b"Impersonate-User": [b"alice"], b"Impersonate-Group": [b"g"],
                     b"Impersonate-Uid": [b"u"], b"Impersonate-Extra-Scopes": [b"s"],
                     b"Accept": [b"application/json"]})
        names = [name for name, _ in self.request.requestHeaders.getAllRawHeaders()]
        self.assertEqual(names, [b"Accept"])

    def test_groups_without_user(self):
        """Groups, extras or uid without a user is a 400 listing what was asked."""
        error = self.error({b"Impersonate-Group": [b"devs"]})
        self.assertEqual(error.code, 400)
        self.assertEqual(error.reason, "BadRequest")
        self.assertEqual(error.message,
                         "requested [{Group  devs    }] without impersonating a user")
        error = self.error({b"Impersonate-User": [b""], b"Impersonate-Extra-Scopes": [b"s"],
                            b"Impersonate-Uid": [b"u"]})
        self.assertEqual(
            error.message,
            "requested [{UserExtra  s  authentication.orch.io/v1  "
            "scopes} {UID  u  authentication.orch.io/v1  }] without impersonating a user")
        self.assertEqual(self.authorizer.seen, [])

    def test_uid_or_extra_alone(self):
        """Impersonate-Uid or Impersonate-Extra-* alone is the 400 upstream gives."""
        error = self.error({b"Impersonate-Uid": [b"u"]})
        self.assertEqual((error.code, error.message), (400, "requested [{UID  u  authentication"
                                                            ".orch.io/v1  }] without impersonating"
                                                            " a user"))
        error = self.error({b"Impersonate-Extra-Foo": [b"bar"]})
        self.assertEqual((error.code, error.message), (400, "requested [{UserExtra  bar  "
                                                            "authentication.orch.io/v1  foo}] "
                                                            "without impersonating a user"))
        error = self.error({b"Impersonate-Group": [b""]})
        self.assertEqual((error.code, error.message),
                         (400, "requested [{Group      }] without impersonating a user"))

    def test_invalid_values_are_400(self):
        """Values that are not UTF-8 or hold control characters are refused, not replaced."""
        cases = [
            ({b"Impersonate-User": [b"\xff\xfe"]}, "Impersonate-User", "not valid UTF-8"),
            ({b"Impersonate-User": [b"alice"], b"Impersonate-Group": [b"g", b"\xc0\x80"]},
             "Impersonate-Group", "not valid UTF-8"),
            ({b"Impersonate-User": [b"alice"], b"Impersonate-Uid": [b"u\x00"]},
             "Impersonate-Uid", "must not contain control characters"),
            ({b"Impersonate-User": [b"alice"], b"Impersonate-Extra-Scopes": [b"a\x1bb"]},
             "Impersonate-Extra-Scopes", "must not contain control characters"),
            ({b"Impersonate-Group": [b"\xff"]}, "Impersonate-Group", "not valid UTF-8"),
        ]
        for headers, header, reason in cases:
            error = self.error(headers)
            self.assertEqual((error.code, error.message),
                             (400, f'invalid impersonation header "{header}": {reason}'))
        self.assertEqual(self.authorizer.seen, [])

    def test_extra_key_escaping_no_utf8_kept(self):
        """An extra key whose escapes are not UTF-8 is kept as sent; a tab in a value is fine."""
        acting = self.acting({b"Impersonate-User": [b"alice"],
                              b"Impersonate-Extra-A%ff": [b"v\tw"]})
        self.assertEqual(acting.extra, {"a%ff": ["v\tw"]})

    def test_denied_user(self):
        """A denied check is a 403 worded with the impersonation attributes."""
        self.filter = ImpersonationFilter(PrivilegedGroups())
        error = self.error({b"Impersonate-User": [b"alice"]})
        self.assertEqual(error.code, 403)
        self.assertEqual(error.message, 'users "alice" is forbidden: User "bob" cannot impersonate '
                                        'resource "users" in API group "" at the cluster scope')
        self.assertEqual(error.details, {"name": "alice", "kind": "users"})

    def test_denied_later_check(self):
        """Each value is checked: a denied extra is a 403 naming its key, with the reason."""
        self.authorizer = Recorder(lambda a: a.resource != "userextras")
        self.filter = ImpersonationFilter(self.authorizer)
        error = self.error({b"Impersonate-User": [b"system:serviceaccount:ns:sa"],
                            b"Impersonate-Extra-Scopes": [b"s"]})
        self.assertEqual(
            error.message,
            'userextras.authentication.orch.io "s" is forbidden: User "bob" cannot impersonate '
            'resource "userextras/scopes" in API group "authentication.orch.io" at the cluster '
            "scope")
        self.assertEqual(error.details,
                         {"name": "s", "group": "authentication.orch.io", "kind": "userextras"})
        self.filter = ImpersonationFilter(AlwaysDeny())
        error = self.error({b"Impersonate-User": [b"system:serviceaccount:ns:sa"]})
        self.assertEqual(
            error.message,
            'serviceaccounts "sa" is forbidden: User "bob" cannot impersonate resource '
            '"serviceaccounts" in API group "" in the namespace "ns": Everything is forbidden.')


class ImpersonationServerTests(SynchronousTestCase):
    """Through the whole server: what authorization and handlers see."""

    def setUp(self):
        self.recorder = Recorder(lambda a: False)

    def test_admin_acts_as_alice(self):
        """An administrator impersonating alice is authorized, and then treated, as alice."""
        api = APIHarness(user=ADMIN, authorizers=[self.recorder, PrivilegedGroups()])
        self.recorder.seen = []
        code, body, _ = api.call("GET", "/api/v1/namespaces/default/configmaps",
                                 headers={b"Impersonate-User": b"alice"})
        self.assertEqual(code, 403)
        self.assertEqual(body["message"],
                         'configmaps is forbidden: User "alice" cannot list resource "configmaps" '
                         'in API group "" in the namespace "default"')
        self.assertEqual(
            [(a.user.name, a.verb, a.resource, a.name) for a in self.recorder.seen],
            [("orch-admin", "impersonate", "users", "alice"), ("alice", "list", "configmaps", "")])
        self.assertEqual(self.recorder.seen[1].user, UserInfo("alice", (AUTHENTICATED,)))

    def test_allowed_request_as_impersonated_user(self):
        """A request allowed for the impersonated user succeeds."""
        api = APIHarness(user=ADMIN, authorizers=[
            self.recorder, PrivilegedGroups(),
            Recorder(lambda a: a.user.name == "alice" and a.verb == "create")])
        code, body, _ = api.call("POST", "/api/v1/namespaces/default/configmaps",
                                 {"metadata": {"name": "c"}},
                                 headers={b"Impersonate-User": b"alice",
                                          b"Impersonate-Group": [b"devs", b"ops"],
                                          b"Impersonate-Extra-Scopes": [b"a", b"b"]})
        self.assertEqual(code, 201, body)
        seen = self.recorder.seen[-1]
        self.assertEqual(seen.user, UserInfo("alice", ("devs", "ops", AUTHENTICATED),
                                             extra={"scopes": ["a", "b"]}))
        self.assertEqual(seen.verb, "create")

    def test_forbidden_impersonation(self):
        """A user without the impersonate permission gets the upstream 403 Status."""
        api = APIHarness(user=ALICE, authorizers=[PrivilegedGroups()])
        code, body, _ = api.call("GET", "/api/v1/namespaces",
                                 headers={b"Impersonate-User": b"orch-admin"})
        self.assertEqual(code, 403)
        self.assertEqual(body["reason"], "Forbidden")
        self.assertEqual(body["message"],
                         'users "orch-admin" is forbidden: User "alice" cannot impersonate '
                         'resource "users" in API group "" at the cluster scope')
        self.assertEqual(body["details"], {"name": "orch-admin", "kind": "users"})

    def test_groups_without_user(self):
        """Groups without a user answer a 400 BadRequest Status, as upstream."""
        api = APIHarness(user=ADMIN)
        code, body, _ = api.call("GET", "/api/v1/namespaces",
                                 headers={b"Impersonate-Group": [b"a", b"b"]})
        self.assertEqual(code, 400)
        self.assertEqual(body["reason"], "BadRequest")
        self.assertEqual(body["message"], "requested [{Group  a    } "
                                          "{Group  b    }] without impersonating a user")

    def test_no_headers(self):
        """Without impersonation headers the authenticated user is the one authorized."""
        api = APIHarness(user=ALICE, authorizers=[self.recorder, AlwaysAllow()])
        self.recorder.seen = []
        self.assertEqual(api.call("GET", "/api/v1/namespaces")[0], 200)
        self.assertEqual([a.user for a in self.recorder.seen], [ALICE])
