"""The resource metrics scraper: every node every 15 s, a few at a time, failures skipped."""

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.logger import LogLevel, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from orchd.app.metricsscraper import MetricsScraper, ScrapeError, _Body, agent_fetch
from orchd.registry.resourcemetrics import MetricsCache

T0 = 1_700_000_000


def node(name, address="10.0.0.1", port=10250):
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
        name = node["metadata"]["name"]
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

    def test_removed_nodes_forgotten(self):
        """A node no longer listed is forgotten."""
        self.scraper.startService()
        self.addCleanup(self.scraper.stopService)
        self.clock.advance(15)
        self.nodes = [node("n2")]
        self.clock.advance(15)
        self.assertIsNone(self.cache.node_usage("n1"))


class FetchTests(SynchronousTestCase):
    """Asking one node with an agent."""

    def test_url_and_refusals(self):
        """The orchlet's address and port make the URL; a node without them is refused."""
        asked = []

        class Agent:
            def request(self, method, url, headers=None, body=None):
                asked.append((method, url))
                return Deferred()

        fetch = agent_fetch(Agent())
        Deferred.fromCoroutine(fetch(node("n1", "fd00::1", 10251)))
        self.assertEqual(asked, [(b"GET", b"https://[fd00::1]:10251/metrics/resource")])
        for bad in (node("n1", address=None), node("n1", port=0), node("n1", "h\u00e9st")):
            failure = self.failureResultOf(Deferred.fromCoroutine(fetch(bad)), ScrapeError)
            self.assertTrue(str(failure.value))

    def test_body_bounded(self):
        """An answer over the bound is refused, not kept."""
        done = Deferred()
        body = _Body(done)

        class Transport:
            stopped = False

            def stopProducing(self):
                self.stopped = True

        body.transport = Transport()
        body.dataReceived(b"x" * (8 * 1024 * 1024 + 1))
        self.assertTrue(body.transport.stopped)
        from twisted.python.failure import Failure
        body.connectionLost(Failure(RuntimeError("closed")))
        self.failureResultOf(done, ScrapeError)


class StopTests(SynchronousTestCase):
    """Stopping the scraper."""

    def test_stop_closes_pool(self):
        """A stop ends the rounds and closes the kept connections."""
        closed = []

        class Pool:
            def closeCachedConnections(self):
                closed.append(True)
                return succeed(None)

        clock = Clock()

        async def nodes():
            return []
        scraper = MetricsScraper(clock, nodes, None, MetricsCache(), pool=Pool())
        scraper.startService()
        self.successResultOf(scraper.stopService())
        self.assertEqual((closed, clock.getDelayedCalls()), ([True], []))
