"""The node agent's kept-alive HTTP/1.1 connections: requests written whole, answers parsed."""

from twisted.internet.defer import Deferred, TimeoutError, succeed
from twisted.internet.error import ConnectionDone
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from orchd.orchlet.keptconn import MAX_HEAD, BadResponse, KeptConnections, request_bytes

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}"


class FakeEndpoint:
    """Connects at once (or when C{gate} fires), over a StringTransport per connection."""

    def __init__(self):
        self.connections = []
        self.gate = None

    def connect(self, factory):
        protocol = factory.buildProtocol(None)
        transport = StringTransport()
        self.connections.append((protocol, transport))
        protocol.makeConnection(transport)
        if self.gate is not None:
            gate = self.gate
            gate.addCallback(lambda _: protocol)
            return gate
        return succeed(protocol)


class KeptConnectionsTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.endpoint = FakeEndpoint()
        self.pool = KeptConnections(self.clock, self.endpoint, "127.0.0.1:6443", kept=2)

    def send(self, method="GET", path="/api/v1/pods", body=None):
        data = request_bytes(method, path, self.pool.host, [("Accept", "application/json")],
                             body)
        return Deferred.fromCoroutine(self.pool.request(data, 15.0))

    def answer(self, index, *chunks):
        protocol, _ = self.endpoint.connections[index]
        for chunk in chunks:
            protocol.dataReceived(chunk)

    def lose(self, index):
        protocol, _ = self.endpoint.connections[index]
        protocol.connectionLost(Failure(ConnectionDone()))

    def test_request_bytes(self):
        """A request is its line, Host, the headers, Content-Length and the body, in one string."""
        data = request_bytes("PATCH", "/x?y=1", "h:1", [("Content-Type", "a/b")], b"{}")
        self.assertEqual(data, b"PATCH /x?y=1 HTTP/1.1\r\nHost: h:1\r\nContent-Type: a/b\r\n"
                               b"Content-Length: 2\r\n\r\n{}")
        self.assertEqual(request_bytes("GET", "/", "h", []), b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")

    def test_request_line_injection(self):
        """A target or method with a space or line break is refused; a header value's line
        break becomes a space."""
        for method, target in (("GET", "/x HTTP/1.1\r\nX-Evil: 1"), ("GET", "/a b"),
                               ("GET", ""), ("GE T", "/")):
            self.assertRaises(ValueError, request_bytes, method, target, "h", [])
        data = request_bytes("GET", "/", "h", [("Authorization", "Bearer a\r\nX-Evil: 1")])
        self.assertIn(b"Authorization: Bearer a X-Evil: 1\r\n", data)
        self.assertEqual(data.count(b"\r\n"), 4)

    def test_written_in_one_write(self):
        """The whole request goes to the transport in one write."""
        self.send("POST", "/e", b'{"k":1}')
        [(protocol, transport)] = self.endpoint.connections
        self.assertEqual(transport.value(), request_bytes(
            "POST", "/e", "127.0.0.1:6443", [("Accept", "application/json")], b'{"k":1}'))

    def test_answer_and_reuse(self):
        """An answer with Content-Length is read whole; the next request reuses the connection."""
        first = self.send()
        self.answer(0, OK)
        self.assertEqual(self.successResultOf(first), (200, b"application/json", b'{"a":1}'))
        second = self.send()
        self.assertEqual(len(self.endpoint.connections), 1)
        self.answer(0, OK[:10], OK[10:])
        self.assertEqual(self.successResultOf(second)[2], b'{"a":1}')

    def test_chunked_byte_by_byte(self):
        """A chunked answer arriving one byte at a time is read whole, trailers skipped."""
        answer = (b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-T: 1\r\n\r\n")
        result = self.send()
        for index in range(len(answer)):
            self.answer(0, answer[index:index + 1])
        self.assertEqual(self.successResultOf(result), (201, b"", b"abc0123456789abcdef"))
        self.assertFalse(self.endpoint.connections[0][1].disconnecting)

    def test_no_body_codes(self):
        """A 204 answer has no body, whatever headers it has; the connection stays."""
        result = self.send()
        self.answer(0, b"HTTP/1.1 204 No Content\r\n\r\n")
        self.assertEqual(self.successResultOf(result), (204, b"", b""))
        self.send()
        self.assertEqual(len(self.endpoint.connections), 1)

    def test_interim_answer_skipped(self):
        """A 100 Continue before the answer is skipped."""
        result = self.send()
        self.answer(0, b"HTTP/1.1 100 Continue\r\n\r\n" + OK)
        self.assertEqual(self.successResultOf(result)[0], 200)

    def test_connection_close(self):
        """An answer saying Connection: close closes it; the next request opens another."""
        result = self.send()
        self.answer(0, b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        self.assertEqual(self.successResultOf(result), (200, b"", b""))
        self.assertTrue(self.endpoint.connections[0][1].disconnecting)
        self.send()
        self.assertEqual(len(self.endpoint.connections), 2)

    def test_body_until_close(self):
        """An answer with neither length nor chunks ends with its connection."""
        result = self.send()
        self.answer(0, b"HTTP/1.1 200 OK\r\n\r\npart one, ", b"part two")
        self.assertNoResult(result)
        self.lose(0)
        self.assertEqual(self.successResultOf(result), (200, b"", b"part one, part two"))

    def test_kept_idle_bounded(self):
        """Three requests at once use three connections; two are kept afterwards, one closed."""
        results = [self.send() for _ in range(3)]
        self.assertEqual(len(self.endpoint.connections), 3)
        for index in range(3):
            self.answer(index, OK)
        for result in results:
            self.successResultOf(result)
        closed = [t.disconnecting for _, t in self.endpoint.connections]
        self.assertEqual(closed, [False, False, True])

    def test_lost_while_idle(self):
        """A kept connection the server closed is not used again."""
        result = self.send()
        self.answer(0, OK)
        self.successResultOf(result)
        self.lose(0)
        self.send()
        self.assertEqual(len(self.endpoint.connections), 2)

    def test_lost_before_answer(self):
        """A connection lost before its answer is complete fails the request."""
        result = self.send()
        self.answer(0, OK[:30])
        self.lose(0)
        self.failureResultOf(result, ConnectionDone)

    def hostile(self, answer):
        """C{answer} fails its request and closes its connection, which is not used again."""
        self.setUp()
        result = self.send()
        self.answer(0, answer)
        self.failureResultOf(result, BadResponse)
        self.assertTrue(self.endpoint.connections[0][1].disconnecting)
        self.send()
        self.assertEqual(len(self.endpoint.connections), 2)

    def test_malformed_status_line(self):
        """An answer that is not HTTP fails the request and closes the connection."""
        self.hostile(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        self.hostile(b"HTTP/1.1 2000 OK\r\n\r\n")

    def test_malformed_lengths(self):
        """A Content-Length that is not a number, or two that disagree, fails the request."""
        self.hostile(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n")
        self.hostile(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")

    def test_malformed_chunks(self):
        """A chunk size that is not hexadecimal, or a chunk without its CRLF, fails the request."""
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        self.hostile(head + b"zz\r\n")
        self.hostile(head + b"-1\r\n")
        self.hostile(head + b"1\r\naXY")
        self.hostile(head + b"fffffffffffffffff\r\n")

    def test_unknown_transfer_encoding(self):
        """A transfer encoding other than chunked fails the request."""
        self.hostile(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n")

    def test_head_too_long(self):
        """A head past MAX_HEAD fails the request."""
        self.hostile(b"HTTP/1.1 200 OK\r\nX: " + b"a" * MAX_HEAD)

    def test_malformed_header_line(self):
        """A header line without a colon fails the request."""
        self.hostile(b"HTTP/1.1 200 OK\r\nnonsense\r\n\r\n")

    def test_data_without_request(self):
        """Bytes from the server on an idle connection close it."""
        result = self.send()
        self.answer(0, OK)
        self.successResultOf(result)
        self.answer(0, b"HTTP/1.1 200 OK\r\n")
        self.assertTrue(self.endpoint.connections[0][1].disconnecting)

    def test_timeout(self):
        """A request unanswered for its timeout fails; its connection is aborted, not kept."""
        result = self.send()
        self.clock.advance(15)
        self.failureResultOf(result, TimeoutError)
        protocol, transport = self.endpoint.connections[0]
        self.assertTrue(transport.disconnecting)
        self.lose(0)
        self.send()
        self.assertEqual(len(self.endpoint.connections), 2)

    def test_one_timer_per_connection(self):
        """Requests answered in time leave no timer of their own (one sweep timer, then none)."""
        for _ in range(3):
            result = self.send()
            self.clock.advance(10)
            self.answer(0, OK)
            self.successResultOf(result)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.clock.advance(60)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertFalse(self.endpoint.connections[0][1].disconnecting)

    def test_connect_timeout(self):
        """A connection not made within the timeout fails the request."""
        self.endpoint.gate = Deferred()
        result = self.send()
        self.clock.advance(15)
        self.failureResultOf(result, TimeoutError)

    def test_close(self):
        """close() closes every connection and fires once they are closed; later requests fail."""
        first, second = self.send(), self.send()
        self.answer(0, OK)
        self.successResultOf(first)
        closed = self.pool.close()
        self.assertTrue(all(t.disconnecting for _, t in self.endpoint.connections))
        self.assertNoResult(closed)
        self.lose(0)
        self.lose(1)
        self.failureResultOf(second, ConnectionDone)
        self.successResultOf(closed)
        self.failureResultOf(self.send(), ConnectionError)
