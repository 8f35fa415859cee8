# -*- test-case-name: tests.auth.test_serviceaccount -*-
"""
Service-account tokens as bearer tokens: legacy secret tokens and bound tokens.

A token is ours when it is a JWT whose C{iss} is the legacy issuer or the
configured one; anything else is left to the other authenticators. The
signature must verify with one of the service-account public keys. Then
the objects the token names are read from the store, every time: a token
outlives nothing it is bound to (its Secret, its ServiceAccount, its Pod),
and a deleted pod must end its tokens at once. Only the signature check,
the costly part, is remembered for a few seconds.
"""

import calendar
import hmac
import time
from base64 import b64decode

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from zope.interface import implementer

from orchd.auth.cache import ExpiringCache
from orchd.auth.interfaces import InvalidToken, ITokenAuthenticator
from orchd.auth.serviceaccount.issuer import (
    BOUND_CLAIM, LEGACY_ISSUER, LEGACY_NAMESPACE, LEGACY_SA_NAME, LEGACY_SA_UID,
    LEGACY_SECRET_NAME, key_id, service_account_username,
)
from orchd.auth.serviceaccount.tracking import INVALID_SINCE, LegacyTokenTracker
from orchd.auth.user import AUTHENTICATED, UserInfo

#: Clock skew allowed on C{exp}, C{nbf} and a bound object's deletion.
LEEWAY = 60
#: How long a verified signature is remembered, and how many.
CACHE_SECONDS = 10
CACHE_SIZE = 4096
EXTRA = "authentication.orch.io/"
INVALIDATED = "Token has been invalidated"

_ALGORITHMS = {rsa.RSAPublicKey: ["RS256"], ec.EllipticCurvePublicKey: ["ES256", "ES384", "ES512"]}


def _algorithms(key):
    for cls, names in _ALGORITHMS.items():
        if isinstance(key, cls):
            return names
    raise ValueError("service-account keys must be RSA or ECDSA")


def service_account_groups(namespace):
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED)


def _seconds(timestamp):
    """Unix seconds of an RFC 3339 UTC timestamp (fractions ignored)."""
    return calendar.timegm(time.strptime(timestamp[:19], "%Y-%m-%dT%H:%M:%S"))


def _quoted(values):
    """Go's C{%q} of a string slice, as upstream words audience errors."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


@implementer(ITokenAuthenticator)
class ServiceAccountTokenAuthenticator:
    """
    @param catalog: the L{orchd.registry.catalog.Catalog} the objects are read from.
    @param public_keys_pem: the verifying keys (C{pki.sa_public_keys_pem}).
    @param issuer: the configured issuer of bound tokens.
    @param api_audiences: the audiences legacy tokens count as naming.
    @param clock: an C{IReactorTime}.
    """

    def __init__(self, catalog, public_keys_pem, issuer, api_audiences, clock):
        self.catalog = catalog
        self.issuer = issuer
        self.api_audiences = tuple(api_audiences)
        self.clock = clock
        self._keys = []
        for pem in public_keys_pem:
            key = serialization.load_pem_public_key(pem if isinstance(pem, bytes)
                                                    else pem.encode())
            self._keys.append((key_id(key), key, _algorithms(key)))
        self._verified = ExpiringCache(clock, CACHE_SIZE)
        self.tracker = LegacyTokenTracker(lambda: catalog.resource("", "secrets"),
                                          catalog.system_context, clock)

    async def authenticate_token(self, token, audiences):
        if token.count(".") != 2:
            return None
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.InvalidTokenError:
            return None
        issuer = unverified.get("iss")
        if issuer != LEGACY_ISSUER and issuer != self.issuer:
            return None
        claims = self._verify(token, header)
        if issuer == LEGACY_ISSUER:
            return await self._legacy(token, claims, audiences)
        return await self._bound(claims, audiences)

    # -- signature ----------------------------------------------------------

    def _verify(self, token, header):
        cached = self._verified.get(token)
        if cached is not None:
            return cached
        kid = header.get("kid")
        keys = sorted(self._keys, key=lambda k: k[0] != kid)    # the named key first
        for _, key, algorithms in keys:
            try:
                claims = jwt.decode(token, key, algorithms=algorithms, options={
                    "verify_exp": False, "verify_nbf": False, "verify_iat": False,
                    "verify_aud": False, "verify_iss": False})
            except jwt.InvalidTokenError:
                continue
            self._verified.put(token, claims, CACHE_SECONDS)
            return claims
        raise InvalidToken("invalid service account token signature")

    # -- the two kinds --------------------------------------------------------

    async def _legacy(self, token, claims, audiences):
        names = [claims.get(c) for c in (LEGACY_NAMESPACE, LEGACY_SECRET_NAME, LEGACY_SA_NAME,
                                         LEGACY_SA_UID)]
        if not all(isinstance(n, str) and n for n in names):
            raise InvalidToken("service account token claims are incomplete")
        namespace, secret_name, sa_name, sa_uid = names
        self._accepted(self.api_audiences, audiences)
        secret = await self._get("secrets", namespace, secret_name)
        if secret is None or secret["metadata"].get("deletionTimestamp"):
            raise InvalidToken(INVALIDATED)
        if (secret["metadata"].get("labels") or {}).get(INVALID_SINCE):
            raise InvalidToken(INVALIDATED)
        stored = (secret.get("data") or {}).get("token") or ""
        try:
            stored = b64decode(stored)
        except ValueError:
            stored = b""
        if not hmac.compare_digest(stored, token.encode()):
            raise InvalidToken("Token does not match server's copy")
        await self._service_account(namespace, sa_name, sa_uid)
        self.tracker.note(secret)
        return self._user(namespace, sa_name, sa_uid, {})

    async def _bound(self, claims, audiences):
        now = self.clock.seconds()
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if isinstance(exp, (int, float)) and now > exp + LEEWAY:
            raise InvalidToken("service account token has expired")
        if isinstance(nbf, (int, float)) and nbf > now + LEEWAY:
            raise InvalidToken("service account token is not valid yet")
        token_audiences = claims.get("aud")
        if isinstance(token_audiences, str):
            token_audiences = [token_audiences]
        self._accepted(token_audiences or (), audiences)
        private = claims.get(BOUND_CLAIM)
        if not isinstance(private, dict):
            raise InvalidToken("service account token claims are incomplete")
        namespace = private.get("namespace")
        account = private.get("serviceaccount") or {}
        sa_name, sa_uid = account.get("name"), account.get("uid")
        if not all(isinstance(n, str) and n for n in (namespace, sa_name, sa_uid)):
            raise InvalidToken("service account token claims are incomplete")
        await self._service_account(namespace, sa_name, sa_uid)
        pod, secret, node = (private.get(k) for k in ("pod", "secret", "node"))
        extra = {}
        if pod:
            await self._bound_object("pods", "Pod", namespace, pod, now)
            extra["pod-name"], extra["pod-uid"] = pod.get("name"), pod.get("uid")
        if secret:
            await self._bound_object("secrets", "Secret", namespace, secret, now)
        if node:
            if not pod:
                # A pod-bound token names its node for information only.
                await self._bound_object("nodes", "Node", "", node, now)
            extra["node-name"], extra["node-uid"] = node.get("name"), node.get("uid")
        if isinstance(claims.get("jti"), str) and claims["jti"]:
            extra["credential-id"] = f"JTI={claims['jti']}"
        extra = {EXTRA + k: [v] for k, v in extra.items() if isinstance(v, str) and v}
        return self._user(namespace, sa_name, sa_uid, extra)

    # -- checks --------------------------------------------------------------

    def _accepted(self, token_audiences, audiences):
        """Refuse a token none of whose audiences the caller accepts."""
        if not any(a in audiences for a in token_audiences):
            raise InvalidToken(f"token audiences {_quoted(token_audiences)} is invalid for the "
                               f"target audiences {_quoted(audiences)}")

    async def _get(self, resource, namespace, name):
        provider = self.catalog.resource("", resource)
        if provider is None or not isinstance(name, str) or not name:
            return None
        return await provider.find(self.catalog.system_context(namespace), name)

    async def _service_account(self, namespace, name, uid):
        account = await self._get("serviceaccounts", namespace, name)
        if account is None or account["metadata"].get("deletionTimestamp"):
            raise InvalidToken(f"ServiceAccount {namespace}/{name} has been deleted")
        if account["metadata"].get("uid") != uid:
            raise InvalidToken(f"ServiceAccount UID ({account['metadata'].get('uid')}) does not "
                               f"match claim ({uid})")

    async def _bound_object(self, resource, kind, namespace, ref, now):
        if not isinstance(ref, dict):
            raise InvalidToken("service account token claims are incomplete")
        obj = await self._get(resource, namespace, ref.get("name"))
        if obj is None:
            raise InvalidToken(INVALIDATED)
        deleted = obj["metadata"].get("deletionTimestamp")
        if deleted and _seconds(deleted) < now - LEEWAY:
            raise InvalidToken(INVALIDATED)
        if obj["metadata"].get("uid") != ref.get("uid"):
            raise InvalidToken(f"{kind} UID ({obj['metadata'].get('uid')}) does not match "
                               f"claim ({ref.get('uid')})")

    def _user(self, namespace, name, uid, extra):
        return UserInfo(service_account_username(namespace, name),
                        service_account_groups(namespace), uid, extra)
