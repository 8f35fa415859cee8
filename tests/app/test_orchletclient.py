"""The API server's orchlet client certificate: issued once, reused, or given."""

import os

from cryptography import x509
from cryptography.x509.oid import NameOID
from twisted.trial.unittest import TestCase

from orchd.app.config import Config
from orchd.app.orchletclient import CERT_NAME, KEY_NAME, ORCHLET_CLIENT_USER, ensure_orchlet_client
from orchd.app.pki import PKI, PKIError


def subject(pem, oid):
    certificate = x509.load_pem_x509_certificate(pem)
    return [a.value for a in certificate.subject.get_attributes_for_oid(oid)]


class OrchletClientTests(TestCase):
    def setUp(self):
        self.data_dir = self.mktemp()
        self.config = Config(data_dir=self.data_dir)
        self.pki = ensure_orchlet_client(self.config, PKI.ensure(self.config))

    def test_generated(self):
        """Under pki/, for the orchlet client user, in no group (not system:masters)."""
        pki = self.pki
        self.assertEqual(pki.orchlet_client_cert_path, os.path.join(pki.directory, CERT_NAME))
        self.assertEqual(pki.orchlet_client_key_path, os.path.join(pki.directory, KEY_NAME))
        self.assertEqual(subject(pki.orchlet_client_cert_pem, NameOID.COMMON_NAME),
                         [ORCHLET_CLIENT_USER])
        self.assertEqual(subject(pki.orchlet_client_cert_pem, NameOID.ORGANIZATION_NAME), [])
        self.assertEqual(os.stat(pki.orchlet_client_key_path).st_mode & 0o777, 0o600)

    def test_reused(self):
        again = ensure_orchlet_client(self.config, PKI.ensure(self.config))
        self.assertEqual(again.orchlet_client_cert_pem, self.pki.orchlet_client_cert_pem)

    def test_regenerated_when_missing(self):
        os.remove(self.pki.orchlet_client_key_path)
        again = ensure_orchlet_client(self.config, PKI.ensure(self.config))
        self.assertNotEqual(again.orchlet_client_cert_pem, self.pki.orchlet_client_cert_pem)

    def test_given(self):
        """Given files win; a key that does not match is an error."""
        cert_pem, key_pem = self.pki.issue_client_certificate("someone-else")
        base = self.mktemp()
        os.makedirs(base)
        cert, key = os.path.join(base, "c.crt"), os.path.join(base, "c.key")
        with open(cert, "wb") as f:
            f.write(cert_pem)
        with open(key, "wb") as f:
            f.write(key_pem)
        config = Config(data_dir=self.data_dir, orchlet_client_certificate=cert,
                        orchlet_client_key=key)
        pki = ensure_orchlet_client(config, PKI.ensure(config))
        self.assertEqual((pki.orchlet_client_cert_pem, pki.orchlet_client_key_path),
                         (cert_pem, key))
        config = Config(data_dir=self.data_dir, orchlet_client_certificate=cert,
                        orchlet_client_key=self.pki.orchlet_client_key_path)
        self.assertRaises(PKIError, ensure_orchlet_client, config, PKI.ensure(config))
