"""Requests in flight: bounded by priority level, long-running ones not counted."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.auth.user import UserInfo
from orchd.server.filters.limits import EXEMPT, NODE_HIGH, SYSTEM, InflightLimiter, priority_level
from orchd.server.requestinfo import parse_request_info
from tests.support import ADMIN, ALICE, APIHarness

CM = "/api/v1/namespaces/default/configmaps"
NODE = UserInfo("system:node:n1", ("system:nodes", "system:authenticated"))
LEASE = "/apis/coordination.orch.io/v1/namespaces/orch-node-lease/leases/n1"


def info(method, path, **query):
    return parse_request_info(method, path, {k.encode(): [v.encode()] for k, v in query.items()})


class LimiterTests(SynchronousTestCase):
    def test_reads_and_writes_have_their_own_bound(self):
        """Past its bound a class answers 429 with Retry-After; the other class still has room."""
        limiter = InflightLimiter(max_reads=2, max_writes=1)
        reads = [limiter.acquire(info(b"GET", CM), ALICE),
                 limiter.acquire(info(b"GET", "/version"), ALICE)]
        self.assertEqual(reads, [("read", "read"), ("read", "read")])
        error = self.assertRaises(StatusError, limiter.acquire, info(b"GET", CM + "/a"), ALICE)
        self.assertEqual((error.code, error.reason, error.headers), (429, "TooManyRequests",
                                                                     {"Retry-After": "1"}))
        self.assertEqual(limiter.acquire(info(b"POST", CM), ALICE), ("write", "write"))
        self.assertRaises(StatusError, limiter.acquire, info(b"DELETE", CM + "/a"), ALICE)

    def test_release_gives_the_slot_back(self):
        """A released slot can be taken again."""
        limiter = InflightLimiter(max_reads=1, max_writes=1)
        slot = limiter.acquire(info(b"PUT", CM + "/a"), ALICE)
        self.assertRaises(StatusError, limiter.acquire, info(b"PATCH", CM + "/a"), ALICE)
        limiter.release(slot)
        self.assertEqual(limiter.acquire(info(b"PATCH", CM + "/a"), ALICE), ("write", "write"))

    def test_long_running_requests_are_not_counted(self):
        """Watches and streamed subresources take no slot, even with every slot taken."""
        limiter = InflightLimiter(max_reads=1, max_writes=1)
        limiter.acquire(info(b"GET", CM), ALICE)
        for request in (info(b"GET", CM, watch="true"), info(b"GET", "/api/v1/watch/pods"),
                        info(b"GET", "/api/v1/namespaces/default/pods/p/log"),
                        info(b"GET", "/api/v1/nodes/n1/proxy/stats/summary")):
            self.assertIsNone(limiter.acquire(request, ALICE), request)
        limiter.release(None)

    def test_zero_is_unbounded(self):
        """A bound of 0 means no bound, as upstream's flags say."""
        limiter = InflightLimiter(max_reads=0, max_writes=0)
        self.assertEqual({limiter.acquire(info(b"POST", CM), ALICE) for _ in range(1000)},
                         {("write", "write")})

    def test_through_the_server(self):
        """A full server answers 429 at once, and serves again once a request is done."""
        api = APIHarness(user=ALICE)
        api.resource.limiter = limiter = InflightLimiter(max_reads=1, max_writes=1)
        held = limiter.acquire(info(b"GET", CM), ALICE)
        code, status, headers = api.call("GET", CM)
        self.assertEqual((code, status["reason"], status["details"]["retryAfterSeconds"]),
                         (429, "TooManyRequests", 1))
        self.assertEqual(headers.getRawHeaders(b"retry-after"), [b"1"])
        limiter.release(held)
        self.assertEqual(api.call("GET", CM)[0], 200)
        self.assertEqual(api.call("GET", CM)[0], 200)

    def test_admins_are_not_refused_through_the_server(self):
        """With every seat taken, the cluster's admin is still served."""
        api = APIHarness(user=ADMIN)
        api.resource.limiter = limiter = InflightLimiter(max_reads=1, max_writes=1)
        held = [limiter.acquire(info(b"GET", CM), ALICE), limiter.acquire(info(b"POST", CM), ALICE)]
        self.assertEqual(api.call("GET", CM)[0], 200)
        self.assertEqual(api.call("POST", CM, {"metadata": {"name": "a"}})[0], 201)
        for slot in held:
            limiter.release(slot)


class PriorityLevelTests(SynchronousTestCase):
    """Upstream's default levels that matter here, as bounds without queues."""

    def test_levels(self):
        cases = [
            (ADMIN, b"POST", CM, EXEMPT),
            (ALICE, b"GET", "/healthz", EXEMPT),
            (ALICE, b"GET", "/readyz/etcd", EXEMPT),
            (ALICE, b"GET", "/livez", EXEMPT),
            (ALICE, b"GET", "/healthzx", "read"),
            (ALICE, b"GET", "/metrics", "read"),
            (ALICE, b"POST", CM, "write"),
            (NODE, b"PUT", LEASE, NODE_HIGH),
            (NODE, b"PATCH", "/api/v1/nodes/n1/status", NODE_HIGH),
            (NODE, b"GET", "/api/v1/nodes/n1", NODE_HIGH),
            (NODE, b"PUT", "/apis/coordination.orch.io/v1/namespaces/default/leases/x", SYSTEM),
            (NODE, b"PATCH", "/api/v1/namespaces/default/pods/p/status", SYSTEM),
            (NODE, b"POST", "/api/v1/namespaces/default/events", SYSTEM),
            (NODE, b"GET", "/version", "read"),
            (ALICE, b"PUT", LEASE, "write"),
        ]
        for user, method, path, level in cases:
            self.assertEqual(priority_level(info(method, path), user), level, (user, path))

    def test_heartbeats_have_seats_of_their_own(self):
        """Other writes, and the nodes' other traffic, cannot refuse a node's heartbeat."""
        limiter = InflightLimiter(max_reads=1, max_writes=1, max_node_requests=1)
        limiter.acquire(info(b"POST", CM), ALICE)
        limiter.acquire(info(b"PATCH", "/api/v1/namespaces/default/pods/p/status"), NODE)
        self.assertRaises(StatusError, limiter.acquire, info(b"POST", CM), ALICE)
        self.assertRaises(StatusError, limiter.acquire,
                          info(b"POST", "/api/v1/namespaces/default/events"), NODE)
        self.assertEqual(limiter.acquire(info(b"PUT", LEASE), NODE), (NODE_HIGH, "write"))
        self.assertRaises(StatusError, limiter.acquire, info(b"PUT", LEASE), NODE)

    def test_node_seats_follow_the_write_bound_by_default(self):
        limiter = InflightLimiter(max_reads=5, max_writes=2)
        for _ in range(2):
            limiter.acquire(info(b"PUT", LEASE), NODE)
        self.assertRaises(StatusError, limiter.acquire, info(b"PUT", LEASE), NODE)

    def test_exempt_requests_count_in_the_peaks(self):
        """The watermark is of every request in flight, exempt or not."""
        limiter = InflightLimiter(max_reads=1, max_writes=1)
        slots = [limiter.acquire(info(b"POST", CM), ADMIN) for _ in range(3)]
        self.assertEqual(limiter.peak("write"), 3)
        for slot in slots:
            limiter.release(slot)
        self.assertEqual(limiter.acquire(info(b"POST", CM), ALICE), ("write", "write"))


class PeakTests(SynchronousTestCase):
    def test_peak_over_the_last_second(self):
        """The peak remembers the most requests in flight in the last second, then lets go."""
        now = [100.0]
        limiter = InflightLimiter(max_reads=10, max_writes=10, now=lambda: now[0])
        read = parse_request_info(b"GET", "/api/v1/nodes", {})
        slots = [limiter.acquire(read, ALICE) for _ in range(3)]
        for slot in slots:
            limiter.release(slot)
        self.assertEqual((limiter.peak("read"), limiter.peak("write")), (3, 0))
        now[0] += 1.5
        self.assertEqual(limiter.peak("read"), 3)
        now[0] += 2.5
        self.assertEqual(limiter.peak("read"), 0)
