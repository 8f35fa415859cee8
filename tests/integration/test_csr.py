"""
CertificateSigningRequests against a real server: approved by hand, signed
by the built-in signer, and the certificate then works as a TLS client
identity.
"""

from treq.client import HTTPClient
from twisted.internet import reactor
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, HTTPConnectionPool

from orchd.tls.certs import certificate_pem, private_key_pem, same_key
from orchd.client.orchconfig import load_orchconfig
from orchd.tls.client import ClientTLSPolicy
from tests.csrsupport import CSRS, approved, issued_certificate, node_csr
from tests.integration.support import RunningControlPlane, sleep

REVIEWS = "/apis/authentication.orch.io/v1/selfsubjectreviews"


class CSRTests(TestCase):
    timeout = 60

    async def start(self, *controllers):
        self.server = await RunningControlPlane(self, controllers=("*",) + controllers).start()

    def client_for(self, cert_pem, key_pem):
        pool = HTTPConnectionPool(reactor, persistent=False)
        ca = load_orchconfig(self.server.plane.pki.admin_orchconfig_path).ca_pem
        return HTTPClient(Agent(reactor, contextFactory=ClientTLSPolicy(ca, cert_pem, key_pem),
                                pool=pool))

    async def certificate_of(self, name, seconds=5.0):
        """Poll request C{name} until it holds a certificate."""
        for _ in range(int(seconds / 0.05)):
            code, csr = await self.server.call("GET", f"{CSRS}/{name}")
            self.assertEqual(code, 200, csr)
            certificate = issued_certificate(csr)
            if certificate is not None:
                return certificate
            await sleep(0.05)
        self.fail(f"request {name} got no certificate within {seconds}s: {csr.get('status')}")

    async def test_node_certificate_by_hand(self):
        """An admin approves a node's request; the issued certificate authenticates the node."""
        await self.start("-csrapproving")     # else the admin's request is approved at once
        body, key = node_csr("node-n1", "n1")
        code, csr = await self.server.call("POST", CSRS, body)
        self.assertEqual(code, 201, csr)
        code, csr = await self.server.call("PUT", f"{CSRS}/node-n1/approval", approved(csr))
        self.assertEqual(code, 200, csr)
        certificate = await self.certificate_of("node-n1")

        node = self.client_for(certificate_pem(certificate), private_key_pem(key))
        code, review = await self.server.call("POST", REVIEWS, {
            "apiVersion": "authentication.orch.io/v1", "kind": "SelfSubjectReview"},
            client=node)
        self.assertEqual(code, 201, review)
        user = review["status"]["userInfo"]
        self.assertEqual(user["username"], "system:node:n1")
        self.assertIn("system:nodes", user["groups"])
        self.assertTrue(same_key(certificate.public_key(), key.public_key()))

    async def test_masters_node_request_approved_automatically(self):
        """Whoever may create nodeclient requests (here system:masters) needs no approver."""
        await self.start()
        body, _ = node_csr("node-n2", "n2")
        code, csr = await self.server.call("POST", CSRS, body)
        self.assertEqual(code, 201, csr)
        certificate = await self.certificate_of("node-n2")
        self.assertEqual(certificate.subject.rfc4514_string(), "CN=system:node:n2,O=system:nodes")
        _, csr = await self.server.call("GET", f"{CSRS}/node-n2")
        self.assertEqual(csr["status"]["conditions"][0]["reason"], "AutoApproved")
