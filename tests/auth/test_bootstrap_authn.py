"""Bootstrap tokens as bearer tokens, read from an informer over orch-system's secrets."""

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.auth.authn.bearer import TokenAuthenticators
from orchd.auth.authn.bootstrap import BootstrapTokenAuthenticator
from orchd.auth.interfaces import InvalidToken, ITokenAuthenticator
from orchd.auth.user import UserInfo
from tests.auth.bootstraptokens import SECRETS, TOKEN, TOKEN_ID, token_secret
from tests.support import APIHarness


class BootstrapAuthenticatorTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.now = self.api.clock.seconds()
        self.authenticator = BootstrapTokenAuthenticator(self.api.store, self.api.clock)
        self.authenticator.startService()
        self.addCleanup(self.authenticator.stopService)
        self.successResultOf(self.authenticator.started)

    def create(self, **kwargs):
        code, body, _ = self.api.call("POST", SECRETS, token_secret(**kwargs))
        self.assertEqual(code, 201, body)

    def authenticate(self, token=TOKEN):
        return self.authenticator.authenticate_token(token, ())

    def test_interface(self):
        """It is a token authenticator."""
        self.assertTrue(verifyObject(ITokenAuthenticator, self.authenticator))

    def test_user(self):
        """A valid token is system:bootstrap:<id> in the bootstrappers and extra groups."""
        self.create(extra_groups="system:bootstrappers:workers, system:bootstrappers:x")
        self.assertEqual(self.authenticate(), UserInfo(
            f"system:bootstrap:{TOKEN_ID}",
            ["system:bootstrappers", "system:bootstrappers:workers", "system:bootstrappers:x",
             "system:authenticated"]))

    def test_not_mine(self):
        """Other token shapes, and tokens without a Secret, are left to other authenticators."""
        self.create()
        self.assertIsNone(self.authenticate("eyJhbGciOiJSUzI1NiJ9.e30.sig"))
        self.assertIsNone(self.authenticate("zzzzzz.0123456789abcdef"))

    def test_wrong_secret(self):
        """A known id with the wrong secret is refused."""
        self.create()
        self.assertRaises(InvalidToken, self.authenticate, f"{TOKEN_ID}.ffffffffffffffff")

    def test_expired(self):
        """A token is refused from its expiration on, by the clock."""
        self.create(expires=self.now + 60)
        self.assertEqual(self.authenticate().name, "system:bootstrap:abcdef")
        self.api.clock.advance(60)
        with self.assertRaises(InvalidToken) as caught:
            self.authenticate()
        self.assertIn("expired", str(caught.exception))

    def test_needs_authentication_usage(self):
        """Without usage-bootstrap-authentication=true the token does not authenticate."""
        self.create(usages=("signing",))
        self.assertRaises(InvalidToken, self.authenticate)

    def test_being_deleted(self):
        """A Secret held by a finalizer while being deleted no longer authenticates."""
        body = token_secret()
        body["metadata"]["finalizers"] = ["example.com/hold"]
        self.assertEqual(self.api.call("POST", SECRETS, body)[0], 201)
        self.assertIsNotNone(self.authenticate())
        self.api.call("DELETE", f"{SECRETS}/bootstrap-token-{TOKEN_ID}")
        self.assertRaises(InvalidToken, self.authenticate)

    def test_follows_changes(self):
        """Tokens created after start, changed or deleted are seen at once."""
        self.assertIsNone(self.authenticate())
        self.create()
        self.assertIsNotNone(self.authenticate())
        self.api.call("PATCH", f"{SECRETS}/bootstrap-token-{TOKEN_ID}",
                      {"stringData": {"usage-bootstrap-authentication": "false"}},
                      content_type=b"application/merge-patch+json")
        self.assertRaises(InvalidToken, self.authenticate)
        self.api.call("DELETE", f"{SECRETS}/bootstrap-token-{TOKEN_ID}")
        self.assertIsNone(self.authenticate())

    def test_review(self):
        """Through the token authenticators a refusal says why."""
        self.create(expires=self.now + 1)
        self.api.clock.advance(5)
        tokens = TokenAuthenticators([], ("api",))
        tokens.add(self.authenticator)
        user, _, error = self.successResultOf(Deferred.fromCoroutine(tokens.review(TOKEN)))
        self.assertIsNone(user)
        self.assertEqual(error, "bootstrap token has expired")
