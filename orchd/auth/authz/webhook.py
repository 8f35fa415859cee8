# -*- test-case-name: tests.auth.test_authz_webhook,tests.integration.test_authz_webhook -*-
"""
Webhook mode: ask a remote service by POSTing a SubjectAccessReview.

The service is named by an orchconfig file: its cluster's C{server} URL is
the exact endpoint, its user's client certificate or token the credentials.
Answers are cached per review spec so a busy server does not ask again for
every request. A call that fails has no opinion (later modes still decide)
and is not cached, so the next request asks again.
"""

import json
from urllib.parse import urlsplit

import attr
from OpenSSL import crypto
from twisted.internet.defer import CancelledError, Deferred, TimeoutError, succeed
from twisted.logger import Logger
from twisted.web.client import HTTPConnectionPool
from zope.interface import implementer

from orchd.api.bounded import parse_json
from orchd.auth.cache import CACHE_SIZE, ExpiringCache  # noqa: F401 (re-exported)
from orchd.auth.interfaces import AuthorizerError, Decision, IAuthorizer
from orchd.client.orchconfig import OrchConfigError, load_orchconfig
from orchd.client.connect import client_from_orchconfig

GROUP = "authorization.orch.io"
VERSIONS = ("v1", "v1beta1")
REQUEST_TIMEOUT = 30.0
#: Requests whose own attributes are this long are not cached (a cheap way
#: to fill the cache otherwise).
MAX_CACHED_ATTRIBUTE_LENGTH = 10000
_HEADERS = {b"content-type": [b"application/json"], b"accept": [b"application/json"]}


class WebhookError(Exception):
    """The remote service gave no usable answer; the message says why."""


@attr.s(frozen=True, slots=True)
class ReviewStatus:
    """The C{status} of a SubjectAccessReview answer."""

    allowed = attr.ib(default=False)
    denied = attr.ib(default=False)
    reason = attr.ib(default="")
    evaluation_error = attr.ib(default="")


def review_spec(attributes):
    """
    The v1 C{SubjectAccessReviewSpec} for C{attributes}.

    Empty fields are left out, as the API's own encoding does, so the same
    request always gives the same spec (it is also the cache key).
    """
    user = attributes.user
    spec = _present({"user": user.name, "groups": list(user.groups),
                     "extra": {key: list(values) for key, values in user.extra.items()},
                     "uid": user.uid})
    if attributes.is_resource_request:
        spec["resourceAttributes"] = _present({
            "namespace": attributes.namespace, "verb": attributes.verb,
            "group": attributes.api_group, "version": attributes.api_version,
            "resource": attributes.resource, "subresource": attributes.subresource,
            "name": attributes.name})
    else:
        spec["nonResourceAttributes"] = _present({"path": attributes.path,
                                                  "verb": attributes.verb})
    return spec


def _present(fields):
    return {key: value for key, value in fields.items() if value}


def review_body(spec, version):
    """The request body; v1beta1 spells C{groups} as C{group}."""
    if version == "v1beta1" and "groups" in spec:
        spec = dict(spec)
        spec["group"] = spec.pop("groups")
    return {"apiVersion": f"{GROUP}/{version}", "kind": "SubjectAccessReview", "spec": spec}


def parse_status(content):
    """
    The status of a SubjectAccessReview answer.

    Any C{apiVersion} is accepted: services written for other control planes
    answer in their own group.
    @raise WebhookError: for a body that is not a SubjectAccessReview.
    """
    try:
        data = parse_json(content)
    except ValueError:
        raise WebhookError("the answer is not JSON") from None
    if not isinstance(data, dict):
        raise WebhookError("the answer is not a JSON object")
    kind = data.get("kind")
    if kind and kind != "SubjectAccessReview":
        raise WebhookError(f"the answer is a {kind}, not a SubjectAccessReview")
    status = data.get("status")
    if status is None:
        status = {}
    if not isinstance(status, dict):
        raise WebhookError("status of the answer is not an object")
    values = {}
    for name, key, expected in (("allowed", "allowed", bool), ("denied", "denied", bool),
                                ("reason", "reason", str),
                                ("evaluation_error", "evaluationError", str)):
        value = status.get(key)
        if value is None:
            continue
        if not isinstance(value, expected):
            raise WebhookError(f"status.{key} of the answer is not a {expected.__name__}")
        values[name] = value
    return ReviewStatus(**values)


def describe_error(error):
    """A one-line description of a failed call, the nested TLS or socket reason included."""
    reasons = getattr(error, "reasons", None)
    if reasons:
        return "; ".join(reason.getErrorMessage() for reason in reasons)
    return str(error) or type(error).__name__


def _check_version(version):
    if version not in VERSIONS:
        raise ValueError(f"unsupported webhook authorizer version {version!r} "
                         f"(supported: {', '.join(VERSIONS)})")


def _cacheable(attributes):
    length = sum(len(value) for value in (
        attributes.namespace, attributes.verb, attributes.api_group, attributes.api_version,
        attributes.resource, attributes.subresource, attributes.name, attributes.path))
    return length < MAX_CACHED_ATTRIBUTE_LENGTH


@implementer(IAuthorizer)
class WebhookAuthorizer:
    """
    Decides as the remote service says: allowed allows, denied denies,
    neither has no opinion.

    @param client: a treq-style client: C{post(url, data=, headers=)} giving
        a response with C{code} and C{content()}.
    @param url: the endpoint to POST to.
    @param clock: an C{IReactorTime} for cache expiry and the request timeout.
    @param version: C{v1} or C{v1beta1}, the SubjectAccessReview version sent.
    @param authorized_ttl: seconds an allow is reused.
    @param unauthorized_ttl: seconds any other answer is reused.
    @param pool: the connection pool to close in L{close}, if any.
    """

    log = Logger()

    def __init__(self, client, url, clock, version="v1beta1", authorized_ttl=300.0,
                 unauthorized_ttl=30.0, timeout=REQUEST_TIMEOUT, cache_size=CACHE_SIZE,
                 pool=None):
        _check_version(version)
        self._client = client
        self._url = url
        self._clock = clock
        self._version = version
        self._authorized_ttl = authorized_ttl
        self._unauthorized_ttl = unauthorized_ttl
        self._timeout = timeout
        self._cache = ExpiringCache(clock, cache_size)
        self._pool = pool

    @classmethod
    def from_config_file(cls, path, reactor, version="v1beta1", authorized_ttl=300.0,
                         unauthorized_ttl=30.0):
        """
        An authorizer for the service in the orchconfig at C{path}.

        @raise ValueError: one line naming the file, for a version other than
            v1 or v1beta1, an unreadable or inconsistent file, a server that
            is not an http(s) URL, or unusable TLS credentials.
        """
        _check_version(version)
        try:
            url = load_orchconfig(path).server
        except OrchConfigError as error:
            raise ValueError(f"authorization webhook config {error}") from None
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(f"authorization webhook config {path}: server {url!r} "
                             f"is not an https:// or http:// URL")
        pool = HTTPConnectionPool(reactor, persistent=True)
        try:
            client, _ = client_from_orchconfig(path, reactor, pool)
        except (ValueError, crypto.Error) as error:
            raise ValueError(f"authorization webhook config {path}: unusable TLS "
                             f"credentials: {error}") from None
        return cls(client, url, reactor, version, authorized_ttl, unauthorized_ttl, pool=pool)

    async def authorize(self, attributes):
        spec = review_spec(attributes)
        key = json.dumps(spec, sort_keys=True, separators=(",", ":"))
        status = self._cache.get(key)
        if status is None:
            try:
                status = await self._ask(spec)
            except CancelledError:
                raise
            except Exception as error:
                # Later modes may still decide; the next request asks again.
                description = describe_error(error)
                self.log.error("Failed to make webhook authorizer request: {error}",
                               error=description)
                raise AuthorizerError(
                    f"webhook authorizer request failed: {description}") from None
            if _cacheable(attributes):
                ttl = self._authorized_ttl if status.allowed else self._unauthorized_ttl
                self._cache.put(key, status, ttl)
        return self._decide(status)

    def _decide(self, status):
        if status.evaluation_error:
            self.log.debug("Webhook authorizer evaluation error: {error}",
                           error=status.evaluation_error)
        if status.denied:
            if status.allowed:
                self.log.error("Webhook authorizer answered both allowed and denied; denying")
            return Decision.DENY, status.reason
        if status.allowed:
            return Decision.ALLOW, status.reason
        return Decision.NO_OPINION, status.reason

    async def _ask(self, spec):
        exchange = Deferred.fromCoroutine(self._exchange(spec))
        try:
            return await exchange.addTimeout(self._timeout, self._clock)
        except TimeoutError:
            raise WebhookError(f"no answer within {self._timeout:g} s") from None

    async def _exchange(self, spec):
        body = json.dumps(review_body(spec, self._version)).encode("utf-8")
        response = await self._client.post(self._url, data=body, headers=_HEADERS)
        content = await response.content()
        if not 200 <= response.code < 300:
            raise WebhookError(f"the service answered HTTP {response.code}")
        return parse_status(content)

    def rules_for(self, user, namespace):
        """A remote service cannot list what it would allow."""
        return [], [], True

    def close(self):
        """Drop kept-alive connections (on shutdown). @return: a Deferred."""
        if self._pool is None:
            return succeed(None)
        return self._pool.closeCachedConnections()
