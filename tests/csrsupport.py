"""
CertificateSigningRequest bodies for tests: a node's client certificate
request (what a joining node sends), a node's serving certificate request
and any other client request.
"""

import base64

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from orchd.tls.certs import subject_alternative_names
from orchd.auth.csr import (
    SIGNER_KUBE_APISERVER_CLIENT, SIGNER_KUBE_APISERVER_CLIENT_ORCHLET, SIGNER_ORCHLET_SERVING,
    node_client_request,
)

CSRS = "/apis/certificates.orch.io/v1/certificatesigningrequests"
NODE_USAGES = ("digital signature", "client auth")
SERVING_USAGES = ("digital signature", "server auth")


def csr_body(name, pem, signer, usages, expiration_seconds=None):
    spec = {"request": base64.b64encode(pem).decode(), "signerName": signer,
            "usages": list(usages)}
    if expiration_seconds is not None:
        spec["expirationSeconds"] = expiration_seconds
    return {"apiVersion": "certificates.orch.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name}, "spec": spec}


def node_csr(name, node, key=None, **options):
    """
    The CSR a node agent sends for its client certificate: C{(body, key)}.

    @param key: the node's private key; a new ECDSA P-256 key by default.
    @param options: C{expiration_seconds}.
    """
    key = key or ec.generate_private_key(ec.SECP256R1())
    pem = node_client_request(node, key)
    return csr_body(name, pem, SIGNER_KUBE_APISERVER_CLIENT_ORCHLET, NODE_USAGES,
                    **options), key


def client_csr(name, common_name, organizations=(), signer=SIGNER_KUBE_APISERVER_CLIENT,
               usages=("client auth",), dns_names=(), **options):
    """A CSR for any client certificate: C{(body, key)}."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, o)
                         for o in organizations]
                        + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = x509.CertificateSigningRequestBuilder().subject_name(subject)
    if dns_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False)
    pem = builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    return csr_body(name, pem, signer, usages, **options), key


def serving_csr(name, node, names=None, usages=SERVING_USAGES, organizations=("system:nodes",),
                common_name=None, other_names=()):
    """
    A node's serving certificate request: C{(body, key)}.

    @param names: host names and IPs; C{[node, "127.0.0.1"]} by default.
    @param other_names: more C{x509.GeneralName}s (e-mail, URI) for requests that must fail.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, o)
                         for o in organizations]
                        + [x509.NameAttribute(NameOID.COMMON_NAME,
                                              common_name or f"system:node:{node}")])
    builder = x509.CertificateSigningRequestBuilder().subject_name(subject)
    entries = subject_alternative_names([node, "127.0.0.1"] if names is None else names)
    entries += list(other_names)
    if entries:
        builder = builder.add_extension(x509.SubjectAlternativeName(entries), critical=False)
    pem = builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    return csr_body(name, pem, SIGNER_ORCHLET_SERVING, usages), key


def approved(csr, kind="Approved", reason="KubectlApprove"):
    """C{csr} with an approval condition added, for a PUT to C{approval}."""
    status = dict(csr.get("status") or {})
    status["conditions"] = list(status.get("conditions") or []) + [
        {"type": kind, "status": "True", "reason": reason, "message": "by a test"}]
    return dict(csr, status=status)


def issued_certificate(csr):
    """The certificate in C{csr}'s status, or None."""
    encoded = (csr.get("status") or {}).get("certificate")
    if not encoded:
        return None
    return x509.load_pem_x509_certificate(base64.b64decode(encoded))
