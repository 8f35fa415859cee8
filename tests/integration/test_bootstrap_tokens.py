"""Bootstrap tokens end to end: authentication, the signed cluster-info, expiry and cleanup."""

import math

from treq.client import HTTPClient
from twisted.internet import reactor
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, HTTPConnectionPool

from orchd.client.orchconfig import load_orchconfig
from orchd.tls.client import ClientTLSPolicy
from tests.auth.bootstraptokens import (
    CLUSTER_INFO, SECRETS, TOKEN, TOKEN_ID, token_secret, verify_detached,
)
from tests.integration.support import RunningControlPlane, sleep

REVIEWS = "/apis/authentication.orch.io/v1/selfsubjectreviews"
SHORT_ID = "shortt"
SHORT = f"{SHORT_ID}.0123456789abcdef"


class BootstrapTokenTests(TestCase):
    timeout = 60

    async def setUp(self):
        self.server = await RunningControlPlane(
            self, enable_bootstrap_token_auth=True,
            controllers=("*", "tokencleaner", "bootstrapsigner")).start()
        pool = HTTPConnectionPool(reactor, persistent=False)
        ca = load_orchconfig(self.server.plane.pki.admin_orchconfig_path).ca_pem
        self.anonymous = HTTPClient(Agent(reactor, contextFactory=ClientTLSPolicy(ca), pool=pool))

    async def as_token(self, method, path, token, body=None):
        return await self.server.call(method, path, body, client=self.anonymous,
                                      headers={b"authorization": [f"Bearer {token}".encode()]})

    async def eventually(self, check, seconds=3.0):
        """Poll C{check} (an async function returning a bool) for up to C{seconds}."""
        for _ in range(int(seconds / 0.1)):
            if await check():
                return
            await sleep(0.1)
        self.fail(f"{check.__name__} did not hold within {seconds}s")

    async def signatures(self):
        code, cm = await self.server.call("GET", CLUSTER_INFO, client=self.anonymous)
        self.assertEqual(code, 200, cm)
        return cm["data"]

    async def test_token_lifecycle(self):
        """A token authenticates and signs cluster-info; a short-lived one stops at expiry and is removed."""
        expires = math.ceil(reactor.seconds()) + 2
        for body in (token_secret(extra_groups="system:bootstrappers:workers"),
                     token_secret(SHORT_ID, expires=expires)):
            code, created = await self.server.call("POST", SECRETS, body)
            self.assertEqual(code, 201, created)

        code, review = await self.as_token("POST", REVIEWS, TOKEN, {
            "apiVersion": "authentication.orch.io/v1", "kind": "SelfSubjectReview"})
        self.assertEqual(code, 201, review)
        self.assertEqual(review["status"]["userInfo"], {
            "username": f"system:bootstrap:{TOKEN_ID}",
            "groups": ["system:bootstrappers", "system:bootstrappers:workers",
                       "system:authenticated"]})
        self.assertEqual((await self.as_token("GET", "/version", SHORT))[0], 200)
        wrong = f"{TOKEN_ID}.ffffffffffffffff"
        self.assertEqual((await self.as_token("GET", "/version", wrong))[0], 401)

        async def both_signed():
            data = await self.signatures()
            return f"jws-kubeconfig-{TOKEN_ID}" in data and f"jws-kubeconfig-{SHORT_ID}" in data
        await self.eventually(both_signed)
        data = await self.signatures()
        self.assertIn(self.server.url, data["kubeconfig"])
        self.assertEqual(verify_detached(data[f"jws-kubeconfig-{TOKEN_ID}"], data["kubeconfig"],
                                         TOKEN), data["kubeconfig"])

        await sleep(max(0.0, expires - reactor.seconds()) + 0.2)
        code, _ = await self.as_token("GET", "/version", SHORT)
        self.assertEqual(code, 401)

        async def short_signature_gone():
            return f"jws-kubeconfig-{SHORT_ID}" not in await self.signatures()

        async def short_secret_gone():
            code, _ = await self.server.call("GET", f"{SECRETS}/bootstrap-token-{SHORT_ID}")
            return code == 404
        await self.eventually(short_signature_gone)
        await self.eventually(short_secret_gone)
        self.assertIn(f"jws-kubeconfig-{TOKEN_ID}", await self.signatures())
