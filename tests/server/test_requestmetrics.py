"""The API server's request metrics: upstream's label values, read after real requests."""

import treq
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from orchd.admission.interfaces import AdmissionAttributes, IAdmissionPlugin
from orchd.api.metrics import FOLD_INTERVAL
from orchd.server.filters.limits import InflightLimiter
from orchd.server import requestmetrics
from orchd.server.requestinfo import parse_request_info
from orchd.server.requestmetrics import (
    APIServerMetrics, dry_run_label, resource_label, scope_label)
from tests.support import ALICE, APIHarness

CM = "/api/v1/namespaces/default/configmaps"


def requests(api):
    """C{{(verb, resource, subresource, scope, dry_run, code): count}} of apiserver_request_total."""
    return {(k[0], k[4], k[5], k[6], k[1], k[8]): child.value
            for k, child in api.metrics.requests._children.items()}


@implementer(IAdmissionPlugin)
class SlowWebhook:
    """Stands for an admission webhook that takes three seconds, two of them reported."""

    def __init__(self, clock):
        self.clock = clock
        self.seen = []

    def admit(self, attributes):
        if attributes.info.resource == "configmaps":
            self.seen.append(attributes)
            self.clock.advance(3)
            attributes.webhook_time(2.0)

    def validate(self, attributes):
        pass


class VerbLabelTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        code, _, _ = self.api.call("POST", CM, {"metadata": {"name": "a"}})
        self.assertEqual(code, 201)

    def test_read_and_write_verbs(self):
        """GET, LIST, POST, PUT, PATCH, APPLY and DELETE as upstream reports them, with scope."""
        api = self.api
        api.call("GET", CM + "/a")
        api.call("GET", CM)
        api.call("GET", "/api/v1/configmaps")
        code, obj, _ = api.call("GET", CM + "/a")
        api.call("PUT", CM + "/a", obj)
        api.call("PATCH", CM + "/a", {"data": {"x": "1"}},
                 content_type=b"application/merge-patch+json")
        code, _, _ = api.call("PATCH", CM + "/b?fieldManager=me",
                              b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
                              content_type=b"application/apply-patch+yaml")
        self.assertEqual(code, 201)
        api.call("DELETE", CM + "/a")
        api.call("DELETE", CM)
        counts = requests(api)
        for key, value in [
                (("POST", "configmaps", "", "resource", "", "201"), 1),
                (("GET", "configmaps", "", "resource", "", "200"), 2),
                (("LIST", "configmaps", "", "namespace", "", "200"), 1),
                (("LIST", "configmaps", "", "cluster", "", "200"), 1),
                (("PUT", "configmaps", "", "resource", "", "200"), 1),
                (("PATCH", "configmaps", "", "resource", "", "200"), 1),
                (("APPLY", "configmaps", "", "resource", "", "201"), 1),
                (("DELETE", "configmaps", "", "resource", "", "200"), 1),
                (("DELETE", "configmaps", "", "namespace", "", "200"), 1)]:
            self.assertEqual(counts.get(key), value, key)

    def test_dry_run_and_status_subresource(self):
        """dryRun=All is the dry_run label; a served subresource is labelled."""
        api = self.api
        code, _, _ = api.call("POST", CM + "?dryRun=All", {"metadata": {"name": "d"}})
        self.assertEqual(code, 201)
        api.call("POST", "/api/v1/namespaces/default/pods", {
            "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
        api.call("GET", "/api/v1/namespaces/default/pods/p/status")
        counts = requests(api)
        self.assertEqual(counts[("POST", "configmaps", "", "resource", "All", "201")], 1)
        self.assertEqual(counts[("GET", "pods", "status", "resource", "", "200")], 1)

    def test_labels_of_a_shape_seen_before(self):
        """A request of a shape already counted gets its labels, but dry runs keep their own."""
        api = self.api
        api.call("POST", CM, {"metadata": {"name": "s1"}})
        api.call("POST", CM + "?dryRun=All", {"metadata": {"name": "s2"}})
        api.call("POST", CM + "?fieldManager=x", {"metadata": {"name": "s3"}})
        api.call("GET", CM + "?limit=5")
        api.call("GET", "/api/v1/namespaces/default/pods")
        counts = requests(api)
        self.assertEqual(counts[("POST", "configmaps", "", "resource", "", "201")], 3)
        self.assertEqual(counts[("POST", "configmaps", "", "resource", "All", "201")], 1)
        self.assertEqual(counts[("LIST", "configmaps", "", "namespace", "", "200")], 1)
        self.assertEqual(counts[("LIST", "pods", "", "namespace", "", "200")], 1)

    def test_shapes_kept_are_bounded(self):
        """Paths of made-up subresources make new shapes; the table of them stays bounded."""
        self.patch(requestmetrics, "_SHAPES", 8)
        for n in range(20):
            self.api.call("GET", f"{CM}/a/made-up-{n}")
        self.assertLessEqual(len(self.api.metrics._shapes), 8)
        counts = requests(self.api)
        self.assertEqual(counts[("GET", "configmaps", "", "resource", "", "404")], 20)

    def test_unknown_paths_mint_no_series(self):
        """Unknown resources and subresources count with empty labels, whatever the path says."""
        api = self.api
        api.call("GET", "/api/v1/namespaces/default/nothings/x")
        api.call("GET", "/apis/made.up/v9/things")
        api.call("GET", CM + "/a/madeup")
        api.call("GET", "/no/such/path")
        counts = requests(api)
        self.assertEqual(counts[("GET", "", "", "resource", "", "404")], 1)
        self.assertEqual(counts[("LIST", "", "", "cluster", "", "404")], 1)
        self.assertEqual(counts[("GET", "configmaps", "", "resource", "", "404")], 1)
        self.assertEqual(counts[("GET", "", "", "", "", "404")], 1)
        groups = {key[2] for key in api.metrics.requests._children}
        self.assertEqual(groups, {""})

    def test_latency_histograms(self):
        """Every request is observed in both histograms; the SLI leaves out webhook time."""
        webhook = SlowWebhook(None)
        api = APIHarness(plugins=(webhook,))
        webhook.clock = api.clock
        code, _, _ = api.call("POST", CM, {"metadata": {"name": "w"}})
        self.assertEqual(code, 201)
        key = ("POST", "", "", "v1", "configmaps", "", "resource", "apiserver")
        duration = api.metrics.latency.child(*key)
        sli = api.metrics.sli.child(*(key[:1] + key[2:]))
        self.assertEqual((duration.count, duration.sum), (1, 3.0))
        self.assertEqual((sli.count, sli.sum), (1, 1.0))
        # Outside a request (a controller's write) the time goes nowhere.
        attributes = webhook.seen[0]
        outside = AdmissionAttributes(attributes.operation, attributes.info, "default", "x",
                                      {}, None, ALICE)
        outside.webhook_time(5.0)
        self.assertEqual((sli.count, sli.sum), (1, 1.0))

    def test_watch_is_longrunning_and_counts_events(self):
        """An open watch is a long-running WATCH; each event sent counts by kind."""
        api = self.api
        response = _result(api.treq.get("https://orchd" + CM + "?watch=true&timeoutSeconds=5"))
        chunks = []
        treq.collect(response, chunks.append)
        api.clock.advance(0.25)
        api.treq.flush()
        short = ("WATCH", "", "v1", "configmaps", "", "namespace", "apiserver")
        self.assertEqual(api.metrics.longrunning.value(*short), 1)
        api.call("POST", CM, {"metadata": {"name": "b"}})
        api.clock.advance(0.25)
        api.treq.flush()
        self.assertGreaterEqual(api.metrics.watch_events.value("", "v1", "ConfigMap"), 2)
        self.assertNotIn(("WATCH", "configmaps", "", "namespace", "", "200"), requests(api))
        api.clock.advance(10)
        api.treq.flush()
        # Counted and timed when it ends, as upstream's.
        self.assertEqual(api.metrics.longrunning.value(*short), 0)
        self.assertEqual(requests(api)[("WATCH", "configmaps", "", "namespace", "", "200")], 1)
        key = ("WATCH", "", "", "v1", "configmaps", "", "namespace", "apiserver")
        self.assertGreaterEqual(api.metrics.latency.child(*key).sum, 5)

    def test_limiter_refusal_is_a_termination(self):
        """A 429 from the in-flight limit counts as a termination and as a request."""
        api = APIHarness(user=ALICE)        # the cluster's admins are exempt
        api.resource.limiter = limiter = InflightLimiter(1, 1)
        held = limiter.acquire(parse_request_info(b"GET", "/api/v1/nodes", {}), ALICE)
        code, _, _ = api.call("GET", CM + "/a")
        self.assertEqual(code, 429)
        limiter.release(held)
        key = ("GET", "", "v1", "configmaps", "", "resource", "apiserver", "429")
        self.assertEqual(api.metrics.terminations.value(*key), 1)
        self.assertEqual(requests(api)[("GET", "configmaps", "", "resource", "", "429")], 1)

    def test_metrics_endpoint_scrapes_its_own_figures(self):
        """GET /metrics answers the exposition, stored objects and in-flight peaks included."""
        code, text, headers = self.api.call("GET", "/metrics")
        self.assertEqual(code, 200)
        self.assertEqual(headers.getRawHeaders(b"content-type"),
                         [b"text/plain; version=0.0.4; charset=utf-8"])
        self.assertIn('apiserver_storage_objects{resource="configmaps"} 1\n', text)
        self.assertIn('apiserver_current_inflight_requests{request_kind="mutating"} 1\n', text)
        self.assertIn('orchd_watch_cache_watchers{resource="configmaps"} 0\n', text)

    def test_off(self):
        """Without metrics nothing is counted and /metrics is not found."""
        api = APIHarness(metrics=False)
        code, _, _ = api.call("GET", "/metrics")
        self.assertEqual(code, 404)


class LabelFunctionTests(SynchronousTestCase):
    def test_head_reads_as_get(self):
        """HEAD is reported as GET or LIST, as upstream's CanonicalVerb."""
        api = APIHarness()
        _result(api.treq.head("https://orchd/api/v1/namespaces/default/configmaps"))
        self.assertEqual(requests(api)[("LIST", "configmaps", "", "namespace", "", "200")], 1)

    def test_dry_run(self):
        """Upstream's cleanDryRun: All, invalid or empty."""
        self.assertEqual(dry_run_label({}), "")
        self.assertEqual(dry_run_label({b"dryRun": [b"All"]}), "All")
        self.assertEqual(dry_run_label({b"dryRun": [b"All", b"All"]}), "All")
        self.assertEqual(dry_run_label({b"dryRun": [b"Some"]}), "invalid")

    def test_scope(self):
        """resource with a name or for a create, namespace, cluster, empty for paths."""
        def scope(method, path):
            return scope_label(parse_request_info(method, path, {}))
        self.assertEqual(scope(b"GET", CM + "/a"), "resource")
        self.assertEqual(scope(b"POST", CM), "resource")
        self.assertEqual(scope(b"GET", CM), "namespace")
        self.assertEqual(scope(b"GET", "/api/v1/nodes"), "cluster")
        self.assertEqual(scope(b"GET", "/healthz"), "")

    def test_resource_label(self):
        """Grouped resources are written resource.group, as apiserver_storage_objects."""
        class Info:
            resource, group = "deployments", "apps"
        self.assertEqual(resource_label(Info), "deployments.apps")
        Info.group = ""
        self.assertEqual(resource_label(Info), "deployments")

    def test_certificate_lifetime(self):
        """A certificate's remaining lifetime lands in upstream's buckets."""
        metrics = APIServerMetrics()
        metrics.observe_certificate_lifetime(3000.0)
        child = metrics.cert_expiry.child()
        self.assertEqual(dict(child.cumulative())[1800.0], 0)
        self.assertEqual(dict(child.cumulative())[3600.0], 1)

    def test_folded_every_interval(self):
        """The request path's histograms are counted every FOLD_INTERVAL, scraped or not."""
        clock = Clock()
        metrics = APIServerMetrics()
        service = metrics.folding(clock)
        service.startService()
        self.addCleanup(service.stopService)
        metrics.observe_certificate_lifetime(3000.0)
        store = metrics.storage_latency.labels("get", "pods")
        store.observe(0.001)
        self.assertEqual(len(store._gathered), 1)
        clock.advance(FOLD_INTERVAL)
        self.assertEqual((store._gathered, store._counts[0]), ([], 1))
        self.assertEqual(metrics.cert_expiry.child()._counts[2], 1)


def _result(d):
    out = []
    d.addBoth(out.append)
    assert out, "no result yet"
    return out[0]
