# -*- test-case-name: tests.orchlet.test_auth -*-
"""
Who may use the orchlet's HTTPS endpoint: its own authentication and authorization.

The node agent is not the API server: it has no users or roles of its own.
It trusts client certificates from the cluster's client CA, may hand
bearer tokens to the API server (TokenReview), and either allows every
authenticated request or asks the API server (SubjectAccessReview) whether
the user may act on the C{nodes} resource named after this node, with a
subresource taken from the path. Webhook answers are cached briefly, as
upstream does, so a busy scraper does not turn into an API-server load.
"""

import hashlib
import posixpath

from twisted.logger import Logger

from orchd.api.errors import StatusError
from orchd.auth.authn.x509 import X509Authenticator
from orchd.auth.cache import ExpiringCache
from orchd.auth.user import ANONYMOUS_USER, AUTHENTICATED, UserInfo

ALWAYS_ALLOW = "AlwaysAllow"
WEBHOOK = "Webhook"
MODES = (ALWAYS_ALLOW, WEBHOOK)
TOKEN_REVIEWS = "/apis/authentication.orch.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.orch.io/v1/subjectaccessreviews"
#: Upstream's webhook cache times: token answers, allow and deny answers.
TOKEN_TTL = 120.0
AUTHORIZED_TTL = 300.0
UNAUTHORIZED_TTL = 30.0

_VERBS = {b"GET": "get", b"HEAD": "get", b"POST": "create", b"PUT": "update",
          b"PATCH": "patch", b"DELETE": "delete"}
#: The specification's path table; everything else is C{proxy}.
_SUBRESOURCES = (("/stats", "stats"), ("/metrics", "metrics"), ("/logs", "log"),
                 ("/spec", "spec"))


class Unauthenticated(Exception):
    """No acceptable credentials: 401 C{Unauthorized}."""


class AuthorizationError(Exception):
    """The authorizer could not decide (webhook failed): 500."""


def request_verb(method):
    """The API verb of an HTTP method (C{bytes}); unknown methods give C{""}."""
    return _VERBS.get(method.upper(), "")


def clean_path(path):
    """The path as Go's C{path.Clean} leaves it (always absolute)."""
    cleaned = posixpath.normpath("/" + path)
    return "/" + cleaned.lstrip("/")


def subresource_for(path):
    """The subresource of C{nodes} a request path maps to."""
    path = clean_path(path)
    for prefix, subresource in _SUBRESOURCES:
        if path == prefix or path.startswith(prefix + "/"):
            return subresource
    return "proxy"


class NodeAttributes:
    """What the authorizer looks at: user, verb and the C{nodes} subresource."""

    __slots__ = ("user", "verb", "name", "subresource")

    def __init__(self, user, verb, name, subresource):
        self.user = user
        self.verb = verb
        self.name = name
        self.subresource = subresource

    def resource_attributes(self):
        return {"verb": self.verb, "resource": "nodes", "subresource": self.subresource,
                "name": self.name, "namespace": "", "group": "", "version": "v1"}

    def describe(self):
        """The parenthesis of upstream's 403 and 500 texts."""
        return (f"user={self.user.name}, verb={self.verb}, resource=nodes, "
                f"subresource={self.subresource}")


class OrchletAuth:
    """
    Authentication and authorization of orchlet requests.

    @param api: the API-server client, C{async request(method, path, body)
        -> (code, JSON)}; needed for the token webhook and Webhook mode.
    """

    log = Logger()

    def __init__(self, clock, node_name, anonymous=True, token_webhook=False,
                 mode=ALWAYS_ALLOW, api=None):
        if mode not in MODES:
            raise ValueError(f"orchlet authorization mode {mode!r} is not one of "
                             + ", ".join(MODES))
        if api is None and (token_webhook or mode == WEBHOOK):
            raise ValueError("the orchlet's webhooks need an API server (--orchconfig)")
        self._x509 = X509Authenticator(clock)
        self._node_name = node_name
        self._anonymous = anonymous
        self._token_webhook = token_webhook
        self._mode = mode
        self._api = api
        self._tokens = ExpiringCache(clock, 4096)
        self._decisions = ExpiringCache(clock, 4096)

    async def authenticate(self, request):
        """
        The user of C{request}.

        @raise Unauthenticated: for a rejected token, or no credentials
            with anonymous access off.
        """
        try:
            user = self._x509.authenticate(request)
        except StatusError:
            raise Unauthenticated("certificate expired") from None
        if user is not None:
            return user
        header = (request.getHeader(b"authorization") or b"").decode("latin-1")
        scheme, _, token = header.strip().partition(" ")
        if self._token_webhook and scheme.lower() == "bearer" and token.strip():
            return await self._review_token(token.strip())
        if self._anonymous:
            return ANONYMOUS_USER
        raise Unauthenticated("no credentials")

    async def _review_token(self, token):
        key = hashlib.sha256(token.encode("utf-8")).hexdigest()
        user = self._tokens.get(key)
        if user is None:
            body = {"apiVersion": "authentication.orch.io/v1", "kind": "TokenReview",
                    "spec": {"token": token}}
            try:
                code, review = await self._api.request("POST", TOKEN_REVIEWS, body)
            except Exception as error:
                self.log.error("TokenReview failed: {error}", error=error)
                raise Unauthenticated("token review failed") from None
            if code not in (200, 201) or not isinstance(review, dict):
                self.log.warn("TokenReview answered {code}: {body!r}", code=code, body=review)
                raise Unauthenticated("token review failed")
            status = review.get("status") or {}
            user = False
            if status.get("authenticated"):
                info = status.get("user") or {}
                user = UserInfo(info.get("username", ""), info.get("groups") or (),
                                info.get("uid", ""), info.get("extra"))
                user = user.with_group(AUTHENTICATED) if user.name else False
            self._tokens.put(key, user, TOKEN_TTL if user else UNAUTHORIZED_TTL)
        if not user:
            raise Unauthenticated("invalid bearer token")
        return user

    def attributes(self, user, method, path):
        """The L{NodeAttributes} of a request by C{user}."""
        return NodeAttributes(user, request_verb(method), self._node_name,
                              subresource_for(path))

    async def authorize(self, attributes):
        """
        Whether the request may proceed.

        @raise AuthorizationError: when the webhook could not be asked.
        """
        if self._mode == ALWAYS_ALLOW:
            return True
        user = attributes.user
        spec = {"user": user.name, "groups": list(user.groups), "uid": user.uid,
                "extra": {k: list(v) for k, v in user.extra.items()},
                "resourceAttributes": attributes.resource_attributes()}
        key = repr(sorted(spec.items()))
        allowed = self._decisions.get(key)
        if allowed is None:
            body = {"apiVersion": "authorization.orch.io/v1", "kind": "SubjectAccessReview",
                    "spec": spec}
            try:
                code, review = await self._api.request("POST", ACCESS_REVIEWS, body)
            except Exception as error:
                self.log.error("SubjectAccessReview failed: {error}", error=error)
                raise AuthorizationError(str(error)) from None
            if code not in (200, 201) or not isinstance(review, dict):
                raise AuthorizationError(f"SubjectAccessReview answered {code}")
            allowed = bool((review.get("status") or {}).get("allowed"))
            self._decisions.put(key, allowed, AUTHORIZED_TTL if allowed else UNAUTHORIZED_TTL)
        return allowed
