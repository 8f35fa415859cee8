# -*- test-case-name: tests.app.test_metricsscraper -*-
"""
Filling the resource metrics API: every node agent's C{/metrics/resource},
read every L{INTERVAL} seconds by the control plane itself.

Upstream runs metrics-server for this; here every API server process keeps
its own L{MetricsCache} (it serves NodeMetrics and PodMetrics from it), so
no extra component is needed. Each round asks every served node, at most
L{CONCURRENCY} at a time (a large round spread over half the interval),
with the credentials C{nodes/proxy} and C{pods/log} use (the API server's
orchlet client certificate, the node's serving certificate verified
against the cluster CA), and stores what each answered; a node that
cannot be reached, answers an error or something unreadable is logged
and dropped from the cache until it answers again. A
round that is still running when the next is due is not doubled up: the
next starts when it ends.

It runs on the reactor that serves every request, thousands of nodes every
15 s, so each round is kept lean: the nodes come from an informer that
keeps only each one's name, address and orchlet port (L{NodeTarget}), not
from a listing of every Node decoded each round; and each node is asked
over one kept-alive connection of its own with the node agent's small
HTTP/1.1 client (L{orchd.orchlet.keptconn}), not twisted.web's C{Agent},
whose parser and Deferred chains per answer were most of the round's cost.
"""

import re
from collections import namedtuple

from twisted.application.service import Service
from twisted.internet.abstract import isIPAddress, isIPv6Address
from twisted.internet.defer import (
    CancelledError, Deferred, DeferredList, gatherResults, succeed,
)
from twisted.internet.endpoints import (
    HostnameEndpoint, TCP4ClientEndpoint, TCP6ClientEndpoint, wrapClientTLS,
)
from twisted.internet.task import LoopingCall, deferLater
from twisted.logger import Logger
from twisted.python.failure import Failure

from orchd.api.promtext import ParseError
from orchd.orchlet.keptconn import BadResponse, KeptConnections, request_bytes
from orchd.registry.nodeproxy import node_address, orchlet_port
from orchd.registry.resourcemetrics import parse_node_metrics
from orchd.storage.informer import Informer
from orchd.timing.timers import deadlines_of
from orchd.tls.client import ClientTLSPolicy

#: Seconds between two rounds (metrics-server's default resolution).
INTERVAL = 15.0
#: Nodes asked at the same time.
CONCURRENCY = 16
#: The part of an interval the starts of a round of L{SPREAD_FROM} nodes
#: or more are spread over: the scraper runs in the API server, and 5,000
#: nodes asked as fast as they answer hold up every request served
#: meanwhile, every 15 s. Fewer nodes are asked at once: a short round.
SPREAD = 0.5
SPREAD_FROM = 256
#: Seconds a node has to answer (metrics-server's default: 10 s).
TIMEOUT = 10.0
#: An answer longer than this is refused (a node with 110 pods answers ~60 KiB).
MAX_BODY = 8 * 1024 * 1024

PATH = "/metrics/resource"
#: What no address (IP or DNS name) has: spaces, controls, anything not ASCII.
_NOT_AN_ADDRESS = re.compile(r"[^\x21-\x7e]")


class ScrapeError(Exception):
    """A node's answer could not be had or read."""


#: What the scraper keeps of a Node: its name, the address to reach its
#: orchlet at (None if it has none) and the orchlet's port (0 if unknown).
NodeTarget = namedtuple("NodeTarget", ["name", "address", "port"])


def node_target(node):
    """The L{NodeTarget} of a Node object."""
    return NodeTarget((node.get("metadata") or {}).get("name", ""), node_address(node),
                      orchlet_port(node))


def _endpoint(reactor, address, port):
    """A TCP endpoint to C{address}: an IP address needs no name lookup."""
    if isIPAddress(address):
        return TCP4ClientEndpoint(reactor, address, port, timeout=TIMEOUT)
    if isIPv6Address(address):
        return TCP6ClientEndpoint(reactor, address, port, timeout=TIMEOUT)
    return HostnameEndpoint(reactor, address, port, timeout=TIMEOUT)


class OrchletClient:
    """
    C{fetch(target) -> Deferred(bytes)}: a node's C{/metrics/resource}, over
    one kept connection per node (a scrape every 15 s reuses it).

    A node's connection follows its address and port: when either changes,
    or the node is no longer scraped (L{forget_others}), it is closed.

    @param policy: the L{ClientTLSPolicy} (verifying the node's serving
        certificate against the cluster CA, presenting the API server's
        orchlet client certificate).
    @param endpoint: C{endpoint(address, port)}, the client endpoint to a
        node; by default TLS with C{policy} over TCP.
    """

    def __init__(self, reactor, policy, timeout=TIMEOUT, max_body=MAX_BODY, endpoint=None):
        self._reactor = reactor
        self._endpoint = endpoint or self._tls_endpoint
        self._policy = policy
        self._timeout = timeout
        self._max_body = max_body
        self._nodes = {}            # name -> ((address, port), KeptConnections)

    @classmethod
    def from_pems(cls, reactor, ca_pem, client_cert_pem, client_key_pem):
        """A client verifying nodes against C{ca_pem}, presenting the given certificate."""
        return cls(reactor, ClientTLSPolicy(ca_pem, client_cert_pem, client_key_pem))

    def _tls_endpoint(self, address, port):
        creator = self._policy.creatorForNetloc(address.encode("ascii"), port)
        return wrapClientTLS(creator, _endpoint(self._reactor, address, port))

    def _connections(self, target):
        address, port = target.address, target.port
        if address is None or not port:
            raise ScrapeError("no address or orchlet port in its status")
        if _NOT_AN_ADDRESS.search(address):
            raise ScrapeError(f"invalid address {address!r}")
        known = self._nodes.get(target.name)
        if known is not None:
            if known[0] == (address, port):
                return known[1]
            known[1].close()
        endpoint = self._endpoint(address, port)
        shown = f"[{address}]" if ":" in address else address
        connections = KeptConnections(self._reactor, endpoint,
                                      shown if port == 443 else f"{shown}:{port}", 1,
                                      max_body=self._max_body)
        self._nodes[target.name] = ((address, port), connections)
        return connections

    async def fetch(self, target):
        """The body of the node's answer; L{ScrapeError} for anything but a 200 read whole."""
        connections = self._connections(target)
        try:
            data = request_bytes("GET", PATH, connections.host, [("Accept", "text/plain")])
            code, _, body = await connections.request(data, self._timeout)
        except CancelledError:
            raise
        except BadResponse as e:
            raise ScrapeError(f"unreadable answer: {e}") from None
        except Exception as e:
            raise ScrapeError(str(e) or e.__class__.__name__) from None
        if code != 200:
            raise ScrapeError(f"answered {code}")
        return body

    def forget_others(self, names):
        """Close the connections of the nodes not in C{names}."""
        for name in [name for name in self._nodes if name not in names]:
            self._nodes.pop(name)[1].close()

    def close(self):
        """Close every connection; a Deferred that fires once they are closed."""
        closing = [connections.close() for _, connections in self._nodes.values()]
        self._nodes = {}
        if not closing:
            return succeed(None)
        return DeferredList(closing).addCallback(lambda _: None)


class MetricsScraper(Service):
    """
    Reads every node's resource metrics into C{cache} on C{clock}.

    @param nodes: C{async nodes() -> [NodeTarget]}, the nodes to scrape.
    @param fetch: C{fetch(target) -> awaitable bytes}, see L{OrchletClient.fetch}.
    @param cache: the L{orchd.registry.resourcemetrics.MetricsCache} to fill.
    @param client: the L{OrchletClient} C{fetch} uses (its connections are
        closed at stop, and those of nodes gone after each round), or None.
    @param informer: what C{nodes} reads (L{FollowedNodes}), stopped with
        the scraper, or None.
    """

    log = Logger()

    def __init__(self, clock, nodes, fetch, cache, interval=INTERVAL,
                 concurrency=CONCURRENCY, timeout=TIMEOUT, client=None, informer=None):
        self.clock = clock
        self._client = client
        self._informer = informer
        self._nodes = nodes
        self._fetch = fetch
        self.cache = cache
        self.interval = interval
        self.timeout = timeout
        self._concurrency = concurrency
        self._loop = None
        self._failing = set()

    @classmethod
    def for_catalog(cls, clock, catalog, client, cache, **kw):
        """
        A scraper of the nodes C{catalog} serves, with C{client} (an
        L{OrchletClient}): an informer on its watch cache keeps what it needs
        of each Node (L{FollowedNodes}).
        """
        nodes = FollowedNodes(Informer(
            catalog.reads, catalog.resource("", "nodes").info.key_prefix(), _ignore,
            keep=node_target, clock=clock))
        return cls(clock, nodes, client.fetch, cache, client=client, informer=nodes, **kw)

    def startService(self):
        super().startService()
        self._loop = LoopingCall(lambda: Deferred.fromCoroutine(self.scrape()))
        self._loop.clock = self.clock
        self._loop.start(self.interval, now=True).addErrback(
            lambda f: self.log.failure("Resource metrics scraping stopped", f))

    def stopService(self):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._informer is not None:
            self._informer.stop()
        super().stopService()
        if self._client is not None:
            return self._client.close()
        return None

    async def scrape(self):
        """One round: every node, a few at a time; never raises."""
        try:
            nodes = await self._nodes()
        except Exception as e:
            self.log.warn("Cannot list the nodes to scrape: {error}", error=e)
            return
        names = {node.name for node in nodes}
        self.cache.keep_nodes(names)
        self._failing &= names
        if self._client is not None:
            self._client.forget_others(names)
        # A few workers taking the nodes in turn, each node started no
        # sooner than its share of the spread.
        todo = enumerate(nodes)
        began = self.clock.seconds()
        step = self.interval * SPREAD / len(nodes) if len(nodes) >= SPREAD_FROM else 0
        await gatherResults([Deferred.fromCoroutine(self._worker(todo, began, step))
                             for _ in range(min(self._concurrency, len(nodes)))],
                            consumeErrors=True)

    async def _worker(self, todo, began, step):
        """
        Scrape the nodes C{todo} yields, each no sooner than C{began} plus its
        index times C{step}, and given up after the timeout (L{deadlines_of}:
        no timer is made per node).
        """
        work = None

        def give_up():
            work.cancel()
        deadlines = deadlines_of(self.clock)
        try:
            for index, node in todo:
                wait = began + index * step - self.clock.seconds()
                if wait > 0:
                    await deferLater(self.clock, wait)
                work = Deferred.fromCoroutine(self._scrape_node(node))
                deadlines.set(give_up, self.timeout)
                await work
                deadlines.clear(give_up)
        finally:
            deadlines.clear(give_up)
            deadlines.idle()

    async def _scrape_node(self, node):
        name = node.name
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


class FollowedNodes:
    """
    C{async nodes() -> [NodeTarget]} from an informer of Nodes keeping
    L{node_target}: started by the first call, which (like any call before
    the first listing is in) waits for it; a listing that fails is tried
    again by the next call.
    """

    log = Logger()

    def __init__(self, informer):
        self._informer = informer
        self._started = False
        self._listed = False
        self._waiting = []

    async def __call__(self):
        if not self._listed:
            waiting = Deferred()
            self._waiting.append(waiting)
            if not self._started:
                self._started = True
                Deferred.fromCoroutine(self._informer.start()).addBoth(self._done)
            await waiting
        return list(self._informer.cache.values())

    def _done(self, result):
        self._started = False
        self._listed = not isinstance(result, Failure)
        waiting, self._waiting = self._waiting, []
        for waiter in waiting:
            if self._listed:
                waiter.callback(None)
            else:
                waiter.errback(ScrapeError(f"cannot list the nodes: {result.value}"))

    def stop(self):
        self._informer.stop()


def _ignore(type, obj, old):
    """The scraper reads the informer's cache each round; changes need nothing more."""
