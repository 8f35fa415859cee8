"""The bootstrap signer: cluster-info carries a detached JWS per valid signing token."""

import base64

import jwt
from twisted.trial.unittest import SynchronousTestCase

from orchd.app.clusterinfo import ensure_cluster_info
from orchd.auth.clusterinfo import detached_jws
from orchd.controllers.bootstrapsigner import BootstrapSigner
from tests.auth.bootstraptokens import (
    CLUSTER_INFO, SECRETS, TOKEN, TOKEN_ID, token_secret, verify_detached as verify,
)
from tests.support import APIHarness

KEY = f"jws-kubeconfig-{TOKEN_ID}"


class DetachedJWSTests(SynchronousTestCase):
    def test_header_bytes_and_verification(self):
        """The header is exactly go-jose's, and pyjwt verifies the signature with the whole token."""
        detached = detached_jws("payload: 1\n", TOKEN)
        header = detached.split(".")[0]
        self.assertEqual(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)),
                         b'{"alg":"HS256","kid":"abcdef"}')
        self.assertEqual(verify(detached, "payload: 1\n", TOKEN), "payload: 1\n")
        self.assertRaises(jwt.InvalidSignatureError, verify, detached, "payload: 1\n",
                          "abcdef.ffffffffffffffff")
        self.assertRaises(jwt.InvalidSignatureError, verify, detached, "payload: 2\n", TOKEN)


class SignerTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.clock = self.api.clock
        self.api.run(ensure_cluster_info(self.api.catalog, "https://127.0.0.1:6443", b"CA"))
        self.signer = BootstrapSigner(self.api.catalog, self.clock)
        self.signer.startService()
        self.addCleanup(self.signer.stopService)
        self.successResultOf(self.signer.started)

    def data(self):
        return self.api.call("GET", CLUSTER_INFO)[1]["data"]

    def create(self, **kwargs):
        code, body, _ = self.api.call("POST", SECRETS, token_secret(**kwargs))
        self.assertEqual(code, 201, body)

    def secret(self, token_id, **strings):
        return self.api.call("PATCH", f"{SECRETS}/bootstrap-token-{token_id}",
                             {"stringData": strings},
                             content_type=b"application/merge-patch+json")[0]

    def test_signs_and_verifies(self):
        """A signing token adds jws-kubeconfig-<id>, which verifies against the kubeconfig."""
        self.create()
        data = self.data()
        self.assertEqual(verify(data[KEY], data["kubeconfig"], TOKEN), data["kubeconfig"])

    def test_only_signing_tokens(self):
        """Tokens without usage-bootstrap-signing=true sign nothing; turning it off drops the signature."""
        self.create(token_id="zzzzzz", usages=("authentication",))
        self.create()
        self.assertEqual(sorted(k for k in self.data() if k.startswith("jws-")), [KEY])
        self.assertEqual(self.secret(TOKEN_ID, **{"usage-bootstrap-signing": "false"}), 200)
        self.assertNotIn(KEY, self.data())

    def test_deleted_token(self):
        """Deleting the token's Secret removes its signature."""
        self.create()
        self.api.call("DELETE", f"{SECRETS}/bootstrap-token-{TOKEN_ID}")
        self.assertNotIn(KEY, self.data())

    def test_expiry_on_time(self):
        """A signature disappears when its token expires, without any store event."""
        now = self.clock.seconds()
        self.create(expires=now + 30)
        self.create(token_id="yyyyyy", expires=now + 90)
        self.assertIn(KEY, self.data())
        self.clock.advance(29)
        self.assertIn(KEY, self.data())
        self.clock.advance(1)
        self.assertNotIn(KEY, self.data())
        self.assertIn("jws-kubeconfig-yyyyyy", self.data())
        self.clock.advance(60)
        self.assertNotIn("jws-kubeconfig-yyyyyy", self.data())

    def test_resigned_on_kubeconfig_change(self):
        """A new kubeconfig is signed again; stray signature keys are removed."""
        self.create()
        self.api.run(ensure_cluster_info(self.api.catalog, "https://10.0.0.1:6443", b"CA"))
        self.api.call("PATCH", CLUSTER_INFO, {"data": {"jws-kubeconfig-stale00": "a..b"}},
                      content_type=b"application/merge-patch+json")
        data = self.data()
        self.assertIn("10.0.0.1", data["kubeconfig"])
        self.assertNotIn("jws-kubeconfig-stale00", data)
        verify(data[KEY], data["kubeconfig"], TOKEN)

    def test_no_kubeconfig_no_work(self):
        """Without a kubeconfig key the config map is left alone."""
        self.api.call("PUT", CLUSTER_INFO, {"metadata": {"name": "cluster-info"},
                                            "data": {"other": "x"}})
        self.create()
        self.assertEqual(self.data(), {"other": "x"})
