# -*- test-case-name: tests.server.test_handlers,tests.server.test_client_errors,tests.server.test_channel -*-
"""
The API server's twisted.web Site: every request's way through the server.

audit ID -> request info -> authentication -> audit level -> impersonation ->
in-flight limit -> authorization -> route:
health, discovery and OpenAPI for non-resource paths, the verb handler for
resource requests (or, for a streamed subresource such as C{nodes/proxy},
the stream forwarder, which goes where the subresource's connector points).
Errors from any step are written once, as a Status. When the answer is
complete the request is logged (L{orchd.server.requestlog}) and its audit
event emitted (L{orchd.server.filters.audit}).
"""

import time
from urllib.parse import unquote

from twisted.internet.defer import CancelledError, Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.http import datetimeToString
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from orchd.api.errors import StatusError
from orchd.api.kinds import SUBRESOURCE_VERBS, subresource_kind
from orchd.api.query import parse_query
from orchd.registry.catalog import IStreamConnector
from orchd.registry.context import RequestContext
from orchd.server.channel import BoundedRequest, BoundedSite
from orchd.server.errors import refusal_body, render_failure, request_gone
from orchd.server.filters.audit import Auditor
from orchd.server.filters.authorization import AuthorizationFilter
from orchd.server.filters.impersonation import ImpersonationFilter
from orchd.server.filters.limits import LONG_RUNNING_SUBRESOURCES, LONG_RUNNING_VERBS, \
    InflightLimiter
from orchd.server.handlers import VERB_HANDLERS
from orchd.server.handlers.scope import RequestScope
from orchd.server.health import ENDPOINTS
from orchd.server.metricsendpoint import serve_metrics
from orchd.server.requestinfo import parse_request_info
from orchd.server.requestlog import log_request
from orchd.server.settings import ServerSettings
from orchd.storage.interfaces import StoreUnavailableError
from orchd.timing.seconds import second_text

_NOT_FOUND = "the server could not find the requested resource"


class APIRequest(BoundedRequest):
    """
    A request whose query only the API server parses (L{_read_query}), once:
    twisted.web's own parse of it, by other rules, would be thrown away.

    @ivar audit_id: the request's audit ID (also its C{Audit-ID} header).
    @ivar audit: its L{orchd.server.audit.record.AuditRecord} when audited.
    @ivar api_info: its L{orchd.server.requestinfo.RequestInfo}, once parsed.
    @ivar api_user: the user it was authenticated as, once known.
    @ivar received: when it came (wall clock).
    @ivar timing: its L{orchd.server.requestmetrics.RequestTiming} when
        requests are counted.
    """

    timing = None

    def requestReceived(self, command, path, version):
        if not self.channel.query_within_limit(path):
            return
        self.content.seek(0, 0)
        self.args = {}
        self.method, self.uri, self.clientproto = command, path, version
        self.path = path.split(b"?", 1)[0]
        self.process()

    def process(self):
        """
        twisted.web's C{process}, less what a site of one leaf that routes
        every path itself (L{APIServer}) does not use: no resource tree to
        walk, no C{postpath} to split and unquote, no C{Server} header (the
        upstream API server sends none), and the C{Date} header's text made
        once a second rather than per request.
        """
        self.site = site = self.channel.site
        self.prepath, self.postpath = [], []
        self.setHeader(b"Date", _http_date(time.time()))
        try:
            self.render(site.resource)
        except BaseException:
            self.processingFailed(Failure())


#: The C{Date} header's text of a second.
_http_date = second_text(datetimeToString)


class APISite(BoundedSite):
    """
    The API server's Site, under the request limits of L{orchd.server.channel};
    requests are logged by the server, not per hit.
    """

    requestFactory = APIRequest

    def log(self, request):
        pass

    def refusal(self, code, message):
        """What the connection answers by itself is a Status too."""
        return b"application/json", refusal_body(code, message)


class APIServer(Resource):
    """
    The root resource: one leaf that routes every path itself.

    @param catalog: the L{orchd.registry.catalog.Catalog} of enabled resources.
    @param authenticator: an L{orchd.auth.interfaces.IAuthenticator}.
    @param authorizer: an L{orchd.auth.interfaces.IAuthorizer}.
    @param health: the L{orchd.server.health.Health} checks.
    @param discovery: the discovery and OpenAPI routes.
    @param streams: the L{orchd.server.proxy.StreamForwarder} that serves
        streamed subresources (C{nodes/proxy}, C{pods/log}); without one
        they are not served.
    @param metrics: the L{orchd.server.requestmetrics.APIServerMetrics} that
        counts requests and that C{/metrics} exposes; without them nothing
        is counted and C{/metrics} is not served.
    @param auditor: the L{Auditor}; by default one that audits nothing (the
        C{Audit-ID} header is given all the same).
    """

    isLeaf = True
    log = Logger()

    def __init__(self, catalog, authenticator, authorizer, health, discovery, limiter=None,
                 settings=None, streams=None, metrics=None, auditor=None):
        super().__init__()
        self.settings = settings or ServerSettings()
        self.catalog = catalog
        self.authenticator = authenticator
        self.impersonation = ImpersonationFilter(authorizer)
        self.authorization = AuthorizationFilter(authorizer)
        self.health = health
        self.discovery = discovery
        self.limiter = limiter or InflightLimiter()
        self.streams = streams
        self.metrics = self.settings.metrics = metrics
        if metrics is not None:
            metrics.follow_server(catalog, self.limiter, health)
        self.auditor = auditor or Auditor()

    def render(self, request):
        self.auditor.begin(request)
        metrics = self.metrics
        timing = request.timing = metrics.begin() if metrics is not None else None
        Deferred.fromCoroutine(self._serve(request, timing)).addBoth(
            self._settle, request, timing)
        return NOT_DONE_YET

    def _settle(self, result, request, timing):
        """
        The handler is done: its error written if it failed, the request
        counted, then followed to its end. One callback rather than a chain
        of three: every request goes through it.
        """
        if isinstance(result, Failure):
            try:
                result = self._failed(result, request)
            except BaseException:
                result = Failure()
        if timing is not None and not timing.longrunning:
            self.metrics.record(request, timing)
        self._done(result, request)

    def _failed(self, failure, request):
        """Write the error; a bug (not a Status) ends the request's audit with C{Panic}."""
        panicked = not failure.check(StatusError, CancelledError, StoreUnavailableError)
        render_failure(failure, request)
        return panicked

    def _done(self, panicked, request):
        if not request_gone(request):
            # A watch answers on from its producer after the handler returned.
            request.notifyFinish().addBoth(lambda _: self._ended(request, panicked is True))
        else:
            self._ended(request, panicked is True)

    def _ended(self, request, panicked):
        self.auditor.finished(request, panicked)
        log_request(request, self.auditor.now())

    async def _serve(self, request, timing):
        _read_query(request)
        raw = request.path
        path = unquote(raw.decode("utf-8", "replace")) if b"%" in raw else raw.decode("latin-1")
        info = request.api_info = parse_request_info(request.method, path, request.args)
        found = (self.catalog.lookup(info.api_group, info.api_version, info.resource)
                 if info.is_resource_request else None)
        if timing is not None:
            self.metrics.classify(timing, request, info, found[0] if found else None)
        auditor = self.auditor
        try:
            user = await self.authenticator.authenticate(request)
        except StatusError as e:
            if e.code == 401:
                auditor.authentication_failed(request, info, e.to_status())
            raise
        request.api_user = user
        auditor.authenticated(request, info, user)
        acting = self.impersonation.apply(request, user)
        if acting is not user:
            acting = await acting
            if acting is not user:
                auditor.impersonated(request, acting)
        user = acting
        try:
            slot = self.limiter.acquire(info, user)
        except StatusError as e:
            if timing is not None:
                self.metrics.terminated(timing, e.code)
            raise
        try:
            await self.authorization.check(user, info, request.audit)
            if info.verb in LONG_RUNNING_VERBS or (
                    info.is_resource_request and info.subresource in LONG_RUNNING_SUBRESOURCES):
                auditor.long_running(request)
            if info.is_resource_request:
                await self._serve_resource(request, info, user, found)
            else:
                await self._serve_path(request, path)
        finally:
            self.limiter.release(slot)

    async def _serve_resource(self, request, info, user, found):
        """
        @param found: the catalog's C{(KindInfo, provider)} for the request's
            resource (looked up before authentication, for the metrics), or None.
        """
        if found is None:
            raise StatusError(404, "NotFound", _NOT_FOUND)
        kind, provider = found
        if kind.namespaced and not info.namespace and info.verb not in ("list", "watch"):
            # Across namespaces a namespaced resource can only be read as a collection.
            if info.name:
                raise StatusError(404, "NotFound", _NOT_FOUND)
            raise StatusError.method_not_allowed(info.verb, kind.resource, kind.group)
        if info.subresource:
            if info.subresource not in kind.subresources:
                raise StatusError(404, "NotFound", _NOT_FOUND)
            allowed = SUBRESOURCE_VERBS.get(info.subresource, ())
            connector = self.catalog.connector(kind.group, kind.resource, info.subresource,
                                               kind.version)
            if IStreamConnector.providedBy(connector):
                if self.streams is None:
                    raise StatusError(404, "NotFound", _NOT_FOUND)
                if info.verb not in connector.verbs:
                    raise StatusError.method_not_allowed(info.verb or request.method.decode(),
                                                         kind.resource, kind.group)
                namespace = info.namespace if kind.namespaced else ""
                await self.streams.serve(request, info, connector,
                                         RequestContext(user, namespace, audit=request.audit,
                                                        timing=request.timing))
                return
            if connector is not None:
                kind, provider = connector.info, connector
            elif subresource_kind(kind, info.subresource) is not kind:
                raise StatusError(404, "NotFound", _NOT_FOUND)
        else:
            allowed = kind.verbs
        handler = VERB_HANDLERS.get(info.verb)
        if handler is None or info.verb not in allowed:
            raise StatusError.method_not_allowed(info.verb or request.method.decode(),
                                                 kind.resource, kind.group)
        await handler(RequestScope(request, info, user, kind, provider, self.settings))

    async def _serve_path(self, request, path):
        segments = [s for s in path.split("/") if s]
        if segments and segments[0] in ENDPOINTS:
            await self.health.serve(request, segments[0], "/".join(segments[1:]))
            return
        if segments and segments[0] == "metrics" and self.metrics is not None:
            if serve_metrics(request, segments[1:], self.metrics.registry,
                             self.metrics.slis):
                return
        if not await self.discovery.serve(request, segments):
            raise StatusError(404, "NotFound", _NOT_FOUND)


def _read_query(request):
    """
    Parse the query as the API reads it (see L{orchd.api.query}).

    twisted.web drops parameters without C{=} (C{?verbose}, C{?watch}) and
    also splits on C{;}; API clients expect neither.
    """
    _, sep, query = request.uri.partition(b"?")
    if sep:
        request.args = parse_query(query)
