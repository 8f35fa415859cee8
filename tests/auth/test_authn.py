"""Authentication: the union's rules and identities read from certificates."""

from cryptography import x509
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.tls.certs import create_ca, issue_certificate
from orchd.auth.authn.bearer import BearerAuthenticator, TokenAuthenticators
from orchd.auth.authn.union import UnionAuthenticator
from orchd.auth.interfaces import InvalidToken
from orchd.auth.authn.x509 import X509Authenticator, certificate_identity
from orchd.auth.user import ANONYMOUS_USER, AUTHENTICATED, UserInfo


class Fixed:
    def __init__(self, result):
        self.result = result

    def authenticate(self, request):
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


class UnionTests(SynchronousTestCase):
    def run_union(self, *authenticators, anonymous=True):
        union = UnionAuthenticator(authenticators, anonymous=anonymous)
        from twisted.internet.defer import Deferred

        return Deferred.fromCoroutine(union.authenticate(object()))

    def test_first_recognising_wins(self):
        """The first authenticator that returns a user decides."""
        bob = UserInfo("bob")
        self.assertEqual(self.successResultOf(self.run_union(Fixed(None), Fixed(bob))), bob)

    def test_no_credentials_is_anonymous(self):
        """With nothing recognised, the request is anonymous when that is on."""
        self.assertEqual(self.successResultOf(self.run_union(Fixed(None))), ANONYMOUS_USER)

    def test_anonymous_off_is_401(self):
        """With anonymous off, no credentials is 401."""
        failure = self.failureResultOf(self.run_union(Fixed(None), anonymous=False), StatusError)
        self.assertEqual(failure.value.code, 401)

    def test_rejected_credentials_are_401_not_anonymous(self):
        """Credentials rejected by one and accepted by none fail with 401."""
        failure = self.failureResultOf(
            self.run_union(Fixed(StatusError.unauthorized()), Fixed(None)), StatusError)
        self.assertEqual(failure.value.code, 401)

    def test_later_acceptance_beats_rejection(self):
        """A rejection is forgotten when a later authenticator accepts."""
        bob = UserInfo("bob")
        result = self.run_union(Fixed(StatusError.unauthorized()), Fixed(bob))
        self.assertEqual(self.successResultOf(result), bob)


class FakeTransport:
    def __init__(self, certificate_pem):
        from OpenSSL import crypto

        self.peer = crypto.X509.from_cryptography(
            x509.load_pem_x509_certificate(certificate_pem)) if certificate_pem else None

    def getPeerCertificate(self):
        return self.peer


class FakeRequest:
    def __init__(self, certificate_pem):
        self.transport = FakeTransport(certificate_pem)
        self.channel = type("Channel", (), {})()


class X509Tests(SynchronousTestCase):
    def setUp(self):
        self.ca_cert, self.ca_key = create_ca()

    def issue(self, cn, orgs, days=30):
        from orchd.tls.certs import certificate_pem

        cert, _ = issue_certificate(self.ca_cert, self.ca_key, cn, orgs, client=True, days=days)
        return certificate_pem(cert)

    def test_identity_from_subject(self):
        """User is the CN, groups the O values in order, plus system:authenticated."""
        cert = x509.load_pem_x509_certificate(self.issue("alice", ["devs", "ops"]))
        user, _ = certificate_identity(cert)
        self.assertEqual(user.name, "alice")
        self.assertEqual(user.groups, ("devs", "ops", AUTHENTICATED))

    def test_authenticator_reads_connection_certificate(self):
        """The authenticator reads the TLS peer certificate and caches it per connection."""
        clock = Clock()
        clock.advance(x509.load_pem_x509_certificate(
            self.issue("x", [])).not_valid_before_utc.timestamp() + 10)
        request = FakeRequest(self.issue("bob", ["system:masters"]))
        user = X509Authenticator(clock).authenticate(request)
        self.assertEqual((user.name, user.groups[0]), ("bob", "system:masters"))
        request.transport.peer = None
        self.assertEqual(X509Authenticator(clock).authenticate(request).name, "bob")

    def test_certificate_lifetime_observed_per_request(self):
        """Each authenticated request reports the certificate's remaining lifetime."""
        clock = Clock()
        clock.advance(x509.load_pem_x509_certificate(
            self.issue("x", [])).not_valid_before_utc.timestamp() + 10)
        pem = self.issue("bob", [])
        request = FakeRequest(pem)
        seen = []
        authenticator = X509Authenticator(clock, observe_lifetime=seen.append)
        authenticator.authenticate(request)
        request.transport.peer = None            # a second request reads the channel's cache
        clock.advance(5)
        authenticator.authenticate(request)
        left = x509.load_pem_x509_certificate(pem).not_valid_after_utc.timestamp() - clock.seconds()
        self.assertEqual(seen, [left + 5, left])
        self.assertIsNone(X509Authenticator(clock, seen.append).authenticate(FakeRequest(None)))
        self.assertEqual(len(seen), 2)

    def test_no_certificate(self):
        """Without a certificate the authenticator has no opinion."""
        self.assertIsNone(X509Authenticator(Clock()).authenticate(FakeRequest(None)))

    def test_expired_certificate_is_401(self):
        """A certificate past its validity on a long-lived connection is refused."""
        clock = Clock()
        clock.advance(4_000_000_000)
        request = FakeRequest(self.issue("bob", [], days=1))
        self.assertRaises(StatusError, X509Authenticator(clock).authenticate, request)


class Tokens:
    """A token authenticator that knows one token, and refuses C{bad}."""

    def __init__(self, token, user):
        self.token, self.user = token, user

    def authenticate_token(self, token, audiences):
        if token == "bad":
            raise InvalidToken("token has expired")
        return self.user if token == self.token else None


class BearerTests(SynchronousTestCase):
    def setUp(self):
        self.bob = UserInfo("bob")
        self.tokens = TokenAuthenticators([Tokens("t1", None), Tokens("t2", self.bob)],
                                          ("https://issuer",))
        self.bearer = BearerAuthenticator(self.tokens)

    def authenticate(self, header):
        from twisted.internet.defer import Deferred
        from twisted.web.test.requesthelper import DummyRequest

        request = DummyRequest([b""])
        if header is not None:
            request.requestHeaders.addRawHeader(b"authorization", header)
        return Deferred.fromCoroutine(self.bearer.authenticate(request))

    def test_no_header_is_not_mine(self):
        """Without a bearer header the request is left to other authenticators."""
        self.assertIsNone(self.successResultOf(self.authenticate(None)))
        self.assertIsNone(self.successResultOf(self.authenticate(b"Basic Ym9iOng=")))

    def test_scheme_any_case(self):
        """The scheme is matched whatever its case; the first authenticator knowing the token wins."""
        self.assertEqual(self.successResultOf(self.authenticate(b"bearer t2")), self.bob)
        self.assertEqual(self.successResultOf(self.authenticate(b"BEARER  t2 ")), self.bob)

    def test_empty_unknown_refused_tokens_are_401(self):
        """An empty token, one nobody knows and one refused are all 401."""
        for header in (b"Bearer", b"Bearer ", b"Bearer nobody", b"Bearer bad"):
            failure = self.failureResultOf(self.authenticate(header), StatusError)
            self.assertEqual(failure.value.code, 401, header)

    def test_review(self):
        """A review says who, for which audiences, or why not."""
        from twisted.internet.defer import Deferred

        review = lambda *a: self.successResultOf(Deferred.fromCoroutine(self.tokens.review(*a)))
        self.assertEqual(review("t2"), (self.bob, ("https://issuer",), ""))
        self.assertEqual(review("t2", ["api"]), (self.bob, ("api",), ""))
        self.assertEqual(review("bad"), (None, (), "token has expired"))
        self.assertEqual(review("x"), (None, (), "invalid bearer token"))
