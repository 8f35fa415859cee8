"""The HTTP/2 + gRPC client protocol, against a server played byte by byte."""

import struct

import hpack
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from orchd.storage import grpcwire
from orchd.storage.grpcwire import (
    ACK, CONTINUATION, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, MAX_WINDOW,
    OUR_MAX_FRAME, PADDED, PING, PREFACE, RST_STREAM, SETTINGS, WINDOW_UPDATE,
    GrpcConnection, GrpcError, Lost, NotSent, frame, message,
)

PATH = b"/etcdserverpb.KV/Range"
COMPACTED = b"etcdserver%3A mvcc%3A required revision has been compacted"


def split_frames(data):
    """The frames in C{data}: (type, flags, stream id, payload) each."""
    frames = []
    while data:
        length_type, flags, stream_id = struct.unpack_from(">IBI", data)
        end = 9 + (length_type >> 8)
        frames.append((length_type & 0xFF, flags, stream_id, data[9:end]))
        data = data[end:]
    return frames


def u32(value):
    return struct.pack(">I", value)


def settings(*pairs):
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def data_of(frames, stream_id):
    """The DATA bytes the client sent on C{stream_id}."""
    return b"".join(p for t, _, s, p in frames if t == DATA and s == stream_id)


class GrpcConnectionTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.transport = StringTransport()
        self.conn = GrpcConnection(b"127.0.0.1:2379", b"http", self.clock, timeout=5)
        self.conn.makeConnection(self.transport)
        # The server's encoder: one table for every block it sends, in order.
        self.encoder = hpack.Encoder()
        self.opening = self.transport.value()
        self.transport.clear()

    def call_timers(self):
        """Pending timers other than the connection's keepalive PING."""
        return [c for c in self.clock.getDelayedCalls() if c is not self.conn._pinger]

    def sent(self):
        """The frames the client wrote since the last look."""
        frames = split_frames(self.transport.value())
        self.transport.clear()
        return frames

    def feed(self, *frames, bytewise=False):
        data = b"".join(frames)
        if bytewise:
            for i in range(len(data)):
                self.conn.dataReceived(data[i:i + 1])
        else:
            self.conn.dataReceived(data)

    def headers(self, stream_id, headers, end_stream=False):
        """A server HEADERS frame, encoded with the server's table (so build in feed order)."""
        return frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), stream_id,
                     self.encoder.encode(headers))

    def response(self, stream_id, answer):
        """A whole OK answer: headers, the message, grpc-status 0 trailers."""
        return (self.headers(stream_id, [(":status", "200"),
                                         ("content-type", "application/grpc")])
                + frame(DATA, 0, stream_id, message(answer))
                + self.headers(stream_id, [("grpc-status", "0")], end_stream=True))

    def trailers_only(self, stream_id, code, text=b""):
        return self.headers(stream_id, [(b":status", b"200"), (b"grpc-status", code),
                                        (b"grpc-message", text)], end_stream=True)

    # The connection itself.

    def test_opening(self):
        """The client writes the preface, its SETTINGS and a connection WINDOW_UPDATE."""
        self.assertTrue(self.opening.startswith(PREFACE))
        self.assertEqual(split_frames(self.opening[len(PREFACE):]), [
            (SETTINGS, 0, 0, struct.pack(">HIHIHI", 2, 0, 4, MAX_WINDOW, 5, OUR_MAX_FRAME)),
            (WINDOW_UPDATE, 0, 0, u32(MAX_WINDOW - 65535)),
        ])
        self.assertTrue(self.conn.usable)

    def test_keepalive_ping(self):
        """With calls open, a PING every interval; no answer in time drops the connection."""
        self.clock.advance(grpcwire.PING_INTERVAL)
        self.assertEqual(self.sent(), [])  # nothing open, nothing to keep alive
        self.conn.stream(PATH, lambda data: None)
        self.sent()
        self.clock.advance(grpcwire.PING_INTERVAL)
        [(kind, flags, stream_id, payload)] = self.sent()
        self.assertEqual((kind, flags, stream_id, len(payload)), (PING, 0, 0, 8))
        self.feed(frame(PING, ACK, 0, payload))
        self.clock.advance(grpcwire.PING_TIMEOUT)
        self.assertFalse(self.transport.disconnecting)
        self.clock.advance(grpcwire.PING_INTERVAL - grpcwire.PING_TIMEOUT)
        self.sent()
        self.clock.advance(grpcwire.PING_TIMEOUT)
        self.assertTrue(self.transport.disconnecting)
        self.assertFalse(self.conn.usable)

    def test_settings_acked(self):
        """A server SETTINGS gets an ACK; the server's own ACK gets nothing."""
        self.feed(settings((5, 32768)), frame(SETTINGS, ACK, 0))
        self.assertEqual(self.sent(), [(SETTINGS, ACK, 0, b"")])

    def test_ping(self):
        """A PING is answered by a PING ACK with the same payload; a PING ACK is not."""
        self.feed(frame(PING, 0, 0, b"12345678"), frame(PING, ACK, 0, b"abcdefgh"))
        self.assertEqual(self.sent(), [(PING, ACK, 0, b"12345678")])

    def test_oversized_frame(self):
        """A frame longer than the size we advertised drops the connection."""
        self.feed(struct.pack(">IBI", (OUR_MAX_FRAME + 1) << 8 | DATA, 0, 1))
        self.assertTrue(self.transport.disconnected)

    def test_broken_header_block(self):
        """A header block HPACK cannot read drops the connection."""
        d = self.conn.unary(PATH, b"q")
        self.feed(frame(HEADERS, END_HEADERS, 1, b"\xff\xff\xff\xff"))
        self.assertTrue(self.transport.disconnected)
        self.assertNoResult(d)

    # Unary calls.

    def test_unary_request(self):
        """A unary call is HEADERS on stream 1, then the message in DATA with END_STREAM."""
        self.conn.unary(PATH, b"request")
        (htype, hflags, hstream, block), request = self.sent()
        self.assertEqual((htype, hflags, hstream), (HEADERS, END_HEADERS, 1))
        self.assertEqual(hpack.Decoder().decode(block, raw=True), [
            (b":method", b"POST"), (b":scheme", b"http"), (b":path", PATH),
            (b":authority", b"127.0.0.1:2379"), (b"content-type", b"application/grpc"),
            (b"te", b"trailers")])
        self.assertEqual(request, (DATA, END_STREAM, 1, b"\x00\x00\x00\x00\x07request"))

    def test_unary_answer(self):
        """The answer's message fires the call's Deferred once grpc-status 0 arrives."""
        d = self.conn.unary(PATH, b"q")
        answer = self.response(1, b"answer")
        self.feed(answer[:-1])
        self.assertNoResult(d)
        self.feed(answer[-1:])
        self.assertEqual(self.successResultOf(d), b"answer")
        self.assertEqual(self.call_timers(), [])

    def test_unary_answer_bytewise(self):
        """An answer fed one byte at a time is read the same."""
        d = self.conn.unary(PATH, b"q")
        self.feed(settings(), self.response(1, b"answer"), bytewise=True)
        self.assertEqual(self.successResultOf(d), b"answer")

    def test_next_call(self):
        """The next call takes stream 3; its answer's headers come from the server's table."""
        first = self.conn.unary(PATH, b"q1")
        self.feed(self.response(1, b"a1"))
        self.sent()
        second = self.conn.unary(PATH, b"q2")
        self.assertEqual({s for _, _, s, _ in self.sent()}, {3})
        self.feed(self.response(3, b"a2"))
        self.assertEqual(self.successResultOf(first), b"a1")
        self.assertEqual(self.successResultOf(second), b"a2")

    def test_message_across_frames(self):
        """A message split across two DATA frames is put back together."""
        d = self.conn.unary(PATH, b"q")
        body = message(b"a longer answer")
        self.feed(self.headers(1, [(":status", "200")]), frame(DATA, 0, 1, body[:3]),
                  frame(DATA, 0, 1, body[3:]),
                  self.headers(1, [("grpc-status", "0")], end_stream=True))
        self.assertEqual(self.successResultOf(d), b"a longer answer")

    def test_messages_across_many_frames(self):
        """Two large messages in many small frames, boundaries anywhere, arrive whole and in order."""
        answers = []
        call = self.conn.stream(PATH, answers.append)
        body = message(b"x" * 40000) + message(b"y" * 25000)
        self.feed(self.headers(call.id, [(":status", "200")]),
                  *[frame(DATA, 0, call.id, body[i:i + 997]) for i in range(0, len(body), 997)])
        self.assertEqual(answers, [b"x" * 40000, b"y" * 25000])

    def test_trailers_only_error(self):
        """A trailers-only answer fails the call with its status and decoded message."""
        d = self.conn.unary(PATH, b"q")
        self.feed(self.trailers_only(1, b"11", COMPACTED))
        error = self.failureResultOf(d, GrpcError).value
        self.assertEqual((error.code, error.message),
                         (11, "etcdserver: mvcc: required revision has been compacted"))

    def test_no_grpc_status(self):
        """A stream that ends without a grpc-status fails the call with Lost."""
        d = self.conn.unary(PATH, b"q")
        self.feed(self.headers(1, [(":status", "200")]), frame(DATA, END_STREAM, 1, message(b"a")))
        self.failureResultOf(d, Lost)

    def test_http_status(self):
        """An HTTP status other than 200 fails the call as UNAVAILABLE."""
        d = self.conn.unary(PATH, b"q")
        self.feed(self.headers(1, [(":status", "503")], end_stream=True))
        error = self.failureResultOf(d, GrpcError).value
        self.assertEqual((error.code, error.message), (14, "HTTP status 503"))

    def test_continuation(self):
        """A header block split into HEADERS and CONTINUATION is read as one."""
        d = self.conn.unary(PATH, b"q")
        block = self.encoder.encode([(b":status", b"200"), (b"grpc-status", b"11"),
                                     (b"grpc-message", COMPACTED)])
        self.feed(frame(HEADERS, END_STREAM, 1, block[:4]))
        self.assertNoResult(d)
        self.feed(frame(CONTINUATION, END_HEADERS, 1, block[4:]))
        self.assertEqual(self.failureResultOf(d, GrpcError).value.code, 11)
        # The table followed the block: the next answer's indexed headers read right.
        d = self.conn.unary(PATH, b"q")
        self.feed(self.trailers_only(3, b"11", COMPACTED))
        self.assertEqual(self.failureResultOf(d, GrpcError).value.code, 11)

    # Flow control.

    def test_stream_window(self):
        """With a 10-byte stream window, a request goes out 10 bytes per WINDOW_UPDATE."""
        self.feed(settings((4, 10)))
        self.sent()
        request = bytes(range(95))
        d = self.conn.unary(PATH, request)
        out = self.sent()
        self.assertEqual(data_of(out, 1), message(request)[:10])
        for sent in range(10, 100, 10):
            self.feed(frame(WINDOW_UPDATE, 0, 1, u32(10)))
            (type, flags, _, piece), = self.sent()
            self.assertEqual((type, flags), (DATA, END_STREAM if sent == 90 else 0))
            self.assertEqual(piece, message(request)[sent:sent + 10])
        self.feed(frame(WINDOW_UPDATE, 0, 1, u32(10)))
        self.assertEqual(self.sent(), [])
        self.assertNoResult(d)

    def test_settings_shrink_window(self):
        """A SETTINGS lowering the initial window holds back an open call's rest."""
        self.feed(settings((4, 10)))
        call = self.conn.stream(PATH, lambda answer: None)
        self.feed(settings((4, 5)))
        self.sent()
        self.conn.send(call, b"abcdefgh")
        self.assertEqual(data_of(self.sent(), 1), message(b"abcdefgh")[:5])
        self.feed(settings((4, 8)))
        self.assertEqual(data_of(self.sent(), 1), message(b"abcdefgh")[5:8])

    def test_connection_window(self):
        """The connection window holds a request back until a connection WINDOW_UPDATE."""
        request = b"x" * 70000
        self.conn.unary(PATH, request)
        self.assertEqual(len(data_of(self.sent(), 1)), 65535)
        self.feed(frame(WINDOW_UPDATE, 0, 1, u32(10000)))
        self.assertEqual(self.sent(), [])
        self.feed(frame(WINDOW_UPDATE, 0, 0, u32(1000)))
        self.assertEqual(data_of(self.sent(), 1), message(request)[65535:66535])
        self.feed(frame(WINDOW_UPDATE, 0, 0, u32(10000)))
        out = self.sent()
        self.assertEqual(data_of(out, 1), message(request)[66535:])
        self.assertEqual(out[-1][1], END_STREAM)

    def test_frame_size(self):
        """DATA frames stay within the server's MAX_FRAME_SIZE, 16384 until it says more."""
        request = bytes(range(250)) * 160
        self.conn.unary(PATH, request)
        out = self.sent()[1:]
        self.assertEqual([len(p) for _, _, _, p in out], [16384, 16384, 40005 - 2 * 16384])
        self.assertEqual(data_of(out, 1), message(request))
        self.assertEqual([f for _, f, _, _ in out], [0, 0, END_STREAM])
        self.feed(settings((5, 32768)), frame(WINDOW_UPDATE, 0, 0, u32(40005)))
        self.conn.unary(PATH, request)
        self.assertEqual([len(p) for t, _, _, p in self.sent() if t == DATA], [32768, 7237])

    def test_receive_window(self):
        """Past half the receive window, the connection's bytes are given back."""
        self.patch(grpcwire, "MAX_WINDOW", 1000)
        d = self.conn.unary(PATH, b"q")
        self.sent()
        self.feed(self.headers(1, [(":status", "200")]), frame(DATA, 0, 1, message(b"a" * 400)))
        self.assertEqual(self.sent(), [])
        self.feed(frame(DATA, 0, 1, message(b"b" * 200)))
        self.assertEqual(self.sent(), [(WINDOW_UPDATE, 0, 0, u32(610))])
        self.feed(self.headers(1, [("grpc-status", "0")], end_stream=True))
        self.assertEqual(self.successResultOf(d), b"b" * 200)

    def test_receive_window_padding(self):
        """Padding counts against both receive windows and is given back too."""
        self.patch(grpcwire, "MAX_WINDOW", 1000)
        seen = []
        self.conn.stream(PATH, seen.append)
        self.sent()
        payload = b"\x64" + message(b"a" * 500) + b"\x00" * 100   # 100 bytes of padding
        self.feed(self.headers(1, [(":status", "200")]), frame(DATA, PADDED, 1, payload))
        self.assertEqual(self.sent(), [(WINDOW_UPDATE, 0, 0, u32(len(payload))),
                                       (WINDOW_UPDATE, 0, 1, u32(len(payload)))])
        self.assertEqual(seen, [b"a" * 500])

    def test_receive_window_stream(self):
        """A long-lived stream gives back its own window as well as the connection's."""
        self.patch(grpcwire, "MAX_WINDOW", 1000)
        self.conn.stream(PATH, lambda answer: None)
        self.sent()
        self.feed(self.headers(1, [(":status", "200")]), frame(DATA, 0, 1, message(b"a" * 600)))
        self.assertEqual(self.sent(), [(WINDOW_UPDATE, 0, 0, u32(605)),
                                       (WINDOW_UPDATE, 0, 1, u32(605))])

    # Ends other than an answer.

    def test_refused_stream(self):
        """RST_STREAM REFUSED_STREAM fails the call with NotSent."""
        d = self.conn.unary(PATH, b"q")
        self.feed(frame(RST_STREAM, 0, 1, u32(7)))
        self.failureResultOf(d, NotSent)

    def test_reset_stream(self):
        """RST_STREAM with another code fails the call with Lost."""
        d = self.conn.unary(PATH, b"q")
        self.feed(frame(RST_STREAM, 0, 1, u32(2)))
        self.failureResultOf(d, Lost)
        self.assertEqual(self.call_timers(), [])

    def test_goaway(self):
        """GOAWAY refuses the streams past its last one, lets the rest finish, then closes."""
        first, second = self.conn.unary(PATH, b"q1"), self.conn.unary(PATH, b"q2")
        self.feed(frame(GOAWAY, 0, 0, u32(1) + u32(0)))
        self.failureResultOf(second, NotSent)
        self.failureResultOf(self.conn.unary(PATH, b"q3"), NotSent)
        self.assertIsNone(self.conn.stream(PATH, lambda answer: None))
        self.assertFalse(self.transport.disconnecting)
        self.feed(self.response(1, b"a1"))
        self.assertEqual(self.successResultOf(first), b"a1")
        self.assertTrue(self.transport.disconnecting)

    def test_goaway_idle(self):
        """GOAWAY with no call open closes the connection at once."""
        self.feed(frame(GOAWAY, 0, 0, u32(0) + u32(0)))
        self.assertTrue(self.transport.disconnecting)

    def test_timeout(self):
        """A call with no answer in time is reset (CANCEL) and fails with Lost."""
        d = self.conn.unary(PATH, b"q")
        self.sent()
        self.clock.advance(4.9)
        self.assertNoResult(d)
        self.clock.advance(0.1)
        self.assertEqual(self.sent(), [(RST_STREAM, 0, 1, u32(8))])
        self.failureResultOf(d, Lost)

    def test_lost_before_server_frame(self):
        """Losing the connection before the server said anything fails calls with NotSent."""
        d = self.conn.unary(PATH, b"q")
        self.conn.connectionLost(Failure(ConnectionError("refused")))
        self.failureResultOf(d, NotSent)
        self.successResultOf(self.conn.finished)
        self.failureResultOf(self.conn.unary(PATH, b"q"), NotSent)
        self.assertEqual(self.call_timers(), [])

    def test_lost_after_server_frame(self):
        """Losing the connection once the server has spoken fails calls with Lost."""
        d = self.conn.unary(PATH, b"q")
        self.feed(settings())
        self.conn.connectionLost(Failure(ConnectionError("reset")))
        self.failureResultOf(d, Lost)
        self.successResultOf(self.conn.finished)

    # Bidirectional streams.

    def test_stream(self):
        """A stream sends messages without ending and hands each answer over in order."""
        seen = []
        call = self.conn.stream(PATH, seen.append)
        self.conn.send(call, b"one")
        self.conn.send(call, b"two")
        out = self.sent()
        self.assertEqual([(t, f, s) for t, f, s, _ in out],
                         [(HEADERS, END_HEADERS, 1), (DATA, 0, 1), (DATA, 0, 1)])
        self.assertEqual(data_of(out, 1), message(b"one") + message(b"two"))
        both = message(b"first") + message(b"") + message(b"third")
        self.feed(self.headers(1, [(":status", "200")]), frame(DATA, 0, 1, both + b"\x00\x00"))
        self.assertEqual(seen, [b"first", b"", b"third"])
        self.feed(frame(DATA, 0, 1, message(b"fourth")[2:]))
        self.assertEqual(seen, [b"first", b"", b"third", b"fourth"])
        self.assertNoResult(call.done)
        self.clock.advance(60)
        self.assertNoResult(call.done)

    def test_cancel(self):
        """Cancelling a stream resets it and fails it with CANCELLED."""
        call = self.conn.stream(PATH, lambda answer: None)
        self.sent()
        self.conn.cancel(call)
        self.assertEqual(self.sent(), [(RST_STREAM, 0, 1, u32(8))])
        self.assertEqual(self.failureResultOf(call.done, GrpcError).value.code, 1)
        self.conn.send(call, b"late")
        self.assertEqual(self.sent(), [])

    def test_stream_ends(self):
        """A stream the server ends with a status fails its C{done} with that status."""
        call = self.conn.stream(PATH, lambda answer: None)
        self.feed(self.trailers_only(1, b"14", b"leader changed"))
        error = self.failureResultOf(call.done, GrpcError).value
        self.assertEqual((error.code, error.message), (14, "leader changed"))
