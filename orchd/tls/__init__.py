"""
Certificates and TLS, the leaf of orchd's layers.

X.509 building blocks (L{orchd.tls.certs}), the options of TLS listeners
(L{orchd.tls.server}) and the trust policy of HTTPS clients
(L{orchd.tls.client}). Every layer uses them, so this package imports
nothing else of orchd.
"""
