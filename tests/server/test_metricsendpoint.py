"""/metrics and /metrics/slis: which paths and methods answer, and with what."""

from twisted.trial.unittest import SynchronousTestCase

from tests.support import APIHarness


class MetricsEndpointTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def test_slis_holds_the_health_checks(self):
        """/metrics/slis counts the named checks each health endpoint ran."""
        self.assertEqual(self.api.call("GET", "/readyz")[0], 200)
        code, text, _ = self.api.call("GET", "/metrics/slis")
        self.assertEqual(code, 200)
        self.assertIn('kubernetes_healthcheck{name="ping",type="readyz"} 1\n', text)
        self.assertIn('kubernetes_healthchecks_total{name="shutdown",status="success",'
                      'type="readyz"} 1\n', text)
        self.assertNotIn("apiserver_request_total", text)

    def test_head_has_no_body(self):
        """HEAD /metrics answers the headers only."""
        response = _result(self.api.treq.head("https://orchd/metrics"))
        self.assertEqual(response.code, 200)
        self.assertEqual(_result(self.api.treq.content(response)), b"")

    def test_other_paths_and_methods(self):
        """Other paths under /metrics and other methods are 404."""
        self.assertEqual(self.api.call("GET", "/metrics/nothing")[0], 404)
        self.assertEqual(self.api.call("POST", "/metrics", b"")[0], 404)

    def test_forbidden_without_permission(self):
        """A user without the non-resource permission gets 403, as the authorizer decides."""
        api = APIHarness(rbac=True)
        from orchd.auth.user import UserInfo
        api.as_user(UserInfo("nobody", ["system:authenticated"]))
        code, status, _ = api.call("GET", "/metrics")
        self.assertEqual(code, 403)
        self.assertEqual(status["message"],
                         'forbidden: User "nobody" cannot get path "/metrics"')


def _result(d):
    out = []
    d.addBoth(out.append)
    assert out, "no result yet"
    return out[0]
