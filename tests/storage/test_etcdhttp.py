# -*- test-case-name: tests.storage.test_etcdhttp -*-
"""
The etcd gateway's own HTTP/1.1 client, driven in memory.

L{GatewayConnection} is fed the bytes an etcd gateway would send (whole, and
split one byte at a time) on a C{StringTransport}; L{GatewayPool} runs on a
C{MemoryReactorClock}, whose recorded connects are completed by hand. No
network and no etcd.
"""

from OpenSSL import SSL
from twisted.internet import defer
from twisted.internet.error import ConnectionAborted, ConnectionDone, ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase

from orchd.storage.etcdhttp import MAX_HEAD, GatewayConnection, GatewayPool, Lost, NotSent

REQUEST = b"POST /v3/kv/range HTTP/1.1\r\nHost: etcd:2379\r\n\r\n"
HELLO = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
CHUNKS = b"5\r\nhello\r\n1;name=value\r\n \r\nA\r\n0123456789\r\n"


def connect():
    """A L{GatewayConnection} made on a fresh C{StringTransport}."""
    connection, transport = GatewayConnection(), StringTransport()
    connection.makeConnection(transport)
    return connection, transport


def feed(protocol, data, bytewise=False):
    """Deliver C{data} to C{protocol} in one piece, or one byte at a time."""
    for piece in ([data[i:i + 1] for i in range(len(data))] if bytewise else [data]):
        protocol.dataReceived(piece)


def lose(protocol, error=None):
    """End C{protocol}'s connection (cleanly, or with C{error})."""
    protocol.connectionLost(Failure(error if error is not None else ConnectionDone()))


class AnswerTests(TestCase):
    """Reading answers to plain calls."""

    def answer(self, data, bytewise=False):
        """Make a call, feed it C{data}, return (connection, its Deferred)."""
        connection, _ = connect()
        d = connection.call(REQUEST)
        feed(connection, data, bytewise)
        return connection, d

    def test_request_written_as_is(self):
        """A call writes its request bytes, unchanged, to the transport."""
        connection, transport = connect()
        connection.call(REQUEST)
        self.assertEqual(transport.value(), REQUEST)

    def test_content_length(self):
        """A Content-Length answer fires with (status, body) and leaves the connection reusable."""
        connection, d = self.answer(HELLO)
        self.assertEqual(self.successResultOf(d), (200, b"hello"))
        self.assertTrue(connection.reusable)

    def test_content_length_bytewise(self):
        """Split one byte at a time, the answer fires only with its last byte."""
        connection, _ = connect()
        d = connection.call(REQUEST)
        feed(connection, HELLO[:-1], bytewise=True)
        self.assertNoResult(d)
        feed(connection, HELLO[-1:])
        self.assertEqual(self.successResultOf(d), (200, b"hello"))

    def test_status_and_empty_body(self):
        """An error status and a zero length come back as they are."""
        _, d = self.answer(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
        self.assertEqual(self.successResultOf(d), (404, b""))

    def test_keep_alive(self):
        """Calls follow one another on one connection."""
        connection, transport = connect()
        for body in (b"hello", b"again"):
            d = connection.call(REQUEST)
            feed(connection, HELLO.replace(b"hello", body))
            self.assertEqual(self.successResultOf(d), (200, body))
        self.assertEqual(transport.value(), REQUEST * 2)

    def test_chunked(self):
        """Chunks (with extensions) are joined; the 0 chunk without trailers ends the body."""
        for bytewise in (False, True):
            connection, d = self.answer(CHUNKED_HEAD + CHUNKS + b"0\r\n\r\n", bytewise)
            self.assertEqual(self.successResultOf(d), (200, b"hello 0123456789"))
            self.assertTrue(connection.reusable)

    def test_chunked_trailers(self):
        """Trailers after the 0 chunk are skipped, and the answer ends with the blank line."""
        for bytewise in (False, True):
            connection, d = self.answer(CHUNKED_HEAD + CHUNKS + b"0;x=y\r\nX-A: 1\r\nX-B: 2\r\n",
                                        bytewise)
            self.assertNoResult(d)
            feed(connection, b"\r\n", bytewise)
            self.assertEqual(self.successResultOf(d), (200, b"hello 0123456789"))

    def test_chunked_waits_for_end(self):
        """The answer does not fire before the blank line that follows the 0 chunk."""
        connection, d = self.answer(CHUNKED_HEAD + CHUNKS + b"0\r\n\r")
        self.assertNoResult(d)
        feed(connection, b"\n")
        self.assertEqual(self.successResultOf(d), (200, b"hello 0123456789"))

    def test_until_close(self):
        """Without a length or chunks, the body is everything until the connection ends."""
        connection, d = self.answer(b"HTTP/1.0 200 OK\r\n\r\nhel", bytewise=True)
        feed(connection, b"lo")
        self.assertNoResult(d)
        lose(connection)
        self.assertEqual(self.successResultOf(d), (200, b"hello"))
        self.assertTrue(connection.finished.called)

    def test_connection_close(self):
        """C{Connection: close} in the answer makes its connection not reusable."""
        connection, d = self.answer(b"HTTP/1.1 200 OK\r\nConnection: Close\r\n"
                                    b"Content-Length: 5\r\n\r\nhello")
        self.assertEqual(self.successResultOf(d), (200, b"hello"))
        self.assertFalse(connection.reusable)


class StreamTests(TestCase):
    """Calls given C{on_data}: the watch's endless answers."""

    def stream(self, data, bytewise=False):
        """Make a stream call, feed it C{data}: (connection, Deferred, pieces received)."""
        connection, _ = connect()
        pieces = []
        d = connection.call(REQUEST, pieces.append)
        feed(connection, data, bytewise)
        return connection, d, pieces

    def test_fires_on_head(self):
        """A 200 fires with (200, None) once its head is in; each chunk then goes to on_data."""
        connection, d, pieces = self.stream(CHUNKED_HEAD[:-1])
        self.assertNoResult(d)
        feed(connection, CHUNKED_HEAD[-1:])
        self.assertEqual(self.successResultOf(d), (200, None))
        self.assertFalse(connection.reusable)
        feed(connection, CHUNKS, bytewise=True)
        self.assertEqual(pieces, [b"hello", b" ", b"0123456789"])
        self.assertFalse(connection.finished.called)
        lose(connection)
        self.assertTrue(connection.finished.called)

    def test_without_chunks(self):
        """A 200 without chunks hands on everything it receives until the connection ends."""
        connection, d, pieces = self.stream(b"HTTP/1.1 200 OK\r\n\r\nab")
        self.assertEqual(self.successResultOf(d), (200, None))
        feed(connection, b"cd")
        self.assertEqual(b"".join(pieces), b"abcd")

    def test_end_of_chunks_ends_stream(self):
        """The 0 chunk ends a stream: its connection is dropped, so C{finished} will fire."""
        connection, transport = connect()
        pieces = []
        connection.call(REQUEST, pieces.append)
        feed(connection, CHUNKED_HEAD + b"2\r\nab\r\n0\r\n\r\n")
        self.assertEqual(pieces, [b"ab"])
        self.assertTrue(transport.disconnecting)
        lose(connection, ConnectionAborted())
        self.assertTrue(connection.finished.called)

    def test_error_read_whole(self):
        """A non-200 answer to a stream call is read whole and returned as (status, body)."""
        for bytewise in (False, True):
            _, d, pieces = self.stream(b"HTTP/1.1 503 Unavailable\r\nTransfer-Encoding: chunked"
                                       b"\r\n\r\n" + CHUNKS + b"0\r\n\r\n", bytewise)
            self.assertEqual(self.successResultOf(d), (503, b"hello 0123456789"))
            self.assertEqual(pieces, [])


class FailureTests(TestCase):
    """Broken answers and broken connections."""

    def assertDropped(self, data):
        """Feeding C{data} aborts the connection, and the call then fails with L{Lost}."""
        connection, transport = connect()
        d = connection.call(REQUEST)
        feed(connection, data)
        self.assertTrue(transport.disconnecting)
        self.assertFalse(connection.reusable)
        self.assertNoResult(d)
        lose(connection, ConnectionAborted())
        self.failureResultOf(d, Lost)

    def test_head_too_big(self):
        """An answer head over 64 KiB drops the connection."""
        self.assertDropped(b"HTTP/1.1 200 OK\r\nX: " + b"x" * MAX_HEAD)

    def test_bad_status_line(self):
        """A status line without a numeric status drops the connection."""
        self.assertDropped(b"HTTP/1.1 OK\r\nContent-Length: 0\r\n\r\n")

    def test_bad_chunk_size(self):
        """A chunk size that is not hexadecimal drops the connection."""
        self.assertDropped(CHUNKED_HEAD + b"5\r\nhello\r\nzz\r\n")

    def test_negative_chunk_size(self):
        """A signed chunk size is refused rather than read as data."""
        self.assertDropped(CHUNKED_HEAD + b"-2\r\nhello\r\n")

    def test_bad_content_length(self):
        """A Content-Length that is not a number drops the connection."""
        self.assertDropped(b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n")

    def test_lost_before_answer(self):
        """A connection lost before any answer fails the call with L{Lost}."""
        connection, _ = connect()
        d = connection.call(REQUEST)
        lose(connection)
        self.failureResultOf(d, Lost)
        self.assertFalse(connection.reusable)

    def test_lost_mid_body(self):
        """A connection lost within a Content-Length body fails the call with L{Lost}."""
        connection, _ = connect()
        d = connection.call(REQUEST)
        feed(connection, HELLO[:-2])
        lose(connection)
        self.failureResultOf(d, Lost)

    def test_tls_refused(self):
        """A TLS error before any answer means the request was never read: L{NotSent}."""
        connection, _ = connect()
        d = connection.call(REQUEST)
        lose(connection, SSL.Error([("SSL routines", "", "certificate verify failed")]))
        self.failureResultOf(d, NotSent)

    def test_tls_error_after_answer(self):
        """Once a connection has answered, a TLS error on it is L{Lost}, not L{NotSent}."""
        connection, _ = connect()
        connection.call(REQUEST)
        feed(connection, HELLO)
        d = connection.call(REQUEST)
        lose(connection, SSL.Error([("SSL routines", "", "bad record mac")]))
        self.failureResultOf(d, Lost)

    def test_busy(self):
        """A second call while one is in flight fails with L{NotSent}, and the first goes on."""
        connection, transport = connect()
        first = connection.call(REQUEST)
        self.failureResultOf(connection.call(REQUEST), NotSent)
        self.assertEqual(transport.value(), REQUEST)
        feed(connection, HELLO)
        self.assertEqual(self.successResultOf(first), (200, b"hello"))

    def test_closed(self):
        """A call on a connection that has ended fails with L{NotSent}."""
        connection, _ = connect()
        lose(connection)
        self.failureResultOf(connection.call(REQUEST), NotSent)


class PoolTests(TestCase):
    """L{GatewayPool} on a memory reactor: connects are recorded and completed by hand."""

    def setUp(self):
        self.reactor = MemoryReactorClock()
        self.pool = GatewayPool(self.reactor, [("http", "127.0.0.1", 2379)], timeout=5)

    def call(self, body=b'{"key":"YQ=="}'):
        return defer.ensureDeferred(self.pool.call(0, b"/v3/kv/range", body))

    def accept(self, n=-1):
        """Complete recorded connect C{n}: its protocol and a new C{StringTransport}."""
        host, port, factory, _, _ = self.reactor.tcpClients[n]
        self.assertEqual((host, port), ("127.0.0.1", 2379))
        protocol, transport = factory.buildProtocol(None), StringTransport()
        protocol.makeConnection(transport)
        return protocol, transport

    def test_request_bytes(self):
        """A call writes one JSON POST with Host, Content-Type and Content-Length, then the body."""
        d = self.call()
        _, transport = self.accept()
        self.assertEqual(transport.value(),
                         b'POST /v3/kv/range HTTP/1.1\r\nHost: 127.0.0.1:2379\r\n'
                         b'Content-Type: application/json\r\nContent-Length: 14\r\n\r\n'
                         b'{"key":"YQ=="}')
        self.assertNoResult(d)

    def test_reuse(self):
        """A finished call's connection goes idle, and the next call reuses it: one connect."""
        d = self.call()
        protocol, transport = self.accept()
        feed(protocol, HELLO)
        self.assertEqual(self.successResultOf(d), (200, b"hello"))
        self.assertEqual(len(self.pool._idle[0]), 1)
        transport.clear()
        d = self.call()
        self.assertEqual(len(self.reactor.tcpClients), 1)
        self.assertTrue(transport.value().startswith(b"POST /v3/kv/range "))
        feed(protocol, HELLO)
        self.assertEqual(self.successResultOf(d), (200, b"hello"))
        self.assertFalse(self.reactor.getDelayedCalls())  # the timeouts were cancelled

    def test_connection_close_not_kept(self):
        """An answer with C{Connection: close} is returned, but its connection is dropped."""
        d = self.call()
        protocol, transport = self.accept()
        feed(protocol, b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
        self.assertEqual(self.successResultOf(d), (200, b"{}"))
        self.assertEqual(self.pool._idle[0], [])
        self.assertTrue(transport.disconnecting)
        self.call()
        self.assertEqual(len(self.reactor.tcpClients), 2)

    def test_connect_failed(self):
        """A connect that fails raises L{NotSent}."""
        d = self.call()
        factory = self.reactor.tcpClients[0][2]
        factory.clientConnectionFailed(None, Failure(ConnectionRefusedError()))
        self.reactor.advance(0.3)  # HostnameEndpoint reports after its next attempt delay
        self.failureResultOf(d, NotSent)

    def test_timeout(self):
        """A call with no answer within C{timeout} aborts its connection and raises L{Lost}."""
        d = self.call()
        protocol, transport = self.accept()
        self.reactor.advance(4.9)
        self.assertFalse(transport.disconnecting)
        self.reactor.advance(0.1)
        self.assertTrue(transport.disconnecting)
        lose(protocol, ConnectionAborted())
        self.failureResultOf(d, Lost)
        self.assertEqual(self.pool._idle[0], [])

    def test_stream(self):
        """A stream accepted with 200 returns its connection; the body flows to on_data."""
        pieces = []
        d = defer.ensureDeferred(self.pool.stream(0, b"/v3/watch", b"{}", pieces.append))
        protocol, _ = self.accept()
        feed(protocol, CHUNKED_HEAD)
        status, connection = self.successResultOf(d)
        self.assertEqual(status, 200)
        self.assertIsInstance(connection, GatewayConnection)
        feed(protocol, CHUNKS)
        self.assertEqual(pieces, [b"hello", b" ", b"0123456789"])
        self.assertEqual(self.pool._idle[0], [])
        self.assertFalse(self.reactor.getDelayedCalls())

    def test_stream_refused(self):
        """A stream refused with an error status returns (status, body) and drops its connection."""
        d = defer.ensureDeferred(self.pool.stream(0, b"/v3/watch", b"{}", [].append))
        protocol, transport = self.accept()
        feed(protocol, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\n\r\n{}")
        self.assertEqual(self.successResultOf(d), (400, b"{}"))
        self.assertTrue(transport.disconnecting)

    def test_close(self):
        """C{close} aborts every open connection, idle or busy, and fires once each has ended."""
        done, busy = self.call(), self.call()
        (idle_protocol, idle_transport), (busy_protocol, busy_transport) = (
            self.accept(0), self.accept(1))
        feed(idle_protocol, HELLO)
        self.successResultOf(done)
        closed = defer.ensureDeferred(self.pool.close())
        self.assertTrue(idle_transport.disconnecting)
        self.assertTrue(busy_transport.disconnecting)
        self.assertEqual(self.pool._idle[0], [])
        lose(idle_protocol, ConnectionAborted())
        self.assertNoResult(closed)
        lose(busy_protocol, ConnectionAborted())
        self.successResultOf(closed)
        self.failureResultOf(busy, Lost)
