"""The SubjectAccessReview webhook authorizer end to end, over mutual TLS on a real port."""

import json

from twisted.internet import reactor
from twisted.internet.ssl import Certificate, CertificateOptions, PrivateCertificate
from twisted.trial.unittest import TestCase
from twisted.web.resource import Resource
from twisted.web.server import Site

from orchd.tls.certs import certificate_pem, create_ca, issue_certificate, private_key_pem
from orchd.auth.attributes import Attributes
from orchd.auth.authz.webhook import WebhookAuthorizer
from orchd.auth.interfaces import Decision
from orchd.auth.user import AUTHENTICATED, UserInfo
from orchd.client.orchconfig import write_orchconfig


class SubjectAccessReviews(Resource):
    """A webhook service: allows alice, denies mallory, has no opinion on others."""

    isLeaf = True

    def __init__(self):
        super().__init__()
        self.reviews = []

    def render_POST(self, request):
        peer = request.transport.getPeerCertificate()
        review = json.loads(request.content.read())
        self.reviews.append((peer.get_subject().CN, request.path, review))
        user = review["spec"].get("user")
        status = {"allowed": user == "alice"}
        if user == "mallory":
            status.update(denied=True, reason="mallory is banned")
        request.setHeader(b"content-type", b"application/json")
        return json.dumps({"apiVersion": review["apiVersion"], "kind": "SubjectAccessReview",
                           "status": status}).encode()


class RealTLSTests(TestCase):
    async def test_end_to_end(self):
        """Over mutual TLS the service's allow and deny arrive, and a repeat is cached."""
        ca, ca_key = create_ca("webhook-ca")
        server_cert, server_key = issue_certificate(ca, ca_key, "authz", names=["127.0.0.1"],
                                                    server=True)
        client_cert, client_key = issue_certificate(ca, ca_key, "orchd-apiserver", client=True)
        server = PrivateCertificate.loadPEM(certificate_pem(server_cert)
                                            + private_key_pem(server_key))
        options = CertificateOptions(
            privateKey=server.privateKey.original, certificate=server.original, verify=True,
            caCerts=[Certificate.loadPEM(certificate_pem(ca)).original],
            requireCertificate=True)
        service = SubjectAccessReviews()
        port = reactor.listenSSL(0, Site(service), options, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        config = self.mktemp()
        write_orchconfig(config, f"https://127.0.0.1:{port.getHost().port}/authorize",
                         certificate_pem(ca), certificate_pem(client_cert),
                         private_key_pem(client_key))
        authorizer = WebhookAuthorizer.from_config_file(config, reactor, version="v1")
        self.addCleanup(authorizer.close)

        def pods(name):
            return Attributes(UserInfo(name, (AUTHENTICATED,)), "list", namespace="a",
                              resource="pods")

        self.assertEqual(await authorizer.authorize(pods("alice")), (Decision.ALLOW, ""))
        self.assertEqual(await authorizer.authorize(pods("mallory")),
                         (Decision.DENY, "mallory is banned"))
        self.assertEqual(await authorizer.authorize(pods("alice")), (Decision.ALLOW, ""))
        self.assertEqual(await authorizer.authorize(pods("mallory")),
                         (Decision.DENY, "mallory is banned"))
        self.assertEqual(len(service.reviews), 2)
        subject, path, review = service.reviews[0]
        self.assertEqual((subject, path), ("orchd-apiserver", b"/authorize"))
        self.assertEqual(review["spec"], {
            "resourceAttributes": {"namespace": "a", "verb": "list", "resource": "pods"},
            "user": "alice", "groups": [AUTHENTICATED]})
