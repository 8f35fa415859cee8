"""A node agent's serving certificate: the names it asks for, the request, reuse."""

import base64

from cryptography import x509
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase

from orchd.tls.certs import certificate_pem, create_ca, issue_certificate
from orchd.auth.csr import node_serving_error, parse_request, usages_of
from orchd.orchlet.bootstrap import JoinError
from orchd.orchlet.servingcert import request_serving_certificate, serving_names, usable


class NamesTests(SynchronousTestCase):
    def test_loopback(self):
        """Bound to loopback, localhost and 127.0.0.1 are named too."""
        self.assertEqual(serving_names("n1", "127.0.0.1"), ["n1", "127.0.0.1", "localhost"])

    def test_address(self):
        """Bound to one address, the node name and that address."""
        self.assertEqual(serving_names("n1", "10.0.0.5"), ["n1", "10.0.0.5"])

    def test_wildcard(self):
        """Bound to every address, only the node name."""
        self.assertEqual(serving_names("n1", "0.0.0.0"), ["n1"])
        self.assertEqual(serving_names("n1", "::"), ["n1"])


class UsableTests(SynchronousTestCase):
    def setUp(self):
        self.ca, self.ca_key = create_ca()
        certificate, _ = issue_certificate(self.ca, self.ca_key, "system:node:n1",
                                           names=["n1", "127.0.0.1"], server=True)
        self.pem = certificate_pem(certificate)

    def test_usable(self):
        """Issued by the cluster CA and covering every name: reused."""
        self.assertTrue(usable(self.pem, ["n1", "127.0.0.1"], [certificate_pem(self.ca)]))
        self.assertTrue(usable(self.pem, ["n1"], []))

    def test_missing_name(self):
        """A name it lacks (the bind address changed): asked for again."""
        self.assertFalse(usable(self.pem, ["n1", "10.0.0.5"], [certificate_pem(self.ca)]))

    def test_other_issuer(self):
        """From another CA (a self-made one, another cluster's): asked for again."""
        self.assertFalse(usable(self.pem, ["n1"], [certificate_pem(create_ca()[0])]))


class FakeAPI:
    """Answers a POST of a CSR, then GETs with C{states}, one after the other."""

    def __init__(self, states):
        self.states = list(states)
        self.sent = None

    async def request(self, method, path, body=None):
        if method == "POST":
            self.sent = body
            return 201, body
        return 200, dict(self.sent, status=self.states.pop(0))


class RequestTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()

    def ask(self, api):
        return Deferred.fromCoroutine(request_serving_certificate(
            self.clock, api, "n1", ["n1", "127.0.0.1", "localhost"], Logger(), wait=10,
            interval=1))

    def test_issued(self):
        """A node serving request is sent and polled until its certificate comes."""
        issued = base64.b64encode(b"CERTIFICATE").decode()
        api = FakeAPI([{}, {"certificate": issued}])
        result = self.ask(api)
        self.assertNoResult(result)
        self.clock.advance(1)
        certificate, key = self.successResultOf(result)
        self.assertEqual(certificate, b"CERTIFICATE")
        self.assertIn(b"PRIVATE KEY", key)
        spec = api.sent["spec"]
        self.assertEqual(spec["signerName"], "orch.io/orchlet-serving")
        self.assertTrue(api.sent["metadata"]["name"].startswith("node-serving-csr-"))
        request = parse_request(api.sent)
        self.assertIsNone(node_serving_error(request, usages_of(api.sent)))
        names = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        self.assertEqual(names.get_values_for_type(x509.DNSName), ["n1", "localhost"])
        self.assertEqual([str(ip) for ip in names.get_values_for_type(x509.IPAddress)],
                         ["127.0.0.1"])

    def test_denied(self):
        """A denied request is an error that says so."""
        denied = {"conditions": [{"type": "Denied", "status": "True", "message": "no"}]}
        failure = self.failureResultOf(self.ask(FakeAPI([denied])), JoinError)
        self.assertIn("denied", str(failure.value))

    def test_timeout(self):
        """Nobody approving within the wait is an error too."""
        result = self.ask(FakeAPI([{}] * 20))
        self.clock.pump([1] * 12)
        self.assertIn("timed out", str(self.failureResultOf(result, JoinError).value))
