"""
A node joining with a bootstrap token, as a node agent will: cluster-info
read without trusting TLS and checked by its signature, then a client
certificate requested with the token, approved and signed without an
administrator, and the certificate authenticating as the node.
"""

import base64

import yaml
from treq.client import HTTPClient
from twisted.internet import reactor
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, HTTPConnectionPool

from orchd.tls.certs import certificate_pem, private_key_pem
from orchd.tls.client import ClientTLSPolicy
from tests.auth.bootstraptokens import (
    CLUSTER_INFO, SECRETS, TOKEN, TOKEN_ID, token_secret, verify_detached,
)
from tests.csrsupport import CSRS, issued_certificate, node_csr
from tests.integration.support import RunningControlPlane, sleep

REVIEWS = "/apis/authentication.orch.io/v1/selfsubjectreviews"


class NodeJoinTests(TestCase):
    timeout = 60

    def client(self, **tls):
        return HTTPClient(Agent(reactor, contextFactory=ClientTLSPolicy(**tls),
                                pool=HTTPConnectionPool(reactor, persistent=False)))

    async def poll(self, read, seconds=5.0):
        """The first true result of C{read()}, polled for up to C{seconds}."""
        for _ in range(int(seconds / 0.05)):
            result = await read()
            if result:
                return result
            await sleep(0.05)
        self.fail(f"{read.__name__} gave nothing within {seconds}s")

    async def test_join_with_bootstrap_token(self):
        server = await RunningControlPlane(
            self, enable_bootstrap_token_auth=True,
            controllers=("*", "bootstrapsigner")).start()
        code, _ = await server.call("POST", SECRETS, token_secret())
        self.assertEqual(code, 201)

        # 1. cluster-info, trusting nothing yet: the signature is the proof.
        untrusted = self.client(verify=False)

        async def signed_cluster_info():
            code, cm = await server.call("GET", CLUSTER_INFO, client=untrusted)
            self.assertEqual(code, 200, cm)
            return cm["data"] if f"jws-kubeconfig-{TOKEN_ID}" in cm["data"] else None
        data = await self.poll(signed_cluster_info)
        kubeconfig = verify_detached(data[f"jws-kubeconfig-{TOKEN_ID}"], data["kubeconfig"], TOKEN)
        cluster = yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]
        self.assertEqual(cluster["server"], server.url)
        ca_pem = base64.b64decode(cluster["certificate-authority-data"])

        # 2. A client certificate requested with the token, over verified TLS.
        bootstrap = self.client(ca_pem=ca_pem)
        bearer = {b"authorization": [f"Bearer {TOKEN}".encode()]}
        body, key = node_csr("node-joiner", "joiner")
        code, csr = await server.call("POST", CSRS, body, headers=bearer, client=bootstrap)
        self.assertEqual(code, 201, csr)
        self.assertEqual(csr["spec"]["username"], f"system:bootstrap:{TOKEN_ID}")

        async def signed():
            code, csr = await server.call("GET", f"{CSRS}/node-joiner", headers=bearer,
                                          client=bootstrap)
            self.assertEqual(code, 200, csr)
            return issued_certificate(csr)
        certificate = await self.poll(signed)

        # 3. The certificate is the node's identity.
        node = self.client(ca_pem=ca_pem, client_cert_pem=certificate_pem(certificate),
                           client_key_pem=private_key_pem(key))
        code, review = await server.call("POST", REVIEWS, {
            "apiVersion": "authentication.orch.io/v1", "kind": "SelfSubjectReview"}, client=node)
        self.assertEqual(code, 201, review)
        self.assertEqual(review["status"]["userInfo"]["username"], "system:node:joiner")
        self.assertIn("system:nodes", review["status"]["userInfo"]["groups"])
