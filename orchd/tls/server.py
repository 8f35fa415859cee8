# -*- test-case-name: tests.integration.test_server,tests.integration.test_client_tls -*-
"""
TLS for listeners: the serving certificate, and client certificates checked
against the client CA during the handshake.

A client certificate is optional (anonymous and token clients have none),
but one that is presented must chain to a client CA, or the handshake
fails; the x509 authenticator can then trust whatever certificate arrived.
"""

from OpenSSL import SSL, crypto
from twisted.internet.ssl import Certificate, CertificateOptions, TLSVersion

from orchd.tls.certs import split_pem_certificates


def server_tls_options(cert_pem, key_pem, client_ca_pems):
    """
    @param cert_pem: the serving certificate, then any intermediate chain.
    @param client_ca_pems: PEM CA certificates trusted for client certificates.
    """
    chain = [crypto.load_certificate(crypto.FILETYPE_PEM, pem)
             for pem in split_pem_certificates(cert_pem)]
    key = crypto.load_privatekey(crypto.FILETYPE_PEM, key_pem)
    cas = [Certificate.loadPEM(pem).original for pem in client_ca_pems]
    return _ServerOptions(
        privateKey=key,
        certificate=chain[0],
        extraCertChain=chain[1:],
        verify=True,
        caCerts=cas,
        requireCertificate=False,
        raiseMinimumTo=TLSVersion.TLSv1_2,
    )


class _ServerOptions(CertificateOptions):
    """
    Server TLS without client-initiated renegotiation (TLS 1.2): each one
    costs the server a handshake, and would get around the handshake
    deadline and the connection bound of L{orchd.server.channel}.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # Made now, before any connection uses (and freezes) the context.
        self.getContext().set_options(SSL.OP_NO_RENEGOTIATION)
