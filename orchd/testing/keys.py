# -*- test-case-name: tests.testing.test_units -*-
"""
Key material made once per process and given to every test control plane.

Generating a CA, a serving certificate and a service-account key is most of
a cold start's cost; tests do not need fresh keys per control plane, so the
first one pays and the others copy the PEM files into their own data
directory, where L{orchd.app.pki.PKI.ensure} finds and reuses them. Every
key is ECDSA P-256: the service-account tokens are then ES256, which the
token issuer and authenticator accept.

Control planes of one process therefore share one CA: a client certificate
issued by one is valid on another. Tests that need separate trust roots
should run separate processes.
"""

import os
import socket
import threading

from cryptography.hazmat.primitives.asymmetric import ec

from orchd.app.pki import APISERVER_NAME
from orchd.tls.certs import (
    certificate_pem, create_ca, issue_certificate, private_key_pem, public_key_pem,
)

#: Names the shared serving certificate covers: loopback, this host and the
#: first address of the default service range (the API server's own).
SERVING_NAMES = ("localhost", "127.0.0.1", "::1", socket.gethostname(), "10.96.0.1")

_lock = threading.Lock()
_material = None


def material():
    """C{{file name under pki/: PEM bytes}}, generated on the first call only."""
    global _material
    with _lock:
        if _material is None:
            ca_certificate, ca_key = create_ca()
            serving, serving_key = issue_certificate(ca_certificate, ca_key, APISERVER_NAME,
                                                     names=SERVING_NAMES, server=True)
            sa_key = ec.generate_private_key(ec.SECP256R1())
            _material = {
                "ca.crt": certificate_pem(ca_certificate),
                "ca.key": private_key_pem(ca_key),
                "apiserver.crt": certificate_pem(serving),
                "apiserver.key": private_key_pem(serving_key),
                "sa.key": private_key_pem(sa_key),
                "sa.pub": public_key_pem(sa_key.public_key()),
            }
        return _material


def seed(data_dir):
    """Write the shared key material into C{data_dir}/pki, owner-only."""
    directory = os.path.join(data_dir, "pki")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    for name, data in material().items():
        fd = os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    return directory
