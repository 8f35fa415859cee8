"""/metrics end to end: a scraper's certificate over real TLS, RBAC deciding."""

from prometheus_client.parser import text_string_to_metric_families
from twisted.trial.unittest import TestCase

from tests.integration.support import RunningControlPlane

CM = "/api/v1/namespaces/default/configmaps"


def families(text):
    """The scrape parsed by prometheus_client's parser: C{{name: family}}."""
    return {family.name: family for family in text_string_to_metric_families(text)}


class MetricsEndpointTests(TestCase):
    timeout = 60

    async def setUp(self):
        self.server = await RunningControlPlane(self).start()

    async def test_monitoring_group_scrapes(self):
        """A member of system:monitoring reads /metrics, which parses with upstream's names."""
        code, _ = await self.server.call("POST", CM, {"metadata": {"name": "scraped"}})
        self.assertEqual(code, 201)
        code, _ = await self.server.call("GET", CM + "/scraped")
        self.assertEqual(code, 200)
        scraper = self.server.user_client("prometheus", "system:monitoring")
        code, text = await self.server.call("GET", "/metrics", client=scraper)
        self.assertEqual(code, 200, text)
        found = families(text)
        for name in ("apiserver_request", "apiserver_request_duration_seconds",
                     "apiserver_request_sli_duration_seconds", "apiserver_storage_objects",
                     "etcd_request_duration_seconds", "apiserver_current_inflight_requests",
                     "apiserver_client_certificate_expiration_seconds", "process_cpu_seconds",
                     "process_resident_memory_bytes", "orchd_storage_group_commit_batch_size"):
            self.assertIn(name, found)
        gets = [s for s in found["apiserver_request"].samples
                if s.name == "apiserver_request_total" and s.labels["verb"] == "GET"
                and s.labels["resource"] == "configmaps"]
        self.assertEqual([(s.labels["scope"], s.labels["code"], s.value) for s in gets],
                         [("resource", "200", 1.0)])
        objects = {s.labels["resource"]: s.value
                   for s in found["apiserver_storage_objects"].samples}
        self.assertGreaterEqual(objects["configmaps"], 1)
        self.assertGreaterEqual(objects["namespaces"], 4)
        creates = [s for s in found["etcd_request_duration_seconds"].samples
                   if s.name.endswith("_count") and s.labels["operation"] == "create"
                   and s.labels["type"] == "configmaps"]
        self.assertTrue(creates and creates[0].value >= 1, creates)
        expiry = [s for s in found["apiserver_client_certificate_expiration_seconds"].samples
                  if s.name.endswith("_count")]
        self.assertGreaterEqual(expiry[0].value, 1)
        code, slis = await self.server.call("GET", "/metrics/slis", client=scraper)
        self.assertEqual(code, 200)
        self.assertIn("kubernetes_healthcheck", families(slis))

    async def test_forbidden_without_the_role(self):
        """A user outside system:monitoring gets 403 for /metrics and /metrics/slis."""
        nobody = self.server.user_client("nobody")
        for path in ("/metrics", "/metrics/slis"):
            code, status = await self.server.call("GET", path, client=nobody)
            self.assertEqual(code, 403, status)
            self.assertEqual(status["reason"], "Forbidden")
