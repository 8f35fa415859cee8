"""The resource metrics API: usage from scraped points, served as NodeMetrics and PodMetrics."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.orchlet.metrics import resource_metrics
from orchd.registry.resourcemetrics import (
    MetricsCache, go_duration, parse_node_metrics, resource_metrics_providers,
    usage_list,
)
from tests.support import APIHarness

T0 = 1_700_000_000
NODES = "/apis/metrics.orch.io/v1beta1/nodes"
PODS = "/apis/metrics.orch.io/v1beta1/namespaces/default/pods"


def stats(now, cpu_seconds, pods=()):
    """An orchlet's stats: the node at C{cpu_seconds}, and C{pods} as (name, cpu, start)."""
    stamp = _stamp(now)
    return {
        "node": {"cpu": {"time": stamp, "usageCoreNanoSeconds": int(cpu_seconds * 1e9)},
                 "memory": {"time": stamp, "workingSetBytes": 512 * 2**20}},
        "pods": [{"podRef": {"namespace": "default", "name": name},
                  "containers": [{"name": "app", "startTime": _stamp(start),
                                  "cpu": {"time": stamp,
                                          "usageCoreNanoSeconds": int(cpu * 1e9)},
                                  "memory": {"time": stamp, "workingSetBytes": 64 * 2**20}}]}
                 for name, cpu, start in pods],
    }


def _stamp(seconds):
    import time
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def scrape(cache, node, now, cpu_seconds, pods=()):
    """Store what a node would answer at C{now}."""
    text = resource_metrics(stats(now, cpu_seconds, pods)).decode("utf-8")
    cache.store(node, *parse_node_metrics(text, now))


class CacheTests(SynchronousTestCase):
    """Rates over two points, as metrics-server computes them."""

    def test_node_needs_two_points(self):
        """A node has usage once it was read twice: the counter's rate over the window."""
        cache = MetricsCache()
        scrape(cache, "n1", T0, 100.0)
        self.assertIsNone(cache.node_usage("n1"))
        scrape(cache, "n1", T0 + 15, 103.0)
        usage = cache.node_usage("n1")
        self.assertEqual((usage.cores, usage.window, usage.time, usage.memory),
                         (0.2, 15, T0 + 15, 512 * 2**20))

    def test_new_container_counts_from_its_start(self):
        """A container read once has a rate from its start time, where its counter was 0."""
        cache = MetricsCache()
        scrape(cache, "n1", T0, 1.0, [("web", 2.5, T0 - 10)])
        usage = cache.pod_usage("default", "web")["app"]
        self.assertEqual((usage.cores, usage.window), (0.25, 10))

    def test_counter_reset_and_repeat(self):
        """A counter that went back counts from its start; a repeated reading changes nothing."""
        cache = MetricsCache()
        scrape(cache, "n1", T0, 1.0, [("web", 5.0, T0 - 10)])
        scrape(cache, "n1", T0, 1.0, [("web", 5.0, T0 - 10)])
        self.assertEqual(cache.pod_usage("default", "web")["app"].cores, 0.5)
        scrape(cache, "n1", T0 + 15, 2.0, [("web", 1.0, T0 + 5)])
        self.assertEqual(cache.pod_usage("default", "web")["app"].window, 10)

    def test_gone_pods_and_failed_nodes(self):
        """Pods missing from a scrape, failed nodes and removed nodes are forgotten."""
        cache = MetricsCache()
        scrape(cache, "n1", T0, 1.0, [("web", 1.0, T0 - 10)])
        scrape(cache, "n2", T0, 1.0, [("db", 1.0, T0 - 10)])
        scrape(cache, "n1", T0 + 15, 2.0)
        self.assertIsNone(cache.pod_usage("default", "web"))
        cache.node_failed("n1")
        self.assertIsNone(cache.node_usage("n1"))
        self.assertIsNotNone(cache.pod_usage("default", "db"))
        cache.keep_nodes({"n1"})
        self.assertIsNone(cache.pod_usage("default", "db"))

    def test_unlabelled_samples_ignored(self):
        """Container samples without a namespace, pod or container label are skipped."""
        text = ('container_cpu_usage_seconds_total{container="a",pod="p"} 1 1000\n'
                'container_memory_working_set_bytes{container="a",pod="p"} 1 1000\n')
        self.assertEqual(parse_node_metrics(text, 1.0), (None, {}))

    def test_formats(self):
        """Windows are Go durations; CPU is in nanocores and memory in BinarySI."""
        self.assertEqual([go_duration(s) for s in (15, 14.998, 60, 0.5, 3661.25, 0)],
                         ["15s", "14.998s", "1m0s", "500ms", "1h1m1.25s", "0s"])
        self.assertEqual(usage_list(0.25, 8 * 2**20), {"cpu": "250000000n", "memory": "8Mi"})


class APITests(SynchronousTestCase):
    """NodeMetrics and PodMetrics through the API server."""

    def setUp(self):
        self.clock = Clock()
        self.clock.advance(T0 + 20)
        self.cache = MetricsCache()
        self.api = APIHarness(virtual=resource_metrics_providers(
            self.cache, lambda: self.api.catalog, self.clock))
        self.api.call("POST", "/api/v1/nodes", {"metadata": {"name": "n1",
                                                             "labels": {"zone": "a"}}})
        self.api.call("POST", "/api/v1/nodes", {"metadata": {"name": "n2"}})
        for name, labels in (("web", {"app": "web"}), ("db", {"app": "db"})):
            code, body, _ = self.api.call("POST", "/api/v1/namespaces/default/pods", {
                "metadata": {"name": name, "labels": labels},
                "spec": {"containers": [{"name": "app", "image": "x"}]}})
            self.assertEqual(code, 201, body)
        scrape(self.cache, "n1", T0, 100.0, [("web", 1.0, T0 - 10), ("db", 0.0, T0 - 10)])
        scrape(self.cache, "n1", T0 + 15, 103.0, [("web", 4.0, T0 - 10), ("db", 0.15, T0 - 10)])

    def test_node_metrics(self):
        """A list holds the nodes with usage, with their labels, window and timestamp."""
        code, body, _ = self.api.call("GET", NODES)
        self.assertEqual(code, 200, body)
        self.assertEqual(body["kind"], "NodeMetricsList")
        [item] = body["items"]
        self.assertEqual(item, {
            "kind": "NodeMetrics", "apiVersion": "metrics.orch.io/v1beta1",
            "metadata": {"name": "n1", "labels": {"zone": "a"},
                         "creationTimestamp": _stamp(T0 + 20)},
            "timestamp": _stamp(T0 + 15), "window": "15s",
            "usage": {"cpu": "200000000n", "memory": "512Mi"}})
        code, body, _ = self.api.call("GET", NODES + "/n1")
        self.assertEqual((code, body["usage"]["cpu"]), (200, "200000000n"))

    def test_node_without_usage_is_not_found(self):
        """A node without two points, or no node at all, is 404 under metrics' name."""
        for name in ("n2", "nothing"):
            code, body, _ = self.api.call("GET", NODES + "/" + name)
            self.assertEqual((code, body["message"]),
                             (404, f'nodes.metrics.orch.io "{name}" not found'))

    def test_pod_metrics_with_selectors(self):
        """Pods filter by their labels and by metadata.name; each container has its usage."""
        code, body, _ = self.api.call("GET", PODS)
        self.assertEqual(code, 200, body)
        self.assertEqual(sorted(i["metadata"]["name"] for i in body["items"]), ["db", "web"])
        _, body, _ = self.api.call("GET", PODS + "?labelSelector=app%3Dweb")
        [web] = body["items"]
        self.assertEqual(web["containers"],
                         [{"name": "app", "usage": {"cpu": "200000000n", "memory": "64Mi"}}])
        self.assertEqual(web["metadata"]["labels"], {"app": "web"})
        _, body, _ = self.api.call("GET", PODS + "?fieldSelector=metadata.name%3Ddb")
        self.assertEqual([i["containers"][0]["usage"]["cpu"] for i in body["items"]],
                         ["10000000n"])
        _, body, _ = self.api.call("GET", "/apis/metrics.orch.io/v1beta1/pods")
        self.assertEqual(len(body["items"]), 2)
        code, body, _ = self.api.call("GET", PODS + "?fieldSelector=spec.nodeName%3Dn1")
        self.assertEqual(code, 400, body)

    def test_read_only(self):
        """Only get and list are served."""
        code, _, _ = self.api.call("POST", NODES, {"metadata": {"name": "x"}})
        self.assertEqual(code, 405)
        code, _, _ = self.api.call("DELETE", PODS + "/web")
        self.assertEqual(code, 405)

    def test_upstream_spelling(self):
        """Asked under metrics.k8s.io, the answer is spelled so."""
        code, body, _ = self.api.call("GET", "/apis/metrics.k8s.io/v1beta1/nodes")
        self.assertEqual(code, 200, body)
        self.assertEqual(body["items"][0]["apiVersion"], "metrics.k8s.io/v1beta1")
