# -*- test-case-name: tests.storage.test_grpcwire -*-
"""
gRPC calls over one HTTP/2 connection, on the reactor.

etcd's API is gRPC: each call is an HTTP/2 stream whose request and answer
bodies are length-prefixed protobuf messages and whose outcome is the
C{grpc-status} trailer. The store makes one kind of call at a time per
stream (unary, or the one bidirectional Watch stream), so this is the part
of HTTP/2 that needs: frames, flow control both ways, SETTINGS, PING,
GOAWAY and RST_STREAM. Request headers never change per method, so they
are encoded once as HPACK literals that leave the server's table alone;
answers are decoded with the C{hpack} package, whose table must follow
every header block the server sends.

grpcio, the obvious alternative, runs each call through its own threads
and took the GIL back and forth with the reactor for every answer: it
cost the API server more CPU per etcd call than everything else in a create.

A call ends as:
  - an answer (the message bytes), or C{GrpcError(code, message)} for a
    gRPC status other than OK;
  - L{NotSent} when the connection could not be made or the server said
    (GOAWAY) it never took the stream: safe to send again anywhere;
  - L{Lost} when the connection broke or the call timed out after the
    request went out: it may or may not have been applied.
"""

import struct
from urllib.parse import unquote

import hpack
from twisted.internet import defer
from twisted.internet.protocol import Protocol
from twisted.logger import Logger

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = range(10)
END_STREAM = ACK = 0x1
END_HEADERS, PADDED, PRIORITY_FLAG = 0x4, 0x8, 0x20
SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_FRAME_SIZE = 4, 5
MAX_WINDOW = 2**31 - 1
DEFAULT_WINDOW = 65535
#: The largest frame we accept (advertised); fewer frames for large values.
OUR_MAX_FRAME = 1 << 20
#: While calls are open, a PING this often (etcd refuses more than one per
#: 5 s) must be answered within PING_TIMEOUT, or the connection is dropped:
#: a server that vanished without closing is noticed, and its watch moves on.
PING_INTERVAL = 10.0
PING_TIMEOUT = 5.0
_HEAD = struct.Struct(">I B I")  # (length << 8 | type), flags, stream id
_U32 = struct.Struct(">I")

#: gRPC status codes the store tells apart.
OK, CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE = 0, 1, 4, 14


class NotSent(Exception):
    """The call never reached the server: safe to send again, anywhere."""


class Lost(Exception):
    """The call may have reached the server, but no outcome came back."""


class GrpcError(Exception):
    """The server ended the call with a gRPC status other than OK."""

    def __init__(self, code, message):
        super().__init__(code, message)
        self.code = code
        self.message = message


def frame(type, flags, stream_id, payload=b""):
    return _HEAD.pack(len(payload) << 8 | type, flags, stream_id) + payload


def _integer(value, prefix_bits, first=0):
    """An HPACK integer with a C{prefix_bits}-bit prefix (RFC 7541, 5.1)."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def literal_headers(headers):
    """
    A header block of literals without indexing (new names, no Huffman):
    decodable with no shared state, so it can be built once and reused.
    """
    block = bytearray()
    for name, value in headers:
        block += b"\x00" + _integer(len(name), 7) + name + _integer(len(value), 7) + value
    return bytes(block)


def message(data):
    """One gRPC message: not compressed, its length, its bytes."""
    return b"\x00" + _U32.pack(len(data)) + data


class Call:
    """One stream: what is still to send, what came back, how it ended."""

    __slots__ = ("id", "window", "pending", "pieces", "held", "need", "on_message", "done",
                 "answer", "status", "ended", "timer", "received")

    def __init__(self, stream_id, window, on_message):
        self.id = stream_id
        self.window = window
        self.pending = []       # [bytes, bytes already sent, end_stream] not all sent
        self.pieces = []        # the start of a message still arriving...
        self.held = 0           # ...its length so far...
        self.need = 0           # ...and what completes its prefix or itself
        self.on_message = on_message
        self.done = defer.Deferred()
        self.answer = None
        self.status = None      # (code, message) once the server has said
        self.ended = False
        self.timer = None
        self.received = 0       # bytes to give back to this stream's window


class GrpcConnection(Protocol):
    """
    One HTTP/2 connection carrying gRPC calls to one server.

    @param authority: the C{:authority} of every request (C{host:port}).
    @param scheme: C{b"http"} or C{b"https"}.
    """

    log = Logger()

    def __init__(self, authority, scheme, reactor, timeout):
        self.authority = authority
        self.scheme = scheme
        self.reactor = reactor
        self.timeout = timeout
        self.usable = False
        self.finished = defer.Deferred()
        self._calls = {}
        self._next_id = 1
        self._buffer = b""
        self._decoder = hpack.Decoder()
        self._blocks = {}
        self._peer_window = DEFAULT_WINDOW      # the server's initial stream window
        self._peer_frame = 16384
        self._send_window = DEFAULT_WINDOW      # connection-level, towards the server
        self._received = 0                      # bytes to give back to the server's window
        self._going_away = None
        self._heads = {}
        self._heard = False     # any frame from the server yet (else nothing was taken)
        self._pinger = self._unanswered = None
        self._broken = False

    # Twisted's side.

    def connectionMade(self):
        for option in ("setTcpNoDelay", "setTcpKeepAlive"):
            setter = getattr(self.transport, option, None)
            if setter is not None:
                setter(True)
        settings = struct.pack(">HIHIHI", 2, 0, SETTINGS_INITIAL_WINDOW_SIZE, MAX_WINDOW,
                               SETTINGS_MAX_FRAME_SIZE, OUR_MAX_FRAME)
        self.transport.write(PREFACE + frame(SETTINGS, 0, 0, settings) + frame(
            WINDOW_UPDATE, 0, 0, _U32.pack(MAX_WINDOW - DEFAULT_WINDOW)))
        self.usable = True
        self._pinger = self.reactor.callLater(PING_INTERVAL, self._ping)

    def _ping(self):
        self._pinger = self.reactor.callLater(PING_INTERVAL, self._ping)
        if self._calls and self._unanswered is None:
            self.transport.write(frame(PING, 0, 0, b"orchd\x00\x00\x00"))
            self._unanswered = self.reactor.callLater(PING_TIMEOUT, self._ping_lost)

    def _ping_lost(self):
        self._unanswered = None
        self.log.warn("etcd at {authority} did not answer a PING; dropping the connection",
                      authority=self.authority.decode("ascii", "replace"))
        self.abort()

    def connectionLost(self, reason):
        self.usable = False
        for timer in (self._pinger, self._unanswered):
            if timer is not None and timer.active():
                timer.cancel()
        calls, self._calls = self._calls, {}
        # Before the server's first frame (its SETTINGS), e.g. TLS refused,
        # it has taken nothing.
        failure = Lost if self._heard else NotSent
        for call in calls.values():
            self._end(call, failure(reason.getErrorMessage()))
        if not self.finished.called:
            self.finished.callback(None)

    def dataReceived(self, data):
        buffer = self._buffer + data if self._buffer else data
        offset, size = 0, len(buffer)
        while size - offset >= 9 and not self._broken:
            length_type, flags, stream_id = _HEAD.unpack_from(buffer, offset)
            length = length_type >> 8
            if length > OUR_MAX_FRAME:
                return self._protocol_error("a frame over the size we allow")
            if size - offset - 9 < length:
                break
            start = offset + 9
            offset = start + length
            self._frame(length_type & 0xFF, flags, stream_id & 0x7FFFFFFF,
                        buffer[start:offset])
        self._buffer = buffer[offset:]

    # Calls.

    def head(self, path):
        """The request HEADERS block for C{path} (built once per path)."""
        block = self._heads.get(path)
        if block is None:
            block = self._heads[path] = literal_headers((
                (b":method", b"POST"), (b":scheme", self.scheme), (b":path", path),
                (b":authority", self.authority), (b"content-type", b"application/grpc"),
                (b"te", b"trailers")))
        return block

    def unary(self, path, request):
        """A Deferred of the answer's bytes to one request (see the module docstring)."""
        call = self._open(path, None)
        if call is None:
            return defer.fail(NotSent("the connection is closing"))
        call.timer = self.reactor.callLater(self.timeout, self._expire, call)
        self._send(call, message(request), True)
        return call.done

    def stream(self, path, on_message):
        """
        Open a bidirectional call: returns the L{Call} (send with L{send}),
        whose C{done} fires when it ends; each answer goes to C{on_message}.
        """
        return self._open(path, on_message)

    def send(self, call, request):
        if not call.ended:
            self._send(call, message(request), False)

    def cancel(self, call):
        """End a call from our side (RST_STREAM CANCEL)."""
        if not call.ended and self.usable:
            self.transport.write(frame(RST_STREAM, 0, call.id, _U32.pack(8)))
        self._end(call, GrpcError(CANCELLED, "cancelled"))

    def close(self):
        self.usable = False
        if self.transport is not None:
            self.transport.loseConnection()

    def abort(self):
        self.usable = False
        if self.transport is not None:
            self.transport.abortConnection()

    def _open(self, path, on_message):
        if not self.usable or self._going_away is not None:
            return None
        call = Call(self._next_id, self._peer_window, on_message)
        self._next_id += 2
        if self._next_id > MAX_WINDOW:
            self.usable = False  # stream ids used up: the next call takes a new connection
        self._calls[call.id] = call
        block = self.head(path)
        self.transport.write(frame(HEADERS, END_HEADERS, call.id, block))
        return call

    def _send(self, call, data, end):
        call.pending.append([data, 0, end])
        self._flush(call)

    def _flush(self, call):
        """Write what flow control lets through of C{call}'s pending data."""
        out = []
        while call.pending:
            chunk = call.pending[0]
            data, offset, end = chunk
            left = len(data) - offset
            room = min(left, call.window, self._send_window, self._peer_frame)
            if left and room <= 0:
                break
            last = end and room == left
            out.append(frame(DATA, END_STREAM if last else 0, call.id,
                             data[offset:offset + room]))
            call.window -= room
            self._send_window -= room
            if room < left:
                chunk[1] = offset + room
            else:
                call.pending.pop(0)
        if out:
            self.transport.write(b"".join(out))

    def _expire(self, call):
        call.timer = None
        if not call.ended:
            if self.usable:
                self.transport.write(frame(RST_STREAM, 0, call.id, _U32.pack(8)))
            self._end(call, Lost(f"no answer within {self.timeout:g}s"))

    def _end(self, call, error=None):
        if call.ended:
            return
        call.ended = True
        self._calls.pop(call.id, None)
        if call.timer is not None and call.timer.active():
            call.timer.cancel()
        if error is None:
            if call.status is None:
                error = Lost("the stream ended without a gRPC status")
            elif call.status[0] != OK:
                error = GrpcError(*call.status)
        if self._going_away is not None and not self._calls:
            self.close()
        if error is not None:
            call.done.errback(error)
        else:
            call.done.callback(call.answer)

    # Frames.

    def _frame(self, type, flags, stream_id, payload):
        self._heard = True
        if type == DATA:
            self._data(flags, stream_id, payload)
        elif type in (HEADERS, CONTINUATION):
            self._header_block(type, flags, stream_id, payload)
        elif type == SETTINGS:
            if not flags & ACK:
                self._settings(payload)
                self.transport.write(frame(SETTINGS, ACK, 0))
        elif type == WINDOW_UPDATE:
            self._window_update(stream_id, _U32.unpack(payload[:4])[0] & 0x7FFFFFFF)
        elif type == PING:
            if not flags & ACK:
                self.transport.write(frame(PING, ACK, 0, payload))
            elif self._unanswered is not None:
                self._unanswered.cancel()
                self._unanswered = None
        elif type == RST_STREAM:
            call = self._calls.get(stream_id)
            if call is not None:
                code = _U32.unpack(payload[:4])[0]
                # REFUSED_STREAM (7): the server did not start on it.
                self._end(call, NotSent("stream refused") if code == 7 else
                          Lost(f"the server reset the stream (HTTP/2 error {code})"))
        elif type == GOAWAY:
            self._goaway(payload)
        # PRIORITY, PUSH_PROMISE (push is off) and unknown frames are ignored.

    def _data(self, flags, stream_id, payload):
        # Flow control counts the whole frame payload, padding included.
        counted = len(payload)
        if flags & PADDED:
            payload = payload[1:len(payload) - payload[0]]
        self._received += counted
        if self._received > MAX_WINDOW // 2:
            self.transport.write(frame(WINDOW_UPDATE, 0, 0, _U32.pack(self._received)))
            self._received = 0
        call = self._calls.get(stream_id)
        if call is None:
            return
        if call.on_message is not None:
            # A long-lived stream gives its window back too (unary calls end first).
            call.received += counted
            if call.received > MAX_WINDOW // 2:
                self.transport.write(frame(WINDOW_UPDATE, 0, call.id, _U32.pack(call.received)))
                call.received = 0
        if call.pieces:
            # Joined once the message is whole, not per frame: a large
            # message in many frames is not copied over and over.
            call.pieces.append(payload)
            call.held += len(payload)
            if call.held < call.need:
                payload = None
            else:
                payload = b"".join(call.pieces)
                call.pieces, call.held = [], 0
        if payload is not None:
            self._messages(call, payload)
        if flags & END_STREAM:
            self._end(call)

    def _messages(self, call, data):
        """Hand on each whole message in C{data}; keep the start of the next."""
        offset, size = 0, len(data)
        while size - offset >= 5:
            length = _U32.unpack_from(data, offset + 1)[0]
            if size - offset - 5 < length:
                break
            answer = data[offset + 5:offset + 5 + length]
            offset += 5 + length
            if call.on_message is not None:
                call.on_message(answer)
            else:
                call.answer = answer
        if offset < size:
            rest = data[offset:]
            call.pieces, call.held = [rest], len(rest)
            call.need = 5 + _U32.unpack_from(rest, 1)[0] if len(rest) >= 5 else 5

    def _header_block(self, type, flags, stream_id, payload):
        if type == HEADERS:
            if flags & PADDED:
                payload = payload[1:len(payload) - payload[0]]
            if flags & PRIORITY_FLAG:
                payload = payload[5:]
            block = payload
            self._blocks[stream_id] = [flags & END_STREAM]
        else:
            block = payload
        pending = self._blocks.get(stream_id)
        if pending is None:
            return self._protocol_error("a CONTINUATION out of place")
        pending.append(block)
        if not flags & END_HEADERS:
            return
        del self._blocks[stream_id]
        try:
            headers = self._decoder.decode(b"".join(pending[1:]), raw=True)
        except Exception as e:  # a broken table cannot be recovered: drop the connection
            return self._protocol_error(f"a header block HPACK cannot read ({e})")
        call = self._calls.get(stream_id)
        if call is None:
            return
        status = message_text = None
        for name, value in headers:
            if name == b"grpc-status":
                status = int(value)
            elif name == b"grpc-message":
                message_text = unquote(value.decode("utf-8", "replace"))
            elif name == b":status" and value != b"200":
                status = status if status is not None else UNAVAILABLE
                message_text = message_text or f"HTTP status {value.decode()}"
        if status is not None:
            call.status = (status, message_text or "")
        if pending[0]:
            self._end(call)

    def _settings(self, payload):
        for offset in range(0, len(payload) - 5, 6):
            key, value = struct.unpack_from(">HI", payload, offset)
            if key == SETTINGS_INITIAL_WINDOW_SIZE:
                delta = value - self._peer_window
                self._peer_window = value
                for call in list(self._calls.values()):
                    call.window += delta
                    self._flush(call)
            elif key == SETTINGS_MAX_FRAME_SIZE:
                self._peer_frame = value

    def _window_update(self, stream_id, increment):
        if stream_id == 0:
            self._send_window += increment
            for call in list(self._calls.values()):
                if call.pending:
                    self._flush(call)
        else:
            call = self._calls.get(stream_id)
            if call is not None:
                call.window += increment
                self._flush(call)

    def _goaway(self, payload):
        """No new streams; those the server never took are refused now, the rest run on."""
        last = _U32.unpack(payload[:4])[0] & 0x7FFFFFFF
        self._going_away = last
        self.usable = False
        for call in [c for c in self._calls.values() if c.id > last]:
            self._end(call, NotSent("the server is going away"))
        if not self._calls:
            self.close()

    def _protocol_error(self, what):
        self.log.warn("etcd sent {what}; dropping the connection", what=what)
        self._broken = True
        self.abort()
