"""
Tests for L{orchd.tls.client} and L{orchd.client.connect}: real TLS on a
loopback port, PKI from L{orchd.app.pki}.

The server side is what the API server does: it asks for an optional client
certificate and verifies it against the client CA.
"""

import os

import treq
from OpenSSL import SSL
from treq.client import HTTPClient
from twisted.internet import reactor
from twisted.internet.ssl import Certificate, CertificateOptions, PrivateCertificate
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, HTTPConnectionPool, ResponseNeverReceived
from twisted.web.iweb import IPolicyForHTTPS
from twisted.web.resource import Resource
from twisted.web.server import Site
from zope.interface.verify import verifyObject

from orchd.app.config import Config
from orchd.app.pki import PKI
from orchd.client.connect import client_from_orchconfig
from orchd.client.orchconfig import load_orchconfig, write_orchconfig
from orchd.tls.certs import certificate_pem, create_ca, issue_certificate, private_key_pem
from orchd.tls.client import ClientTLSPolicy


class WhoAmI(Resource):
    """Answers with the client certificate's CN (or C{anonymous}) and the Authorization header."""

    isLeaf = True

    def render_GET(self, request):
        peer = request.transport.getPeerCertificate()
        name = peer.get_subject().CN if peer is not None else "anonymous"
        authorization = request.getHeader(b"authorization") or b"-"
        return name.encode() + b" " + authorization


class ClientTLSTests(TestCase):
    """A treq client built from an orchconfig talks to a server using the same PKI."""

    def setUp(self):
        data_dir = self.mktemp()
        os.makedirs(data_dir)
        self.pki = PKI.ensure(Config(data_dir=data_dir, secure_port=0))
        server = PrivateCertificate.loadPEM(self.pki.serving_cert_pem + self.pki.serving_key_pem)
        options = CertificateOptions(
            privateKey=server.privateKey.original, certificate=server.original, verify=True,
            caCerts=[Certificate.loadPEM(pem).original for pem in self.pki.client_ca_pems],
            requireCertificate=False)
        self.port = reactor.listenSSL(0, Site(WhoAmI()), options, interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.orchconfig = self.pki.write_admin_orchconfig(self.port.getHost().port)
        self.pool = HTTPConnectionPool(reactor, persistent=False)

    def assertTlsFailure(self, error, text):
        """The request failed in the TLS handshake, for the reason C{text}."""
        reasons = [reason.value for reason in error.reasons]
        self.assertTrue(reasons and all(isinstance(r, SSL.Error) for r in reasons), reasons)
        self.assertIn(text, str(reasons[0]))

    async def get(self, client, url):
        response = await client.get(url + "/whoami")
        return (await treq.content(response)).decode()

    def test_interface(self):
        """The policy is what Agent expects, and a lone key or certificate is refused."""
        self.assertTrue(verifyObject(IPolicyForHTTPS, ClientTLSPolicy(self.pki.ca_pem)))
        self.assertRaises(ValueError, ClientTLSPolicy, self.pki.ca_pem, self.pki.ca_pem)

    async def test_admin_identity(self):
        """The admin orchconfig's certificate is seen by the server as CN orch-admin."""
        client, url = client_from_orchconfig(self.orchconfig, reactor, pool=self.pool)
        self.assertEqual(url, f"https://127.0.0.1:{self.port.getHost().port}")
        self.assertEqual(await self.get(client, url), "orch-admin -")

    async def test_node_identity(self):
        """A client certificate issued by the PKI authenticates as its CN."""
        cert_pem, key_pem = self.pki.issue_client_certificate("system:node:n1", ["system:nodes"])
        client = HTTPClient(Agent(
            reactor, contextFactory=ClientTLSPolicy(self.pki.ca_pem, cert_pem, key_pem),
            pool=self.pool))
        url = load_orchconfig(self.orchconfig).server
        self.assertEqual(await self.get(client, url), "system:node:n1 -")

    async def test_creator_kept_per_host(self):
        """Each host's connection creator is built once and serves every connection to it."""
        cert_pem, key_pem = self.pki.issue_client_certificate("system:node:n1", ["system:nodes"])
        policy = ClientTLSPolicy(self.pki.ca_pem, cert_pem, key_pem)
        first = policy.creatorForNetloc(b"127.0.0.1", self.port.getHost().port)
        self.assertIs(policy.creatorForNetloc(b"127.0.0.1", self.port.getHost().port), first)
        self.assertIsNot(policy.creatorForNetloc(b"localhost", self.port.getHost().port), first)
        # Thousands of node agents on one address, each on its own port: one creator.
        for port in range(20000, 20100):
            self.assertIs(policy.creatorForNetloc(b"127.0.0.1", port), first)
        client = HTTPClient(Agent(reactor, contextFactory=policy, pool=self.pool))
        url = load_orchconfig(self.orchconfig).server
        self.assertEqual(await self.get(client, url), "system:node:n1 -")
        self.assertEqual(await self.get(client, url), "system:node:n1 -")

    async def test_no_client_certificate(self):
        """Without a client certificate the server sees an anonymous peer."""
        client = HTTPClient(Agent(
            reactor, contextFactory=ClientTLSPolicy(self.pki.ca_pem), pool=self.pool))
        url = load_orchconfig(self.orchconfig).server
        self.assertEqual(await self.get(client, url), "anonymous -")

    async def test_foreign_client_certificate(self):
        """A client certificate from another CA fails the handshake."""
        other_ca, other_key = create_ca("other-ca")
        cert, key = issue_certificate(other_ca, other_key, "intruder", client=True)
        client = HTTPClient(Agent(
            reactor, contextFactory=ClientTLSPolicy(self.pki.ca_pem, certificate_pem(cert),
                                                    private_key_pem(key)),
            pool=self.pool))
        url = load_orchconfig(self.orchconfig).server
        with self.assertRaises(ResponseNeverReceived) as caught:
            await self.get(client, url)
        self.assertTlsFailure(caught.exception, "unknown ca")

    async def test_untrusted_server(self):
        """A client trusting another CA refuses the server."""
        other_ca, _ = create_ca("other-ca")
        client = HTTPClient(Agent(
            reactor, contextFactory=ClientTLSPolicy(certificate_pem(other_ca)), pool=self.pool))
        url = load_orchconfig(self.orchconfig).server
        with self.assertRaises(ResponseNeverReceived) as caught:
            await self.get(client, url)
        self.assertTlsFailure(caught.exception, "certificate verify failed")

    async def test_unverified_policy(self):
        """verify=False reaches a server whose CA the client does not know."""
        other_ca, _ = create_ca("other-ca")
        client = HTTPClient(Agent(
            reactor, contextFactory=ClientTLSPolicy(certificate_pem(other_ca), verify=False),
            pool=self.pool))
        url = load_orchconfig(self.orchconfig).server
        self.assertEqual(await self.get(client, url), "anonymous -")

    async def test_bearer_token(self):
        """A token in the orchconfig is sent as a bearer token."""
        path = self.mktemp()
        write_orchconfig(path, load_orchconfig(self.orchconfig).server, self.pki.ca_pem,
                         token="abcdef.0123456789abcdef")
        client, url = client_from_orchconfig(path, reactor, pool=self.pool)
        self.assertEqual(await self.get(client, url), "anonymous Bearer abcdef.0123456789abcdef")
