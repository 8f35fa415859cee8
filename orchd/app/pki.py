# -*- test-case-name: tests.app.test_pki -*-
"""
The cluster's keys and certificates: made on first start, reused ever after.

Under C{<data-dir>/pki}: the CA (C{ca.crt}/C{ca.key}, ECDSA P-256, ten
years), the API server's serving certificate (C{apiserver.crt}/C{.key}, one
year) and the service-account signing pair (C{sa.key}/C{sa.pub}, RSA 2048
for RS256). C{<data-dir>/admin.orchconfig} embeds a client certificate for
C{orch-admin} in C{system:masters}. Files given by flags replace the
generated ones. Nothing that exists is regenerated: a restart must keep
every issued credential valid. Private keys are written 0600, atomically.

L{PKI.ensure} does it all and returns the PEM material a TLS layer needs;
L{PKI.write_admin_orchconfig} runs once the listening port is known.
"""

import ipaddress
import os
import socket

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from twisted.logger import Logger

from orchd.tls.certs import (
    LEAF_DAYS, certificate_pem, create_ca, issue_certificate, issued_by, pem_blocks,
    private_key_pem, public_key_pem, same_key, split_pem_certificates, subject_alternative_names,
)
from orchd.client.orchconfig import (
    ADMIN_USER, load_orchconfig, server_url, set_orchconfig_server, write_file_atomically,
    write_orchconfig,
)

__all__ = ["PKI", "PKIError", "create_ca", "issue_certificate", "load_orchconfig",
           "write_orchconfig", "server_url", "split_pem_certificates"]

APISERVER_NAME = "orchd-apiserver"
ADMIN_GROUP = "system:masters"


class PKIError(ValueError):
    """A key or certificate is missing, unreadable or inconsistent; one line for the user."""


def _read(path, what):
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except OSError as error:
        raise PKIError(f"cannot read {what} {path}: {error.strerror}") from None


def _load_certificates(path, what):
    try:
        return x509.load_pem_x509_certificates(_read(path, what))
    except ValueError:
        raise PKIError(f"{what} {path} holds no PEM certificate") from None


def _load_private_key(path, what):
    try:
        return serialization.load_pem_private_key(_read(path, what), password=None)
    except (ValueError, TypeError):
        raise PKIError(f"{what} {path} is not an unencrypted PEM private key") from None


def _load_public_keys(path, what):
    """Public keys of a PEM file; private keys in it count for their public halves."""
    blocks = pem_blocks(_read(path, what))
    if not blocks:
        raise PKIError(f"{what} {path} holds no PEM key")
    return [_public_of(block, path, what) for block in blocks]


def _public_of(block, path, what):
    try:
        if b"PRIVATE KEY" in block.split(b"\n", 1)[0]:
            return serialization.load_pem_private_key(block, password=None).public_key()
        return serialization.load_pem_public_key(block)
    except (ValueError, TypeError):
        raise PKIError(f"{what} {path} holds a block that is not a PEM key") from None


def _write(path, data):
    # Certificates too are owner-only: everything under the data dir is.
    write_file_atomically(path, data, 0o600)


def _service_account_algorithm(key):
    """The JWT algorithm a service-account signing key implies."""
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        by_curve = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
        if key.curve.name in by_curve:
            return by_curve[key.curve.name]
    raise PKIError("the service-account signing key must be RSA or ECDSA P-256/P-384/P-521")


def _setting(config, name, default=None):
    """Read C{name} from a L{Config} or any object with the same attribute names."""
    return getattr(config, name, default)


def _wildcard(address):
    return address in (None, "", "0.0.0.0", "::")


class PKI:
    """
    The credentials of one orchd: where they are and their PEM bytes.

    @ivar ca_pem: the cluster CA; it signs serving certificates (and client
        certificates unless C{--client-ca-file} names another CA).
    @ivar server_ca_pem: what clients trust for C{serving_cert_pem}: the
        cluster CA, or for a given C{--tls-cert-file} not issued by it, the
        last certificate of that file's chain.
    @ivar serving_cert_pem: the serving certificate file's content (leaf first,
        then any chain); C{serving_chain_pems} splits it.
    @ivar client_ca_pems: the CAs client certificates are verified against.
    @ivar can_sign_clients: False when C{--client-ca-file} is given without
        its key (expected next to it as C{<name>.key}): no admin orchconfig and
        no node client certificate can be issued then.
    @ivar sa_private_key_pem: signs service-account tokens with C{sa_algorithm}.
    @ivar sa_public_keys_pem: every key that verifies them (the signing key's first).
    """

    log = Logger()

    def __init__(self, **attributes):
        self.__dict__.update(attributes)

    @classmethod
    def ensure(cls, config, extra_names=()):
        """
        Load every credential, generating what is neither given nor on disk.

        @param config: a L{orchd.app.config.Config} (or an object with its
            attribute names; only C{data_dir} is required).
        @param extra_names: more host names or IP addresses for a newly
            generated serving certificate.
        @raise PKIError: for unreadable or mismatched given files, or a
            half-present pair that cannot be completed.
        """
        data_dir = config.data_dir
        directory = os.path.join(data_dir, "pki")
        os.makedirs(directory, mode=0o700, exist_ok=True)

        # A given client CA with its key is the cluster CA; without its key it
        # only verifies clients, and a generated CA signs serving certificates.
        client_ca_path = _setting(config, "client_ca_file")
        client_signer = None
        if client_ca_path:
            client_cas = _load_certificates(client_ca_path, "--client-ca-file")
            client_signer = cls._given_ca_signer(client_ca_path, client_cas)
        if client_signer is not None:
            (ca_certificate, ca_key), ca_cert_path = client_signer, client_ca_path
            ca_key_path = os.path.splitext(client_ca_path)[0] + ".key"
        else:
            ca_certificate, ca_key, ca_cert_path, ca_key_path = cls._cluster_ca(directory)
        if not client_ca_path:
            client_cas = [ca_certificate]
            client_ca_path = ca_cert_path
            client_signer = (ca_certificate, ca_key) if ca_key is not None else None

        names = ["localhost", "127.0.0.1", "::1", socket.gethostname()]
        bind_address = _setting(config, "bind_address", "127.0.0.1")
        if not _wildcard(bind_address):
            names.append(bind_address)
        service_range = _setting(config, "service_cluster_ip_range")
        if service_range is not None and ipaddress.ip_network(service_range).num_addresses > 1:
            # The first service IP is the API server's own in-cluster address.
            names.append(str(ipaddress.ip_network(service_range)[1]))
        names.extend(extra_names)
        serving = cls._serving(config, directory, ca_certificate, ca_key, names)

        sa = cls._service_account(config, directory)
        return cls(
            data_dir=data_dir,
            directory=directory,
            bind_address=bind_address,
            ca_cert_path=ca_cert_path,
            ca_key_path=ca_key_path,
            ca_pem=certificate_pem(ca_certificate),
            ca_certificate=ca_certificate,
            ca_key=ca_key,
            client_ca_path=client_ca_path,
            client_ca_pems=[certificate_pem(certificate) for certificate in client_cas],
            client_signer=client_signer,
            can_sign_clients=client_signer is not None,
            admin_orchconfig_path=os.path.join(data_dir, "admin.orchconfig"),
            **serving, **sa,
        )

    @classmethod
    def _given_ca_signer(cls, path, certificates):
        """The given client CA and its key, if the key lies next to it as C{<name>.key}."""
        key_path = os.path.splitext(path)[0] + ".key"
        if key_path == path or not os.path.exists(key_path):
            cls.log.info("No key {key_path} beside --client-ca-file: client certificates "
                         "cannot be issued", key_path=key_path)
            return None
        key = _load_private_key(key_path, "client CA key")
        for certificate in certificates:
            if same_key(certificate.public_key(), key.public_key()):
                return certificate, key
        raise PKIError(f"{key_path} matches no certificate of --client-ca-file {path}")

    @classmethod
    def _cluster_ca(cls, directory):
        """Load or create C{ca.crt}/C{ca.key}; the key is None if only the certificate exists."""
        cert_path = os.path.join(directory, "ca.crt")
        key_path = os.path.join(directory, "ca.key")
        if os.path.exists(cert_path):
            certificate = _load_certificates(cert_path, "CA certificate")[0]
            if not os.path.exists(key_path):
                cls.log.warn("{key_path} is missing: certificates cannot be issued",
                             key_path=key_path)
                return certificate, None, cert_path, None
            key = _load_private_key(key_path, "CA key")
            if not same_key(certificate.public_key(), key.public_key()):
                raise PKIError(f"{key_path} does not match {cert_path}")
            return certificate, key, cert_path, key_path
        # A key without its certificate is what an interrupted first start
        # leaves: nothing can have been signed with it yet.
        certificate, key = create_ca()
        _write(key_path, private_key_pem(key))
        _write(cert_path, certificate_pem(certificate))
        cls.log.info("Generated cluster CA {path}", path=cert_path)
        return certificate, key, cert_path, key_path

    @classmethod
    def _serving(cls, config, directory, ca_certificate, ca_key, names):
        """The serving certificate: given, on disk, or issued now by the CA."""
        cert_path = _setting(config, "tls_cert_file")
        key_path = _setting(config, "tls_private_key_file")
        given = cert_path is not None
        if not given:
            cert_path = os.path.join(directory, "apiserver.crt")
            key_path = os.path.join(directory, "apiserver.key")
            if not os.path.exists(cert_path):
                if ca_key is None:
                    raise PKIError(f"cannot issue {cert_path}: the CA key is not available")
                certificate, key = issue_certificate(ca_certificate, ca_key, APISERVER_NAME,
                                                     names=names, server=True)
                _write(key_path, private_key_pem(key))
                _write(cert_path, certificate_pem(certificate))
                cls.log.info("Generated serving certificate {path}", path=cert_path)
            elif not os.path.exists(key_path):
                raise PKIError(f"{cert_path} exists but {key_path} is missing")
        chain = _load_certificates(cert_path, "serving certificate")
        key = _load_private_key(key_path, "serving key")
        if not same_key(chain[0].public_key(), key.public_key()):
            raise PKIError(f"{key_path} does not match {cert_path}")
        if not given:
            cls._warn_missing_names(cert_path, chain[0], names)
        trust = ca_certificate if issued_by(chain[0], ca_certificate) else chain[-1]
        return {
            "serving_cert_path": cert_path,
            "serving_key_path": key_path,
            "serving_cert_pem": b"".join(certificate_pem(c) for c in chain),
            "serving_chain_pems": [certificate_pem(c) for c in chain],
            "serving_key_pem": private_key_pem(key),
            "server_ca_pem": certificate_pem(trust),
        }

    @classmethod
    def _warn_missing_names(cls, path, certificate, names):
        """A reused certificate is never reissued, but a name it lacks is worth a warning."""
        try:
            extension = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
            san = extension.value
            present = {str(value).lower() for value in san.get_values_for_type(x509.DNSName)}
            present |= {str(value) for value in san.get_values_for_type(x509.IPAddress)}
        except x509.ExtensionNotFound:
            present = set()
        wanted = {str(entry.value).lower() for entry in subject_alternative_names(names)}
        missing = sorted(wanted - present)
        if missing:
            cls.log.warn("{path} does not cover {missing}; delete it (and its key) to reissue",
                         path=path, missing=", ".join(missing))

    @classmethod
    def _service_account(cls, config, directory):
        """The token signing key (given, on disk or new RSA 2048) and the verifying keys."""
        private_path = _setting(config, "service_account_private_key_file")
        public_path = _setting(config, "service_account_key_file")
        if private_path is not None:
            private_key = _load_private_key(private_path, "--service-account-private-key-file")
            own_public_path = None
        else:
            private_path = os.path.join(directory, "sa.key")
            own_public_path = os.path.join(directory, "sa.pub")
            if os.path.exists(private_path):
                private_key = _load_private_key(private_path, "service-account key")
            else:
                private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
                _write(private_path, private_key_pem(private_key))
                cls.log.info("Generated service-account signing key {path}", path=private_path)
            if not os.path.exists(own_public_path):
                _write(own_public_path, public_key_pem(private_key.public_key()))
            elif not same_key(_load_public_keys(own_public_path, "service-account key")[0],
                               private_key.public_key()):
                cls.log.warn("{path} does not match the signing key; tokens are verified "
                             "with the signing key's public half", path=own_public_path)
        algorithm = _service_account_algorithm(private_key)
        own_public = private_key.public_key()
        verifying = [own_public]
        if public_path is not None:
            for key in _load_public_keys(public_path, "--service-account-key-file"):
                if not any(same_key(key, known) for known in verifying):
                    verifying.append(key)
        return {
            "sa_private_key_path": private_path,
            "sa_public_key_path": public_path or own_public_path,
            "sa_private_key_pem": private_key_pem(private_key),
            "sa_public_key_pem": public_key_pem(own_public),
            "sa_public_keys_pem": [public_key_pem(key) for key in verifying],
            "sa_algorithm": algorithm,
        }

    def issue_client_certificate(self, common_name, organizations=(), days=LEAF_DAYS):
        """
        A client certificate for user C{common_name} in groups C{organizations}.

        @return: C{(certificate_pem, key_pem)}.
        @raise PKIError: if the client CA's key is not available.
        """
        if self.client_signer is None:
            raise PKIError("cannot issue client certificates: the client CA's key is not available")
        ca_certificate, ca_key = self.client_signer
        certificate, key = issue_certificate(ca_certificate, ca_key, common_name,
                                             organizations=organizations, client=True, days=days)
        return certificate_pem(certificate), private_key_pem(key)

    def issue_serving_certificate(self, names, common_name=None, days=LEAF_DAYS):
        """
        A serving certificate from the cluster CA for other hosts (a node agent).

        @param names: host names and IP addresses; the first is the CN by default.
        @return: C{(certificate_pem, key_pem)}.
        @raise PKIError: if the CA key is not available.
        """
        names = list(names)
        if self.ca_key is None:
            raise PKIError("cannot issue serving certificates: the CA key is not available")
        certificate, key = issue_certificate(self.ca_certificate, self.ca_key,
                                             common_name or names[0], names=names, server=True,
                                             days=days)
        return certificate_pem(certificate), private_key_pem(key)

    def write_admin_orchconfig(self, port, bind_address=None):
        """
        Write C{<data-dir>/admin.orchconfig} for the API server listening on C{port}.

        Called once the port is known (C{--secure-port=0} picks it at listen
        time). An existing file keeps its credentials; only its server URL is
        updated if the address or port changed.

        @return: the file's path, or None when no admin certificate can be
            signed (client CA given without its key); that case is logged.
        """
        path = self.admin_orchconfig_path
        server = server_url(bind_address if bind_address is not None else self.bind_address, port)
        if os.path.exists(path):
            if set_orchconfig_server(path, server):
                self.log.info("Pointed {path} at {server}", path=path, server=server)
            return path
        if not self.can_sign_clients:
            self.log.warn("Not writing {path}: the client CA's key is not available to sign "
                          "an admin certificate", path=path)
            return None
        cert_pem, key_pem = self.issue_client_certificate(ADMIN_USER, [ADMIN_GROUP])
        write_orchconfig(path, server, self.server_ca_pem, cert_pem, key_pem)
        self.log.info("Wrote {path} for user {user} at {server}", path=path, user=ADMIN_USER,
                      server=server)
        return path
