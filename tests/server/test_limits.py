"""Requests in flight: bounded apart for reads and writes, long-running ones not counted."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.server.filters.limits import InflightLimiter
from orchd.server.requestinfo import parse_request_info
from tests.support import APIHarness

CM = "/api/v1/namespaces/default/configmaps"


def info(method, path, **query):
    return parse_request_info(method, path, {k.encode(): [v.encode()] for k, v in query.items()})


class LimiterTests(SynchronousTestCase):
    def test_reads_and_writes_have_their_own_bound(self):
        """Past its bound a class answers 429 with Retry-After; the other class still has room."""
        limiter = InflightLimiter(max_reads=2, max_writes=1)
        reads = [limiter.acquire(info(b"GET", CM)), limiter.acquire(info(b"GET", "/healthz"))]
        self.assertEqual(reads, ["read", "read"])
        error = self.assertRaises(StatusError, limiter.acquire, info(b"GET", CM + "/a"))
        self.assertEqual((error.code, error.reason, error.headers), (429, "TooManyRequests",
                                                                     {"Retry-After": "1"}))
        self.assertEqual(limiter.acquire(info(b"POST", CM)), "write")
        self.assertRaises(StatusError, limiter.acquire, info(b"DELETE", CM + "/a"))

    def test_release_gives_the_slot_back(self):
        """A released slot can be taken again."""
        limiter = InflightLimiter(max_reads=1, max_writes=1)
        slot = limiter.acquire(info(b"PUT", CM + "/a"))
        self.assertRaises(StatusError, limiter.acquire, info(b"PATCH", CM + "/a"))
        limiter.release(slot)
        self.assertEqual(limiter.acquire(info(b"PATCH", CM + "/a")), "write")

    def test_long_running_requests_are_not_counted(self):
        """Watches and streamed subresources take no slot, even with every slot taken."""
        limiter = InflightLimiter(max_reads=1, max_writes=1)
        limiter.acquire(info(b"GET", CM))
        for request in (info(b"GET", CM, watch="true"), info(b"GET", "/api/v1/watch/pods"),
                        info(b"GET", "/api/v1/namespaces/default/pods/p/log"),
                        info(b"GET", "/api/v1/nodes/n1/proxy/stats/summary")):
            self.assertIsNone(limiter.acquire(request), request)
        limiter.release(None)

    def test_zero_is_unbounded(self):
        """A bound of 0 means no bound, as upstream's flags say."""
        limiter = InflightLimiter(max_reads=0, max_writes=0)
        self.assertEqual({limiter.acquire(info(b"POST", CM)) for _ in range(1000)}, {"write"})

    def test_through_the_server(self):
        """A full server answers 429 at once, and serves again once a request is done."""
        api = APIHarness()
        api.resource.limiter = limiter = InflightLimiter(max_reads=1, max_writes=1)
        held = limiter.acquire(info(b"GET", CM))
        code, status, headers = api.call("GET", CM)
        self.assertEqual((code, status["reason"], status["details"]["retryAfterSeconds"]),
                         (429, "TooManyRequests", 1))
        self.assertEqual(headers.getRawHeaders(b"retry-after"), [b"1"])
        limiter.release(held)
        self.assertEqual(api.call("GET", CM)[0], 200)
        self.assertEqual(api.call("GET", CM)[0], 200)


class PeakTests(SynchronousTestCase):
    def test_peak_over_the_last_second(self):
        """The peak remembers the most requests in flight in the last second, then lets go."""
        now = [100.0]
        limiter = InflightLimiter(max_reads=10, max_writes=10, now=lambda: now[0])
        read = parse_request_info(b"GET", "/api/v1/nodes", {})
        slots = [limiter.acquire(read) for _ in range(3)]
        for slot in slots:
            limiter.release(slot)
        self.assertEqual((limiter.peak("read"), limiter.peak("write")), (3, 0))
        now[0] += 1.5
        self.assertEqual(limiter.peak("read"), 3)
        now[0] += 2.5
        self.assertEqual(limiter.peak("read"), 0)
