# -*- test-case-name: tests.app.test_metricsscraper -*-
"""
Filling the resource metrics API: every node agent's C{/metrics/resource},
read every L{INTERVAL} seconds by the control plane itself.

Upstream runs metrics-server for this; here every API server process keeps
its own L{MetricsCache} (it serves NodeMetrics and PodMetrics from it), so
no extra component is needed. Each round lists the served nodes, asks at
most L{CONCURRENCY} of them at a time through the same client and
credentials C{nodes/proxy} and C{pods/log} use (the API server's orchlet
client certificate), and stores what each answered; a node that cannot be
reached, answers an error or something unreadable is logged and dropped
from the cache until it answers again. A round that is still running when
the next is due is not doubled up: the next starts when it ends.
"""

from twisted.application.service import Service
from twisted.internet.defer import CancelledError, Deferred, DeferredSemaphore, gatherResults
from twisted.internet.protocol import Protocol
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.web.client import PotentialDataLoss, ResponseDone
from twisted.web.http_headers import Headers

from orchd.api.promtext import ParseError
from orchd.registry.nodeproxy import node_address, orchlet_port
from orchd.registry.options import ListOptions
from orchd.registry.resourcemetrics import parse_node_metrics

#: Seconds between two rounds (metrics-server's default resolution).
INTERVAL = 15.0
#: Nodes asked at the same time.
CONCURRENCY = 16
#: Seconds a node has to answer (metrics-server's default: 10 s).
TIMEOUT = 10.0
#: An answer longer than this is refused (a node with 110 pods answers ~60 KiB).
MAX_BODY = 8 * 1024 * 1024

PATH = "/metrics/resource"


class ScrapeError(Exception):
    """A node's answer could not be had or read."""


class _Body(Protocol):
    """Collects a response body of at most L{MAX_BODY} bytes."""

    def __init__(self, done):
        self.done = done
        self.chunks = []
        self.size = 0

    def dataReceived(self, data):
        self.size += len(data)
        if self.size > MAX_BODY:
            self.chunks = []
            self.transport.stopProducing()
            return
        self.chunks.append(data)

    def connectionLost(self, reason):
        if self.size > MAX_BODY:
            self.done.errback(ScrapeError(f"answer over {MAX_BODY} bytes"))
        elif reason.check(ResponseDone, PotentialDataLoss):
            self.done.callback(b"".join(self.chunks))
        else:
            self.done.errback(ScrapeError(f"answer cut off: {reason.value}"))


def agent_fetch(agent):
    """
    C{fetch(node) -> Deferred(bytes)} asking a node's orchlet port with
    C{agent} (L{orchd.server.proxy.orchlet_agent}).
    """
    async def fetch(node):
        address, port = node_address(node), orchlet_port(node)
        if address is None or not port:
            raise ScrapeError("no address or orchlet port in its status")
        host = f"[{address}]" if ":" in address else address
        try:
            url = f"https://{host}:{port}{PATH}".encode("ascii")
        except UnicodeEncodeError:
            raise ScrapeError(f"invalid address {address!r}") from None
        headers = Headers({b"accept": [b"text/plain"]})
        try:
            response = await agent.request(b"GET", url, headers)
        except CancelledError:
            raise
        except Exception as e:
            raise ScrapeError(str(e) or e.__class__.__name__) from None
        done = Deferred()
        response.deliverBody(_Body(done))
        body = await done
        if response.code != 200:
            raise ScrapeError(f"answered {response.code}")
        return body
    return fetch


class MetricsScraper(Service):
    """
    Reads every node's resource metrics into C{cache} on C{clock}.

    @param nodes: C{async nodes() -> [node objects]}, the nodes to scrape.
    @param fetch: C{fetch(node) -> awaitable bytes}, see L{agent_fetch}.
    @param cache: the L{orchd.registry.resourcemetrics.MetricsCache} to fill.
    @param pool: the C{HTTPConnectionPool} C{fetch} uses, closed at stop, or None.
    """

    log = Logger()

    def __init__(self, clock, nodes, fetch, cache, interval=INTERVAL,
                 concurrency=CONCURRENCY, timeout=TIMEOUT, pool=None):
        self.clock = clock
        self._pool = pool
        self._nodes = nodes
        self._fetch = fetch
        self.cache = cache
        self.interval = interval
        self.timeout = timeout
        self._limit = DeferredSemaphore(concurrency)
        self._loop = None
        self._failing = set()

    @classmethod
    def for_catalog(cls, clock, catalog, fetch, cache, **kw):
        """A scraper of the nodes C{catalog} serves (read from its watch cache)."""
        async def nodes():
            listed = await catalog.resource("", "nodes").list(
                catalog.system_context(), ListOptions(resource_version="0"))
            return listed.get("items") or []
        return cls(clock, nodes, fetch, cache, **kw)

    def startService(self):
        super().startService()
        self._loop = LoopingCall(lambda: Deferred.fromCoroutine(self.scrape()))
        self._loop.clock = self.clock
        self._loop.start(self.interval, now=True).addErrback(
            lambda f: self.log.failure("Resource metrics scraping stopped", f))

    def stopService(self):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        super().stopService()
        if self._pool is not None:
            return self._pool.closeCachedConnections()
        return None

    async def scrape(self):
        """One round: every node, a few at a time; never raises."""
        try:
            nodes = await self._nodes()
        except Exception as e:
            self.log.warn("Cannot list the nodes to scrape: {error}", error=e)
            return
        names = {(node.get("metadata") or {}).get("name", "") for node in nodes}
        self.cache.keep_nodes(names)
        self._failing &= names
        await gatherResults([self._limit.run(self._one, node) for node in nodes],
                            consumeErrors=True)

    def _one(self, node):
        work = Deferred.fromCoroutine(self._scrape_node(node))
        timer = self.clock.callLater(self.timeout, work.cancel)

        def done(result):
            if timer.active():
                timer.cancel()
            return result
        return work.addBoth(done)

    async def _scrape_node(self, node):
        name = (node.get("metadata") or {}).get("name", "")
        try:
            body = await self._fetch(node)
            point, pods = parse_node_metrics(body.decode("utf-8", "replace"),
                                             self.clock.seconds())
        except CancelledError:
            self._failed(name, f"no answer in {self.timeout:g}s")
        except (ScrapeError, ParseError) as e:
            self._failed(name, str(e))
        except Exception:
            self.log.failure("Scraping node {node} failed", node=name)
            self.cache.node_failed(name)
        else:
            self.cache.store(name, point, pods)
            if name in self._failing:
                self._failing.discard(name)
                self.log.info("Node {node} answers its resource metrics again", node=name)

    def _failed(self, name, why):
        """Drop the node's figures; say so once until it answers again."""
        self.cache.node_failed(name)
        if name not in self._failing:
            self._failing.add(name)
            self.log.warn("Cannot scrape the resource metrics of node {node}: {why}",
                          node=name, why=why)
