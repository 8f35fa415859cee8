# -*- test-case-name: tests.auth.test_serviceaccount -*-
"""Service-account tokens: issuing, verifying bound and legacy tokens, tracking their use."""

import base64

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.api.errors import StatusError
from orchd.tls.certs import private_key_pem
from orchd.auth.authn.serviceaccount import ServiceAccountTokenAuthenticator
from orchd.auth.interfaces import InvalidToken, ITokenAuthenticator
from orchd.auth.serviceaccount.issuer import TokenIssuer
from orchd.auth.serviceaccount.tracking import LAST_USED
from orchd.auth.user import AUTHENTICATED
from tests.support import SA_ISSUER, APIHarness

EC_KEY = private_key_pem(ec.generate_private_key(ec.SECP256R1()))
EXTRA = "authentication.orch.io/"
DAY = 86400


def sa_objects(api, namespace="ns", account="build"):
    """A namespace, a service account and a pod running as it; returns (sa, pod)."""
    api.call("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    base = f"/api/v1/namespaces/{namespace}"
    _, sa, _ = api.call("POST", f"{base}/serviceaccounts", {"metadata": {"name": account}})
    _, pod, _ = api.call("POST", f"{base}/pods", {
        "metadata": {"name": "p"},
        "spec": {"serviceAccountName": account, "containers": [{"name": "c", "image": "i"}]}})
    return sa, pod


class _TokenCase(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness(service_account_key=(EC_KEY, "ES256"))
        self.sa, self.pod = sa_objects(self.api)
        self.authn = self.api.tokens.authenticators[-1]

    def authenticate(self, token, audiences=(SA_ISSUER,)):
        d = Deferred.fromCoroutine(self.authn.authenticate_token(token, audiences))
        results = []
        d.addBoth(results.append)
        if isinstance(results[0], Exception) or hasattr(results[0], "raiseException"):
            results[0].raiseException()
        return results[0]

    def refused(self, token, audiences=(SA_ISSUER,)):
        return str(self.assertRaises(InvalidToken, self.authenticate, token, audiences))


class ServiceAccountTokenTests(_TokenCase):

    def bound(self, audiences=(SA_ISSUER,), seconds=3600, **refs):
        token, _ = self.api.issuer.bound("ns", "build", self.sa["metadata"]["uid"], audiences,
                                         seconds, **refs)
        return token

    def pod_token(self):
        return self.bound(pod=("p", self.pod["metadata"]["uid"]))

    def test_interface(self):
        """The authenticator provides ITokenAuthenticator."""
        self.assertTrue(verifyObject(ITokenAuthenticator, self.authn))

    def test_bound_token_claims(self):
        """A bound token carries the REFERENCE claims, with a kid header."""
        token = self.pod_token()
        claims = jwt.decode(token, options={"verify_signature": False})
        self.assertEqual(claims["iss"], SA_ISSUER)
        self.assertEqual(claims["sub"], "system:serviceaccount:ns:build")
        self.assertEqual(claims["aud"], [SA_ISSUER])
        self.assertEqual(claims["exp"] - claims["iat"], 3600)
        self.assertEqual(claims["nbf"], claims["iat"])
        self.assertEqual(claims["orch.io"], {
            "namespace": "ns", "serviceaccount": {"name": "build", "uid": self.sa["metadata"]["uid"]},
            "pod": {"name": "p", "uid": self.pod["metadata"]["uid"]}})
        self.assertEqual(jwt.get_unverified_header(token)["kid"], self.api.issuer.key_id)

    def test_pod_bound_token_user(self):
        """A pod-bound token names the account, its groups and the pod extras."""
        token = self.pod_token()
        user = self.authenticate(token)
        jti = jwt.decode(token, options={"verify_signature": False})["jti"]
        self.assertEqual(user.name, "system:serviceaccount:ns:build")
        self.assertEqual(user.uid, self.sa["metadata"]["uid"])
        self.assertEqual(user.groups, ("system:serviceaccounts", "system:serviceaccounts:ns",
                                       AUTHENTICATED))
        self.assertEqual(user.extra, {EXTRA + "pod-name": ["p"],
                                      EXTRA + "pod-uid": [self.pod["metadata"]["uid"]],
                                      EXTRA + "credential-id": [f"JTI={jti}"]})

    def test_other_tokens_pass(self):
        """Tokens that are not JWTs, or not of our issuers, are left to others."""
        foreign = jwt.encode({"iss": "someone-else"}, "s" * 32, algorithm="HS256")
        self.assertIsNone(self.authenticate("abcdef.0123456789abcdef"))
        self.assertIsNone(self.authenticate("a.b.c"))
        self.assertIsNone(self.authenticate(foreign))

    def test_bad_signature(self):
        """A token of our issuer signed with another key is refused."""
        other = TokenIssuer(private_key_pem(ec.generate_private_key(ec.SECP256R1())), "ES256",
                            SA_ISSUER, self.api.clock)
        token, _ = other.bound("ns", "build", self.sa["metadata"]["uid"], [SA_ISSUER], 3600)
        self.assertIn("signature", self.refused(token))
        forged = jwt.encode(jwt.decode(token, options={"verify_signature": False}), "k" * 32,
                            algorithm="HS256")
        self.assertIn("signature", self.refused(forged))

    def test_expiry_with_leeway(self):
        """A token is accepted up to 60 s past its expiry, then refused."""
        token = self.bound(seconds=600)
        self.api.clock.advance(650)
        self.assertIsNotNone(self.authenticate(token))
        self.api.clock.advance(20)
        self.assertEqual(self.refused(token), "service account token has expired")

    def test_audience_must_match(self):
        """A token for other audiences is refused; a review naming its audience accepts it."""
        token = self.bound(audiences=["vault"])
        self.assertEqual(self.refused(token), 'token audiences ["vault"] is invalid for the '
                         f'target audiences ["{SA_ISSUER}"]')
        self.assertIsNotNone(self.authenticate(token, ("vault", "other")))

    def test_deleted_pod_ends_token(self):
        """Once its pod is deleted, a token is refused at once, even just after a success."""
        token = self.pod_token()
        self.assertIsNotNone(self.authenticate(token))
        self.api.call("DELETE", "/api/v1/namespaces/ns/pods/p")
        self.assertEqual(self.refused(token), "Token has been invalidated")

    def test_recreated_pod_ends_token(self):
        """A pod of the same name but another uid does not keep the token valid."""
        token = self.pod_token()
        self.api.call("DELETE", "/api/v1/namespaces/ns/pods/p")
        self.api.call("POST", "/api/v1/namespaces/ns/pods", {
            "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
        self.assertIn("does not match claim", self.refused(token))

    def test_terminating_pod_within_leeway(self):
        """A pod being deleted keeps its tokens for the leeway, not longer."""
        self.api.call("PATCH", "/api/v1/namespaces/ns/pods/p",
                      {"metadata": {"finalizers": ["example.com/hold"]}},
                      content_type=b"application/merge-patch+json")
        token = self.pod_token()
        self.api.call("DELETE", "/api/v1/namespaces/ns/pods/p")
        self.api.clock.advance(30)
        self.assertIsNotNone(self.authenticate(token))
        self.api.clock.advance(31)
        self.assertEqual(self.refused(token), "Token has been invalidated")

    def test_recreated_account_ends_token(self):
        """A token of a deleted, recreated account is refused; of a deleted one too."""
        token = self.bound()
        self.api.call("DELETE", "/api/v1/namespaces/ns/serviceaccounts/build")
        self.assertEqual(self.refused(token), "ServiceAccount ns/build has been deleted")
        self.api.call("POST", "/api/v1/namespaces/ns/serviceaccounts",
                      {"metadata": {"name": "build"}})
        self.assertIn("ServiceAccount UID", self.refused(token))

    def test_secret_and_node_bound(self):
        """Secret- and node-bound tokens live as long as their object."""
        _, secret, _ = self.api.call("POST", "/api/v1/namespaces/ns/secrets",
                                     {"metadata": {"name": "s"}})
        _, node, _ = self.api.call("POST", "/api/v1/nodes", {"metadata": {"name": "n1"}})
        by_secret = self.bound(secret=("s", secret["metadata"]["uid"]))
        by_node = self.bound(node=("n1", node["metadata"]["uid"]))
        self.assertEqual(self.authenticate(by_node).extra[EXTRA + "node-name"], ["n1"])
        self.assertNotIn(EXTRA + "pod-name", self.authenticate(by_secret).extra)
        self.api.call("DELETE", "/api/v1/namespaces/ns/secrets/s")
        self.api.call("DELETE", "/api/v1/nodes/n1")
        self.refused(by_secret)
        self.refused(by_node)

    def test_any_verifying_key(self):
        """Every configured public key verifies; an RSA key takes RS256 tokens."""
        rsa_pem = private_key_pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
        rsa_issuer = TokenIssuer(rsa_pem, "RS256", SA_ISSUER, self.api.clock)
        authn = ServiceAccountTokenAuthenticator(
            self.api.catalog, [self.api.issuer.public_key_pem, rsa_issuer.public_key_pem],
            SA_ISSUER, (SA_ISSUER,), self.api.clock)
        self.authn = authn
        token, _ = rsa_issuer.bound("ns", "build", self.sa["metadata"]["uid"], [SA_ISSUER], 3600)
        self.assertEqual(self.authenticate(token).name, "system:serviceaccount:ns:build")
        self.assertIsNotNone(self.authenticate(self.bound()))


class LegacyTokenTests(_TokenCase):
    def setUp(self):
        super().setUp()
        self.token = self.api.issuer.legacy("ns", "build", self.sa["metadata"]["uid"], "build-tok")
        code, self.secret, _ = self.api.call("POST", "/api/v1/namespaces/ns/secrets", {
            "metadata": {"name": "build-tok",
                         "annotations": {"orch.io/service-account.name": "build"}},
            "type": "orch.io/service-account-token",
            "data": {"token": base64.b64encode(self.token.encode()).decode()}})
        self.assertEqual(code, 201, self.secret)

    def secret_now(self):
        return self.api.call("GET", "/api/v1/namespaces/ns/secrets/build-tok")[1]

    def test_legacy_token_user(self):
        """A legacy token names its account, with no extras."""
        user = self.authenticate(self.token)
        self.assertEqual((user.name, user.uid, user.extra),
                         ("system:serviceaccount:ns:build", self.sa["metadata"]["uid"], {}))

    def test_last_used_recorded_once_a_day(self):
        """The first use of the day is recorded on the Secret; later ones that day are not."""
        self.authenticate(self.token)
        secret = self.secret_now()
        self.assertEqual(secret["metadata"]["annotations"][LAST_USED], "2023-11-14")
        self.authenticate(self.token)
        self.assertEqual(self.secret_now()["metadata"]["resourceVersion"],
                         secret["metadata"]["resourceVersion"])
        self.api.clock.advance(DAY)
        self.authenticate(self.token)
        self.assertEqual(self.secret_now()["metadata"]["annotations"][LAST_USED], "2023-11-15")

    def test_tracking_write_is_not_awaited_nor_doubled(self):
        """Authentication does not wait for the write, and concurrent uses write once."""
        calls = []

        class Slow:
            def patch(self, ctx, name, apply):
                calls.append(name)
                return Deferred()

        self.authn.tracker._secrets = Slow
        self.authenticate(self.token)
        self.authenticate(self.token)
        self.assertEqual(calls, ["build-tok"])

    def test_tracking_failure_does_not_fail_authentication(self):
        """A failed write leaves the token valid and is tried again on a later use."""
        calls = []

        class Broken:
            def patch(self, ctx, name, apply):
                calls.append(name)
                raise StatusError.internal("store down")

        self.authn.tracker._secrets = Broken
        self.assertIsNotNone(self.authenticate(self.token))
        self.assertIsNotNone(self.authenticate(self.token))
        self.assertEqual(len(calls), 2)

    def test_secret_must_hold_the_token(self):
        """A token that differs from the Secret's copy, or of a deleted Secret, is refused."""
        self.api.call("PATCH", "/api/v1/namespaces/ns/secrets/build-tok",
                      {"data": {"token": base64.b64encode(b"other").decode()}},
                      content_type=b"application/merge-patch+json")
        self.assertEqual(self.refused(self.token), "Token does not match server's copy")
        self.api.call("DELETE", "/api/v1/namespaces/ns/secrets/build-tok")
        self.assertEqual(self.refused(self.token), "Token has been invalidated")

    def test_invalidated_label_refuses(self):
        """The cleaner's invalid-since label refuses the token until it is removed."""
        path = "/api/v1/namespaces/ns/secrets/build-tok"
        merge = b"application/merge-patch+json"
        self.api.call("PATCH", path, {"metadata": {"labels": {
            "orch.io/legacy-token-invalid-since": "2023-11-01"}}}, content_type=merge)
        self.assertEqual(self.refused(self.token), "Token has been invalidated")
        self.api.call("PATCH", path, {"metadata": {"labels": {
            "orch.io/legacy-token-invalid-since": None}}}, content_type=merge)
        self.assertIsNotNone(self.authenticate(self.token))

    def test_account_uid_must_match(self):
        """A legacy token of a deleted account is refused."""
        self.api.call("DELETE", "/api/v1/namespaces/ns/serviceaccounts/build")
        self.assertEqual(self.refused(self.token), "ServiceAccount ns/build has been deleted")

    def test_legacy_audiences_are_the_api_audiences(self):
        """A review for audiences other than the API's refuses a legacy token."""
        self.assertIn("is invalid for the target audiences", self.refused(self.token, ("x",)))
