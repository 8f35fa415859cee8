"""Tests for L{orchd.app.pki}, L{orchd.tls.certs} and L{orchd.client.orchconfig}."""

import datetime
import ipaddress
import os
import socket
import stat

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from twisted.trial.unittest import SynchronousTestCase

from orchd.tls.certs import certificate_pem, create_ca, issue_certificate, private_key_pem
from orchd.app.config import Config
from orchd.app.pki import PKI, PKIError
from orchd.client.orchconfig import (
    OrchConfigError, cluster_info_document, dump_orchconfig, load_orchconfig, server_url,
    write_orchconfig,
)

GENERATED = ("ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "sa.key", "sa.pub")
PRIVATE = ("ca.key", "apiserver.key", "sa.key")


def certificate(pem):
    return x509.load_pem_x509_certificate(pem)


def names_of(cert):
    """The DNS names and IP addresses (as text) of a certificate's SAN."""
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(san.get_values_for_type(x509.DNSName)) | {
        str(address) for address in san.get_values_for_type(x509.IPAddress)}


def subject(cert, oid):
    return [attribute.value for attribute in cert.subject.get_attributes_for_oid(oid)]


def extended_usages(cert):
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def public_der(key):
    """The DER public key of a public or private key, for comparing key pairs."""
    if hasattr(key, "private_bytes"):
        key = key.public_key()
    return key.public_bytes(serialization.Encoding.DER,
                            serialization.PublicFormat.SubjectPublicKeyInfo)


def validity(cert):
    return cert.not_valid_after_utc - cert.not_valid_before_utc


class TempDirMixin:
    def make_dir(self):
        path = self.mktemp()
        os.makedirs(path)
        return path

    def write(self, directory, name, data):
        path = os.path.join(directory, name)
        with open(path, "wb") as stream:
            stream.write(data)
        return path


class GenerationTests(TempDirMixin, SynchronousTestCase):
    """First start: everything is generated under C{<data-dir>/pki}."""

    def setUp(self):
        self.data_dir = self.make_dir()
        self.config = Config(data_dir=self.data_dir)
        self.pki = PKI.ensure(self.config)
        self.directory = os.path.join(self.data_dir, "pki")

    def test_files(self):
        """The six files exist, private keys with mode 0600, nothing else left behind."""
        self.assertEqual(sorted(os.listdir(self.directory)), sorted(GENERATED))
        for name in PRIVATE:
            mode = stat.S_IMODE(os.stat(os.path.join(self.directory, name)).st_mode)
            self.assertEqual(mode, 0o600, name)

    def test_ca(self):
        """The CA is a self-signed ECDSA P-256 CA named orchd-ca, valid ten years."""
        ca = certificate(self.pki.ca_pem)
        self.assertEqual(subject(ca, NameOID.COMMON_NAME), ["orchd-ca"])
        self.assertEqual(ca.issuer, ca.subject)
        self.assertTrue(ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
        self.assertIsInstance(ca.public_key(), ec.EllipticCurvePublicKey)
        self.assertEqual(ca.public_key().curve.name, "secp256r1")
        self.assertGreaterEqual(validity(ca), datetime.timedelta(days=3650))
        ca.verify_directly_issued_by(ca)
        with open(os.path.join(self.directory, "ca.crt"), "rb") as stream:
            self.assertEqual(stream.read(), self.pki.ca_pem)

    def test_serving_certificate(self):
        """The serving certificate is the CA's, for the local names, for serverAuth, one year."""
        serving = certificate(self.pki.serving_cert_pem)
        serving.verify_directly_issued_by(certificate(self.pki.ca_pem))
        expected = {"localhost", "127.0.0.1", "::1", socket.gethostname().lower(), "10.96.0.1"}
        self.assertEqual(names_of(serving), expected)
        self.assertEqual(extended_usages(serving), [ExtendedKeyUsageOID.SERVER_AUTH])
        usage = serving.extensions.get_extension_for_class(x509.KeyUsage).value
        self.assertTrue(usage.digital_signature and usage.key_encipherment)
        self.assertFalse(usage.key_cert_sign)
        self.assertEqual(validity(serving).days, 365)
        key = serialization.load_pem_private_key(self.pki.serving_key_pem, None)
        self.assertEqual(public_der(key), public_der(serving.public_key()))
        self.assertEqual(self.pki.server_ca_pem, self.pki.ca_pem)

    def test_service_account_keys(self):
        """sa.key is RSA 2048 and sa.pub its public half, for RS256."""
        key = serialization.load_pem_private_key(self.pki.sa_private_key_pem, None)
        self.assertIsInstance(key, rsa.RSAPrivateKey)
        self.assertEqual(key.key_size, 2048)
        with open(os.path.join(self.directory, "sa.pub"), "rb") as stream:
            public = serialization.load_pem_public_key(stream.read())
        self.assertEqual(public_der(public), public_der(key))
        self.assertEqual(self.pki.sa_public_keys_pem, [self.pki.sa_public_key_pem])
        self.assertEqual(self.pki.sa_algorithm, "RS256")

    def test_client_ca_is_cluster_ca(self):
        """Without --client-ca-file, client certificates are checked against the cluster CA."""
        self.assertEqual(self.pki.client_ca_pems, [self.pki.ca_pem])
        self.assertTrue(self.pki.can_sign_clients)

    def test_bind_and_extra_names(self):
        """A specific bind address and extra names join the SANs; a wildcard does not."""
        pki = PKI.ensure(Config(data_dir=self.make_dir(), bind_address="192.0.2.7"),
                         extra_names=["api.example.org", "198.51.100.1"])
        names = names_of(certificate(pki.serving_cert_pem))
        self.assertTrue({"192.0.2.7", "api.example.org", "198.51.100.1"} <= names, names)
        wildcard = PKI.ensure(Config(data_dir=self.make_dir(), bind_address="0.0.0.0"))
        self.assertNotIn("0.0.0.0", names_of(certificate(wildcard.serving_cert_pem)))


class ReuseTests(TempDirMixin, SynchronousTestCase):
    """A restart reuses every file; nothing is regenerated."""

    def snapshot(self, directory):
        result = {}
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if os.path.isdir(path):
                continue
            with open(path, "rb") as stream:
                result[name] = (stream.read(), os.stat(path).st_mtime_ns)
        return result

    def test_restart_keeps_files(self):
        """Bytes and modification times of every file stay the same."""
        data_dir = self.make_dir()
        first = PKI.ensure(Config(data_dir=data_dir))
        first.write_admin_orchconfig(6443)
        before = self.snapshot(os.path.join(data_dir, "pki"))
        admin_before = self.snapshot(data_dir)["admin.orchconfig"]
        second = PKI.ensure(Config(data_dir=data_dir))
        second.write_admin_orchconfig(6443)
        self.assertEqual(self.snapshot(os.path.join(data_dir, "pki")), before)
        self.assertEqual(self.snapshot(data_dir)["admin.orchconfig"], admin_before)
        self.assertEqual((second.ca_pem, second.serving_key_pem, second.sa_private_key_pem),
                         (first.ca_pem, first.serving_key_pem, first.sa_private_key_pem))

    def test_new_port_keeps_credentials(self):
        """A restart on another port rewrites only the server URL of admin.orchconfig."""
        data_dir = self.make_dir()
        PKI.ensure(Config(data_dir=data_dir)).write_admin_orchconfig(6443)
        before = load_orchconfig(os.path.join(data_dir, "admin.orchconfig"))
        PKI.ensure(Config(data_dir=data_dir)).write_admin_orchconfig(7443)
        after = load_orchconfig(os.path.join(data_dir, "admin.orchconfig"))
        self.assertEqual(after.server, "https://127.0.0.1:7443")
        self.assertEqual((after.client_cert_pem, after.client_key_pem, after.ca_pem),
                         (before.client_cert_pem, before.client_key_pem, before.ca_pem))

    def test_missing_public_half_restored(self):
        """A deleted sa.pub is written again from sa.key, which is kept."""
        data_dir = self.make_dir()
        first = PKI.ensure(Config(data_dir=data_dir))
        os.unlink(os.path.join(data_dir, "pki", "sa.pub"))
        second = PKI.ensure(Config(data_dir=data_dir))
        self.assertEqual(second.sa_private_key_pem, first.sa_private_key_pem)
        self.assertTrue(os.path.exists(os.path.join(data_dir, "pki", "sa.pub")))

    def test_interrupted_first_start(self):
        """A CA key left without its certificate (a crash mid-write) is replaced."""
        data_dir = self.make_dir()
        os.makedirs(os.path.join(data_dir, "pki"))
        self.write(os.path.join(data_dir, "pki"), "ca.key", b"half-written")
        pki = PKI.ensure(Config(data_dir=data_dir))
        with open(os.path.join(data_dir, "pki", "ca.key"), "rb") as stream:
            key = serialization.load_pem_private_key(stream.read(), None)
        self.assertEqual(public_der(key), public_der(certificate(pki.ca_pem).public_key()))

    def test_certificate_without_key(self):
        """A serving certificate whose key is gone is an error, not a silent reissue."""
        data_dir = self.make_dir()
        PKI.ensure(Config(data_dir=data_dir))
        os.unlink(os.path.join(data_dir, "pki", "apiserver.key"))
        error = self.assertRaises(PKIError, PKI.ensure, Config(data_dir=data_dir))
        self.assertIn("apiserver.key", str(error))


class AdminOrchconfigTests(TempDirMixin, SynchronousTestCase):
    """admin.orchconfig: user orch-admin in system:masters, credentials embedded."""

    def setUp(self):
        self.data_dir = self.make_dir()
        self.pki = PKI.ensure(Config(data_dir=self.data_dir))
        self.path = self.pki.write_admin_orchconfig(41234)

    def test_layout(self):
        """The file has kubeconfig's shape and names, and mode 0600."""
        self.assertEqual(self.path, os.path.join(self.data_dir, "admin.orchconfig"))
        with open(self.path) as stream:
            document = yaml.safe_load(stream)
        self.assertEqual((document["apiVersion"], document["kind"]), ("v1", "Config"))
        self.assertEqual(document["current-context"], "orch-admin@orchd")
        self.assertEqual(document["contexts"][0]["context"],
                         {"cluster": "orchd", "user": "orch-admin", "namespace": "default"})
        self.assertEqual(document["clusters"][0]["name"], "orchd")
        self.assertEqual(document["users"][0]["name"], "orch-admin")
        self.assertEqual(document["preferences"], {})
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)

    def test_round_trip(self):
        """load_orchconfig returns the server, the CA and a matching admin key pair."""
        loaded = load_orchconfig(self.path)
        self.assertEqual(loaded.server, "https://127.0.0.1:41234")
        self.assertEqual(loaded.ca_pem, self.pki.ca_pem)
        self.assertIsNone(loaded.token)
        self.assertEqual(loaded.namespace, "default")
        admin = certificate(loaded.client_cert_pem)
        self.assertEqual(subject(admin, NameOID.COMMON_NAME), ["orch-admin"])
        self.assertEqual(subject(admin, NameOID.ORGANIZATION_NAME), ["system:masters"])
        self.assertEqual(extended_usages(admin), [ExtendedKeyUsageOID.CLIENT_AUTH])
        admin.verify_directly_issued_by(certificate(self.pki.ca_pem))
        key = serialization.load_pem_private_key(loaded.client_key_pem, None)
        self.assertEqual(public_der(key), public_der(admin.public_key()))

    def test_server_urls(self):
        """Wildcards are reached through 127.0.0.1, IPv6 in brackets."""
        self.assertEqual(server_url("0.0.0.0", 6443), "https://127.0.0.1:6443")
        self.assertEqual(server_url("::", 6443), "https://127.0.0.1:6443")
        self.assertEqual(server_url("", 1), "https://127.0.0.1:1")
        self.assertEqual(server_url("::1", 6443), "https://[::1]:6443")
        self.assertEqual(server_url("192.0.2.1", 6443), "https://192.0.2.1:6443")

    def test_bind_address_in_url(self):
        """The bind address, if specific, is the server of the written file."""
        pki = PKI.ensure(Config(data_dir=self.make_dir(), bind_address="::1"))
        self.assertEqual(load_orchconfig(pki.write_admin_orchconfig(6443)).server,
                         "https://[::1]:6443")


class IssueTests(TempDirMixin, SynchronousTestCase):
    """Helpers that issue more certificates from the CA."""

    def setUp(self):
        self.pki = PKI.ensure(Config(data_dir=self.make_dir()))
        self.ca = certificate(self.pki.ca_pem)

    def test_client_certificate(self):
        """A node identity: CN system:node:<name>, O system:nodes, clientAuth."""
        cert_pem, key_pem = self.pki.issue_client_certificate("system:node:n1", ["system:nodes"])
        cert = certificate(cert_pem)
        cert.verify_directly_issued_by(self.ca)
        self.assertEqual(subject(cert, NameOID.COMMON_NAME), ["system:node:n1"])
        self.assertEqual(subject(cert, NameOID.ORGANIZATION_NAME), ["system:nodes"])
        self.assertEqual(extended_usages(cert), [ExtendedKeyUsageOID.CLIENT_AUTH])
        key = serialization.load_pem_private_key(key_pem, None)
        self.assertEqual(public_der(key), public_der(cert.public_key()))

    def test_several_groups(self):
        """Every group becomes its own O value, in order."""
        cert = certificate(self.pki.issue_client_certificate("u", ["g1", "g2"])[0])
        self.assertEqual(subject(cert, NameOID.ORGANIZATION_NAME), ["g1", "g2"])

    def test_serving_certificate_for_other_host(self):
        """A serving certificate names the given hosts and addresses."""
        cert = certificate(self.pki.issue_serving_certificate(["node-1", "10.0.0.5"])[0])
        cert.verify_directly_issued_by(self.ca)
        self.assertEqual(names_of(cert), {"node-1", "10.0.0.5"})
        self.assertEqual(subject(cert, NameOID.COMMON_NAME), ["node-1"])
        self.assertEqual(extended_usages(cert), [ExtendedKeyUsageOID.SERVER_AUTH])


class GivenFilesTests(TempDirMixin, SynchronousTestCase):
    """Files named by flags are used instead of generated ones."""

    def setUp(self):
        self.given = self.make_dir()
        self.data_dir = self.make_dir()
        self.ca, self.ca_key = create_ca("given-ca")

    def test_serving_files(self):
        """--tls-cert-file/--tls-private-key-file replace apiserver.crt/key."""
        cert, key = issue_certificate(self.ca, self.ca_key, "given", names=["given.example"],
                                      server=True)
        cert_path = self.write(self.given, "tls.crt", certificate_pem(cert))
        key_path = self.write(self.given, "tls.key", private_key_pem(key))
        pki = PKI.ensure(Config(data_dir=self.data_dir, tls_cert_file=cert_path,
                                tls_private_key_file=key_path))
        self.assertEqual(pki.serving_cert_pem, certificate_pem(cert))
        self.assertEqual(pki.serving_cert_path, cert_path)
        self.assertFalse(os.path.exists(os.path.join(self.data_dir, "pki", "apiserver.crt")))
        # Not issued by the cluster CA: clients must trust the top of its chain.
        self.assertEqual(pki.server_ca_pem, certificate_pem(cert))

    def test_mismatched_serving_key(self):
        """A key that does not belong to the certificate is refused."""
        cert, _ = issue_certificate(self.ca, self.ca_key, "given", server=True)
        _, other = issue_certificate(self.ca, self.ca_key, "other", server=True)
        error = self.assertRaises(PKIError, PKI.ensure, Config(
            data_dir=self.data_dir,
            tls_cert_file=self.write(self.given, "tls.crt", certificate_pem(cert)),
            tls_private_key_file=self.write(self.given, "tls.key", private_key_pem(other))))
        self.assertIn("does not match", str(error))

    def test_client_ca_with_key(self):
        """A given client CA with its key beside it is the cluster CA and signs admin."""
        path = self.write(self.given, "ca.crt", certificate_pem(self.ca))
        self.write(self.given, "ca.key", private_key_pem(self.ca_key))
        pki = PKI.ensure(Config(data_dir=self.data_dir, client_ca_file=path))
        self.assertEqual(pki.ca_pem, certificate_pem(self.ca))
        self.assertEqual(pki.client_ca_pems, [certificate_pem(self.ca)])
        self.assertFalse(os.path.exists(os.path.join(self.data_dir, "pki", "ca.crt")))
        certificate(pki.serving_cert_pem).verify_directly_issued_by(self.ca)
        admin = load_orchconfig(pki.write_admin_orchconfig(6443))
        certificate(admin.client_cert_pem).verify_directly_issued_by(self.ca)

    def test_client_ca_without_key(self):
        """Without its key the given CA only verifies clients; no admin file is written."""
        path = self.write(self.given, "clients.pem", certificate_pem(self.ca))
        pki = PKI.ensure(Config(data_dir=self.data_dir, client_ca_file=path))
        self.assertEqual(pki.client_ca_pems, [certificate_pem(self.ca)])
        self.assertFalse(pki.can_sign_clients)
        self.assertIsNone(pki.write_admin_orchconfig(6443))
        self.assertFalse(os.path.exists(os.path.join(self.data_dir, "admin.orchconfig")))
        self.assertRaises(PKIError, pki.issue_client_certificate, "u")
        # Serving still works, from a generated CA.
        certificate(pki.serving_cert_pem).verify_directly_issued_by(certificate(pki.ca_pem))
        self.assertNotEqual(pki.ca_pem, certificate_pem(self.ca))

    def test_service_account_files(self):
        """Given signing and verifying keys are used; the signer's key verifies too."""
        signing = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        other = ec.generate_private_key(ec.SECP256R1())
        private_path = self.write(self.given, "sa.key", private_key_pem(signing))
        public_path = self.write(self.given, "sa.pub", other.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        pki = PKI.ensure(Config(data_dir=self.data_dir,
                                service_account_private_key_file=private_path,
                                service_account_key_file=public_path))
        loaded = serialization.load_pem_private_key(pki.sa_private_key_pem, None)
        self.assertEqual(public_der(loaded), public_der(signing))
        verifying = [public_der(serialization.load_pem_public_key(pem))
                     for pem in pki.sa_public_keys_pem]
        self.assertEqual(verifying, [public_der(signing), public_der(other)])
        self.assertFalse(os.path.exists(os.path.join(self.data_dir, "pki", "sa.key")))

    def test_unreadable_given_file(self):
        """A given file that is not PEM is refused with its name."""
        path = self.write(self.given, "junk.crt", b"not a certificate")
        error = self.assertRaises(PKIError, PKI.ensure,
                                  Config(data_dir=self.data_dir, client_ca_file=path))
        self.assertIn(path, str(error))


class OrchconfigFileTests(TempDirMixin, SynchronousTestCase):
    """Reading orchconfig files written by others."""

    def test_relative_paths(self):
        """Path fields are read relative to the file's directory."""
        directory = self.make_dir()
        self.write(directory, "ca.pem", b"CA")
        self.write(directory, "token", b"abcdef.0123456789abcdef\n")
        document = {
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "k", "cluster": {"server": "https://h:1",
                                                   "certificate-authority": "ca.pem"}}],
            "users": [{"name": "u", "user": {"tokenFile": "token"}}],
            "contexts": [{"name": "c",
                          "context": {"cluster": "k", "user": "u", "namespace": "ns"}}],
        }
        path = self.write(directory, "config", yaml.safe_dump(document).encode())
        loaded = load_orchconfig(path)
        self.assertEqual((loaded.server, loaded.ca_pem, loaded.token, loaded.namespace),
                         ("https://h:1", b"CA", "abcdef.0123456789abcdef", "ns"))

    def test_data_and_path_both_set(self):
        """A path field and a -data field for the same thing are refused."""
        directory = self.make_dir()
        document = {
            "current-context": "c",
            "clusters": [{"name": "k", "cluster": {"server": "https://h:1",
                                                   "certificate-authority": "ca.pem",
                                                   "certificate-authority-data": "Q0E="}}],
            "contexts": [{"name": "c", "context": {"cluster": "k"}}],
        }
        path = self.write(directory, "config", yaml.safe_dump(document).encode())
        error = self.assertRaises(OrchConfigError, load_orchconfig, path)
        self.assertIn("both", str(error))

    def test_unknown_context(self):
        """A current-context that names nothing is an error naming the file."""
        directory = self.make_dir()
        path = self.write(directory, "config", b"current-context: nope\ncontexts: []\n")
        error = self.assertRaises(OrchConfigError, load_orchconfig, path)
        self.assertIn(path, str(error))

    def test_cluster_info(self):
        """A cluster-info document (no users, no context) yields its server and CA."""
        directory = self.make_dir()
        path = self.write(directory, "info",
                          dump_orchconfig(cluster_info_document("https://h:2", b"CA")).encode())
        loaded = load_orchconfig(path)
        self.assertEqual((loaded.server, loaded.ca_pem, loaded.client_cert_pem),
                         ("https://h:2", b"CA", None))

    def test_token_written(self):
        """A token passed to write_orchconfig comes back from load_orchconfig."""
        path = os.path.join(self.make_dir(), "config")
        write_orchconfig(path, "https://h:3", b"CA", token="abcdef.0123456789abcdef")
        self.assertEqual(load_orchconfig(path).token, "abcdef.0123456789abcdef")

    def test_ipv6_address_in_names(self):
        """IP addresses in issued names are IP SANs, not DNS names."""
        ca, key = create_ca()
        cert, _ = issue_certificate(ca, key, "x", names=["fd00::1"], server=True)
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        self.assertEqual(san.get_values_for_type(x509.IPAddress), [ipaddress.ip_address("fd00::1")])
