# -*- test-case-name: tests.server.test_channel -*-
"""
HTTP/1.1 connections with bounds on size, time and number.

twisted.web's L{HTTPChannel} drops an over-long request line or header line
without an answer, answers other excesses with a bare 400, reads any body a
Content-Length announces (after a 100 Continue), lets a Content-Length of
thousands of digits raise out of the parser, and has one idle timeout that
every received byte resets, so a client that trickles a byte at a time keeps
its connection, and its descriptor, for ever; so does one that neither
answers the TLS close alert of a connection being closed nor hangs up.

L{BoundedChannel} applies the L{RequestLimits} of its L{BoundedSite}: each
excess gets its own answer (400, 408, 413, 414, 431) with a body the site
writes (a Status for the API server), then the connection closes. Each
connection has one deadline, moved as it goes from state to state::

    handshake -> idle -> headers [-> body] -> handling -> idle -> ...
                  (any state) -> closing -> aborted if still open

A request being handled has none: a watch or a followed log lasts as long as
its handler says. Connections with no request being handled are also
counted per site, and past a bound the oldest of them is dropped, so idle
or half-sent connections cannot take every file descriptor.
"""

from collections import OrderedDict
from io import BytesIO

from twisted.internet.interfaces import IHandshakeListener, ISSLTransport
from twisted.logger import Logger
from twisted.web.http import HTTPChannel
from twisted.web.server import Request, Site
from zope.interface import implementer

from orchd.server.requestlimits import RequestLimits

_PHRASES = {400: b"Bad Request", 408: b"Request Timeout", 413: b"Content Too Large",
            414: b"URI Too Long", 431: b"Request Header Fields Too Large"}
_TEXT = b"text/plain; charset=utf-8"

# Connection states; a request being handled ("handling") has no deadline.
_HANDSHAKE = "handshake"
_IDLE = "idle"
_HEADERS = "headers"
_BODY = "body"
_HANDLING = "handling"
_CLOSING = "closing"


@implementer(IHandshakeListener)
class BoundedChannel(HTTPChannel):
    """
    One HTTP/1.1 connection under its site's L{RequestLimits}.

    @ivar limits: the L{RequestLimits} in force.
    """

    _log = Logger()

    def __init__(self, limits, pending):
        super().__init__()
        self.limits = limits
        self._pending = pending
        # twisted.web counts the head's lines and bytes as they arrive (no
        # code of ours runs per line); its refusals are given our answers in
        # lineLengthExceeded and _respondToBadRequestAndDisconnect.
        self.delimiter = b"\n"
        self.MAX_LENGTH = limits.max_line + 1   # the CR before LF is not counted
        self.totalHeadersSize = limits.max_head
        self.maxHeaders = limits.max_headers
        self._state = None
        self._timer = None
        self._timer_for = None     # the state whose deadline the timer holds
        self._closing = False
        self._body_due = 0.0       # when the body being received must be whole

    # -- addresses ------------------------------------------------------------

    _host = _peer_address = None

    def getHost(self):
        """
        The connection's local address, read once: twisted.web asks for it
        for every request, and reading it is a system call (C{getsockname})
        and a new address object each time.
        """
        host = self._host
        if host is None:
            host = self._host = super().getHost()
        return host

    def getPeer(self):
        """The client's address, made once (twisted.web asks for it for every request)."""
        peer = self._peer_address
        if peer is None:
            peer = self._peer_address = super().getPeer()
        return peer

    # -- deadlines ------------------------------------------------------------

    def _enter(self, state, timeout):
        """Go to C{state}, whose deadline is C{timeout} seconds from now."""
        self._state = state
        self._arm(state, timeout)

    def _arm(self, state, timeout):
        self._timer_for = state
        timer = self._timer
        if timer is None:
            self._timer = self.callLater(timeout, self._expired)
        else:
            timer.reset(timeout)

    def _expired(self):
        self._timer = None
        self._timer_for = None
        state = self._state
        if state == _HANDLING:
            # Left running while a request was handled (cheaper than
            # cancelling it for every request); the next state sets another.
            return
        if state == _HEADERS:
            self.refuse(408, "the request headers did not arrive within "
                             f"{self.limits.header_timeout:g}s")
        elif state == _BODY:
            if self.site.reactor.seconds() < self._body_due:
                self.refuse(408, f"no part of the request body arrived for "
                                 f"{self.limits.body_pause_timeout:g}s")
            else:
                self.refuse(408, f"the request body did not arrive within "
                                 f"{self.limits.body_timeout:g}s")
        elif state == _IDLE:
            self._log.debug("Closing idle connection from {peer}", peer=self._peer())
            self.loseConnection()
        else:
            self._log.debug("Aborting connection from {peer} ({state})", peer=self._peer(),
                            state=state)
            self._abort()

    def _abort(self):
        self._closing = True
        self._state = _CLOSING
        self.transport.abortConnection()

    def evict(self):
        """Drop this connection now: its site has too many without a request."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_for = None
        self._abort()

    def _peer(self):
        return str(self.getPeer()) if self.transport is not None else "?"

    # -- connection events ----------------------------------------------------

    def connectionMade(self):
        super().connectionMade()
        if ISSLTransport.providedBy(self.transport):
            self._enter(_HANDSHAKE, self.limits.tls_handshake_timeout)
        else:
            self._enter(_IDLE, self.limits.header_timeout)
        self._pending.add(self)

    def handshakeCompleted(self):
        """The TLS handshake is done: the first request's headers are due."""
        if self._state == _HANDSHAKE:
            self._enter(_IDLE, self.limits.header_timeout)

    def dataReceived(self, data):
        if self._closing:
            return
        if self._state == _IDLE:
            self._state = _HEADERS
        HTTPChannel.dataReceived(self, data)
        # Deadlines for the request's head and body are set only if they are
        # still incomplete now: a request that arrived whole (the usual case)
        # moves no timer until it is answered.
        state = self._state
        if state == _BODY:
            # Due at the body's deadline, or sooner if it pauses.
            now = self.site.reactor.seconds()
            if self._timer_for != _BODY:
                self._body_due = now + self.limits.body_timeout
            self._arm(_BODY, min(self.limits.body_pause_timeout, self._body_due - now))
        elif state == _HEADERS and self._timer_for != _HEADERS:
            self._arm(_HEADERS, self.limits.header_timeout)

    def lineReceived(self, line):
        # Lines end at LF, with or without CR before it, as Go's servers
        # read them: a client that sends bare LF gets an answer, not a
        # wait for the head's deadline.
        if line[-1:] == b"\r":
            line = line[:-1]
        HTTPChannel.lineReceived(self, line)

    def rawDataReceived(self, data):
        if not self._closing:
            HTTPChannel.rawDataReceived(self, data)

    def connectionLost(self, reason):
        self._pending.discard(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_for = None
        self._closing = True
        self._state = _CLOSING
        super().connectionLost(reason)

    def resumeProducing(self):
        # The client took everything written so far: an idle or closing
        # connection's deadline counts from now, not from the response's end.
        super().resumeProducing()
        if self._timer is not None:
            if self._state == _IDLE:
                self._timer.reset(self.limits.idle_timeout)
            elif self._state == _CLOSING:
                self._timer.reset(self.limits.close_timeout)

    def loseConnection(self):
        if self._state != _CLOSING:
            self._closing = True
            self._enter(_CLOSING, self.limits.close_timeout)
            self._pending.add(self)
        return super().loseConnection()

    # -- the request head -----------------------------------------------------

    def lineLengthExceeded(self, line):
        if self._receivedHeaderSize == 0:      # no line of this request yet
            return self.refuse(414, f"the request line is longer than "
                                    f"{self.limits.max_line} bytes")
        return self.refuse(431, f"a request header field is longer than "
                                f"{self.limits.max_line} bytes")

    def headerReceived(self, line):
        # Decide on Content-Length before twisted.web converts it: a value of
        # thousands of digits makes int() raise there, and a body announced
        # too large is refused before any of it (or a 100 Continue) is sent.
        if line[14:15] == b":" and line[:14].lower() == b"content-length":
            value = line[15:].strip(b" \t")
            if value.isdigit():     # anything else is twisted.web's 400
                value = value.lstrip(b"0") or b"0"
                if len(value) > 18 or int(value) > self.limits.max_body:
                    self._body_too_large()
                    return False
                line = b"Content-Length: " + value
        return HTTPChannel.headerReceived(self, line)

    def allHeadersReceived(self):
        if self.length != 0:        # None: chunked, length unknown
            self._state = _BODY     # its deadline: see dataReceived
        HTTPChannel.allHeadersReceived(self)

    def allContentReceived(self):
        if self._closing:           # a body refused part way
            return
        self._state = _HANDLING
        self._pending.discard(self)
        HTTPChannel.allContentReceived(self)

    def requestDone(self, request):
        self._pending.add(self)
        if self.persistent and not self._closing:
            # Before the base class replays pipelined data into dataReceived.
            self._enter(_IDLE, self.limits.idle_timeout)
        HTTPChannel.requestDone(self, request)

    # -- answers --------------------------------------------------------------

    def body_received(self, size):
        """
        C{size} bytes of this request's body have arrived so far (called by
        L{BoundedRequest}); False once that is more than the limit, which
        has then been answered.
        """
        if size > self.limits.max_body:
            self._body_too_large()
            return False
        return True

    def _body_too_large(self):
        self.refuse(413, f"Request entity too large: limit is {self.limits.max_body}")

    def _respondToBadRequestAndDisconnect(self):
        # twisted.web's answer to a head over its bounds, or to a malformed
        # request line, header, length or chunk: ours, with a body.
        limits = self.limits
        if self._receivedHeaderSize > self.totalHeadersSize:
            self.refuse(431, "the request line and header fields are larger than "
                             f"{limits.max_head} bytes")
        elif self._receivedHeaderCount > self.maxHeaders:
            self.refuse(431, f"the request has more than {limits.max_headers} header fields")
        else:
            self.refuse(400, "the request is not valid HTTP/1.1")

    def query_within_limit(self, target):
        """
        Whether the request target C{target} has at most the allowed number
        of query parameters (counted, not parsed); if not, the request has
        been answered 400.
        """
        query = target.find(b"?")
        if query < 0 or (target.count(b"&", query) + target.count(b";", query)
                         < self.limits.max_query_params):
            return True
        self.refuse(400, f"too many query parameters: the limit is "
                         f"{self.limits.max_query_params}")
        return False

    def refuse(self, code, message):
        """
        Answer C{code} with C{message} instead of handling the request, then
        close: the rest of what the client sends is not read.
        """
        if self._closing:
            return
        self._log.debug("Refused a request from {peer}: {code} {message}",
                        peer=self._peer(), code=code, message=message)
        # Stop the line parser on this line: a TLS transport still waiting
        # for the client's close alert does not look closed to it yet.
        self.clearLineBuffer()
        content_type, body = self.site.refusal(code, message)
        self.transport.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nX-Content-Type-Options: nosniff\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
            % (code, _PHRASES[code], content_type, len(body), body))
        self.loseConnection()


class BoundedRequest(Request):
    """
    A request whose body is held in memory and refused (413) past the limit,
    and whose query is refused (400) past its number of parameters before
    anything parses it.

    twisted.web would spool a large body to a temporary file; the limit keeps
    it small, and the channel stops reading once it is crossed.
    """

    _received = 0

    def requestReceived(self, command, path, version):
        if self.channel.query_within_limit(path):
            super().requestReceived(command, path, version)

    def gotLength(self, length):
        self.content = BytesIO()

    def handleContentChunk(self, data):
        self._received += len(data)
        if self.channel.body_received(self._received):
            self.content.write(data)


class PendingConnections:
    """
    A site's connections that have no request being handled, oldest first.

    Past C{bound}, adding one drops the oldest: under a flood of idle or
    slow connections the newest get served, and descriptors stay free for
    the requests in progress.
    """

    log = Logger()
    #: Seconds between two warnings about dropped connections.
    WARN_INTERVAL = 60.0

    def __init__(self, bound, clock):
        self.bound = bound
        self._clock = clock
        self._channels = OrderedDict()
        self._dropped = 0
        self._warned_at = None

    def __len__(self):
        return len(self._channels)

    def add(self, channel):
        channels = self._channels
        channels[channel] = None
        if len(channels) > self.bound:
            oldest, _ = channels.popitem(last=False)
            oldest.evict()
            self._note_drop()

    def discard(self, channel):
        self._channels.pop(channel, None)

    def _note_drop(self):
        self._dropped += 1
        now = self._clock.seconds()
        if self._warned_at is None or now - self._warned_at >= self.WARN_INTERVAL:
            self.log.warn("Dropped {count} connection(s) with no request in progress: more "
                          "than {bound} were open", count=self._dropped, bound=self.bound)
            self._dropped = 0
            self._warned_at = now


class BoundedSite(Site):
    """
    A Site whose connections are L{BoundedChannel}s under C{limits}.

    twisted.web's own idle timeout (reset by every byte received) is off:
    the channels keep their own deadlines. Only HTTP/1.1 is offered over
    TLS, since the bounds are those of HTTP/1.1.

    @ivar limits: the L{RequestLimits} of new connections.
    @ivar pending: the L{PendingConnections} of this site.
    """

    requestFactory = BoundedRequest
    displayTracebacks = False

    def __init__(self, resource, limits=None, **kwargs):
        kwargs["timeout"] = None
        # No HTML form decoding of POST bodies into request.args: no listener
        # reads form arguments (an API body must not set query options), and
        # twisted.web parses each POST's Content-Type through the email
        # package to look for them (a sixth of a create's CPU), then a
        # multipart body of megabytes, on the reactor.
        kwargs.setdefault("parsePOSTFormSubmission", False)
        super().__init__(resource, **kwargs)
        self.limits = limits or RequestLimits()
        self.pending = PendingConnections(self.limits.max_pending_connections, self.reactor)

    def buildProtocol(self, addr):
        channel = BoundedChannel(self.limits, self.pending)
        channel.factory = self
        channel.site = self
        channel.requestFactory = self.requestFactory
        channel.callLater = self.reactor.callLater
        channel.timeOut = None
        return channel

    def acceptableProtocols(self):
        return [b"http/1.1"]

    def refusal(self, code, message):
        """
        The body of an answer the connection gives by itself (too large,
        too slow, malformed): C{(content type, bytes)}. Plain text here.
        """
        return _TEXT, message.encode("utf-8") + b"\n"
