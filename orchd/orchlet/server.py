# -*- test-case-name: tests.orchlet.test_endpoint,tests.integration.test_orchlet_endpoint,tests.integration.test_orchlet_request_limits -*-
"""
The orchlet's HTTPS endpoint (port 10250): what the API server, metrics
scrapers and administrators read from a node.

Every request, C{/healthz} included, is authenticated and authorized first
(L{orchd.orchlet.auth}); the answers are upstream's plain texts, not API
C{Status} objects, because clients of this port expect those. One leaf
resource routes by path, so authentication sees every path before any
route does.
"""

import os
from urllib.parse import unquote

import orjson
from twisted.application.service import Service
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.logger import Logger
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from orchd.api.query import parse_query
from orchd.orchlet import metrics
from orchd.orchlet.auth import (
    AuthorizationError, OrchletAuth, Unauthenticated, clean_path,
)
from orchd.orchlet.checkpoint import CheckpointError, checkpoint, parse_timeout
from orchd.orchlet.logs import LogError, LogRequest, follow_log, read_log, serve_log_path, trim
from orchd.server.channel import BoundedSite
from orchd.server.requestlimits import LISTEN_BACKLOG
from orchd.tls.listen import listen_tls
from orchd.tls.server import server_tls_options

CHECKPOINT_GATE = "ContainerCheckpoint"
_TEXT = b"text/plain; charset=utf-8"
_JSON = b"application/json"


class _Answer(Exception):
    """Stop handling and answer C{code} with C{body}."""

    def __init__(self, code, body, content_type=_TEXT):
        super().__init__(code)
        self.code = code
        self.body = body if isinstance(body, bytes) else body.encode("utf-8")
        self.content_type = content_type


_NOT_FOUND = _Answer(404, "404 page not found\n")


class OrchletResource(Resource):
    """Every path of the endpoint: authenticate, authorize, route."""

    isLeaf = True
    log = Logger()

    def __init__(self, reactor, settings, runtime, node_name, auth):
        super().__init__()
        self._reactor = reactor
        self._settings = settings
        self._runtime = runtime
        self._node_name = node_name
        self._auth = auth

    def render(self, request):
        work = Deferred.fromCoroutine(self._handle(request))
        request.notifyFinish().addErrback(lambda _: work.cancel())
        work.addErrback(self._failed, request)
        return NOT_DONE_YET

    def _failed(self, failure, request):
        if request.finished or request._disconnected:
            return None
        self.log.failure("orchlet request failed", failure)
        _write(request, _Answer(500, "Internal Server Error\n"))

    async def _handle(self, request):
        path = clean_path(request.path.decode("latin-1"))
        # The query as Go splits it, as the API server reads its own:
        # twisted.web drops C{?follow} (no C{=}), which upstream reads as true.
        request.args = parse_query(request.uri.partition(b"?")[2])
        try:
            await self._admit(request, path)
            answer = await self._route(request, path)
        except _Answer as error:
            answer = error
        if answer is not None and not (request.finished or request._disconnected):
            _write(request, answer)

    async def _admit(self, request, path):
        try:
            user = await self._auth.authenticate(request)
        except Unauthenticated:
            raise _Answer(401, "Unauthorized") from None
        attributes = self._auth.attributes(user, request.method, path)
        try:
            allowed = await self._auth.authorize(attributes)
        except AuthorizationError:
            raise _Answer(500, f"Authorization error ({attributes.describe()})") from None
        if not allowed:
            raise _Answer(403, f"Forbidden ({attributes.describe()})")

    async def _route(self, request, path):
        parts = [unquote(part) for part in path.split("/")[1:] if part]
        first = parts[0] if parts else ""
        get_routes = {"healthz": self._healthz, "pods": self._pods, "stats": self._stats,
                      "metrics": self._metrics, "spec": self._spec, "logs": self._logs,
                      "containerLogs": self._container_logs}
        if first == "checkpoint":
            if not self._settings.feature_gates.enabled(CHECKPOINT_GATE):
                raise _NOT_FOUND
            _allow(request, b"POST")
            return await self._checkpoint(request, parts[1:])
        if first not in get_routes:
            raise _NOT_FOUND
        _allow(request, b"GET", b"HEAD")
        return await get_routes[first](request, parts[1:])

    async def _healthz(self, request, rest):
        if rest:
            raise _NOT_FOUND
        return _Answer(200, "ok")

    async def _pods(self, request, rest):
        if rest:
            raise _NOT_FOUND
        items = []
        for pod, status in await maybeDeferred(self._runtime.pods):
            items.append(dict(pod, apiVersion="v1", kind="Pod", status=status))
        return _json({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})

    async def _stats(self, request, rest):
        if rest != ["summary"]:
            raise _NOT_FOUND
        stats = await maybeDeferred(self._runtime.stats)
        return _json(metrics.summary(stats, self._node_name))

    async def _metrics(self, request, rest):
        if rest != ["resource"]:
            raise _NOT_FOUND
        stats = await maybeDeferred(self._runtime.stats)
        read_at = self._reactor.seconds()
        return _Answer(200, metrics.resource_metrics(stats, read_at), metrics.PROMETHEUS_TYPE)

    async def _spec(self, request, rest):
        if rest:
            raise _NOT_FOUND
        return _json(metrics.machine_info(self._node_name, self._reactor))

    async def _logs(self, request, rest):
        try:
            content_type, body = serve_log_path(os.path.join(self._settings.root_dir, "logs"), rest)
        except LogError as error:
            raise _Answer(error.code, error.text) from None
        return _Answer(200, body, content_type)

    async def _container_logs(self, request, rest):
        if len(rest) != 3:
            text = "missing container name" if len(rest) == 2 else "404 page not found\n"
            raise _Answer(400 if len(rest) == 2 else 404, text)
        try:
            asked = LogRequest(request.args)
            log = await read_log(self._runtime, *rest)
        except LogError as error:
            raise _Answer(error.code, error.text) from None
        body = trim(log, asked.tail_lines, asked.limit_bytes)
        if not asked.follow or request.method == b"HEAD":
            return _Answer(200, body)
        await self._follow(request, rest, len(log), body, asked.limit_bytes)
        return None

    async def _follow(self, request, names, read, body, limit):
        """The log so far, then what the container adds, as it comes (no length)."""
        request.setResponseCode(200)
        request.setHeader(b"content-type", _TEXT)
        request.setHeader(b"x-content-type-options", b"nosniff")
        left = limit

        def write(data):
            nonlocal left
            if left is not None:
                data = data[:left]
                left -= len(data)
            request.write(data)
            return left is None or left > 0

        if write(body):
            await follow_log(self._reactor, self._runtime, names, read, write)
        request.finish()

    async def _checkpoint(self, request, rest):
        if len(rest) != 3:
            raise _NOT_FOUND
        try:
            timeout = parse_timeout(request.args.get(b"timeout"))
            archive = await checkpoint(self._reactor, self._runtime, self._settings.root_dir,
                                       *rest, timeout=timeout)
        except CheckpointError as error:
            raise _Answer(error.code, error.text) from None
        return _json({"items": [archive]})


def _allow(request, *methods):
    if request.method not in methods:
        request.setHeader(b"allow", b", ".join(methods))
        raise _Answer(405, "405: Method Not Allowed")


def _json(document):
    return _Answer(200, orjson.dumps(document), _JSON)


def _write(request, answer):
    request.setResponseCode(answer.code)
    request.setHeader(b"content-type", answer.content_type)
    request.setHeader(b"x-content-type-options", b"nosniff")
    request.setHeader(b"content-length", str(len(answer.body)).encode("ascii"))
    if request.method != b"HEAD":
        request.write(answer.body)
    request.finish()


class OrchletEndpoint(Service):
    """
    The TLS listener of the orchlet, on C{settings.port} (0: a free one).

    @param settings: the L{orchd.orchlet.settings.OrchletSettings}.

    @param client_ca_pems: PEM CA certificates client certificates must chain to.
    @param api: API-server client for the TokenReview and SubjectAccessReview
        webhooks (C{async request(method, path, body) -> (code, JSON)}).
    @param tls: the TLS options to serve with, shared by many endpoints
        (L{orchd.tls.server.server_tls_options}); None to make them from the
        certificate, key and CAs given.
    @ivar port: the port listened on, once started.
    """

    def __init__(self, reactor, settings, runtime, node_name, serving_cert_pem, serving_key_pem,
                 client_ca_pems, api=None, tls=None):
        self.auth = OrchletAuth(reactor, node_name, settings.anonymous, settings.token_webhook,
                                settings.authorization_mode, api)
        self._reactor = reactor
        self._settings = settings
        self._tls = tls if tls is not None else server_tls_options(
            serving_cert_pem, serving_key_pem, list(client_ca_pems))
        # The API server's request limits apply here too (orchd.server.channel).
        self.site = BoundedSite(OrchletResource(reactor, settings, runtime, node_name, self.auth),
                                reactor=reactor)
        self._listening = None
        self.port = None

    def privilegedStartService(self):
        self._listen()
        super().privilegedStartService()

    def startService(self):
        self._listen()
        super().startService()

    def _listen(self):
        if self._listening is None:
            self._listening = listen_tls(
                self._reactor, self._settings.port, self.site, self._tls,
                backlog=LISTEN_BACKLOG, interface=self._settings.bind_address)
            self.port = self._listening.getHost().port

    def stopService(self):
        super().stopService()
        listening, self._listening = self._listening, None
        if listening is not None:
            return listening.stopListening()
        return None
