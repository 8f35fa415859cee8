"""Authentication: the union's rules and identities read from certificates."""

from cryptography import x509
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.app.certs import create_ca, issue_certificate
from orchd.auth.authn.union import UnionAuthenticator
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
        from orchd.app.certs import certificate_pem

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

    def test_no_certificate(self):
        """Without a certificate the authenticator has no opinion."""
        self.assertIsNone(X509Authenticator(Clock()).authenticate(FakeRequest(None)))

    def test_expired_certificate_is_401(self):
        """A certificate past its validity on a long-lived connection is refused."""
        clock = Clock()
        clock.advance(4_000_000_000)
        request = FakeRequest(self.issue("bob", [], days=1))
        self.assertRaises(StatusError, X509Authenticator(clock).authenticate, request)
