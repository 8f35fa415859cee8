"""The resource metrics scraper: every node every 15 s, a few at a time, failures skipped."""

from twisted.internet.defer import CancelledError, Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import LogLevel, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from orchd.app.metricsscraper import (
    FollowedNodes, MetricsScraper, NodeTarget, OrchletClient, ScrapeError, node_target,
)
from orchd.registry.resourcemetrics import MetricsCache
from orchd.storage.informer import Informer
from orchd.storage.memory import MemoryStore

T0 = 1_700_000_000


def node(name, address="10.0.0.1", port=10250):
    return NodeTarget(name, address, port)


def node_object(name, address="10.0.0.1", port=10250):
    status = {"addresses": [{"type": "InternalIP", "address": address}]} if address else {}
    if port:
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}
    return {"metadata": {"name": name}, "status": status}


def answer(cpu_seconds, now):
    millis = int(now * 1000)
    return (f"node_cpu_usage_seconds_total {cpu_seconds} {millis}\n"
            f"node_memory_working_set_bytes 1048576 {millis}\n").encode("ascii")


class ScraperTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.clock.advance(T0)
        self.nodes = [node("n1"), node("n2")]
        self.answers = {}
        self.asked = []
        self.cache = MetricsCache()
        self.scraper = MetricsScraper(self.clock, self.list_nodes, self.fetch, self.cache,
                                      concurrency=1)
        self.warnings = []
        observer = self.observe
        globalLogPublisher.addObserver(observer)
        self.addCleanup(globalLogPublisher.removeObserver, observer)

    def observe(self, event):
        if event.get("log_level") == LogLevel.warn:
            self.warnings.append(event)

    async def list_nodes(self):
        return self.nodes

    def fetch(self, node):
        name = node.name
        self.asked.append(name)
        result = self.answers.get(name)
        if isinstance(result, Deferred):
            return result
        if isinstance(result, Exception):
            return fail(result)
        return succeed(answer(self.clock.seconds() - T0, self.clock.seconds()))

    def test_every_interval(self):
        """Started, it reads every node at once and again each 15 s; usage follows."""
        self.scraper.startService()
        self.addCleanup(self.scraper.stopService)
        self.assertEqual(self.asked, ["n1", "n2"])
        self.clock.advance(15)
        self.assertEqual(self.asked, ["n1", "n2", "n1", "n2"])
        usage = self.cache.node_usage("n1")
        self.assertEqual((usage.cores, usage.window), (1.0, 15))

    def test_failing_node_skipped(self):
        """A node that fails is dropped from the cache and logged once; the others go on."""
        self.scraper.startService()
        self.addCleanup(self.scraper.stopService)
        self.clock.advance(15)
        self.answers["n1"] = ScrapeError("answered 403")
        self.clock.advance(15)
        self.clock.advance(15)
        self.assertIsNone(self.cache.node_usage("n1"))
        self.assertIsNotNone(self.cache.node_usage("n2"))
        self.assertEqual([e["node"] for e in self.warnings], ["n1"])
        del self.answers["n1"]
        self.clock.advance(15)
        self.clock.advance(15)
        self.assertIsNotNone(self.cache.node_usage("n1"))

    def test_unreadable_answer(self):
        """An answer that is not the text format fails that node only."""
        self.answers["n1"] = succeed(b"<html>\n")
        self.scraper.startService()
        self.addCleanup(self.scraper.stopService)
        self.assertIn("line 1", self.warnings[0]["why"])

    def test_timeout(self):
        """A node that does not answer in 10 s is given up; the next node is asked then."""
        self.answers["n1"] = Deferred()
        self.scraper.startService()
        self.addCleanup(self.scraper.stopService)
        self.assertEqual(self.asked, ["n1"])
        self.clock.advance(10)
        self.assertEqual(self.asked, ["n1", "n2"])
        self.assertEqual(self.warnings[0]["why"], "no answer in 10s")

    def test_large_rounds_spread(self):
        """A round of many nodes starts them over half the interval, not all at once."""
        self.nodes = [node(f"n{i}") for i in range(512)]
        self.scraper.startService()
        self.addCleanup(self.scraper.stopService)
        self.assertEqual(self.asked, ["n0"])
        self.clock.advance(3.75)
        self.assertEqual(len(self.asked), 257)
        self.clock.advance(3.75)
        self.assertEqual(len(self.asked), 512)
        self.clock.advance(7.5)
        self.assertEqual(self.asked[512:], ["n0"])

    def test_removed_nodes_forgotten(self):
        """A node no longer listed is forgotten."""
        self.scraper.startService()
        self.addCleanup(self.scraper.stopService)
        self.clock.advance(15)
        self.nodes = [node("n2")]
        self.clock.advance(15)
        self.assertIsNone(self.cache.node_usage("n1"))


class TargetTests(SynchronousTestCase):
    """What the scraper keeps of a Node."""

    def test_node_target(self):
        """A Node's name, preferred address and orchlet port; None and 0 when missing."""
        self.assertEqual(node_target(node_object("n1", "fd00::1", 10251)),
                         NodeTarget("n1", "fd00::1", 10251))
        self.assertEqual(node_target(node_object("n1", None, 0)), NodeTarget("n1", None, 0))
        self.assertEqual(node_target({}), NodeTarget("", None, 0))


class FollowedNodesTests(SynchronousTestCase):
    """The nodes to scrape, from an informer."""

    def test_follows_the_store(self):
        """The first call waits for the listing; later ones see created and deleted nodes."""
        import orjson
        store = MemoryStore()
        prefix = "/registry/minions/"
        for name in ("n1", "n2"):
            self.successResultOf(store.create(prefix + name, orjson.dumps(node_object(name))))

        class Failing:
            """A store whose first listing fails."""
            failed = False

            def list(self, prefix):
                if not self.failed:
                    self.failed = True
                    return fail(OSError("down"))
                return store.list(prefix)

            def watch(self, *args):
                return store.watch(*args)

        nodes = FollowedNodes(Informer(Failing(), prefix, lambda *a: None,
                                       keep=node_target, clock=Clock()))
        self.addCleanup(nodes.stop)
        self.failureResultOf(Deferred.fromCoroutine(nodes()), ScrapeError)
        self.assertEqual(sorted(self.successResultOf(Deferred.fromCoroutine(nodes()))),
                         [node("n1"), node("n2")])
        self.successResultOf(store.delete(prefix + "n1"))
        self.successResultOf(store.create(prefix + "n3",
                                          orjson.dumps(node_object("n3", port=10251))))
        self.assertEqual(sorted(self.successResultOf(Deferred.fromCoroutine(nodes()))),
                         [node("n2"), node("n3", port=10251)])


class Endpoint:
    """A client endpoint whose connections are string transports."""

    def __init__(self, address, port, made):
        self.address, self.port, self.made = address, port, made

    def connect(self, factory):
        protocol = factory.buildProtocol(None)
        transport = StringTransport()
        protocol.makeConnection(transport)
        self.made.append((self.address, self.port, protocol, transport))
        return succeed(protocol)


class FetchTests(SynchronousTestCase):
    """Asking one node with the kept-connection client."""

    def setUp(self):
        self.clock = Clock()
        self.made = []
        self.client = OrchletClient(
            self.clock, None, endpoint=lambda address, port: Endpoint(address, port, self.made))

    def fetch(self, target):
        return Deferred.fromCoroutine(self.client.fetch(target))

    def answer(self, data, index=-1):
        self.made[index][2].dataReceived(data)

    def test_request_and_answer(self):
        """A GET of /metrics/resource with the node's Host; a 200's body is the result."""
        got = self.fetch(node("n1", "fd00::1", 10251))
        address, port, _, transport = self.made[0]
        self.assertEqual((address, port), ("fd00::1", 10251))
        self.assertEqual(transport.value(), b"GET /metrics/resource HTTP/1.1\r\n"
                         b"Host: [fd00::1]:10251\r\nAccept: text/plain\r\n\r\n")
        self.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc")
        self.assertEqual(self.successResultOf(got), b"abc")

    def test_connection_kept(self):
        """The next round asks on the same connection; a new address opens a new one."""
        self.fetch(node("n1"))
        self.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        self.fetch(node("n1"))
        self.assertEqual(len(self.made), 1)
        self.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        self.fetch(node("n1", "10.0.0.2"))
        self.assertEqual(len(self.made), 2)
        self.assertTrue(self.made[0][3].disconnecting)

    def test_refusals(self):
        """A node without address or port, or with an address that is none, is refused."""
        for bad in (node("n1", address=None), node("n1", port=0), node("n1", "h\u00e9st"),
                    node("n1", "a b"), node("n1", "a\r\nX: y")):
            failure = self.failureResultOf(self.fetch(bad), ScrapeError)
            self.assertTrue(str(failure.value))
        self.assertEqual(self.made, [])

    def test_error_answer(self):
        """An answer other than 200 fails with its code."""
        got = self.fetch(node("n1"))
        self.answer(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno")
        self.assertEqual(str(self.failureResultOf(got, ScrapeError).value), "answered 403")

    def test_body_bounded(self):
        """An answer over the bound is refused, not kept, and its connection closed."""
        got = self.fetch(node("n1"))
        self.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 8388609\r\n\r\n")
        self.assertIn("too large", str(self.failureResultOf(got, ScrapeError).value))
        self.assertTrue(self.made[0][3].disconnecting)
        got = self.fetch(node("n1"))
        self.answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"800000\r\n" + b"x" * 8388608 + b"\r\n1\r\n")
        self.assertIn("too large", str(self.failureResultOf(got, ScrapeError).value))

    def test_cut_off(self):
        """A connection lost before the whole answer fails the request."""
        got = self.fetch(node("n1"))
        self.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        from twisted.internet.error import ConnectionLost
        from twisted.python.failure import Failure
        self.made[0][2].connectionLost(Failure(ConnectionLost()))
        self.failureResultOf(got, ScrapeError)

    def test_cancel_aborts(self):
        """A request given up (the scraper's timeout) aborts its connection."""
        got = self.fetch(node("n1"))
        got.cancel()
        self.failureResultOf(got, CancelledError)
        self.assertTrue(self.made[0][3].disconnecting)

    def test_forget_and_close(self):
        """Nodes no longer scraped lose their connection; closing closes the rest."""
        for name in ("n1", "n2"):
            self.fetch(node(name))
            self.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        self.client.forget_others({"n2"})
        self.assertEqual([m[3].disconnecting for m in self.made], [True, False])
        closed = self.client.close()
        self.assertTrue(self.made[1][3].disconnecting)
        self.made[1][2].connectionLost(None)
        self.successResultOf(closed)


class StopTests(SynchronousTestCase):
    """Stopping the scraper."""

    def test_stop_closes_client(self):
        """A stop ends the rounds and closes the kept connections."""
        closed = []

        class Client:
            def forget_others(self, names):
                pass

            def close(self):
                closed.append(True)
                return succeed(None)

        clock = Clock()

        async def nodes():
            return []
        scraper = MetricsScraper(clock, nodes, None, MetricsCache(), client=Client())
        scraper.startService()
        self.successResultOf(scraper.stopService())
        self.assertEqual((closed, clock.getDelayedCalls()), ([True], []))
