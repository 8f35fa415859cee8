"""
The built-in signer: approved client and node serving requests get
certificates, others never do.
"""

import base64
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from twisted.trial.unittest import SynchronousTestCase

from orchd.tls.certs import certificate_pem, create_ca, issued_by, same_key
from orchd.app.pki import PKI
from orchd.controllers.csrsigning import DEFAULT_DURATION, CSRSigningController, duration
from tests.csrsupport import (
    CSRS, approved, client_csr, issued_certificate, node_csr, serving_csr,
)
from tests.support import APIHarness


def fake_pki(can_sign=True):
    certificate, key = create_ca()
    return PKI(ca_certificate=certificate, ca_key=key, ca_pem=certificate_pem(certificate),
               client_signer=(certificate, key) if can_sign else None, can_sign_clients=can_sign)


class DurationTests(SynchronousTestCase):
    def test_bounds(self):
        """Asked-for durations count, within ten minutes and the signer's default."""
        self.assertEqual(duration(None), DEFAULT_DURATION)
        self.assertEqual(duration(3600), 3600)
        self.assertEqual(duration(60), 600)
        self.assertEqual(duration(10 * DEFAULT_DURATION), DEFAULT_DURATION)


class SignerTests(SynchronousTestCase):
    def setUp(self, can_sign=True):
        self.api = APIHarness()
        self.pki = fake_pki(can_sign)
        controller = CSRSigningController(self.api.catalog, self.api.clock, self.pki)
        controller.startService()
        self.addCleanup(controller.stopService)
        self.successResultOf(controller.started)

    def call(self, method, path, body=None):
        code, obj, _ = self.api.call(method, path, body)
        self.api.clock.advance(1)
        return code, obj

    def submit(self, body, approve="Approved"):
        code, csr = self.call("POST", CSRS, body)
        self.assertEqual(code, 201, csr)
        name = body["metadata"]["name"]
        if approve:
            code, csr = self.call("PUT", f"{CSRS}/{name}/approval", approved(csr, approve))
            self.assertEqual(code, 200, csr)
        return self.call("GET", f"{CSRS}/{name}")[1]

    def test_node_client_certificate(self):
        """An approved node request gets a one-year client certificate from the CA."""
        body, key = node_csr("node-n1", "n1")
        now = self.api.clock.seconds()
        certificate = issued_certificate(self.submit(body))
        ca = self.pki.ca_certificate
        self.assertTrue(issued_by(certificate, ca))
        self.assertTrue(same_key(certificate.public_key(), key.public_key()))
        subject = certificate.subject
        self.assertEqual(subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value,
                         "system:node:n1")
        self.assertEqual([a.value for a in subject.get_attributes_for_oid(
            NameOID.ORGANIZATION_NAME)], ["system:nodes"])
        usage = certificate.extensions.get_extension_for_class(x509.KeyUsage).value
        self.assertTrue(usage.digital_signature)
        self.assertFalse(usage.key_cert_sign)
        self.assertEqual(list(certificate.extensions.get_extension_for_class(
            x509.ExtendedKeyUsage).value), [ExtendedKeyUsageOID.CLIENT_AUTH])
        self.assertFalse(certificate.extensions.get_extension_for_class(
            x509.BasicConstraints).value.ca)
        start = certificate.not_valid_before_utc.timestamp()
        self.assertTrue(abs(start - (now - 300)) <= 3, (start, now))
        self.assertEqual(certificate.not_valid_after_utc.timestamp() - start, DEFAULT_DURATION)

    def test_expiration_seconds(self):
        """spec.expirationSeconds sets the lifetime, with a ten-minute floor."""
        for name, asked, lifetime in (("one-hour", 3600, 3600), ("one-minute", 60, 600)):
            body, _ = client_csr(name, "alice", ["devs"], expiration_seconds=asked)
            certificate = issued_certificate(self.submit(body))
            self.assertEqual((certificate.not_valid_after_utc
                              - certificate.not_valid_before_utc).total_seconds(), lifetime)

    def test_client_signer_keeps_names(self):
        """A client request keeps its subject and alternative names."""
        body, _ = client_csr("alice", "alice", ["devs", "ops"], dns_names=["alice.example"],
                             usages=("client auth", "digital signature", "key encipherment"))
        certificate = issued_certificate(self.submit(body))
        self.assertEqual(certificate.subject.rfc4514_string(), "CN=alice,O=ops,O=devs")
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        self.assertEqual(names.value.get_values_for_type(x509.DNSName), ["alice.example"])
        self.assertTrue(certificate.extensions.get_extension_for_class(
            x509.KeyUsage).value.key_encipherment)

    def test_not_approved_not_signed(self):
        """Pending and denied requests get nothing."""
        pending = self.submit(node_csr("pending", "n1")[0], approve=None)
        denied = self.submit(node_csr("denied", "n1")[0], approve="Denied")
        for csr in (pending, denied):
            self.assertNotIn("certificate", csr.get("status") or {})
            self.assertEqual([c["type"] for c in (csr.get("status") or {}).get(
                "conditions", [])], [] if csr is pending else ["Denied"])

    def test_other_signers_ignored(self):
        """Requests for signers this one does not serve stay as they are."""
        csr = self.submit(client_csr("x", "x", signer="example.com/other")[0])
        self.assertEqual([c["type"] for c in csr["status"]["conditions"]], ["Approved"])
        self.assertNotIn("certificate", csr["status"])

    def assertFailed(self, csr, message):
        self.assertNotIn("certificate", csr["status"])
        failed = [c for c in csr["status"]["conditions"] if c["type"] == "Failed"]
        self.assertEqual(len(failed), 1, csr["status"])
        self.assertEqual((failed[0]["status"], failed[0]["reason"]),
                         ("True", "SignerValidationFailure"))
        self.assertIn(message, failed[0]["message"])

    def test_invalid_node_request_fails(self):
        """A node request for another subject, or with extra usages, fails for good."""
        body, _ = client_csr("not-a-node", "alice", ["system:nodes"],
                             signer="orch.io/kube-apiserver-client-orchlet",
                             usages=("digital signature", "client auth"))
        self.assertFailed(self.submit(body), "subject common name does not begin with")
        body, _ = client_csr("wrong-group", "system:node:n1", ["devs"],
                             signer="orch.io/kube-apiserver-client-orchlet",
                             usages=("digital signature", "client auth"))
        self.assertFailed(self.submit(body), "subject organization is not system:nodes")
        body, _ = node_csr("server-usage", "n1")
        body["spec"]["usages"].append("server auth")
        self.assertFailed(self.submit(body), "usages did not match")

    def test_invalid_client_request_fails(self):
        """A client request without client auth, or with server auth, fails."""
        body, _ = client_csr("server", "alice", usages=("server auth", "client auth"))
        self.assertFailed(self.submit(body), "invalid usage for client certificate: server auth")
        body, _ = client_csr("none", "alice", usages=("digital signature",))
        self.assertFailed(self.submit(body), "missing required usage")

    def test_bad_signature_fails(self):
        """A request whose signature does not match its content fails."""
        body, _ = node_csr("forged", "n1")
        pem = base64.b64decode(body["spec"]["request"])
        der = x509.load_pem_x509_csr(pem).public_bytes(Encoding.DER)
        forged = der[:-8] + bytes(b ^ 0xFF for b in der[-8:])
        body["spec"]["request"] = base64.b64encode(
            b"-----BEGIN CERTIFICATE REQUEST-----\n" + base64.encodebytes(forged)
            + b"-----END CERTIFICATE REQUEST-----\n").decode()
        self.assertFailed(self.submit(body), "signature")

    def test_certificate_cannot_change(self):
        """Once issued, a certificate stays: a status write replacing it is invalid."""
        csr = self.submit(node_csr("n1", "n1")[0])
        other = self.submit(node_csr("n2", "n2")[0])
        csr["status"]["certificate"] = other["status"]["certificate"]
        code, obj = self.call("PUT", f"{CSRS}/n1/status", csr)
        self.assertEqual(code, 422, obj)
        self.assertIn("may not modify existing certificate", obj["message"])


class ServingSignerTests(SynchronousTestCase):
    setUp, call, submit, assertFailed = (SignerTests.setUp, SignerTests.call,
                                         SignerTests.submit, SignerTests.assertFailed)

    def test_node_serving_certificate(self):
        """A node serving request gets a server certificate from the cluster CA, with its names."""
        body, key = serving_csr("serving", "n1", ["n1", "localhost", "10.0.0.7"])
        certificate = issued_certificate(self.submit(body))
        self.assertTrue(issued_by(certificate, self.pki.ca_certificate))
        self.assertTrue(same_key(certificate.public_key(), key.public_key()))
        self.assertEqual(certificate.subject.rfc4514_string(), "CN=system:node:n1,O=system:nodes")
        self.assertEqual(list(certificate.extensions.get_extension_for_class(
            x509.ExtendedKeyUsage).value), [ExtendedKeyUsageOID.SERVER_AUTH])
        usage = certificate.extensions.get_extension_for_class(x509.KeyUsage).value
        self.assertTrue(usage.digital_signature)
        self.assertFalse(usage.key_encipherment)
        names = certificate.extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value
        self.assertEqual(names.get_values_for_type(x509.DNSName), ["n1", "localhost"])
        self.assertEqual(names.get_values_for_type(x509.IPAddress),
                         [ipaddress.ip_address("10.0.0.7")])

    def test_usages(self):
        """Server auth alone, or with key encipherment, is a serving request too."""
        for name, usages in (("alone", ("server auth",)),
                             ("rsa", ("digital signature", "key encipherment", "server auth"))):
            body, _ = serving_csr(name, "n1", usages=usages)
            self.assertIsNotNone(issued_certificate(self.submit(body)), name)

    def test_invalid_serving_requests_fail(self):
        """Anything but a node's serving request fails, as upstream's ValidateKubeletServingCSR."""
        for (name, options), message in (
                (("no-names", {"names": []}), "DNS or IP subjectAltName is required"),
                (("email", {"other_names": [x509.RFC822Name("n1@example.com")]}),
                 "Email subjectAltNames are not allowed"),
                (("uri", {"other_names": [x509.UniformResourceIdentifier("spiffe://n1")]}),
                 "URI subjectAltNames are not allowed"),
                (("client", {"usages": ("digital signature", "server auth", "client auth")}),
                 "usages did not match"),
                (("no-server", {"usages": ("digital signature", "key encipherment")}),
                 "usages did not match"),
                (("group", {"organizations": ("system:nodes", "devs")}),
                 "subject organization is not system:nodes"),
                (("no-group", {"organizations": ()}), "subject organization is not"),
                (("user", {"common_name": "alice"}), "subject common name does not begin"),
                (("empty", {"common_name": "system:node:"}), "subject common name")):
            body, _ = serving_csr(name, "n1", **options)
            self.assertFailed(self.submit(body), message)

    def test_without_client_ca_key(self):
        """Without the client CA's key, serving requests are still signed by the cluster CA."""
        self.pki.client_signer, self.pki.can_sign_clients = None, False
        self.assertIsNotNone(issued_certificate(self.submit(serving_csr("s", "n1")[0])))
        self.assertNotIn("certificate", self.submit(node_csr("c", "n1")[0])["status"])


class NoCAKeyTests(SynchronousTestCase):
    def test_idle(self):
        """Without the client CA's key, approved requests are left alone."""
        SignerTests.setUp(self, can_sign=False)
        code, csr = SignerTests.call(self, "POST", CSRS, node_csr("n1", "n1")[0])
        SignerTests.call(self, "PUT", f"{CSRS}/n1/approval", approved(csr))
        csr = SignerTests.call(self, "GET", f"{CSRS}/n1")[1]
        self.assertNotIn("certificate", csr["status"])
