# -*- test-case-name: tests.app.test_pki -*-
"""
X.509 building blocks: keys, a self-signed CA, certificates it issues, PEM.

Kept apart from C{orchd.app.pki} (which decides what lives where on disk) so
that other signers, such as a certificate-signing-request controller, can
issue certificates without touching files.
"""

import datetime
import ipaddress

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_NAME = "orchd-ca"
CA_DAYS = 3650
LEAF_DAYS = 365
#: Certificates start a little in the past so a peer whose clock lags accepts them.
_BACKDATE = datetime.timedelta(minutes=5)


def new_private_key():
    """An ECDSA P-256 key: small, fast, and accepted by every client orchd serves."""
    return ec.generate_private_key(ec.SECP256R1())


def private_key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def public_key_pem(key):
    return key.public_bytes(serialization.Encoding.PEM,
                            serialization.PublicFormat.SubjectPublicKeyInfo)


def certificate_pem(certificate):
    return certificate.public_bytes(serialization.Encoding.PEM)


def same_key(public_a, public_b):
    der = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return public_a.public_bytes(*der) == public_b.public_bytes(*der)


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def create_ca(common_name=CA_NAME, days=CA_DAYS):
    """A self-signed CA certificate and its new key: C{(certificate, key)}."""
    key = new_private_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, key_cert_sign=True, crl_sign=True,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return certificate, key


def subject_alternative_names(names):
    """Host names and IP addresses, each once, as SAN entries."""
    entries, seen = [], set()
    for name in names:
        name = str(name).strip().lower()
        if not name or name in seen:
            continue
        seen.add(name)
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return entries


def issue_certificate(ca_certificate, ca_key, common_name, organizations=(), names=(),
                      server=False, client=False, days=LEAF_DAYS):
    """
    A new key and a certificate for it, signed by the CA: C{(certificate, key)}.

    @param organizations: subject O values; for client certificates they are
        the user's groups.
    @param names: host names and IP addresses for the SAN extension.
    @param server: add C{serverAuth} to the extended key usage.
    @param client: add C{clientAuth} to the extended key usage.
    """
    key = new_private_key()
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)
                         for organization in organizations]
                        + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) \
        + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject).issuer_name(ca_certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(min(now + datetime.timedelta(days=days),
                             ca_certificate.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                     key_encipherment=True, data_encipherment=False,
                                     key_agreement=False, key_cert_sign=False, crl_sign=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            ca_certificate.public_key()), critical=False)
    )
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    alternative_names = subject_alternative_names(names)
    if alternative_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alternative_names),
                                        critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def split_pem_certificates(data):
    """Each certificate of a PEM bundle as its own PEM bytes, in file order."""
    return [certificate_pem(certificate) for certificate in x509.load_pem_x509_certificates(data)]


def pem_blocks(data):
    """The C{-----BEGIN ...-----} to C{-----END ...-----} blocks of a PEM file."""
    blocks, position = [], 0
    while (start := data.find(b"-----BEGIN ", position)) >= 0:
        end = data.find(b"-----END ", start)
        close = data.find(b"-----", end + len(b"-----END ")) if end >= 0 else -1
        if close < 0:
            break
        blocks.append(data[start:close + len(b"-----")] + b"\n")
        position = close + len(b"-----")
    return blocks


def issued_by(certificate, ca_certificate):
    try:
        certificate.verify_directly_issued_by(ca_certificate)
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False
