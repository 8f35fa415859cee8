# -*- test-case-name: tests.app.test_orchletclient -*-
"""
The client certificate the API server presents to orchlets.

C{nodes/proxy} and C{pods/log} reach a node's orchlet as the user
L{ORCHLET_CLIENT_USER}, which the bootstrap policy binds to
C{system:orchlet-api-admin} (upstream's C{system:kubelet-api-admin}: every
verb on C{nodes} subresources C{proxy}, C{stats}, C{log}, C{spec},
C{metrics}). It is deliberately not in C{system:masters}: an orchlet that
authorizes by webhook asks the API server about this user like any other.

C{--orchlet-client-certificate}/C{--orchlet-client-key} name the pair;
otherwise it is C{<data-dir>/pki/apiserver-orchlet-client.crt}/C{.key},
issued by the client CA when missing (either half missing reissues both:
nothing but this server holds the key).
"""

import os

from twisted.logger import Logger

from orchd.tls.certs import same_key
from orchd.app.pki import PKIError, _load_certificates, _load_private_key, _write
from orchd.auth.bootstrappolicy.clusterroles import ORCHLET_API_CLIENT

#: The user (certificate CN) of the API server towards orchlets; no groups.
ORCHLET_CLIENT_USER = ORCHLET_API_CLIENT
CERT_NAME = "apiserver-orchlet-client.crt"
KEY_NAME = "apiserver-orchlet-client.key"

log = Logger()


def ensure_orchlet_client(config, pki):
    """
    Load or issue the orchlet client pair and set it on C{pki}.

    Sets C{orchlet_client_cert_path}, C{orchlet_client_key_path},
    C{orchlet_client_cert_pem} and C{orchlet_client_key_pem}; the PEMs are
    None when no pair is given and the client CA's key is not available
    (the API server then reaches orchlets without a client certificate).

    @param config: a L{orchd.app.config.Config} (or an object with its names).
    @param pki: the L{orchd.app.pki.PKI} of this server.
    @raise PKIError: for unreadable or mismatched given files.
    """
    cert_path = getattr(config, "orchlet_client_certificate", None)
    key_path = getattr(config, "orchlet_client_key", None)
    if cert_path is None:
        cert_path = os.path.join(pki.directory, CERT_NAME)
        key_path = os.path.join(pki.directory, KEY_NAME)
        if not (os.path.exists(cert_path) and os.path.exists(key_path)):
            if not pki.can_sign_clients:
                log.warn("Cannot issue {path}: the client CA's key is not available; orchlets "
                         "are reached without a client certificate", path=cert_path)
                pki.orchlet_client_cert_path = pki.orchlet_client_key_path = None
                pki.orchlet_client_cert_pem = pki.orchlet_client_key_pem = None
                return pki
            cert_pem, key_pem = pki.issue_client_certificate(ORCHLET_CLIENT_USER)
            _write(key_path, key_pem)
            _write(cert_path, cert_pem)
            log.info("Generated orchlet client certificate {path}", path=cert_path)
    chain = _load_certificates(cert_path, "orchlet client certificate")
    key = _load_private_key(key_path, "orchlet client key")
    if not same_key(chain[0].public_key(), key.public_key()):
        raise PKIError(f"{key_path} does not match {cert_path}")
    with open(cert_path, "rb") as stream:
        cert_pem = stream.read()
    with open(key_path, "rb") as stream:
        key_pem = stream.read()
    pki.orchlet_client_cert_path = cert_path
    pki.orchlet_client_key_path = key_path
    pki.orchlet_client_cert_pem = cert_pem
    pki.orchlet_client_key_pem = key_pem
    return pki
