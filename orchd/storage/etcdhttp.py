# -*- test-case-name: tests.storage.test_etcdhttp -*-
"""
The HTTP/1.1 client under the etcd gateway: kept-alive connections, one call each at a time.

Every store call is one small POST to a known host, answered with a
C{Content-Length} body; a watch is one POST answered with an endless
chunked body. That needs far less than a general client: no URL parsing,
redirects, cookies or header objects per call, and no endpoint built per
request. Twisted's C{Agent} did all of that and cost more CPU per call
than etcd's own work on the other side, so the gateway speaks HTTP/1.1
itself: one prebuilt request written in one piece, a status line and a
few headers parsed with C{bytes.find}, the body read by length or by
chunks.

A call fails in one of two ways, and the difference matters for writes:
L{NotSent} (no connection, or TLS refused before any request byte could
be read) may be retried anywhere; L{Lost} (the connection broke or the
call timed out after the request was written) may or may not have been
applied.
"""

from twisted.internet import defer
from twisted.internet.endpoints import HostnameEndpoint, connectProtocol, wrapClientTLS
from twisted.internet.protocol import Protocol
from twisted.logger import Logger

#: The most a status line and headers may take before the answer is refused.
MAX_HEAD = 64 * 1024
HEX_DIGITS = b"0123456789abcdefABCDEF"


class NotSent(Exception):
    """The request never reached etcd: safe to send again, anywhere."""


class Lost(Exception):
    """The request may have reached etcd, but no whole answer came back."""


def _tls_refused(reason):
    """Whether a connection ended by a TLS failure (the handshake, so nothing was read)."""
    from OpenSSL.SSL import Error

    return reason is not None and reason.check(Error) is not None


class GatewayConnection(Protocol):
    """
    One connection to one etcd member.

    L{call} sends a request and fires with C{(status, body)}; with
    C{on_data} a 200 answer fires as soon as its head is in, and each piece
    of its body goes to C{on_data} until the connection ends
    (C{finished}). Calls on one connection never overlap.
    """

    log = Logger()

    def __init__(self):
        self.finished = defer.Deferred()
        self.reusable = False
        self._buffer = b""
        self._waiting = None
        self._on_data = None
        self._head = None
        self._answered_once = False

    # Twisted's side.

    def connectionMade(self):
        set_nodelay = getattr(self.transport, "setTcpNoDelay", None)
        if set_nodelay is not None:
            set_nodelay(True)
        self.reusable = True

    def connectionLost(self, reason):
        self.reusable = False
        if self._head is not None and self._on_data is None and self._head[1:] == (None, False):
            # An answer without a length or chunks ends with its connection.
            self._complete(self._buffer)
        waiting, self._waiting = self._waiting, None
        if waiting is not None:
            nothing_back = self._head is None and not self._answered_once
            if nothing_back and _tls_refused(reason):
                waiting.errback(NotSent(f"TLS: {reason.getErrorMessage()}"))
            else:
                waiting.errback(Lost(reason.getErrorMessage()))
        if not self.finished.called:
            self.finished.callback(None)

    def dataReceived(self, data):
        self._buffer += data
        if self._head is None and not self._read_head():
            return
        self._read_body()

    # Calls.

    def call(self, request, on_data=None):
        """Send C{request} (complete bytes); see the class docstring."""
        if self._waiting is not None or not self.reusable:
            return defer.fail(NotSent("connection busy or closed"))
        self._waiting = defer.Deferred()
        self._on_data = on_data
        self._head = None
        self.transport.write(request)
        return self._waiting

    def abort(self):
        """Drop the connection now (a timed-out call, a stopped stream, closing)."""
        self.reusable = False
        if self.transport is not None:
            self.transport.abortConnection()

    # Parsing.

    def _read_head(self):
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD:
                self._protocol_error("an answer head over 64 KiB")
            return False
        lines = self._buffer[:end].split(b"\r\n")
        self._buffer = self._buffer[end + 4:]
        try:
            status = int(lines[0].split(b" ", 2)[1])
        except (IndexError, ValueError):
            self._protocol_error(f"a bad status line {lines[0][:80]!r}")
            return False
        length, chunked = None, False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                value = value.strip()
                if not value.isdigit():
                    self._protocol_error(f"a bad Content-Length {value[:20]!r}")
                    return False
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection" and b"close" in value.lower():
                self.reusable = False
        self._head = (status, None if chunked else length, chunked)
        self._body = []
        if self._on_data is not None:
            if status == 200:
                self.reusable = False  # a stream's connection is never reused
                self._fire((status, None))
            else:
                self._on_data = None  # an error answer is read whole
        return True

    def _read_body(self):
        status, length, chunked = self._head
        if chunked:
            self._read_chunks()
        elif self._on_data is not None:
            # A stream without chunks: everything until the connection ends.
            data, self._buffer = self._buffer, b""
            if data:
                self._on_data(data)
        elif length is not None and len(self._buffer) >= length:
            body, self._buffer = self._buffer[:length], self._buffer[length:]
            self._complete(body)

    def _read_chunks(self):
        while True:
            line_end = self._buffer.find(b"\r\n")
            if line_end < 0:
                return
            digits = self._buffer[:line_end].split(b";", 1)[0].strip()
            if not digits or digits.strip(HEX_DIGITS):
                self._protocol_error("a bad chunk size")
                return
            size = int(digits, 16)
            if size == 0:
                trailer_end = self._buffer.find(b"\r\n\r\n", line_end)
                if trailer_end < 0 and self._buffer[line_end + 2:line_end + 4] != b"\r\n":
                    return
                self._buffer = b""
                self._complete(b"".join(self._body))
                return
            start = line_end + 2
            if len(self._buffer) < start + size + 2:
                return
            piece = self._buffer[start:start + size]
            self._buffer = self._buffer[start + size + 2:]
            if self._on_data is not None:
                self._on_data(piece)
            else:
                self._body.append(piece)

    def _complete(self, body):
        self._answered_once = True
        status = self._head[0]
        self._head = None
        if self._on_data is not None:
            # The end of a stream (its 0 chunk): the connection is never reused,
            # so drop it, or C{finished} would not fire while the server keeps it.
            self.abort()
            return
        self._fire((status, body))

    def _fire(self, result):
        waiting, self._waiting = self._waiting, None
        if waiting is not None:
            waiting.callback(result)

    def _protocol_error(self, what):
        self.log.warn("etcd answered with {what}; dropping the connection", what=what)
        self.abort()


class GatewayPool:
    """
    Kept-alive connections to each etcd member, and the calls made on them.

    @param endpoints: C{(scheme, host, port)} of each member.
    @param tls_policy: an C{IPolicyForHTTPS} for C{https} members.
    """

    def __init__(self, reactor, endpoints, tls_policy=None, timeout=10, max_idle=32):
        self.reactor = reactor
        self.timeout = timeout
        self.max_idle = max_idle
        self._connectors = [self._connector(*member, tls_policy) for member in endpoints]
        self._hosts = [f"{host}:{port}".encode("ascii") for _, host, port in endpoints]
        self._idle = [[] for _ in endpoints]
        self._open = set()

    def _connector(self, scheme, host, port, tls_policy):
        endpoint = HostnameEndpoint(self.reactor, host, port, timeout=self.timeout)
        if scheme == "https":
            if tls_policy is None:
                from twisted.web.client import BrowserLikePolicyForHTTPS

                tls_policy = BrowserLikePolicyForHTTPS()
            creator = tls_policy.creatorForNetloc(host.encode("ascii"), port)
            endpoint = wrapClientTLS(creator, endpoint)
        return endpoint

    def request(self, index, path, body):
        """The bytes of a JSON POST of C{body} to C{path} on member C{index}."""
        return b"".join((b"POST ", path, b" HTTP/1.1\r\nHost: ", self._hosts[index],
                         b"\r\nContent-Type: application/json\r\nContent-Length: ",
                         str(len(body)).encode("ascii"), b"\r\n\r\n", body))

    async def _connection(self, index):
        idle = self._idle[index]
        while idle:
            connection = idle.pop()
            if connection.reusable:
                return connection
        try:
            connection = await connectProtocol(self._connectors[index], GatewayConnection())
        except Exception as e:
            raise NotSent(str(e)) from None
        self._open.add(connection)
        connection.finished.addBoth(lambda _: self._open.discard(connection))
        return connection

    async def call(self, index, path, body):
        """POST C{body} to member C{index}: C{(status, answer bytes)}, or L{NotSent}/L{Lost}."""
        connection = await self._connection(index)
        timer = self.reactor.callLater(self.timeout, connection.abort)
        try:
            result = await connection.call(self.request(index, path, body))
        finally:
            if timer.active():
                timer.cancel()
        if connection.reusable and len(self._idle[index]) < self.max_idle:
            self._idle[index].append(connection)
        else:
            connection.abort()
        return result

    async def stream(self, index, path, body, on_data):
        """
        POST C{body} and keep reading: C{(200, connection)} once etcd accepts
        (the body then flows to C{on_data}), else C{(status, answer bytes)}.
        """
        connection = await self._connection(index)
        timer = self.reactor.callLater(self.timeout, connection.abort)
        try:
            status, answer = await connection.call(self.request(index, path, body), on_data)
        finally:
            if timer.active():
                timer.cancel()
        if status == 200:
            return status, connection
        connection.abort()
        return status, answer

    async def close(self):
        """Drop every connection and wait until each is gone."""
        for idle in self._idle:
            idle.clear()
        open_now = list(self._open)
        for connection in open_now:
            connection.abort()
        await defer.DeferredList([c.finished for c in open_now])
