# -*- test-case-name: tests.server.test_healthsite -*-
"""
The health listeners of the scheduler and the controller manager (ports
10259 and 10257): C{/healthz}, C{/livez}, C{/readyz} and C{/<endpoint>/<check>}.

Upstream serves these on each component's own HTTPS port and always lets
anyone read them (C{--authorization-always-allow-paths}), so they are
answered here without authentication, by the same L{Health} machinery as
the API server's, under the same connection and request bounds
(L{orchd.server.channel.BoundedSite}); every other path is upstream's
plain C{404 page not found}. With a registry the port also serves the
component's own C{/metrics} (and C{/metrics/slis}: its health checks), as
upstream's components do on these ports.
"""

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from orchd.api.query import parse_query
from orchd.server.channel import BoundedSite
from orchd.server.health import ENDPOINTS
from orchd.server.healthmetrics import HealthMetrics
from orchd.server.metricsendpoint import serve_metrics
from orchd.server.requestlimits import LISTEN_BACKLOG
from orchd.server.response import write_text
from orchd.tls.listen import listen_tls

NOT_FOUND = "404 page not found\n"


class HealthResource(Resource):
    """
    Every path of a health listener: the health endpoints, C{/metrics} when
    given a C{registry} (an L{orchd.api.metrics.Registry}), or 404.
    """

    isLeaf = True
    log = Logger()

    def __init__(self, health, registry=None):
        super().__init__()
        self.health = health
        self.registry = registry
        self.slis = None
        if registry is not None:
            health.metrics = HealthMetrics()
            self.slis = health.metrics.registry

    def render(self, request):
        work = Deferred.fromCoroutine(self._serve(request))
        request.notifyFinish().addErrback(lambda _: work.cancel())
        work.addErrback(self._failed, request)
        return NOT_DONE_YET

    async def _serve(self, request):
        # As the API server reads a query: a bare ?verbose counts.
        request.args = parse_query(request.uri.partition(b"?")[2])
        segments = [s for s in request.path.decode("latin-1").split("/") if s]
        if segments and segments[0] in ENDPOINTS:
            await self.health.serve(request, segments[0], "/".join(segments[1:]))
        elif not (segments and segments[0] == "metrics" and self.registry is not None
                  and serve_metrics(request, segments[1:], self.registry, self.slis)):
            write_text(request, 404, NOT_FOUND)

    def _failed(self, failure, request):
        if request.finished or request._disconnected:
            return None
        self.log.failure("Health request failed", failure)
        write_text(request, 500, "internal server error\n")


class HealthSite(BoundedSite):
    """A health listener's Site: bounded as the API server's, not logged per request."""

    def log(self, request):
        pass


def listen_health(reactor, port, interface, tls_options, health, registry=None):
    """
    Listen with TLS on C{interface}:C{port} and serve C{health} there (and
    C{registry}'s metrics, if any).

    @return: the listening port.
    @raise twisted.internet.error.CannotListenError: when the port is taken.
    """
    site = HealthSite(HealthResource(health, registry), reactor=reactor)
    return listen_tls(reactor, port, site, tls_options, backlog=LISTEN_BACKLOG,
                      interface=interface)
