"""The token controller: service-account token secrets are filled, or deleted."""

import base64

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from twisted.trial.unittest import SynchronousTestCase

from orchd.auth.serviceaccount.issuer import TokenIssuer
from orchd.controllers.tokens import GRACE, TokensController
from tests.support import APIHarness

CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
SAS = "/api/v1/namespaces/default/serviceaccounts"
SECRETS = "/api/v1/namespaces/default/secrets"
TOKEN_TYPE = "orch.io/service-account-token"
MERGE = b"application/merge-patch+json"


def token_secret(name, account, uid=None):
    annotations = {"orch.io/service-account.name": account}
    if uid:
        annotations["orch.io/service-account.uid"] = uid
    return {"metadata": {"name": name, "annotations": annotations}, "type": TOKEN_TYPE}


def decoded(data, key):
    return base64.b64decode(data[key]).decode()


class TokensControllerTests(SynchronousTestCase):
    def setUp(self):
        self.key = ec.generate_private_key(ec.SECP256R1())
        pem = self.key.private_bytes(serialization.Encoding.PEM,
                                     serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())
        self.api = APIHarness()
        issuer = TokenIssuer(pem, "ES256", "https://orch.example", self.api.clock)
        controller = TokensController(self.api.catalog, self.api.clock, issuer, CA)
        controller.startService()
        self.addCleanup(controller.stopService)
        self.successResultOf(controller.started)

    def call(self, method, path, body=None, **kwargs):
        code, obj, _ = self.api.call(method, path, body, **kwargs)
        self.api.clock.advance(0.1)
        return code, obj

    def account(self, name="robot", **fields):
        code, account = self.call("POST", SAS, dict({"metadata": {"name": name}}, **fields))
        self.assertEqual(code, 201)
        return account

    def secret(self, name="robot-token"):
        return self.call("GET", f"{SECRETS}/{name}")

    def test_token_filled(self):
        """token, ca.crt and namespace are filled in, and the uid recorded."""
        account = self.account()
        self.assertEqual(self.call("POST", SECRETS, token_secret("robot-token", "robot"))[0], 201)
        code, secret = self.secret()
        self.assertEqual(code, 200)
        uid = account["metadata"]["uid"]
        self.assertEqual(secret["metadata"]["annotations"]["orch.io/service-account.uid"], uid)
        self.assertEqual(decoded(secret["data"], "ca.crt"), CA.decode())
        self.assertEqual(decoded(secret["data"], "namespace"), "default")
        claims = jwt.decode(decoded(secret["data"], "token"), self.key.public_key(),
                            algorithms=["ES256"])
        self.assertEqual(claims["sub"], "system:serviceaccount:default:robot")
        self.assertEqual(claims["orch.io/serviceaccount/secret.name"], "robot-token")
        self.assertEqual(claims["orch.io/serviceaccount/service-account.uid"], uid)

    def test_token_regenerated(self):
        """A removed token is made again; a present one is left as it is."""
        self.account()
        self.call("POST", SECRETS, token_secret("robot-token", "robot"))
        first = self.secret()[1]["data"]["token"]
        self.call("PATCH", f"{SECRETS}/robot-token", {"metadata": {"labels": {"a": "b"}}},
                  content_type=MERGE)
        self.assertEqual(self.secret()[1]["data"]["token"], first)
        self.call("PATCH", f"{SECRETS}/robot-token", {"data": {"token": None}},
                  content_type=MERGE)
        self.assertTrue(self.secret()[1]["data"].get("token"))

    def test_missing_account(self):
        """A secret naming no existing account is deleted once the grace is over."""
        self.call("POST", SECRETS, token_secret("ghost-token", "ghost"))
        self.assertEqual(self.secret("ghost-token")[0], 200)
        self.api.clock.advance(GRACE + 1)
        self.assertEqual(self.secret("ghost-token")[0], 404)

    def test_account_created_just_after(self):
        """A secret seen before its account is filled when the account comes."""
        self.call("POST", SECRETS, token_secret("robot-token", "robot"))
        self.account()
        self.api.clock.advance(GRACE + 1)
        code, secret = self.secret()
        self.assertEqual(code, 200)
        self.assertIn("token", secret["data"])

    def test_uid_mismatch(self):
        """A secret made for an earlier account of the same name is deleted."""
        self.account()
        self.api.clock.advance(GRACE + 1)
        self.call("POST", SECRETS, token_secret("robot-token", "robot", uid="not-it"))
        self.assertEqual(self.secret()[0], 404)

    def test_account_deleted(self):
        """Deleting an account deletes its token secrets, not other secrets."""
        self.account()
        self.call("POST", SECRETS, token_secret("robot-token", "robot"))
        self.call("POST", SECRETS, {"metadata": {"name": "plain"}, "data": {"a": "Yg=="}})
        self.api.clock.advance(GRACE + 1)
        self.call("DELETE", f"{SAS}/robot")
        self.assertEqual(self.secret()[0], 404)
        self.assertEqual(self.secret("plain")[0], 200)

    def test_secret_reference_removed(self):
        """A deleted token secret leaves its account's secrets list."""
        self.account(secrets=[{"name": "robot-token"}, {"name": "other"}])
        self.call("POST", SECRETS, token_secret("robot-token", "robot"))
        self.call("DELETE", f"{SECRETS}/robot-token")
        self.assertEqual(self.call("GET", f"{SAS}/robot")[1]["secrets"], [{"name": "other"}])

    def test_other_secrets_untouched(self):
        self.call("POST", SECRETS, {"metadata": {"name": "plain"}, "data": {"a": "Yg=="}})
        self.api.clock.advance(GRACE + 1)
        self.assertEqual(self.secret("plain")[1]["data"], {"a": "Yg=="})
