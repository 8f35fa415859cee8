# -*- test-case-name: tests.server.test_proxy -*-
"""
Streamed subresources: forward a request, and its answer back, unbuffered.

The L{StreamForwarder} serves every stream connector
(L{orchd.registry.catalog.IStreamConnector}: C{nodes/proxy}, C{pods/log}):
it reads the subresource's options from the request
(L{orchd.server.streamoptions}), the connector names a
L{orchd.registry.streams.Location}, an C{IAgent} that presents the
location's TLS identity fetches it, and the answer's status, content type
and body go back to the client as they arrive (C{follow=true} logs never
end on their own). A slow client pauses the orchlet's connection; a client
that leaves closes it. A backend that cannot be reached is a 503
C{ServiceUnavailable} Status worded as upstream's proxy transport words it.
"""

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.web.client import Agent, PotentialDataLoss, ResponseDone
from twisted.web.http_headers import Headers
from twisted.web.iweb import UNKNOWN_LENGTH

from orchd.api.errors import StatusError
from orchd.client.body import BytesProducer
from orchd.registry.streams import ORCHLET_CLIENT
from orchd.tls.client import ClientTLSPolicy
from orchd.server.errors import request_gone
from orchd.server.streamoptions import read_options

log = Logger()

#: Seconds to wait for a TCP connection to the orchlet (upstream dials for 30 s).
CONNECT_TIMEOUT = 30
#: Most bytes of a backend's error reply turned into a Status message.
MAX_ERROR_BODY = 50000
#: Headers that belong to one connection, or to the API server's own
#: authentication, never forwarded either way.
_HOP_BY_HOP = frozenset((
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
    b"trailer", b"transfer-encoding", b"upgrade", b"host", b"content-length",
    b"authorization",
))


def _forwarded(headers):
    """The request or response headers worth passing on."""
    out = Headers()
    for name, values in headers.getAllRawHeaders():
        lowered = name.lower()
        if lowered in _HOP_BY_HOP or lowered.startswith(b"impersonate-"):
            continue
        out.setRawHeaders(name, values)
    return out


def unreachable(reason):
    """The Status for a backend that did not answer, as upstream's proxy transport."""
    value = reason.value if hasattr(reason, "value") else reason
    reasons = getattr(value, "reasons", None)
    if reasons:     # ResponseNeverReceived / RequestTransmissionFailed wrap the cause
        value = reasons[0].value
    text = str(value) or type(value).__name__
    return StatusError(503, "ServiceUnavailable", f"error trying to reach service: {text}")


class _Relay(Protocol):
    """Writes a response body to the client as it arrives; paced by the client."""

    def __init__(self, request, done):
        self.request = request
        self.done = done

    def connectionMade(self):
        # The body transport is a push producer: a full client buffer pauses it.
        self.request.registerProducer(self.transport, True)
        self.request.notifyFinish().addErrback(self._client_gone)

    def _client_gone(self, _):
        self.transport.stopProducing()

    def dataReceived(self, data):
        if not request_gone(self.request):
            self.request.write(data)

    def connectionLost(self, reason):
        request = self.request
        if not request_gone(request):
            request.unregisterProducer()
            if reason.check(ResponseDone, PotentialDataLoss):
                request.finish()
            else:
                # Cut off mid-body: the client must see an incomplete answer.
                log.info("Proxied response cut off: {reason}", reason=reason.value)
                request.loseConnection()
        self.done.callback(None)


class _Collect(Protocol):
    """Reads at most L{MAX_ERROR_BODY} bytes of an error reply."""

    def __init__(self, done):
        self.done = done
        self.chunks = []
        self.size = 0

    def dataReceived(self, data):
        if self.size < MAX_ERROR_BODY:
            self.chunks.append(data[:MAX_ERROR_BODY - self.size])
            self.size += len(data)
            if self.size >= MAX_ERROR_BODY:
                self.transport.stopProducing()

    def connectionLost(self, reason):
        if not reason.check(ResponseDone, PotentialDataLoss):
            log.debug("Error reply cut off: {reason}", reason=reason.value)
        self.done.callback(b"".join(self.chunks))


_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
            405: "MethodNotAllowed", 409: "Conflict", 422: "Invalid", 429: "TooManyRequests",
            500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


async def forward(agent, request, location):
    """
    Ask C{location} (its method, with C{request}'s headers and, for methods
    that have one, its body) and stream the answer back to C{request}.

    @param location: the L{orchd.registry.streams.Location}; its content
        type, if any, replaces the backend's, and with C{check_status} a
        non-2xx reply is answered as a Status with its text.
    @raise StatusError: 503 when the backend cannot be reached, or a checked
        reply's code; nothing has been written then.
    """
    method = location.method.encode("ascii")
    try:
        url = location.url.encode("ascii")
    except UnicodeEncodeError:
        # Only the host can be other than ASCII: an address a node reported.
        raise unreachable(ValueError(f"invalid host {location.host!r}")) from None
    body = None
    if method in (b"POST", b"PUT", b"PATCH"):
        request.content.seek(0)
        body = BytesProducer(request.content.read())
    pending = agent.request(method, url, _forwarded(request.requestHeaders), body)
    request.notifyFinish().addErrback(lambda _: pending.cancel())
    try:
        response = await pending
    except CancelledError:
        return
    except Exception as e:
        raise unreachable(e) from None
    if location.check_status and not 200 <= response.code < 300:
        done = Deferred()
        response.deliverBody(_Collect(done))
        text = (await done).decode("utf-8", "replace").strip()
        message = text or (f"the server responded with the status code {response.code} "
                           "but did not return more information")
        raise StatusError(response.code, _REASONS.get(response.code, "Unknown"), message)
    if request_gone(request):
        response.deliverBody(Protocol())    # drop it; closes the connection
        return
    request.setResponseCode(response.code, response.phrase)
    for name, values in _forwarded(response.headers).getAllRawHeaders():
        request.responseHeaders.setRawHeaders(name, values)
    if location.content_type is not None:
        request.setHeader(b"content-type", location.content_type.encode("ascii"))
    if response.length is not UNKNOWN_LENGTH and request.method != b"HEAD":
        request.setHeader(b"content-length", b"%d" % response.length)
    done = Deferred()
    response.deliverBody(_Relay(request, done))
    await done


class StreamForwarder:
    """
    Serves streamed subresources: the request's options go to the
    subresource's L{IStreamConnector<orchd.registry.catalog.IStreamConnector>},
    and the request goes on to the location it names.

    @param orchlet_agent: the C{IAgent} for L{ORCHLET_CLIENT} locations, an
        orchlet's own port (it presents the API server's orchlet client
        certificate), see L{orchlet_agent}.
    @param plain_agent: the C{IAgent} for locations without a TLS identity
        (a node's other ports), see L{plain_agent}; C{orchlet_agent} if None.
    """

    def __init__(self, orchlet_agent, plain_agent=None):
        self._agents = {ORCHLET_CLIENT: orchlet_agent, None: plain_agent or orchlet_agent}

    async def serve(self, request, info, connector, ctx):
        """
        Answer C{request} for the subresource C{connector} serves.

        @param info: the request's L{orchd.server.requestinfo.RequestInfo}.
        @param ctx: the L{orchd.registry.context.RequestContext} (its
            namespace is the parent's).
        @return: (awaitable) fires once the response is complete.
        @raise StatusError: only before anything is written.
        """
        options = read_options(connector.options, request, info)
        location = await connector.locate(ctx, info.name, options)
        await forward(self._agents[location.identity], request, location)


def orchlet_agent(reactor, ca_pem, client_cert_pem, client_key_pem, pool=None):
    """
    An C{IAgent} for orchlets: verifies their serving certificates against
    the cluster CA (by address, IP or name) and presents the API server's
    orchlet client certificate (none when its PEMs are None). Connections
    are not kept alive unless C{pool} is persistent.
    """
    policy = ClientTLSPolicy(ca_pem, client_cert_pem, client_key_pem)
    return Agent(reactor, contextFactory=policy, connectTimeout=CONNECT_TIMEOUT, pool=pool)


def plain_agent(reactor, ca_pem, pool=None):
    """An C{IAgent} for a node's other ports: C{https} verified by the cluster CA, no client
    certificate."""
    return Agent(reactor, contextFactory=ClientTLSPolicy(ca_pem), connectTimeout=CONNECT_TIMEOUT,
                 pool=pool)
