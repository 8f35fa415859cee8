# -*- test-case-name: tests.orchlet.test_servingcert -*-
"""
The serving certificate of a node agent on a machine without the cluster CA's key.

The API server reaches node agents (C{nodes/proxy}, container logs) over
TLS and verifies them against the cluster CA, so a certificate from a CA
the agent made for itself is refused ("certificate verify failed"). As
upstream's kubelet does with C{serverTLSBootstrap}, an agent started with
C{--orchlet-only} asks for one with a CertificateSigningRequest to
C{orch.io/orchlet-serving}, sent with its own client certificate so that
the approver sees the node asking for itself (see
L{orchd.controllers.csrapproving}). It names what the agent is reached
at: its node name, its bind address (unless a wildcard), and
C{localhost}/C{127.0.0.1} when it binds loopback. The host's name, when it
differs from the node name (C{--hostname-override}), is left out: nothing
the approver can check vouches for it, so it would hold every request for
a person. The certificate is stored beside the client one, 0600, and
reused while valid, issued by the cluster CA and covering those names.
The endpoint serves the leaf alone: the API server has the CA.
"""

import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from orchd.tls.certs import issued_by, private_key_pem, subject_alternative_names
from orchd.auth.csr import DIGITAL_SIGNATURE, SERVER_AUTH, SIGNER_ORCHLET_SERVING
from orchd.auth.csr import node_serving_request
from orchd.orchlet.bootstrap import POLL_INTERVAL, WAIT, await_certificate, create_csr

#: Usages asked for: an ECDSA key needs no key encipherment.
USAGES = (DIGITAL_SIGNATURE, SERVER_AUTH)
CSR_PREFIX = "node-serving-csr-"


def serving_paths(root_dir):
    """Where a node agent keeps its serving C{(certificate, key)}."""
    pki = os.path.join(root_dir, "pki")
    return os.path.join(pki, "orchlet.crt"), os.path.join(pki, "orchlet.key")


def _ip(text):
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def serving_names(node_name, bind_address):
    """The host names and IP addresses a node agent's serving certificate names."""
    names = [node_name]
    address = _ip(bind_address or "")
    if address is not None and not address.is_unspecified:
        names.append(str(address))
        if address.is_loopback:
            names += ["localhost", "127.0.0.1"]
    return list(dict.fromkeys(names))


def usable(cert_pem, names, ca_pems):
    """
    Whether stored serving certificate C{cert_pem} is issued by one of
    C{ca_pems} (when any are known) and covers every one of C{names}.
    """
    try:
        certificate = x509.load_pem_x509_certificate(cert_pem)
        cas = [ca for pem in ca_pems for ca in x509.load_pem_x509_certificates(pem)]
    except ValueError:
        return False
    if cas and not any(issued_by(certificate, ca) for ca in cas):
        return False
    try:
        present = set(certificate.extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        return False
    return set(subject_alternative_names(names)) <= present


async def request_serving_certificate(reactor, api, node_name, names, log, wait=WAIT,
                                      interval=POLL_INTERVAL):
    """
    C{(certificate PEM, key PEM)}: a new key and its certificate, through a CSR sent with C{api}.

    @raise orchd.orchlet.bootstrap.JoinError: the request was refused, denied,
        failed, or not signed within C{wait} seconds.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    name = await create_csr(api, CSR_PREFIX, node_serving_request(node_name, key, names),
                            SIGNER_ORCHLET_SERVING, USAGES)
    log.info("Asked for a serving certificate for {names} with CertificateSigningRequest "
             "{name}; waiting for its approval and signature", names=", ".join(names), name=name)
    certificate = await await_certificate(reactor, api, name, wait, interval)
    log.info("Serving certificate issued through {name}", name=name)
    return certificate, private_key_pem(key)
