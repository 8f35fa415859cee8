# -*- test-case-name: tests.orchlet.test_keptconn -*-
"""
Kept-alive HTTP/1.1 connections for the node agent's small requests.

A node agent sends the same few small requests over and over (pod status
patches, events, Lease renewals), and a hundred simulated nodes share one
process with the API server, where every cycle the client spends is taken
from the server. twisted.web's C{Agent} builds a request, a parser, a body
producer and a chain of Deferreds per request, and writes the head and the
body separately (two TLS records); this client writes each request whole in
one write, parses the answer in one small state machine, and keeps at most
C{kept} idle connections open for the next requests, as C{Agent}'s
persistent pool did. One connection carries one request at a time (no
pipelining); a request finding no idle connection opens one.

Answers are C{(code, content_type, body)} with the whole body read
(C{Content-Length}, chunked, or up to the end of the connection). A
malformed answer, or one over L{MAX_HEAD} / L{MAX_BODY}, fails the request
with L{BadResponse} and closes its connection. A request is never sent
twice: a failure is the caller's to retry, as before. A request unanswered
for its timeout fails with C{TimeoutError} and its connection is aborted;
the deadlines of all requests share one timer (L{deadlines_of}).
"""

import re

from twisted.internet.defer import Deferred, DeferredList, TimeoutError, succeed
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure

from orchd.timing.timers import deadlines_of

#: The most bytes of a status line and headers accepted.
MAX_HEAD = 64 * 1024
#: The most bytes of a body accepted (the API server's objects are smaller).
MAX_BODY = 64 * 1024 * 1024

_NO_BODY = (204, 304)
#: What may not appear in a request line's method or target.
_SPACE_OR_CONTROL = re.compile(r"[\x00-\x20\x7f]")


class BadResponse(Exception):
    """The server's answer is not HTTP/1.1 this client reads; the connection is closed."""


def request_bytes(method, target, host, headers, body=None):
    """
    One request, head and body, as sent (text as UTF-8, as C{Agent} sends a URL).

    @param headers: C{[(name, value)]} of text; C{Content-Length} is added
        for a body (C{bytes}). A line break in a value becomes a space, as
        twisted.web's C{Headers} does, so a value cannot add a header.
    @raise ValueError: for a method or target with spaces or control
        characters (they would end the request line early).
    """
    for part in (method, target):
        if not part or _SPACE_OR_CONTROL.search(part):
            raise ValueError(f"invalid request line part: {part!r}")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    for name, value in headers:
        if "\r" in value or "\n" in value:
            value = value.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")
    return head + body if body else head


class KeptConnection(Protocol):
    """
    One connection, one request at a time.

    @ivar reusable: whether the last answer left the connection open for another request.
    """

    def __init__(self, pool, max_body=MAX_BODY):
        self._pool = pool
        self._max_body = max_body
        self._answer = None          # the Deferred of the request under way
        self._deadlines = deadlines_of(pool.reactor)
        self._expire = self._timed_out      # made once: the key of its deadlines
        self._timeout = 0.0
        self._buffer = bytearray()
        self._state = None
        self._code = 0
        self._ctype = b""
        self._left = 0               # bytes of body (or of the chunk) still to read
        self._body = bytearray()
        self._close_after = False
        self.reusable = False
        self.lost = False
        #: Fires once the connection is closed.
        self.ended = Deferred()

    def connectionLost(self, reason):
        self.lost = True
        self.reusable = False
        self._deadlines.clear(self._expire)
        self._pool._lost(self)
        if self._answer is not None:
            if self._state == "to-close":
                self._done()
            else:
                self._fail(reason)
        self.ended.callback(None)

    def send(self, data, timeout):
        """
        Send one request; a Deferred of C{(code, content_type, body)}, failing
        with C{TimeoutError} when no whole answer came within C{timeout} seconds.
        """
        self.reusable = False
        self._answer = Deferred(self._cancel)
        self._timeout = timeout
        self._deadlines.set(self._expire, timeout)
        self._state = "head"
        self._buffer.clear()
        self._body = bytearray()
        self._close_after = False
        self.transport.write(data)
        return self._answer

    def _cancel(self, answer):
        """The request was given up: the connection goes, whatever comes."""
        self._answer = None
        self._state = None
        self.reusable = False
        self._deadlines.clear(self._expire)
        self.transport.abortConnection()

    def _timed_out(self):
        if self._answer is not None:
            self._fail(Failure(TimeoutError(f"no answer in {self._timeout:g}s")))
            self.transport.abortConnection()

    def dataReceived(self, data):
        if self._answer is None:
            # Nothing was asked: a server does not speak first.
            self.transport.abortConnection()
            return
        self._buffer += data
        try:
            while self._answer is not None and self._step():
                pass
        except BadResponse as e:
            self._fail(Failure(e))
            self.transport.abortConnection()

    # -- parsing ---------------------------------------------------------------------

    def _find(self, ending, limit, too_long):
        """
        Where C{ending} starts in the buffer, or -1; a buffer past C{limit}
        without it is refused.
        """
        end = self._buffer.find(ending)
        if end < 0 and len(self._buffer) > limit:
            raise BadResponse(too_long)
        return end

    def _take(self):
        """Move what is left of the current body or chunk from the buffer; the bytes still due."""
        take = min(self._left, len(self._buffer))
        self._body += self._buffer[:take]
        del self._buffer[:take]
        self._left -= take
        return self._left

    def _step(self):
        """Parse what the buffer holds for the current state; True to go on."""
        state = self._state
        if state == "head":
            end = self._find(b"\r\n\r\n", MAX_HEAD, "the answer's head is too long")
            if end < 0:
                return False
            if end > MAX_HEAD:
                raise BadResponse("the answer's head is too long")
            head = bytes(self._buffer[:end])
            del self._buffer[:end + 4]
            return self._head(head)
        if state == "body":
            if not self._take():
                self._done()
            return False
        if state == "chunk-size":
            end = self._find(b"\r\n", 1024, "a chunk size line is too long")
            if end < 0:
                return False
            line = bytes(self._buffer[:end]).split(b";", 1)[0].strip()
            del self._buffer[:end + 2]
            try:
                if not line or line.startswith((b"-", b"+")) or len(line) > 16:
                    raise ValueError(line)
                size = int(line, 16)
            except ValueError:
                raise BadResponse("a chunk size is not a hexadecimal number") from None
            if len(self._body) + size > self._max_body:
                raise BadResponse("the answer's body is too large")
            if size == 0:
                self._state = "trailers"
            else:
                self._left = size
                self._state = "chunk"
            return True
        if state == "chunk":
            if self._take():
                return False
            self._state = "chunk-end"
            return True
        if state == "chunk-end":
            if len(self._buffer) < 2:
                return False
            if self._buffer[:2] != b"\r\n":
                raise BadResponse("a chunk does not end with CRLF")
            del self._buffer[:2]
            self._state = "chunk-size"
            return True
        if state == "trailers":
            end = self._find(b"\r\n", MAX_HEAD, "the answer's trailers are too long")
            if end < 0:
                return False
            del self._buffer[:end + 2]
            if end == 0:
                self._done()
                return False
            return True
        if state == "to-close":
            if len(self._body) + len(self._buffer) > self._max_body:
                raise BadResponse("the answer's body is too large")
            self._body += self._buffer
            self._buffer.clear()
            return False
        return False

    def _head(self, head):
        """The status line and headers: how the body comes; True to go on parsing."""
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0") \
                or len(parts[1]) != 3 or not parts[1].isdigit():
            raise BadResponse("the answer does not start with an HTTP/1.1 status line")
        code = int(parts[1])
        if 100 <= code < 200:
            return True              # an interim answer; the real one follows
        length = None
        chunked = False
        close = parts[0] == b"HTTP/1.0"
        ctype = b""
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip():
                raise BadResponse("a header line of the answer is malformed")
            name = name.lower()
            value = value.strip()
            if name == b"content-length":
                if not value.isdigit() or (length is not None and int(value) != length):
                    raise BadResponse("the answer's Content-Length is not a number")
                length = int(value)
            elif name == b"transfer-encoding":
                if value.lower() != b"chunked":
                    raise BadResponse("the answer's transfer encoding is not chunked")
                chunked = True
            elif name == b"connection":
                tokens = [t.strip().lower() for t in value.split(b",")]
                if b"close" in tokens:
                    close = True
                elif b"keep-alive" in tokens:
                    close = False if parts[0] == b"HTTP/1.0" else close
            elif name == b"content-type":
                ctype = value
        self._code, self._ctype, self._close_after = code, ctype, close
        if code in _NO_BODY:
            self._done()
            return False
        if chunked:
            self._state = "chunk-size"
            return True
        if length is not None:
            if length > self._max_body:
                raise BadResponse("the answer's body is too large")
            self._left = length
            self._state = "body"
            if length == 0:
                self._done()
                return False
            return True
        self._close_after = True
        self._state = "to-close"
        return True

    def _done(self):
        answer, self._answer = self._answer, None
        self._state = None
        self._deadlines.clear(self._expire)
        self.reusable = not (self._close_after or self.lost or self._buffer)
        body = bytes(self._body)
        self._body = bytearray()
        if not self.reusable and not self.lost:
            self.transport.loseConnection()
        answer.callback((self._code, self._ctype, body))

    def _fail(self, reason):
        answer, self._answer = self._answer, None
        self._state = None
        self._deadlines.clear(self._expire)
        self.reusable = False
        if answer is not None:
            answer.errback(reason)


class _Factory(Factory):
    """Each connection's factory, quiet: thousands of simulated nodes each open one."""

    noisy = False

    def __init__(self, pool):
        self._pool = pool

    def buildProtocol(self, addr):
        return KeptConnection(self._pool, self._pool.max_body)


class KeptConnections:
    """
    Requests to one server over at most C{kept} idle connections kept open.

    @param endpoint: an C{IStreamClientEndpoint} (TLS wrapped for HTTPS).
    @param host: the C{Host} header's value.
    @param max_body: the most bytes of an answer's body accepted.
    """

    def __init__(self, reactor, endpoint, host, kept, max_body=MAX_BODY):
        self.reactor = reactor
        self.max_body = max_body
        self._endpoint = endpoint
        self.host = host
        self.kept = kept
        self._idle = []
        self._open = set()
        self._closed = False

    async def request(self, data, timeout):
        """
        Send C{data} (L{request_bytes}) on an idle connection or a new one.

        @return: C{(code, content_type, body)}.
        @raise Exception: for connection failures, a malformed answer, a timeout.
        """
        if self._closed:
            raise ConnectionError("the client is closed")
        connection = None
        while self._idle:
            candidate = self._idle.pop()
            if not candidate.lost:
                connection = candidate
                break
        if connection is None:
            connecting = self._endpoint.connect(_Factory(self))
            connecting.addTimeout(timeout, self.reactor)
            connection = await connecting
            if self._closed:
                connection.transport.abortConnection()
                raise ConnectionError("the client is closed")
            self._open.add(connection)
        answer = connection.send(data, timeout)
        try:
            result = await answer
        except BaseException:
            if not connection.lost:
                connection.transport.abortConnection()
            raise
        if connection.reusable and not self._closed and len(self._idle) < self.kept:
            self._idle.append(connection)
        elif not connection.lost:
            connection.transport.loseConnection()
        return result

    def _lost(self, connection):
        self._open.discard(connection)
        if connection in self._idle:
            self._idle.remove(connection)

    def close(self):
        """Close every connection; a Deferred that fires once they are closed."""
        self._closed = True
        self._idle = []
        deadlines_of(self.reactor).idle()
        waits = []
        for connection in list(self._open):
            if not connection.lost:
                waits.append(connection.ended)
                connection.transport.loseConnection()
        if not waits:
            return succeed(None)
        return DeferredList(waits).addCallback(lambda _: None)
