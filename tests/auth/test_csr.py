"""Reading certificate signing requests: decoding, conditions, node client requests."""

import base64

from cryptography.hazmat.primitives.asymmetric import ec
from twisted.trial.unittest import SynchronousTestCase

from orchd.auth.csr import (
    CSRError, api_client_error, is_approved, node_client_error, node_client_request,
    parse_request, subject_common_name,
)
from tests.csrsupport import NODE_USAGES, client_csr, node_csr


class ParseTests(SynchronousTestCase):
    def test_node_request(self):
        """node_client_request builds exactly what node_client_error accepts."""
        key = ec.generate_private_key(ec.SECP256R1())
        pem = node_client_request("n1", key)
        request = parse_request({"spec": {"request": base64.b64encode(pem).decode()}})
        self.assertEqual(subject_common_name(request), "system:node:n1")
        self.assertIsNone(node_client_error(request, set(NODE_USAGES)))
        self.assertIsNone(node_client_error(
            request, {"digital signature", "key encipherment", "client auth"}))
        self.assertIn("usages did not match", node_client_error(request, {"client auth"}))

    def test_undecodable(self):
        """Anything but a base64 PEM request is a CSRError."""
        for encoded in ("", "not base64!", base64.b64encode(b"junk").decode()):
            self.assertRaises(CSRError, parse_request, {"spec": {"request": encoded}})

    def test_client_usages(self):
        self.assertIsNone(api_client_error({"client auth", "digital signature"}))
        self.assertIn("missing required usage", api_client_error({"digital signature"}))
        self.assertIn("invalid usage", api_client_error({"client auth", "server auth"}))

    def test_node_request_with_names(self):
        body, _ = client_csr("x", "system:node:n1", ["system:nodes"], dns_names=["n1"])
        self.assertEqual(node_client_error(parse_request(body), set(NODE_USAGES)),
                         "DNS subjectAltNames are not allowed")

    def test_approved(self):
        """Approved counts only while not also Denied."""
        body, _ = node_csr("x", "n1")
        self.assertFalse(is_approved(body))
        approved = {"type": "Approved", "status": "True"}
        self.assertTrue(is_approved(dict(body, status={"conditions": [approved]})))
        self.assertFalse(is_approved(dict(body, status={"conditions": [
            approved, {"type": "Denied", "status": "True"}]})))
