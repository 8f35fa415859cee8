"""
Evictions and disruption budgets over a real server with simulated nodes:
the eviction subresource spending a budget kept by the disruption
controller, concurrent evictions, the official Python client, and
C{kubectl drain} waiting for a budget to allow.
"""


from twisted.internet import threads
from twisted.internet.defer import Deferred, gatherResults
from twisted.trial.unittest import SkipTest, TestCase

try:
    import kubernetes
except ImportError:      # the test extra is not installed
    kubernetes = None

from orchd.registry.eviction import VIOLATION
from tests.integration.support import RunningControlPlane, sleep
from tests.integration.test_kubectl import KubectlMixin

PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
NODES = ["host-sim-0", "host-sim-1"]


def pod(name, node):
    return {"metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "web", "image": "nginx:1.27"}]}}


def eviction(name):
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}


async def until(test, check, what, seconds=30):
    """Poll C{check()} (async) until it returns something true."""
    for _ in range(int(seconds / 0.1)):
        result = await check()
        if result:
            return result
        await sleep(0.1)
    test.fail(f"timed out waiting for {what}")


class EvictionServerTests(TestCase):
    timeout = 120

    async def setUp(self):
        self.server = await RunningControlPlane(self, simulated_nodes=2,
                                                hostname_override="host").start()

    async def get(self, path):
        code, body = await self.server.call("GET", path)
        return body if code == 200 else None

    async def running_pods_and_budget(self, count=2, min_available=1):
        """Ready pods on the simulated nodes, and a budget the controller has counted."""
        for index in range(count):
            code, body = await self.server.call("POST", PODS, pod(f"web-{index}",
                                                                  NODES[index % 2]))
            self.assertEqual(code, 201, body)
        code, body = await self.server.call("POST", PDBS, {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}})
        self.assertEqual(code, 201, body)

        async def counted():
            budget = await self.get(f"{PDBS}/web")
            status = budget["status"]
            return status.get("observedGeneration") == 1 and status["currentHealthy"] == count

        await until(self, counted, "the budget to count the ready pods")
        return await self.get(f"{PDBS}/web")

    async def test_concurrent_evictions_spend_a_budget_once(self):
        """Two evictions at once against a budget of one: one passes, the other is 429."""
        budget = await self.running_pods_and_budget()
        self.assertEqual(budget["status"]["disruptionsAllowed"], 1)
        answers = await gatherResults([
            Deferred.fromCoroutine(self.server.call("POST", f"{PODS}/web-{i}/eviction",
                                                    eviction(f"web-{i}")))
            for i in range(2)])
        codes = sorted(code for code, _ in answers)
        self.assertEqual(codes, [201, 429], answers)
        refused = [body for code, body in answers if code == 429][0]
        self.assertEqual((refused["reason"], refused["message"]), ("TooManyRequests", VIOLATION))
        self.assertEqual(refused["details"]["causes"][0]["reason"], "DisruptionBudget")
        going = [(await self.get(f"{PODS}/web-{i}")) for i in range(2)]
        self.assertEqual(sum(1 for p in going if p is None or
                             p["metadata"].get("deletionTimestamp")), 1)
        await self.evicted_pods_gone()

    async def evicted_pods_gone(self):
        """Wait for the nodes to finish the evicted pods, so the test ends with them at rest."""
        async def gone():
            listing = await self.get(PODS)
            return not any(p["metadata"].get("deletionTimestamp") for p in listing["items"])

        await until(self, gone, "the evicted pods to be gone")

    async def test_python_client_reads_budget_and_evicts(self):
        """The official client reads a counted budget and creates Evictions (201, then 429)."""
        if kubernetes is None:
            raise SkipTest("the kubernetes package (the test extra) is not installed")
        await self.running_pods_and_budget()
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(
            config_file=self.server.plane.pki.admin_orchconfig_path,
            client_configuration=configuration)
        client = kubernetes.client.ApiClient(configuration)
        # No connection left open behind the test: each answer ends its own.
        client.set_default_header("Connection", "close")
        self.addCleanup(client.close)

        def run():
            policy = kubernetes.client.PolicyV1Api(client)
            core = kubernetes.client.CoreV1Api(client)
            read = policy.read_namespaced_pod_disruption_budget("web", "default")
            body = kubernetes.client.V1Eviction(
                metadata=kubernetes.client.V1ObjectMeta(name="web-0", namespace="default"))
            core.create_namespaced_pod_eviction("web-0", "default", body)
            try:
                core.create_namespaced_pod_eviction("web-1", "default", dict(
                    eviction("web-1"), metadata={"name": "web-1", "namespace": "default"}))
            except kubernetes.client.ApiException as e:
                return read, e
            return read, None

        read, refused = await threads.deferToThread(run)
        self.assertEqual((read.status.current_healthy, read.status.desired_healthy,
                          read.status.expected_pods, read.status.disruptions_allowed),
                         (2, 1, 2, 1))
        self.assertEqual(read.status.conditions[0].reason, "SufficientPods")
        self.assertIsNotNone(refused, "the second eviction was not refused")
        self.assertEqual(refused.status, 429)
        self.assertIn(VIOLATION, refused.body)
        await self.evicted_pods_gone()


class DrainTests(KubectlMixin, TestCase):
    timeout = 240
    server_settings = {"simulated_nodes": 2, "hostname_override": "host"}

    async def test_drain_waits_for_the_budget(self):
        """kubectl drain times out on a budget that allows nothing, and drains once it allows."""
        await self.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=2")
        await self.kubectl("rollout", "status", "deployment/web", "--timeout=90s")
        await self.kubectl("create", "pdb", "web", "--selector=app=web", "--min-available=2")

        async def counted():
            status = (await self.get_json("pdb", "web")).get("status") or {}
            return status.get("currentHealthy") == 2 and status.get("observedGeneration") == 1

        await until(self, counted, "the budget to count the ready pods")
        pods = (await self.get_json("pods", "-l", "app=web"))["items"]
        node = pods[0]["spec"]["nodeName"]
        code, out, err = await self.kubectl(
            "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=8s",
            ok=False)
        self.assertNotEqual(code, 0)
        self.assertIn(VIOLATION, out + err)
        self.assertTrue((await self.get_json("node", node))["spec"].get("unschedulable"))
        # One disruption allowed: drain evicts, waits for the replacement on the other
        # node to become ready when both pods were here, and finishes.
        await self.kubectl("patch", "pdb", "web", "--type=merge", "-p",
                           '{"spec":{"minAvailable":1}}')
        _, out, _ = await self.kubectl(
            "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=90s")
        self.assertIn(f"node/{node} drained", out)
        left = [p for p in (await self.get_json("pods", "-l", "app=web"))["items"]
                if p["spec"].get("nodeName") == node
                and not p["metadata"].get("deletionTimestamp")]
        self.assertEqual(left, [])
        await self.kubectl("rollout", "status", "deployment/web", "--timeout=90s")
