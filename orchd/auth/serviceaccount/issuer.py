# -*- test-case-name: tests.auth.test_serviceaccount -*-
"""
Signing service-account tokens: legacy secret tokens and bound tokens.

Claims follow REFERENCE section 7; the C{orch.io} spellings replace the
upstream C{kubernetes.io} ones.
"""

import base64
import hashlib
import uuid

import jwt
from cryptography.hazmat.primitives import serialization

#: The issuer of legacy secret-based tokens (upstream C{kubernetes/serviceaccount}).
LEGACY_ISSUER = "orch/serviceaccount"
_LEGACY = "orch.io/serviceaccount/"
#: The private claim of bound tokens (upstream C{kubernetes.io}).
BOUND_CLAIM = "orch.io"
#: The legacy claims, by what they name.
LEGACY_NAMESPACE = _LEGACY + "namespace"
LEGACY_SECRET_NAME = _LEGACY + "secret.name"
LEGACY_SA_NAME = _LEGACY + "service-account.name"
LEGACY_SA_UID = _LEGACY + "service-account.uid"


def service_account_username(namespace, name):
    return f"system:serviceaccount:{namespace}:{name}"


def key_id(public_key):
    """
    The C{kid} of a public key, as upstream: unpadded base64url of the
    SHA-256 of its DER SubjectPublicKeyInfo. Verifiers try that key first.
    """
    der = public_key.public_bytes(serialization.Encoding.DER,
                                  serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()


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
        self.key_id = key_id(self._key.public_key())

    @property
    def public_key_pem(self):
        """The verifying half of the signing key, PEM."""
        return self._key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    def sign(self, claims):
        return jwt.encode(claims, self._key, algorithm=self.algorithm,
                          headers={"kid": self.key_id})

    def legacy(self, namespace, name, uid, secret_name):
        """The token of a C{orch.io/service-account-token} Secret: no expiry, no audience."""
        return self.sign({
            "iss": LEGACY_ISSUER,
            "sub": service_account_username(namespace, name),
            LEGACY_NAMESPACE: namespace,
            LEGACY_SECRET_NAME: secret_name,
            LEGACY_SA_NAME: name,
            LEGACY_SA_UID: uid,
        })

    def bound(self, namespace, name, uid, audiences, expiration_seconds, pod=None, secret=None,
              node=None):
        """
        A bound token (TokenRequest): C{(token, expires_at)}, the expiry in Unix seconds.

        @param pod: C{(name, uid)} of the Pod it is bound to, or None; so for
            C{secret} and C{node}. A pod-bound token may also name the pod's node.
        """
        now = int(self.clock.seconds())
        expires_at = now + int(expiration_seconds)
        private = {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}}
        for key, ref in (("pod", pod), ("secret", secret), ("node", node)):
            if ref is not None:
                private[key] = {"name": ref[0], "uid": ref[1]}
        token = self.sign({
            "iss": self.issuer,
            "sub": service_account_username(namespace, name),
            "aud": list(audiences),
            "exp": expires_at,
            "iat": now,
            "nbf": now,
            "jti": str(uuid.uuid4()),
            BOUND_CLAIM: private,
        })
        return token, expires_at
