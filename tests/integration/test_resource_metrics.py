"""
Resource metrics on simulated nodes: the control plane scrapes the nodes
it serves, the metrics API answers from what it read, and C{kubectl top}
shows it under the upstream group name.
"""

import os

from twisted.internet import utils
from twisted.trial.unittest import SkipTest, TestCase

from orchd.app.metricsscraper import MetricsScraper
from orchd.orchlet.simnodes import SimulatedNodes
from orchd.orchlet.simusage import CPU_USAGE, MEMORY_USAGE
from tests.integration.support import RunningControlPlane, kubectl, sleep

PODS = "/api/v1/namespaces/default/pods"
NODES = ["host-sim-0", "host-sim-1"]


def pod(name, node, **annotations):
    return {"metadata": {"name": name, "labels": {"app": name}, "annotations": annotations},
            "spec": {"nodeName": node,
                     "containers": [{"name": "main", "image": "nginx:1.27"}]}}


class ResourceMetricsTests(TestCase):
    timeout = 120

    async def setUp(self):
        self.server = await RunningControlPlane(
            self, simulated_nodes=2, hostname_override="host",
            upstream_group_names=True).start()
        simulated = [s for s in self.server.top if isinstance(s, SimulatedNodes)][0]
        for agent in await simulated.ready:
            await agent.registered
        self.scraper = [s for s in self.server.plane if isinstance(s, MetricsScraper)][0]
        self.home = self.mktemp()
        os.makedirs(self.home)

    async def running(self, name):
        for _ in range(400):
            code, body = await self.server.call("GET", f"{PODS}/{name}")
            if code == 200 and body.get("status", {}).get("phase") == "Running":
                return
            await sleep(0.05)
        self.fail(f"pod {name} never ran")

    async def scrape_twice(self):
        """Two rounds a little apart, as two of the scraper's 15 s rounds would be."""
        await self.scraper.scrape()
        await sleep(1.2)
        await self.scraper.scrape()

    async def start_pods(self):
        for name, node, cpu in (("busy", NODES[0], "500m"), ("idle", NODES[1], "10m")):
            code, body = await self.server.call(
                "POST", PODS, pod(name, node, **{CPU_USAGE: cpu, MEMORY_USAGE: "64Mi"}))
            self.assertEqual(code, 201, body)
        await self.running("busy")
        await self.running("idle")
        await self.scrape_twice()

    async def test_metrics_api(self):
        """Every node and pod has usage; a pod's CPU is its annotation's rate."""
        await self.start_pods()
        code, body = await self.server.call("GET", "/apis/metrics.orch.io/v1beta1/nodes")
        self.assertEqual(code, 200, body)
        self.assertEqual(sorted(i["metadata"]["name"] for i in body["items"]), NODES)
        code, body = await self.server.call(
            "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/busy")
        self.assertEqual(code, 200, body)
        self.assertEqual(body["apiVersion"], "metrics.k8s.io/v1beta1")
        [container] = body["containers"]
        self.assertEqual(container["usage"]["memory"], "64Mi")
        cores = int(container["usage"]["cpu"][:-1]) / 1e9
        self.assertLess(abs(cores - 0.5), 0.02, cores)
        code, body = await self.server.call("GET", "/apis")
        groups = {g["name"] for g in body["groups"]}
        self.assertTrue({"metrics.orch.io", "metrics.k8s.io"} <= groups, groups)

    async def test_kubectl_top(self):
        """kubectl top nodes and pods (-A, -l) print the scraped usage."""
        binary = kubectl()
        if binary is None:
            raise SkipTest("kubectl is not installed")
        await self.start_pods()

        async def top(*args):
            argv = ["--kubeconfig", self.server.plane.pki.admin_orchconfig_path, "top", *args]
            env = {"HOME": self.home, "PATH": os.environ.get("PATH", "")}
            out, err, code = await utils.getProcessOutputAndValue(binary, argv, env=env)
            self.assertEqual((code, err.decode()), (0, ""), f"kubectl top {' '.join(args)}")
            return [line.split() for line in out.decode().splitlines()]

        lines = await top("nodes")
        self.assertEqual(lines[0][:3], ["NAME", "CPU(cores)", "CPU(%)"])
        self.assertEqual(sorted(line[0] for line in lines[1:]), NODES)
        lines = await top("pods")
        self.assertEqual(lines[0], ["NAME", "CPU(cores)", "MEMORY(bytes)"])
        usage = {line[0]: line[1:] for line in lines[1:]}
        self.assertEqual(sorted(usage), ["busy", "idle"])
        # kubectl rounds nanocores up to millicores: 10000001n is 11m.
        self.assertIn(usage["idle"][0], ("10m", "11m"))
        self.assertEqual(usage["idle"][1], "64Mi")
        self.assertLess(abs(int(usage["busy"][0][:-1]) - 500), 10, usage["busy"])
        lines = await top("pods", "-A", "-l", "app=idle")
        self.assertEqual(lines[0][:2], ["NAMESPACE", "NAME"])
        self.assertEqual([line[:2] for line in lines[1:]], [["default", "idle"]])


DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
HPAS = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"


class AutoscalerTests(TestCase):
    timeout = 120

    async def setUp(self):
        self.server = await RunningControlPlane(
            self, simulated_nodes=2, hostname_override="host").start()
        simulated = [s for s in self.server.top if isinstance(s, SimulatedNodes)][0]
        for agent in await simulated.ready:
            await agent.registered
        self.scraper = [s for s in self.server.plane if isinstance(s, MetricsScraper)][0]

    async def ready_pods(self, count):
        for _ in range(600):
            code, body = await self.server.call("GET", PODS + "?labelSelector=app%3Dweb")
            ready = [p for p in body["items"] if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (p.get("status") or {}).get("conditions") or ())]
            if len(ready) >= count:
                return ready
            await sleep(0.05)
        self.fail(f"{count} pods never became ready")

    async def replicas(self):
        code, body = await self.server.call("GET", f"{DEPLOYMENTS}/web")
        return body["spec"]["replicas"]

    async def test_raised_cpu_scales_deployment_up(self):
        """Raising the pods' CPU annotation over the target scales the Deployment up."""
        code, body = await self.server.call("POST", DEPLOYMENTS, {
            "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"},
                                               "annotations": {CPU_USAGE: "100m"}},
                                  "spec": {"containers": [{
                                      "name": "web", "image": "nginx:1.27",
                                      "resources": {"requests": {"cpu": "200m"}}}]}}}})
        self.assertEqual(code, 201, body)
        await self.ready_pods(2)
        await sleep(1.5)
        await self.scraper.scrape()
        await sleep(1.2)
        await self.scraper.scrape()
        code, body = await self.server.call("POST", HPAS, {
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": "web"},
                     "minReplicas": 2, "maxReplicas": 6,
                     "metrics": [{"type": "Resource", "resource": {
                         "name": "cpu",
                         "target": {"type": "Utilization", "averageUtilization": 50}}}]}})
        self.assertEqual(code, 201, body)
        for _ in range(100):
            code, hpa = await self.server.call("GET", f"{HPAS}/web")
            if hpa["status"].get("currentMetrics"):
                break
            await sleep(0.1)
        self.assertEqual(hpa["status"]["currentMetrics"][0]["resource"]["current"]
                         ["averageUtilization"], 50, hpa["status"])
        self.assertEqual(await self.replicas(), 2)
        for pod in await self.ready_pods(2):
            code, body = await self.server.call(
                "PATCH", f"{PODS}/{pod['metadata']['name']}",
                {"metadata": {"annotations": {CPU_USAGE: "400m"}}},
                headers={b"content-type": [b"application/merge-patch+json"]})
            self.assertEqual(code, 200, body)
        await sleep(0.5)
        await self.scraper.scrape()
        await sleep(1.2)
        await self.scraper.scrape()
        for _ in range(400):        # the autoscaler's next sync, within 15 s
            if await self.replicas() > 2:
                break
            await sleep(0.1)
        self.assertEqual(await self.replicas(), 4)
        for _ in range(50):         # the status is written after the scale
            code, hpa = await self.server.call("GET", f"{HPAS}/web")
            if hpa["status"]["desiredReplicas"] == 4:
                break
            await sleep(0.1)
        self.assertEqual(hpa["status"]["desiredReplicas"], 4)
        conditions = {c["type"]: c["reason"] for c in hpa["status"]["conditions"]}
        self.assertEqual(conditions["AbleToScale"], "SucceededRescale")
