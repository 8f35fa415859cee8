"""Validation of bootstrap-token Secrets through the API."""

from twisted.trial.unittest import SynchronousTestCase

from tests.auth.bootstraptokens import SECRETS, token_secret
from tests.support import APIHarness


class ValidationTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def create(self, body, namespace="orch-system"):
        return self.api.call("POST", f"/api/v1/namespaces/{namespace}/secrets", body)[:2]

    def causes(self, body, namespace="orch-system"):
        code, status = self.create(body, namespace)
        self.assertEqual(code, 422, status)
        return {c["field"]: c["message"] for c in status["details"]["causes"]}

    def test_valid(self):
        """A well-formed token Secret is stored."""
        code, _ = self.create(token_secret(
            expires=1_900_000_000,
            extra_groups="system:bootstrappers:workers,system:bootstrappers:x",
            description="for node joins"))
        self.assertEqual(code, 201)
        self.assertEqual(self.create(token_secret("zzzzzz", usages=()))[0], 201)

    def test_namespace_and_name(self):
        """The Secret must be in orch-system and named after its id."""
        self.api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "other"}})
        self.assertIn("metadata.namespace", self.causes(token_secret(), "other"))
        causes = self.causes(token_secret(name="bootstrap-token-zzzzzz"))
        self.assertEqual(list(causes), ["metadata.name"])
        self.assertIn("bootstrap-token-abcdef", causes["metadata.name"])

    def test_id_and_secret(self):
        """token-id and token-secret are required and have fixed shapes; the secret is not echoed."""
        causes = self.causes(
            token_secret("ABCDEF", "secret-value-not-shown", name="bootstrap-token-x"))
        self.assertEqual(set(causes), {"data[token-id]", "data[token-secret]"})
        self.assertNotIn("secret-value-not-shown", causes["data[token-secret]"])
        body = token_secret()
        del body["stringData"]["token-id"], body["stringData"]["token-secret"]
        causes = self.causes(body)
        self.assertTrue(all(m.startswith("Required value") for m in causes.values()))
        self.assertEqual(set(causes), {"data[token-id]", "data[token-secret]"})

    def test_expiration_usages_groups(self):
        """expiration is RFC 3339, usages are known and true/false, extra groups are bootstrap groups."""
        causes = self.causes(token_secret(
            expiration="2030-01-01 00:00", extra_groups="system:bootstrappers:ok,system:masters",
            **{"usage-bootstrap-signing": "True", "usage-bootstrap-other": "true"}))
        self.assertEqual(set(causes), {"data[expiration]", "data[usage-bootstrap-signing]",
                                       "data[usage-bootstrap-other]", "data[auth-extra-groups]"})
        self.assertIn('"system:masters"', causes["data[auth-extra-groups]"])

    def test_update_validated(self):
        """An update that breaks the token is refused too."""
        self.assertEqual(self.create(token_secret())[0], 201)
        code, status, _ = self.api.call(
            "PATCH", f"{SECRETS}/bootstrap-token-abcdef",
            {"stringData": {"expiration": "never"}},
            content_type=b"application/merge-patch+json")
        self.assertEqual(code, 422, status)
