"""Health endpoints: the format the specification gives, excludes, failures, grace and shutdown."""

from twisted.internet.defer import Deferred, fail
from twisted.trial.unittest import SynchronousTestCase

from orchd.server.health import Health, HealthCheck, LogCheck
from tests.support import APIHarness


class HealthTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.health = self.api.health
        self.store_ok = True
        self.health.add(HealthCheck("etcd", self._store_check))

    def _store_check(self):
        if not self.store_ok:
            return fail(RuntimeError("store unreachable"))
        return None

    def test_plain_ok(self):
        """All checks passing: 200 and a bare ok."""
        for endpoint in ("/healthz", "/livez", "/readyz"):
            code, body, headers = self.api.call("GET", endpoint)
            self.assertEqual((code, body), (200, "ok"))
            self.assertEqual(headers.getRawHeaders(b"x-content-type-options"), [b"nosniff"])

    def test_verbose(self):
        """verbose lists every check, then the passed line."""
        code, body, _ = self.api.call("GET", "/readyz?verbose")
        self.assertEqual(code, 200)
        self.assertEqual(body, "[+]ping ok\n[+]etcd ok\n[+]shutdown ok\nhealthz check passed\n")

    def test_livez_has_no_shutdown_check(self):
        """The shutdown check belongs to readyz only."""
        _, body, _ = self.api.call("GET", "/livez?verbose")
        self.assertEqual(body, "[+]ping ok\n[+]etcd ok\nhealthz check passed\n")

    def test_exclude_repeatable(self):
        """exclude may repeat; excluded checks read 'excluded: ok'; unknown names are warned."""
        _, body, _ = self.api.call("GET", "/readyz?verbose&exclude=etcd&exclude=ping&exclude=zz")
        self.assertEqual(body, "[+]ping excluded: ok\n[+]etcd excluded: ok\n[+]shutdown ok\n"
                               'warn: some health checks cannot be excluded: no matches for "zz"\n'
                               "healthz check passed\n")

    def test_failure_is_500_with_lines(self):
        """A failing check makes a 500 with [-] lines, its reason withheld."""
        self.store_ok = False
        code, body, _ = self.api.call("GET", "/readyz")
        self.assertEqual(code, 500)
        self.assertIn("[-]etcd failed: reason withheld\n", body)
        self.assertIn("[+]ping ok\n", body)
        self.assertNotIn("unreachable", body)

    def test_excluding_the_failure_passes(self):
        """Excluding the failing check makes the endpoint pass."""
        self.store_ok = False
        self.assertEqual(self.api.call("GET", "/readyz?exclude=etcd")[0], 200)

    def test_single_check(self):
        """/<endpoint>/<check> answers ok, a 500 with the error, or 404 for an unknown check."""
        self.assertEqual(self.api.call("GET", "/readyz/etcd")[:2], (200, "ok"))
        self.store_ok = False
        code, body, _ = self.api.call("GET", "/livez/etcd")
        self.assertEqual((code, body), (500, "internal server error: store unreachable\n"))
        self.assertEqual(self.api.call("GET", "/livez/nope")[0], 404)
        self.assertEqual(self.api.call("GET", "/livez/shutdown")[0], 404)

    def test_post_start_hook(self):
        """A post-start hook fails until finished, and names itself poststarthook/<name>."""
        hook = self.health.post_start_hook("bootstrap")
        code, body, _ = self.api.call("GET", "/readyz")
        self.assertEqual(code, 500)
        self.assertIn("[-]poststarthook/bootstrap failed", body)
        hook.finish()
        self.assertEqual(self.api.call("GET", "/readyz/poststarthook/bootstrap")[:2], (200, "ok"))

    def test_shutdown_fails_readyz_only(self):
        """Once shutting down, readyz fails and livez still passes."""
        self.health.shutting_down = True
        code, body, _ = self.api.call("GET", "/readyz")
        self.assertEqual(code, 500)
        self.assertIn("[-]shutdown failed", body)
        self.assertEqual(self.api.call("GET", "/livez")[0], 200)

    def test_hung_check_times_out(self):
        """A check that never answers fails after the timeout instead of hanging."""
        self.health.add(HealthCheck("slow", lambda: Deferred()))
        d = self.api.treq.get("https://orchd/livez/slow")
        self.assertNoResult(d)
        self.api.clock.advance(6)
        self.api.treq.flush()
        response = self.successResultOf(d)
        self.assertEqual(response.code, 500)


class GracePeriodTests(SynchronousTestCase):
    def test_livez_grace_period(self):
        """During the grace period unfinished hooks pass livez, never readyz."""
        api = APIHarness()
        api.resource.health = health = Health(api.clock, livez_grace_period=10)
        health.post_start_hook("slow-start")
        self.assertEqual(api.call("GET", "/livez")[0], 200)
        self.assertEqual(api.call("GET", "/readyz")[0], 500)
        api.clock.advance(11)
        self.assertEqual(api.call("GET", "/livez")[0], 500)


class LogCheckTests(SynchronousTestCase):
    def test_blocked_flush_fails(self):
        """The log check fails once flushing has not completed for two minutes."""
        from twisted.internet.task import Clock

        clock = Clock()

        class Stuck:
            calls = 0

            def flush(self):
                Stuck.calls += 1
                if Stuck.calls > 1:
                    raise OSError("blocked")

        check = LogCheck(clock, streams=[Stuck()])
        check.start()
        check.check()
        clock.advance(60)
        check.check()
        clock.advance(121)
        self.assertRaises(RuntimeError, check.check)
        check.stop()
