# -*- test-case-name: tests.integration.test_client_tls -*-
"""
TLS for orchd's HTTPS clients: trust the cluster CA, present a client certificate.

L{ClientTLSPolicy} plugs into C{twisted.web.client.Agent} (and so treq):
each connection verifies the server against the given CA, not the
platform's trust store, and presents the client certificate that is the
caller's identity. A policy with C{verify=False} exists only for fetching
C{cluster-info} before any trust is established; the caller must check what
it fetched by other means (the token signature).
"""

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from twisted.internet.ssl import (
    Certificate, CertificateOptions, PrivateCertificate, optionsForClientTLS,
    trustRootFromCertificates,
)
from twisted.web.iweb import IPolicyForHTTPS
from zope.interface import implementer


def _certificates(pem_bundle):
    """Each certificate of a PEM bundle, as Twisted's L{Certificate}."""
    return [Certificate.loadPEM(certificate.public_bytes(Encoding.PEM))
            for certificate in x509.load_pem_x509_certificates(pem_bundle)]


#: Hosts whose connection creators a policy keeps (a client talks to a few).
_MAX_CREATORS = 64


@implementer(IPolicyForHTTPS)
class ClientTLSPolicy:
    """
    Connection settings for every HTTPS host an C{Agent} talks to.

    @param ca_pem: PEM bundle of CAs the server must chain to; None means
        the platform's trust store.
    @param client_cert_pem: PEM client certificate, presented if given.
    @param client_key_pem: its PEM private key.
    @param verify: False skips verifying the server (see the module docstring).
    @param server_name: the name to verify instead of the URL's host
        (kubeconfig's C{tls-server-name}).
    @param protocols: ALPN protocols to offer (C{[b"h2"]} for gRPC).
    """

    def __init__(self, ca_pem=None, client_cert_pem=None, client_key_pem=None, verify=True,
                 server_name=None, protocols=None):
        if (client_cert_pem is None) != (client_key_pem is None):
            raise ValueError("a client certificate needs its key, and a key its certificate")
        self._client = None
        if client_cert_pem is not None:
            self._client = PrivateCertificate.loadPEM(client_cert_pem + b"\n" + client_key_pem)
        self._trust = None
        if ca_pem:
            self._trust = trustRootFromCertificates(_certificates(ca_pem))
        self._verify = verify
        self._server_name = server_name
        self._protocols = protocols
        self._creators = {}

    def creatorForNetloc(self, hostname, port):
        """
        A connection creator for C{hostname}: verified unless the policy says not.

        C{Agent} asks for one on every request, pooled connection or not, and
        building one builds an OpenSSL context: each host's is kept. The
        port changes nothing (the name verified is the host's), so the
        hosts are counted, not the ports: the API server reaching thousands
        of node agents on one address, each on its own port, keeps one.
        """
        creator = self._creators.get(hostname)
        if creator is None:
            if len(self._creators) >= _MAX_CREATORS:
                self._creators.clear()
            creator = self._creators[hostname] = self._creator(hostname)
        return creator

    def _creator(self, hostname):
        if not self._verify:
            # CertificateOptions is itself a client connection creator; it
            # sends no server name and checks no certificate.
            if self._client is None:
                return CertificateOptions(verify=False)
            return CertificateOptions(privateKey=self._client.privateKey.original,
                                      certificate=self._client.original, verify=False)
        name = self._server_name or hostname.decode("ascii")
        return optionsForClientTLS(name, trustRoot=self._trust, clientCertificate=self._client,
                                   acceptableProtocols=self._protocols)
