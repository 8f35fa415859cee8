# -*- test-case-name: tests.server.test_health -*-
"""
Upstream's health check metrics, which C{/metrics/slis} serves:
C{kubernetes_healthcheck{name,type}} (1 when the check last passed, else 0)
and C{kubernetes_healthchecks_total{name,status,type}}, counted each time
an endpoint (C{type}: healthz, livez, readyz) runs a named check.
"""

from orchd.api.metrics import STABLE, Registry


class HealthMetrics:
    """@ivar registry: the families, alone in their registry (C{/metrics/slis})."""

    def __init__(self, registry=None):
        self.registry = registry if registry is not None else Registry()
        self.status = self.registry.gauge(
            "kubernetes_healthcheck",
            "This metric records the result of a single healthcheck.", ("name", "type"), STABLE)
        self.total = self.registry.counter(
            "kubernetes_healthchecks_total",
            "This metric records the results of all healthcheck.", ("name", "status", "type"),
            STABLE)

    def record(self, endpoint, name, ok):
        self.status.set((name, endpoint), 1 if ok else 0)
        self.total.inc((name, "success" if ok else "error", endpoint))
