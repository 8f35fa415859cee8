"""The components' health listeners: the health endpoints for anyone, 404 for the rest."""

from treq.testing import StubTreq
from twisted.internet.defer import fail
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.server.channel import BoundedSite
from orchd.server.health import Health, HealthCheck
from orchd.server.healthsite import HealthResource, HealthSite


def result(d):
    results = []
    d.addBoth(results.append)
    if not results:
        raise AssertionError("not fired")
    if hasattr(results[0], "raiseException"):
        results[0].raiseException()
    return results[0]


class HealthResourceTests(SynchronousTestCase):
    def setUp(self):
        self.health = Health(Clock())
        self.ok = True
        self.health.add(HealthCheck("leaderElection", self.check, endpoints=("healthz", "readyz")))
        self.treq = StubTreq(HealthResource(self.health))

    def check(self):
        if not self.ok:
            return fail(RuntimeError("lease lost"))
        return None

    def get(self, path, method="GET"):
        response = result(self.treq.request(method, "https://scheduler" + path))
        return response.code, result(self.treq.content(response)).decode()

    def test_endpoints(self):
        """/healthz, /livez and /readyz answer ok without any credentials."""
        for path in ("/healthz", "/livez", "/readyz"):
            self.assertEqual(self.get(path), (200, "ok"))

    def test_single_check_and_verbose(self):
        """One check has its own path; a bare ?verbose lists the checks."""
        self.assertEqual(self.get("/healthz/leaderElection"), (200, "ok"))
        self.assertEqual(self.get("/healthz/nothing")[0], 404)
        self.assertEqual(self.get("/readyz?verbose"), (200, "[+]ping ok\n[+]leaderElection ok\n"
                                                            "[+]shutdown ok\n"
                                                            "healthz check passed\n"))

    def test_failure(self):
        """A failing check is a 500 naming it, its reason withheld."""
        self.ok = False
        code, body = self.get("/healthz")
        self.assertEqual(code, 500)
        self.assertIn("[-]leaderElection failed: reason withheld", body)
        self.assertNotIn("lease lost", body)
        self.assertEqual(self.get("/livez"), (200, "ok"))

    def test_shutdown(self):
        """While shutting down /readyz fails and /healthz does not."""
        self.health.shutting_down = True
        self.assertEqual(self.get("/readyz")[0], 500)
        self.assertEqual(self.get("/healthz")[0], 200)

    def test_other_paths(self):
        """Any other path, metrics included for now, is upstream's plain 404."""
        for path in ("/", "/metrics", "/api/v1/pods", "/healthzz", "/%ff"):
            self.assertEqual(self.get(path), (404, "404 page not found\n"), path)

    def test_checks_that_come_and_go(self):
        """Checks from a source are asked for at each request."""
        running = []
        self.health.add_source(lambda: [HealthCheck(name, lambda: None, endpoints=("healthz",))
                                        for name in running])
        self.assertEqual(self.get("/healthz/namespace")[0], 404)
        running.append("namespace")
        self.assertEqual(self.get("/healthz/namespace"), (200, "ok"))
        self.assertIn("[+]namespace ok", self.get("/healthz?verbose")[1])


class HealthSiteTests(SynchronousTestCase):
    def test_bounded_and_quiet(self):
        """The site has the API server's connection bounds and logs no request."""
        site = HealthSite(HealthResource(Health(Clock())))
        self.assertIsInstance(site, BoundedSite)
        self.assertIsNone(site.log(object()))


class ComponentMetricsTests(SynchronousTestCase):
    def test_metrics_served_with_a_registry(self):
        """With a registry the port serves /metrics, and /metrics/slis counts its checks."""
        from prometheus_client.parser import text_string_to_metric_families

        from orchd.api.metrics import Registry
        registry = Registry()
        registry.counter("scheduler_schedule_attempts_total", "A.", ("result",)).inc(("ok",))
        health = Health(Clock())
        stub = StubTreq(HealthResource(health, registry))

        def get(path):
            response = result(stub.get("https://scheduler" + path))
            return response.code, result(stub.content(response)).decode()
        code, text = get("/metrics")
        self.assertEqual(code, 200)
        names = [f.name for f in text_string_to_metric_families(text)]
        self.assertEqual(names, ["scheduler_schedule_attempts"])
        self.assertEqual(get("/healthz"), (200, "ok"))
        code, text = get("/metrics/slis")
        self.assertIn('kubernetes_healthchecks_total{name="ping",status="success",type="healthz"}'
                      ' 1\n', text)
        self.assertIn('kubernetes_healthcheck{name="ping",type="healthz"} 1\n', text)
        self.assertEqual(get("/metrics/other")[0], 404)

    def test_no_metrics_without_a_registry(self):
        """Without a registry /metrics is upstream's plain 404."""
        stub = StubTreq(HealthResource(Health(Clock())))
        response = result(stub.get("https://scheduler/metrics"))
        self.assertEqual(response.code, 404)
