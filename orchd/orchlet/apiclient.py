# -*- test-case-name: tests.integration.test_orchlet_agent,tests.integration.test_node_join -*-
"""
The node agent's one way to talk HTTPS to the API server (and webhooks).

The agent sends a handful of small JSON requests over and over (a Lease
renewal every 10 s, pod status patches, events), so connections are kept
alive (L{orchd.orchlet.keptconn}: each request written whole, the answer
read by a small parser), closed when the agent stops; it follows its pods
with one watch (L{APIClient.watch}), a stream of JSON lines, read through
twisted.web's C{Agent}. The server
is verified against the cluster CA; the caller is its client certificate,
or a bearer token while it has none (joining with a bootstrap token).
Answers come back as C{(code, body)}: JSON decoded, anything else as text,
so callers branch on codes instead of catching exceptions.

Neither needs cookies, redirects or content decoding, and a node sends
many small requests (a hundred simulated nodes share one process with the
server, so every cycle a request costs here is taken from the server).
"""

import orjson
from twisted.internet.defer import Deferred, DeferredList
from twisted.internet.endpoints import HostnameEndpoint, wrapClientTLS
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.web.client import URI, Agent, HTTPConnectionPool, _HTTP11ClientFactory, readBody
from twisted.web.http_headers import Headers
from twisted.web.iweb import IAgentEndpointFactory
from zope.interface import implementer

from orchd.client.body import BytesProducer
from orchd.orchlet.keptconn import KeptConnections, request_bytes
from orchd.tls.client import ClientTLSPolicy

#: Connections kept open to the server.
KEPT_CONNECTIONS = 4
#: Seconds a request may take before it fails (a hung server must not stall heartbeats).
REQUEST_TIMEOUT = 15.0


class APIClient:
    """
    JSON requests to one server, over kept-alive connections.

    @param ca_pem: the CA bundle the server must chain to; None with
        C{verify=False} only for reading cluster-info before trust exists.
    @param cert_pem: the client certificate presented (with C{key_pem}).
    @param token: a bearer token sent with every request.
    @param kept: idle connections kept open (L{KEPT_CONNECTIONS}).
    """

    def __init__(self, reactor, server_url, ca_pem, cert_pem=None, key_pem=None, token=None,
                 verify=True, timeout=REQUEST_TIMEOUT, kept=KEPT_CONNECTIONS):
        self.reactor = reactor
        self.url = server_url.rstrip("/")
        # The Agent's pool: the pod watch, and requests to absolute URLs.
        self.pool = HTTPConnectionPool(reactor, persistent=True)
        self.pool.retryAutomatically = False
        self.pool._factory = _QuietFactory
        self.pool.maxPersistentPerHost = kept
        policy = ClientTLSPolicy(ca_pem, cert_pem, key_pem, verify=verify)
        endpoints = _KeptEndpoints(reactor, policy)
        self.agent = Agent.usingEndpointFactory(reactor, endpoints, pool=self.pool)
        self._headers = {b"accept": [b"application/json"]}
        # The same headers, as the kept connections write them.
        self._lines = [("Accept", "application/json")]
        if token:
            self._headers[b"authorization"] = [b"Bearer " + token.encode("ascii")]
            self._lines.append(("Authorization", "Bearer " + token))
        uri = URI.fromBytes(self.url.encode("utf-8"))
        self._base_path = uri.path.decode("utf-8").rstrip("/")
        # The pod worker, the event recorder, the Lease and the node status
        # each have a request out at times: keep a connection for each.
        self.kept = KeptConnections(reactor, endpoints.endpointForURI(uri), _host_value(uri),
                                    kept)
        self.timeout = timeout

    def _send(self, method, url, headers, data=None):
        """The response once its headers arrive, or a failure after C{timeout} seconds."""
        producer = BytesProducer(data) if data is not None else None
        answer = self.agent.request(method.encode("ascii"), url.encode("utf-8"),
                                    Headers(headers), producer)
        return answer.addTimeout(self.timeout, self.reactor)

    async def request(self, method, path, body=None, content_type="application/json"):
        """
        One request to C{path} (below the server URL, or an absolute URL).

        @param body: a dict/list (sent as JSON), bytes or text; None for none.
        @return: C{(code, body)}: decoded JSON if the answer is JSON, else text.
        @raise Exception: for connection failures and timeouts.
        """
        data = None
        if body is not None:
            if isinstance(body, str):
                data = body.encode("utf-8")
            elif isinstance(body, bytes):
                data = body
            else:
                data = orjson.dumps(body)
        if path.startswith(("https://", "http://")):
            headers = dict(self._headers)
            if data is not None:
                headers[b"content-type"] = [content_type.encode("ascii")]
            response = await self._send(method, path, headers, data)
            raw = await readBody(response)
            code = response.code
            ctype = (response.headers.getRawHeaders(b"content-type") or [b""])[0]
        else:
            lines = self._lines
            if data is not None:
                lines = lines + [("Content-Type", content_type)]
            code, ctype, raw = await self.kept.request(
                request_bytes(method, self._base_path + path, self.kept.host, lines, data),
                self.timeout)
        if ctype.startswith(b"application/json") and raw:
            try:
                return code, orjson.loads(raw)
            except orjson.JSONDecodeError:
                pass
        return code, raw.decode("utf-8", "replace")

    async def watch(self, path, on_event):
        """
        Open a watch at C{path}: C{(200, EventStream)} once the server has
        accepted it (each event, decoded, then goes to C{on_event}), else
        C{(code, body)} as L{request} answers.

        @raise Exception: for connection failures and a timeout before the answer starts.
        """
        response = await self._send("GET", self.url + path, self._headers)
        if response.code != 200:
            return response.code, (await readBody(response)).decode("utf-8", "replace")
        stream = EventStream(on_event)
        response.deliverBody(stream)
        return 200, stream

    def close(self):
        """Close the kept-alive connections; a Deferred that fires when they are closed."""
        return DeferredList([self.kept.close(), self.pool.closeCachedConnections()],
                            consumeErrors=True)


def _host_value(uri):
    """The C{Host} header for C{uri}, as C{Agent} writes it (no default port)."""
    host = uri.host.decode("ascii")
    if ":" in host:
        host = f"[{host}]"
    default = 443 if uri.scheme == b"https" else 80
    return host if uri.port == default else f"{host}:{uri.port}"


class _QuietFactory(_HTTP11ClientFactory):
    """
    The pool's connection factory without a log line at each connection's
    start and end (thousands of simulated nodes each open one).
    """

    noisy = False


class EventStream(Protocol):
    """
    A watch's answer, one JSON event per line, each handed to C{on_event}.

    @ivar ended: fires when the stream ends, by either side.
    """

    log = Logger()

    def __init__(self, on_event):
        self.on_event = on_event
        self.ended = Deferred()
        self._buffer = b""

    def dataReceived(self, data):
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                self.log.warn("A watch sent a line that is not JSON; ending it")
                self.stop()
                return
            self.on_event(event)

    def connectionLost(self, reason):
        if not self.ended.called:
            self.ended.callback(None)

    def stop(self):
        """End the stream: its connection is closed, not kept."""
        if self.transport is not None:
            self.transport.stopProducing()


@implementer(IAgentEndpointFactory)
class _KeptEndpoints:
    """
    One TLS endpoint per server, built once: C{Agent} asks for an endpoint on
    every request, even one a pooled connection then serves.
    """

    def __init__(self, reactor, policy):
        self._reactor = reactor
        self._policy = policy
        self._endpoints = {}

    def endpointForURI(self, uri):
        key = (uri.scheme, uri.host, uri.port)
        endpoint = self._endpoints.get(key)
        if endpoint is None:
            if len(self._endpoints) >= 16:
                self._endpoints.clear()
            endpoint = HostnameEndpoint(self._reactor, uri.host, uri.port)
            if uri.scheme == b"https":
                endpoint = wrapClientTLS(self._policy.creatorForNetloc(uri.host, uri.port),
                                         endpoint)
            self._endpoints[key] = endpoint
        return endpoint

