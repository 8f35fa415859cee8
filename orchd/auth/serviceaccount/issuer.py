# -*- test-case-name: tests.auth.test_serviceaccount -*-
"""
Signing service-account tokens: legacy secret tokens and bound tokens.

Claims follow REFERENCE section 7; the C{orch.io} spellings replace the
upstream C{kubernetes.io} ones.
"""

import jwt
from cryptography.hazmat.primitives import serialization

#: The issuer of legacy secret-based tokens (upstream C{kubernetes/serviceaccount}).
LEGACY_ISSUER = "orch/serviceaccount"
_LEGACY = "orch.io/serviceaccount/"


def service_account_username(namespace, name):
    return f"system:serviceaccount:{namespace}:{name}"


class TokenIssuer:
    """
    @param private_key_pem: the signing key (RSA or ECDSA), PEM.
    @param algorithm: C{RS256} or C{ES256}/C{ES384}/C{ES512}, as the key implies.
    @param issuer: the C{iss} of bound tokens (C{--service-account-issuer}).
    @param clock: an C{IReactorTime}, for C{iat}/C{exp}.
    """

    def __init__(self, private_key_pem, algorithm, issuer, clock):
        self._key = serialization.load_pem_private_key(private_key_pem, None)
        self.algorithm = algorithm
        self.issuer = issuer
        self.clock = clock

    def sign(self, claims):
        return jwt.encode(claims, self._key, algorithm=self.algorithm)

    def legacy(self, namespace, name, uid, secret_name):
        """The token of a C{orch.io/service-account-token} Secret: no expiry, no audience."""
        return self.sign({
            "iss": LEGACY_ISSUER,
            "sub": service_account_username(namespace, name),
            _LEGACY + "namespace": namespace,
            _LEGACY + "secret.name": secret_name,
            _LEGACY + "service-account.name": name,
            _LEGACY + "service-account.uid": uid,
        })
