# -*- test-case-name: tests.orchlet.test_bootstrap -*-
"""
Joining a cluster with a bootstrap token: from a token to a node identity.

A new node knows a server URL and a token, nothing it can trust. It reads
C{cluster-info} without verifying TLS; the detached JWS that the bootstrap
signer made with this very token proves the content (server, CA) came from
someone holding the token. It recomputes the signature and compares it in
constant time. From then on it trusts that CA, asks for a client
certificate (C{system:node:<name>} in C{system:nodes}) with a CSR sent
under the token, waits for the approver and signer, and stores the key,
the certificate and an orchconfig under its root directory, 0600, so later
starts need no token.
"""

import base64
import hmac
import os
import secrets

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from twisted.internet.task import deferLater
from twisted.logger import Logger

from orchd.api import yamldecode
from orchd.tls.certs import private_key_pem
from orchd.auth.csr import SIGNER_KUBE_APISERVER_CLIENT_ORCHLET, node_client_request
from orchd.auth.authz.node import NODE_USER_PREFIX
from orchd.auth.clusterinfo import KUBECONFIG, NAME, NAMESPACE, SIGNATURE_PREFIX, detached_jws
from orchd.client.orchconfig import write_file_atomically, write_orchconfig
from orchd.orchlet.apiclient import APIClient

CLUSTER_INFO = f"/api/v1/namespaces/{NAMESPACE}/configmaps/{NAME}"
CSRS = "/apis/certificates.orch.io/v1/certificatesigningrequests"
POLL_INTERVAL = 0.5
#: Seconds to wait for the signature on cluster-info, then for the certificate.
WAIT = 300.0

log = Logger()


class JoinError(Exception):
    """Joining failed; the message says at which step."""


def verify_cluster_info(configmap, token):
    """
    The server URL and CA PEM of a C{cluster-info} ConfigMap signed for C{token}.

    @raise JoinError: no signature for this token, a wrong one, or no CA.
    """
    data = (configmap or {}).get("data") or {}
    token_id = token.split(".", 1)[0]
    payload, signature = data.get(KUBECONFIG), data.get(SIGNATURE_PREFIX + token_id)
    if not payload or not signature:
        raise JoinError(f"cluster-info is not signed for token id {token_id!r}")
    if not hmac.compare_digest(detached_jws(payload, token).encode(), signature.encode()):
        raise JoinError(f"the cluster-info signature for token id {token_id!r} is invalid")
    try:
        cluster = yamldecode.load(payload)[0]["clusters"][0]["cluster"]
        ca_pem = base64.b64decode(cluster["certificate-authority-data"])
        x509.load_pem_x509_certificates(ca_pem)
        return cluster["server"], ca_pem
    except (LookupError, TypeError, ValueError) as e:  # YAMLDecodeError is a ValueError
        raise JoinError(f"cluster-info holds no usable cluster entry: {e}") from None


def credential_paths(root_dir):
    """Where a joined node keeps C{(certificate, key, orchconfig)}."""
    pki = os.path.join(root_dir, "pki")
    return (os.path.join(pki, "orchlet-client.crt"), os.path.join(pki, "orchlet-client.key"),
            os.path.join(root_dir, "orchlet.orchconfig"))


async def _poll(reactor, read, what, wait, interval):
    """The first true result of C{await read()} within C{wait} seconds."""
    deadline = reactor.seconds() + wait
    while True:
        result = await read()
        if result:
            return result
        if reactor.seconds() >= deadline:
            raise JoinError(f"timed out waiting for {what}")
        await deferLater(reactor, interval, lambda: None)


async def fetch_trust(reactor, server, token, wait=WAIT, interval=POLL_INTERVAL):
    """C{(server URL, CA PEM)} from a C{cluster-info} verified with C{token}."""
    untrusted = APIClient(reactor, server, None, verify=False)
    token_id = token.split(".", 1)[0]
    try:
        async def signed():
            code, body = await untrusted.request("GET", CLUSTER_INFO)
            if code != 200:
                log.warn("Cannot read cluster-info: {code} {body}", code=code, body=body)
                return None
            return body if SIGNATURE_PREFIX + token_id in (body.get("data") or {}) else None
        configmap = await _poll(reactor, signed, "a signed cluster-info", wait, interval)
    finally:
        await untrusted.close()
    return verify_cluster_info(configmap, token)


async def create_csr(api, prefix, pem, signer, usages):
    """Send a CertificateSigningRequest for PEM request C{pem}; its name."""
    name = f"{prefix}{secrets.token_hex(8)}"
    body = {"apiVersion": "certificates.orch.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": base64.b64encode(pem).decode(), "signerName": signer,
                     "usages": list(usages)}}
    code, created = await api.request("POST", CSRS, body)
    if code != 201:
        raise JoinError(f"cannot create CertificateSigningRequest {name}: {code} {created}")
    return name


async def await_certificate(reactor, api, name, wait=WAIT, interval=POLL_INTERVAL):
    """
    The PEM certificate issued for CertificateSigningRequest C{name}.

    @raise JoinError: when it is denied or failed, or nothing comes within C{wait} seconds.
    """
    async def issued():
        code, csr = await api.request("GET", f"{CSRS}/{name}")
        if code != 200:
            raise JoinError(f"cannot read CertificateSigningRequest {name}: {code} {csr}")
        status = csr.get("status") or {}
        for condition in status.get("conditions") or ():
            if condition.get("type") in ("Denied", "Failed") and condition.get("status") == "True":
                raise JoinError(f"CertificateSigningRequest {name} {condition['type'].lower()}: "
                                f"{condition.get('message', '')}")
        return status.get("certificate")
    certificate = await _poll(reactor, issued, f"CertificateSigningRequest {name}", wait, interval)
    return base64.b64decode(certificate)


async def request_certificate(reactor, api, node_name, wait=WAIT, interval=POLL_INTERVAL):
    """C{(certificate PEM, key PEM)} for C{node_name}, through a CSR sent with C{api}."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = await create_csr(api, "node-csr-", node_client_request(node_name, key),
                            SIGNER_KUBE_APISERVER_CLIENT_ORCHLET,
                            ["digital signature", "client auth"])
    return await await_certificate(reactor, api, name, wait, interval), private_key_pem(key)


async def join(reactor, server, token, node_name, root_dir, wait=WAIT, interval=POLL_INTERVAL):
    """
    Join: verified trust, a signed client certificate, files stored.

    @return: the path of the orchconfig the agent runs with.
    @raise JoinError: at the first step that fails.
    """
    api_server, ca_pem = await fetch_trust(reactor, server, token, wait, interval)
    log.info("Trusting the CA of cluster-info; API server {server}", server=api_server)
    bootstrap = APIClient(reactor, api_server, ca_pem, token=token)
    try:
        cert_pem, key_pem = await request_certificate(reactor, bootstrap, node_name, wait,
                                                      interval)
    finally:
        await bootstrap.close()
    cert_path, key_path, orchconfig_path = credential_paths(root_dir)
    os.makedirs(os.path.dirname(cert_path), mode=0o700, exist_ok=True)
    write_file_atomically(key_path, key_pem, 0o600)
    write_file_atomically(cert_path, cert_pem, 0o600)
    write_orchconfig(orchconfig_path, api_server, ca_pem, cert_pem, key_pem,
                     user=NODE_USER_PREFIX + node_name)
    log.info("Joined as {user}; credentials in {path}", user=NODE_USER_PREFIX + node_name,
             path=orchconfig_path)
    return orchconfig_path
