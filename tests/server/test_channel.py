"""
Bounded requests: sizes, slow clients, bodies and pending connections, each
driven through a real Site over StringTransport with a Clock.
"""

import time

import orjson
from twisted.internet.interfaces import ISSLTransport
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.http import datetimeToString
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET
from zope.interface import directlyProvides

from orchd.server import site as site_module
from orchd.server.channel import BoundedSite
from orchd.server.requestlimits import (
    MAX_BODY, MAX_HEADERS, MAX_QUERY_PARAMS, RequestLimits, pending_bound,
)
from orchd.server.site import APISite
from orchd.timing.seconds import second_text
from tests.support import APIHarness


class Recorder(Resource):
    """Answers C{ok} plus the body it got; C{/hold} is held open until released."""

    isLeaf = True

    def __init__(self):
        super().__init__()
        self.seen = []
        self.held = []

    def render(self, request):
        body = request.content.read()
        self.seen.append((request.method, request.uri, body))
        if request.path == b"/hold":
            self.held.append(request)
            return NOT_DONE_YET
        return b"ok:" + body


class TLSTransport(StringTransport):
    """A transport that says it is TLS, as the reactor's are under listenSSL."""

    def setTcpNoDelay(self, enabled):
        pass


class LingeringTransport(StringTransport):
    """A transport that does not look closed at once (TLS awaiting the client's close alert)."""

    def loseConnection(self):
        self.closing = True


def connect(site, tls=False):
    """A new connection to C{site}: its channel and transport."""
    transport = StringTransport()
    if tls:
        transport = TLSTransport()
        directlyProvides(transport, ISSLTransport)
    channel = site.buildProtocol(None)
    channel.makeConnection(transport)
    return channel, transport


def response(transport):
    """C{(code, headers dict, body)} of the first response written."""
    head, _, body = transport.value().partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    code = int(lines[0].split(b" ")[1])
    headers = dict(line.lower().split(b": ", 1) for line in lines[1:])
    return code, headers, body


class ChannelCase(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.resource = Recorder()

    def site(self, cls=APISite, **limits):
        return cls(self.resource, reactor=self.clock, limits=RequestLimits(**limits))

    def open(self, tls=False, **limits):
        site = self.site(**limits)
        return connect(site, tls)

    def assertRefused(self, transport, code, message=None):
        """The connection answered C{code} with a Status and is closing."""
        got, headers, body = response(transport)
        self.assertEqual(got, code)
        self.assertEqual(headers[b"connection"], b"close")
        status = orjson.loads(body)
        self.assertEqual((status["kind"], status["code"]), ("Status", code))
        if message is not None:
            self.assertEqual(status["message"], message)
        self.assertTrue(transport.disconnecting)
        self.assertEqual(self.resource.seen, [])
        return status


class SizeTests(ChannelCase):
    def test_long_request_line_is_414(self):
        """A 100 KiB URL is answered 414 with a Status, then the connection closes."""
        channel, transport = self.open()
        channel.dataReceived(b"GET /" + b"a" * 100 * 1024 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        status = self.assertRefused(transport, 414,
                                    "the request line is longer than 16384 bytes")
        self.assertEqual(status["reason"], "RequestURITooLong")

    def test_long_request_line_not_buffered_whole(self):
        """An endless request line is refused once past the limit, not read to its end."""
        channel, transport = self.open()
        sent = 0
        while not transport.value():
            channel.dataReceived(b"GET /" if sent == 0 else b"a" * 1024)
            sent += 1
        self.assertLess(sent, 20)
        self.assertRefused(transport, 414)
        channel.dataReceived(b"a" * 1024 + b" HTTP/1.1\r\n\r\n")
        self.assertEqual(response(transport)[0], 414)

    def test_request_line_at_limit_is_served(self):
        """A request line of exactly the limit is served."""
        channel, transport = self.open()
        target = b"/" + b"a" * (16 * 1024 - len(b"GET / HTTP/1.1"))
        channel.dataReceived(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(response(transport)[0], 200)

    def test_long_header_is_431(self):
        """A single 20 KiB header field is answered 431."""
        channel, transport = self.open()
        channel.dataReceived(b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 20 * 1024 + b"\r\n\r\n")
        status = self.assertRefused(transport, 431,
                                    "a request header field is longer than 16384 bytes")
        self.assertEqual(status["reason"], "RequestHeaderFieldsTooLarge")

    def test_large_header_block_is_431(self):
        """A 200 KiB header block of 100-byte fields is answered 431 after 32 KiB."""
        channel, transport = self.open(max_headers=10_000)
        block = b"".join(b"X-%d: %s\r\n" % (i, b"a" * 100) for i in range(2000))
        channel.dataReceived(b"GET / HTTP/1.1\r\n" + block + b"\r\n")
        self.assertRefused(transport, 431, "the request line and header fields are larger "
                                           "than 32768 bytes")

    def test_large_header_block_in_small_pieces(self):
        """A header block sent a line at a time meets the same bound, then is ignored."""
        channel, transport = self.open(max_headers=10_000)
        channel.dataReceived(b"GET / HTTP/1.1\r\n")
        for i in range(2000):
            channel.dataReceived(b"X-%d: %s\r\n" % (i, b"a" * 100))
        self.assertRefused(transport, 431)

    def test_too_many_headers_is_431(self):
        """More than 100 header fields are answered 431; exactly 100 are served."""
        fields = b"".join(b"X-%d: v\r\n" % i for i in range(MAX_HEADERS))
        channel, transport = self.open()
        channel.dataReceived(b"GET / HTTP/1.1\r\n" + fields + b"\r\n")
        self.assertEqual(response(transport)[0], 200)
        channel, transport = self.open()
        self.resource.seen.clear()
        channel.dataReceived(b"GET / HTTP/1.1\r\n" + fields + b"X-last: v\r\n\r\n")
        self.assertRefused(transport, 431, "the request has more than 100 header fields")

    def test_too_many_query_parameters_is_400(self):
        """Thousands of query parameters are answered 400 naming the limit."""
        channel, transport = self.open()
        channel.dataReceived(b"GET /api?" + b"a=1&" * 3000 + b" HTTP/1.1\r\n\r\n")
        status = self.assertRefused(transport, 400,
                                    "too many query parameters: the limit is 1000")
        self.assertEqual(status["reason"], "BadRequest")

    def test_semicolons_count_as_separators(self):
        """Parameters separated by C{;} count towards the limit too."""
        channel, transport = self.open()
        channel.dataReceived(b"GET /api?" + b"a;" * 1500 + b" HTTP/1.1\r\n\r\n")
        self.assertRefused(transport, 400)

    def test_query_parameters_at_limit_are_served(self):
        """Exactly 1000 query parameters are served."""
        channel, transport = self.open()
        query = b"&".join([b"a"] * MAX_QUERY_PARAMS)
        channel.dataReceived(b"GET /api?" + query + b" HTTP/1.1\r\n\r\n")
        self.assertEqual(response(transport)[0], 200)

    def test_long_line_and_headers_together_are_431(self):
        """A request line and header fields each within bounds but over 32 KiB together are 431."""
        channel, transport = self.open()
        channel.dataReceived(b"GET /" + b"a" * 16_000 + b" HTTP/1.1\r\nX-A: " + b"b" * 16_000
                             + b"\r\nX-B: " + b"c" * 1_000 + b"\r\n\r\n")
        self.assertRefused(transport, 431)

    def test_node_agent_query_bound(self):
        """The node agent's requests (twisted.web's own query parsing) meet the same bound."""
        channel, transport = connect(self.site(BoundedSite))
        channel.dataReceived(b"GET /pods?" + b"a=1&" * 3000 + b" HTTP/1.1\r\n\r\n")
        self.assertEqual(response(transport)[:3:2],
                         (400, b"too many query parameters: the limit is 1000\n"))
        self.assertEqual(self.resource.seen, [])

    def test_plain_site_refuses_in_text(self):
        """The node agent's site (no Status) answers a refusal in plain text."""
        channel, transport = connect(self.site(BoundedSite))
        channel.dataReceived(b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\n\r\n")
        code, headers, body = response(transport)
        self.assertEqual((code, headers[b"content-type"]), (414, b"text/plain; charset=utf-8"))
        self.assertEqual(body, b"the request line is longer than 16384 bytes\n")
        self.assertEqual(int(headers[b"content-length"]), len(body))

    def test_malformed_header_is_400_with_status(self):
        """A header line without a colon is a 400 with a Status, not a bare status line."""
        channel, transport = self.open()
        channel.dataReceived(b"GET / HTTP/1.1\r\nno colon here\r\n\r\n")
        self.assertRefused(transport, 400, "the request is not valid HTTP/1.1")


class CountingTransport(StringTransport):
    """Counts how often the connection's addresses are read (a system call for the host)."""

    reads = 0

    def getHost(self):
        self.reads += 1
        return super().getHost()

    def getPeer(self):
        self.reads += 1
        return super().getPeer()


class AddressTests(ChannelCase):
    def test_addresses_read_once_per_connection(self):
        """Every request of a connection sees its addresses, read from the transport once."""
        site = self.site()
        channel = site.buildProtocol(None)
        transport = CountingTransport()
        channel.makeConnection(transport)
        seen = []
        self.resource.render = lambda request: seen.append(
            (request.getHost(), request.getClientAddress())) or b"ok"
        for _ in range(3):
            channel.dataReceived(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(transport.reads, 2)
        self.assertEqual(len(seen), 3)
        self.assertTrue(all(pair == seen[0] for pair in seen))
        self.assertEqual(seen[0], (transport.getHost(), transport.getPeer()))


class LineEndTests(ChannelCase):
    def test_bare_lf_is_read(self):
        """Lines ending in LF alone are read as with CRLF: an answer at once, not a timeout."""
        channel, transport = self.open()
        channel.dataReceived(b"POST /x HTTP/1.1\nHost: a\nContent-Length: 2\n\nhi")
        code, _, body = response(transport)
        self.assertEqual((code, body), (200, b"ok:hi"))
        self.assertEqual(self.resource.seen, [(b"POST", b"/x", b"hi")])


class HeaderTests(ChannelCase):
    def test_date_without_server(self):
        """An answer has the Date of its second, written once a second, and no Server header."""
        self.patch(site_module, "_http_date", second_text(datetimeToString))
        channel, transport = self.open()
        before = int(time.time())
        channel.dataReceived(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        seconds = range(before, int(time.time()) + 1)
        _, headers, body = response(transport)
        self.assertEqual(body, b"ok:")
        self.assertNotIn(b"server", headers)
        self.assertIn(headers[b"date"], [datetimeToString(s).lower() for s in seconds])
        now = time.time()
        self.assertIs(site_module._http_date(now), site_module._http_date(now))

    def test_date_follows_the_clock(self):
        """The Date text changes with the second, only then."""
        date = second_text(datetimeToString)
        self.assertEqual(date(0.2), b"Thu, 01 Jan 1970 00:00:00 GMT")
        self.assertEqual(date(0.9), b"Thu, 01 Jan 1970 00:00:00 GMT")
        self.assertEqual(date(61.0), b"Thu, 01 Jan 1970 00:01:01 GMT")


class BodyTests(ChannelCase):
    def test_content_length_over_limit_is_413_at_once(self):
        """A Content-Length over 3 MiB is answered 413 before any body is sent."""
        channel, transport = self.open()
        channel.dataReceived(b"POST / HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1))
        status = self.assertRefused(transport, 413,
                                    "Request entity too large: limit is 3145728")
        self.assertEqual(status["reason"], "RequestEntityTooLarge")

    def test_body_at_limit_is_served(self):
        """A body of exactly 3 MiB reaches the resource whole."""
        channel, transport = self.open()
        channel.dataReceived(b"PUT / HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % MAX_BODY)
        channel.dataReceived(b"x" * MAX_BODY)
        self.assertEqual(response(transport)[0], 200)
        self.assertEqual(len(self.resource.seen[0][2]), MAX_BODY)

    def test_expect_continue_over_limit_gets_no_100(self):
        """With C{Expect: 100-continue}, a body over the limit gets 413, never 100 Continue."""
        channel, transport = self.open()
        channel.dataReceived(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\n"
                             b"Content-Length: 100000000\r\n\r\n")
        self.assertNotIn(b"100 Continue", transport.value())
        self.assertRefused(transport, 413)

    def test_nothing_parsed_after_refusal(self):
        """After a refusal nothing more is parsed, even while the transport is still closing."""
        channel = self.site().buildProtocol(None)
        transport = LingeringTransport()
        channel.makeConnection(transport)
        channel.dataReceived(b"POST / HTTP/1.1\r\nContent-Length: 99999999\r\nX-A: 1\r\n"
                             b"Expect: 100-continue\r\n\r\n"
                             b"GET /next HTTP/1.1\r\n\r\n")
        self.assertTrue(transport.closing)
        self.assertEqual(transport.value().count(b"HTTP/1.1 "), 1)
        self.assertEqual(response(transport)[0], 413)
        self.assertEqual(self.resource.seen, [])

    def test_expect_continue_within_limit(self):
        """A body within the limit is invited with 100 Continue and served."""
        channel, transport = self.open()
        channel.dataReceived(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\n"
                             b"Content-Length: 5\r\n\r\n")
        self.assertEqual(transport.value(), b"HTTP/1.1 100 Continue\r\n\r\n")
        transport.clear()
        channel.dataReceived(b"hello")
        self.assertEqual(response(transport)[2], b"ok:hello")

    def test_content_length_of_thousands_of_digits(self):
        """A Content-Length of 5000 digits is a 413, not an exception out of the parser."""
        channel, transport = self.open()
        channel.dataReceived(b"POST / HTTP/1.1\r\nContent-Length: " + b"1" * 5000 + b"\r\n\r\n")
        self.assertRefused(transport, 413)

    def test_content_length_with_leading_zeros(self):
        """A Content-Length with thousands of leading zeros is its plain value."""
        channel, transport = self.open()
        channel.dataReceived(b"POST / HTTP/1.1\r\nContent-Length: " + b"0" * 5000 + b"5\r\n\r\n"
                             b"hello")
        self.assertEqual(response(transport)[:3:2], (200, b"ok:hello"))

    def test_invalid_content_lengths_are_400(self):
        """Negative, signed, fractional or non-numeric Content-Lengths are 400."""
        for value in (b"-1", b"+5", b"1.5", b"1e3", b"abc", b"0x10", b"\xd9\xa3"):
            channel, transport = self.open()
            channel.dataReceived(b"POST / HTTP/1.1\r\nContent-Length: " + value + b"\r\n\r\n1")
            self.assertRefused(transport, 400)

    def test_length_and_chunked_together_is_400(self):
        """Content-Length with Transfer-Encoding (a smuggling shape) is a 400."""
        channel, transport = self.open()
        channel.dataReceived(b"POST / HTTP/1.1\r\nContent-Length: 4\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        self.assertRefused(transport, 400)

    def test_chunked_body_over_limit_is_413_when_crossed(self):
        """A chunked body is refused as soon as it crosses the limit; the rest is not read."""
        channel, transport = self.open()
        channel.dataReceived(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"100000\r\n" + b"x" * 0x100000 + b"\r\n"
        for _ in range(3):
            channel.dataReceived(chunk)
        self.assertEqual(transport.value(), b"")
        channel.dataReceived(b"1\r\nx\r\n")
        self.assertRefused(transport, 413)
        channel.dataReceived(chunk + b"0\r\n\r\n")
        self.assertEqual(self.resource.seen, [])

    def test_chunked_body_within_limit(self):
        """A chunked body within the limit reaches the resource whole."""
        channel, transport = self.open()
        channel.dataReceived(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                             b"5\r\nhello\r\n1\r\n!\r\n0\r\n\r\n")
        self.assertEqual(response(transport)[2], b"ok:hello!")

    def test_bad_chunk_is_400(self):
        """A chunk size that is not hexadecimal is a 400."""
        channel, transport = self.open()
        channel.dataReceived(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
        self.assertRefused(transport, 400)

    def test_pipelined_requests_answered_in_order(self):
        """Pipelined requests are answered in order; one over the limit ends the connection."""
        channel, transport = self.open()
        channel.dataReceived(b"POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
                             b"GET /b HTTP/1.1\r\n\r\n"
                             b"POST /c HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"
                             b"GET /d HTTP/1.1\r\n\r\n")
        self.assertEqual([uri for _, uri, _ in self.resource.seen], [b"/a", b"/b"])
        out = transport.value()
        self.assertEqual(out.count(b"HTTP/1.1 200 OK"), 2)
        self.assertIn(b"HTTP/1.1 413 ", out)
        self.assertTrue(transport.disconnecting)


class TimeoutTests(ChannelCase):
    def request(self, channel, path=b"/"):
        channel.dataReceived(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")

    def test_trickled_headers_get_408(self):
        """Headers trickled a byte every 2 s are answered 408 10 s after their first byte."""
        channel, transport = self.open()
        self.clock.advance(5)       # a fresh connection may wait before sending
        for byte in b"GET / HTTP/1.1\r\nX-Slow: " + b"a" * 10:
            if transport.value():
                break
            channel.dataReceived(bytes([byte]))
            self.clock.advance(2)
        self.assertEqual(self.clock.seconds(), 15)
        self.assertRefused(transport, 408, "the request headers did not arrive within 10s")

    def test_trickled_body_gets_408(self):
        """A body trickled a byte every 5 s is answered 408 60 s after the headers."""
        channel, transport = self.open()
        channel.dataReceived(b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n")
        for _ in range(12):
            self.assertEqual(transport.value(), b"")
            self.clock.advance(5)
            channel.dataReceived(b"a")
        self.assertRefused(transport, 408, "the request body did not arrive within 60s")

    def test_announced_body_never_sent(self):
        """A Content-Length within the limit whose body never comes is a 408 after 10 s."""
        channel, transport = self.open()
        channel.dataReceived(b"PUT / HTTP/1.1\r\nContent-Length: 3000000\r\n\r\n")
        self.clock.advance(9.5)
        self.assertFalse(transport.disconnecting)
        self.clock.advance(0.5)
        self.assertRefused(transport, 408, "no part of the request body arrived for 10s")

    def test_body_that_stops_part_way(self):
        """A chunked body that stops after its first chunk is a 408 10 s after that chunk."""
        channel, transport = self.open()
        channel.dataReceived(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
        self.clock.advance(8)
        channel.dataReceived(b"2\r\nhi\r\n")
        self.clock.advance(9.5)
        self.assertFalse(transport.disconnecting)
        self.clock.advance(0.5)
        self.assertRefused(transport, 408, "no part of the request body arrived for 10s")

    def test_unfinished_handshake_is_aborted(self):
        """A TLS connection whose handshake does not finish within 10 s is aborted."""
        channel, transport = self.open(tls=True)
        self.clock.advance(9.9)
        self.assertFalse(transport.disconnecting)
        self.clock.advance(0.1)
        self.assertTrue(transport.disconnected)
        self.assertEqual(transport.value(), b"")

    def test_after_handshake_first_request_is_due(self):
        """After the handshake, a connection that sends nothing is closed 10 s later, silently."""
        channel, transport = self.open(tls=True)
        self.clock.advance(5)
        channel.handshakeCompleted()
        self.clock.advance(9)
        self.assertFalse(transport.disconnecting)
        self.clock.advance(1)
        self.assertTrue(transport.disconnecting)
        self.assertEqual(transport.value(), b"")

    def test_idle_keep_alive_closed_after_90s(self):
        """An idle keep-alive connection is closed 90 s after its last response, silently."""
        channel, transport = self.open()
        self.request(channel)
        self.clock.advance(60)
        transport.clear()
        self.request(channel)       # the idle time counts from here
        transport.clear()
        self.clock.advance(89)
        self.assertFalse(transport.disconnecting)
        self.clock.advance(1)
        self.assertTrue(transport.disconnecting)
        self.assertEqual(transport.value(), b"")

    def test_slow_reader_idle_time_counts_from_drain(self):
        """While a response is still being taken by the client, the idle time waits for it."""
        channel, transport = self.open()
        self.request(channel)
        channel.pauseProducing()    # the transport's buffer is full
        self.clock.advance(80)
        channel.resumeProducing()   # ... and now drained
        self.clock.advance(80)
        self.assertFalse(transport.disconnecting)
        self.clock.advance(10)
        self.assertTrue(transport.disconnecting)

    def test_close_that_hangs_is_aborted(self):
        """A connection still open 15 s after it was closed (a TLS alert unanswered) is aborted."""
        channel, transport = self.open()
        channel.dataReceived(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        self.assertTrue(transport.disconnecting)
        self.clock.advance(14)
        self.assertFalse(transport.disconnected)
        self.clock.advance(1)
        self.assertTrue(transport.disconnected)

    def test_request_being_handled_has_no_deadline(self):
        """A request held open for an hour (a watch, a followed log) is not cut off."""
        channel, transport = self.open()
        self.request(channel, b"/hold")
        self.clock.advance(3600)
        self.assertFalse(transport.disconnecting)
        request = self.resource.held[0]
        request.write(b"still here")
        request.finish()
        self.assertIn(b"still here", transport.value())
        self.clock.advance(89)
        self.assertFalse(transport.disconnecting)
        self.clock.advance(1)
        self.assertTrue(transport.disconnecting)

    def test_lost_connection_leaves_no_timer(self):
        """A connection that goes away leaves no call behind on the clock."""
        channel, transport = self.open()
        self.request(channel)
        channel.connectionLost(None)
        self.assertEqual(self.clock.getDelayedCalls(), [])


class WatchTests(SynchronousTestCase):
    def test_watch_outlives_every_deadline(self):
        """A watch on the real API server, silent for ten minutes, still gets its events."""
        api = APIHarness()
        site = APISite(api.resource, reactor=api.clock)
        channel, transport = connect(site)
        channel.dataReceived(b"GET /api/v1/namespaces/default/configmaps?watch=true HTTP/1.1\r\n"
                             b"Host: x\r\n\r\n")
        for _ in range(60):
            api.clock.advance(10)
        self.assertFalse(transport.disconnecting)
        self.assertNotIn(b"ADDED", transport.value())
        code, _, _ = api.call("POST", "/api/v1/namespaces/default/configmaps",
                              {"metadata": {"name": "late"}})
        self.assertEqual(code, 201)
        api.clock.advance(0.5)
        self.assertIn(b'"ADDED"', transport.value())
        self.assertIn(b'"late"', transport.value())


class PendingTests(ChannelCase):
    def setUp(self):
        super().setUp()
        self.events = []
        globalLogPublisher.addObserver(self.events.append)
        self.addCleanup(globalLogPublisher.removeObserver, self.events.append)

    def test_oldest_pending_connection_dropped(self):
        """Past the bound, the oldest connection without a request in progress is dropped."""
        site = self.site(max_pending_connections=3)
        conns = [connect(site) for _ in range(4)]
        self.assertEqual([t.disconnected for _, t in conns], [True, False, False, False])
        self.assertEqual(len(site.pending), 3)
        warnings = [e for e in self.events if "Dropped" in e.get("log_format", "")]
        self.assertEqual(len(warnings), 1)
        self.assertEqual((warnings[0]["count"], warnings[0]["bound"]), (1, 3))

    def test_requests_in_progress_are_not_counted(self):
        """A connection whose request is being handled is never dropped for newer ones."""
        site = self.site(max_pending_connections=2)
        busy, busy_transport = connect(site)
        busy.dataReceived(b"GET /hold HTTP/1.1\r\n\r\n")
        others = [connect(site) for _ in range(3)]
        self.assertFalse(busy_transport.disconnected)
        self.assertEqual([t.disconnected for _, t in others], [True, False, False])

    def test_active_keep_alive_becomes_newest(self):
        """A keep-alive connection that just made a request is the last to be dropped."""
        site = self.site(max_pending_connections=3)
        first, first_transport = connect(site)
        second, second_transport = connect(site)
        third, _ = connect(site)
        first.dataReceived(b"GET / HTTP/1.1\r\n\r\n")
        connect(site)
        self.assertFalse(first_transport.disconnected)
        self.assertTrue(second_transport.disconnected)

    def test_lost_connections_leave_the_count(self):
        """Closed connections no longer count."""
        site = self.site(max_pending_connections=2)
        channel, _ = connect(site)
        channel.connectionLost(None)
        self.assertEqual(len(site.pending), 0)

    def test_bound_follows_open_file_limit(self):
        """The default bound is half the open-file limit, within 16 and 16384."""
        self.assertEqual(pending_bound(1024), 512)
        self.assertEqual(pending_bound(20), 16)
        self.assertEqual(pending_bound(1_048_576), 16384)
        # The idle connections of 5,000 nodes fit under the usual 20,000 files.
        self.assertGreater(pending_bound(20000), 5000)
