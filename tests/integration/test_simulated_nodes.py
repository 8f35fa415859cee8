"""
Simulated nodes against a real API server: three nodes with their own
identities and Leases, pods run through one shared watch, graceful
deletion ended by the node, and kubectl's view of it.
"""

import json
import os

from twisted.internet import utils
from twisted.trial.unittest import SkipTest, TestCase

from orchd.orchlet.heartbeat import LEASES
from orchd.orchlet.simnodes import SimulatedNodes
from tests.integration.support import RunningControlPlane, kubectl, sleep

PODS = "/api/v1/namespaces/default/pods"
NAMES = ["host-sim-0", "host-sim-1", "host-sim-2"]


def simulated_of(top):
    return [service for service in top if isinstance(service, SimulatedNodes)][0]


def pod(name, node, **annotations):
    meta = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30,
                                       "containers": [{"name": "web", "image": "nginx:1.27"}]}}


class SimulatedNodesTests(TestCase):
    timeout = 90

    async def setUp(self):
        self.server = await RunningControlPlane(self, simulated_nodes=3,
                                                hostname_override="host").start()
        self.service = simulated_of(self.server.top)
        self.agents = await self.service.ready
        for agent in self.agents:
            await agent.registered

    async def until(self, check, what, seconds=20):
        """Poll C{check()} (async) until it returns something true."""
        for _ in range(int(seconds / 0.05)):
            result = await check()
            if result:
                return result
            await sleep(0.05)
        self.fail(f"timed out waiting for {what}")

    async def get(self, path):
        code, body = await self.server.call("GET", path)
        return body if code == 200 else None

    async def test_nodes_ready_with_leases_and_identities(self):
        """Three Nodes, Ready, labelled, with the configured capacity, Leases of their own and
        their status reports spread."""
        code, nodes = await self.server.call(
            "GET", "/api/v1/nodes?labelSelector=orchlet.orch.io%2Fsimulated%3Dtrue")
        self.assertEqual(code, 200, nodes)
        self.assertEqual(sorted(n["metadata"]["name"] for n in nodes["items"]), NAMES)
        ports = set()
        for node in nodes["items"]:
            ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
            self.assertEqual(ready, "True")
            self.assertEqual(node["status"]["capacity"],
                             {"cpu": "32", "memory": "256Gi", "pods": "110"})
            self.assertEqual(node["status"]["allocatable"], node["status"]["capacity"])
            ports.add(node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"])
            # Its own endpoint, reached through the API server's node proxy.
            code, health = await self.server.call(
                "GET", f"/api/v1/nodes/{node['metadata']['name']}/proxy/healthz")
            self.assertEqual((code, health), (200, "ok"))
        self.assertEqual(len(ports - {0}), 3)
        for agent in self.agents:
            lease = await self.until(lambda: self.get(f"{LEASES}/{agent.node_name}"),
                                     f"the lease of {agent.node_name}")
            self.assertEqual(lease["spec"]["holderIdentity"], agent.node_name)
            self.assertTrue(await agent.lease.renew())
            renewed = await self.get(f"{LEASES}/{agent.node_name}")
            self.assertGreater(renewed["spec"]["renewTime"], lease["spec"]["renewTime"])
        # Each acts as itself: node 0 may not write node 1's status.
        code, body = await self.agents[0].api.request(
            "PATCH", "/api/v1/nodes/host-sim-1/status", {"status": {}},
            "application/merge-patch+json")
        self.assertEqual(code, 403, body)
        # The 5-minute status reports are spread over their cycle as the renewals are.
        self.assertEqual([a.status.report_phase for a in self.agents], [0, 100, 200])
        # Credentials are kept under the root directory, one pair per node.
        for name in NAMES:
            self.assertTrue(os.path.exists(os.path.join(
                self.server.config.root_dir, "simulated", name, "pki", "orchlet-client.crt")))

    async def test_pods_run_and_are_deleted_gracefully(self):
        """A bound pod becomes Running and Ready with events; DELETE: Terminating, then gone."""
        self.assertEqual([a.watch for a in self.agents], [None, None, None])
        for index, name in enumerate(NAMES):
            code, body = await self.server.call("POST", PODS, pod(f"p{index}", name))
            self.assertEqual(code, 201, body)

        async def ready(name):
            got = await self.get(f"{PODS}/{name}")
            conditions = {c["type"]: c["status"] for c in
                          ((got or {}).get("status") or {}).get("conditions") or ()}
            return got if conditions.get("Ready") == "True" else None

        for index in range(3):
            got = await self.until(lambda: ready(f"p{index}"), f"pod p{index} ready")
            status = got["status"]
            self.assertEqual(status["phase"], "Running")
            self.assertTrue(status["podIP"].startswith(f"10.89.{index}."), status["podIP"])
            self.assertEqual(status["containerStatuses"][0]["state"].keys(), {"running"})
        self.assertEqual(self.service.watch.lists, 1)     # one shared list and watch

        async def events():
            code, listed = await self.server.call(
                "GET", "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dp1")
            reasons = [e["reason"] for e in listed["items"]]
            return listed["items"] if "Started" in reasons else None

        listed = await self.until(events, "events of p1")
        by_reason = {e["reason"]: e for e in listed}
        self.assertEqual(by_reason["Pulling"]["message"], 'Pulling image "nginx:1.27"')
        self.assertEqual(by_reason["Created"]["message"], "Created container: web")
        self.assertEqual(by_reason["Started"]["source"], {"component": "orchlet",
                                                          "host": "host-sim-1"})
        self.assertEqual(by_reason["Started"]["involvedObject"]["fieldPath"],
                         "spec.containers{web}")

        # Its log comes from its own node's endpoint.
        code, log = await self.server.call("GET", f"{PODS}/p1/log")
        self.assertEqual(code, 200, log)
        self.assertIn("started", log)
        code, body = await self.server.call("DELETE", f"{PODS}/p1")
        self.assertEqual(code, 200, body)
        self.assertEqual(body["metadata"]["deletionGracePeriodSeconds"], 30)
        self.assertIn("deletionTimestamp", body["metadata"])

        async def gone():
            code, _ = await self.server.call("GET", f"{PODS}/p1")
            return code == 404

        await self.until(gone, "p1 removed by its node")
        code, listed = await self.server.call(
            "GET", "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dp1")
        self.assertIn("Stopping container web", [e["message"] for e in listed["items"]])
        self.assertIsNotNone(await self.get(f"{PODS}/p0"))

    async def test_stop_after_shows_terminating(self):
        """A pod slow to stop stays Terminating, with its containers stopped at the end."""
        code, body = await self.server.call(
            "POST", PODS, pod("slow", "host-sim-2", **{"orchlet.orch.io/stop-after": "1s",
                                                        "orchlet.orch.io/start-after": "0s"}))
        self.assertEqual(code, 201, body)

        async def running():
            got = await self.get(f"{PODS}/slow")
            return ((got or {}).get("status") or {}).get("phase") == "Running"

        await self.until(running, "slow running")
        await self.server.call("DELETE", f"{PODS}/slow")
        got = await self.get(f"{PODS}/slow")
        self.assertIsNotNone(got)
        self.assertIn("deletionTimestamp", got["metadata"])

        async def gone():
            return (await self.server.call("GET", f"{PODS}/slow"))[0] == 404

        await self.until(gone, "slow removed")

    async def test_kubectl_shows_terminating_and_delete_waits(self):
        """kubectl shows Terminating, and kubectl delete returns once the node removed the pod."""
        binary = kubectl()
        if binary is None:
            raise SkipTest("kubectl is not installed")
        code, body = await self.server.call(
            "POST", PODS, pod("k", "host-sim-0", **{"orchlet.orch.io/stop-after": "3s"}))
        self.assertEqual(code, 201, body)
        home = os.path.abspath(self.mktemp())
        os.makedirs(home)
        env = {"HOME": home, "PATH": os.environ.get("PATH", "")}
        base = ["--kubeconfig", self.server.plane.pki.admin_orchconfig_path]

        async def run(*args):
            out, err, code = await utils.getProcessOutputAndValue(binary, base + list(args),
                                                                  env=env)
            self.assertEqual(code, 0, f"kubectl {' '.join(args)}: {err.decode()}")
            return out.decode()

        await run("wait", "--for=condition=Ready", "pod/k", "--timeout=30s")
        self.assertEqual(json.loads(await run("get", "pod", "k", "-o", "json"))
                         ["status"]["phase"], "Running")
        self.assertIn('pod "k" deleted', await run("delete", "pod", "k", "--wait=false"))
        self.assertIn("Terminating", await run("get", "pod", "k", "--no-headers"))
        self.assertIn('pod "k" deleted', await run("delete", "pod", "k", "--timeout=30s"))
        self.assertEqual((await self.server.call("GET", f"{PODS}/k"))[0], 404)


class ClusterOfItsOwnTests(TestCase):
    """Simulated nodes in a process of their own: identities asked for with an admin's orchconfig."""

    timeout = 90

    async def test_nodes_join_with_certificates_from_csrs(self):
        """Two nodes get certificates through CSRs, register, renew and serve; a restart reuses them."""
        from orchd.app.config import Config
        from orchd.app.orchletsettings import simulated_node_settings
        from twisted.internet import reactor
        server = await RunningControlPlane(self, no_orchlet=True).start()
        root = self.mktemp()
        config = Config(data_dir=self.mktemp(), root_dir=root, orchlet_only=True,
                        orchconfig=server.plane.pki.admin_orchconfig_path, simulated_nodes=2,
                        hostname_override="apart", orchlet_port=0)
        nodes = SimulatedNodes(simulated_node_settings(config), reactor)
        nodes.startService()
        self.addCleanup(lambda: nodes.running and nodes.stopService())
        agents = await nodes.ready
        for agent in agents:
            await agent.registered
        code, csrs = await server.call(
            "GET", "/apis/certificates.orch.io/v1/certificatesigningrequests")
        self.assertEqual(code, 200)
        requested = sorted(c["spec"]["username"] for c in csrs["items"])
        # Two client certificates asked for by the admin, a serving one by node 0.
        self.assertEqual(requested.count("system:node:apart-sim-0"), 1)
        self.assertEqual(len(requested), 3)
        for agent in agents:
            self.assertTrue(await agent.lease.renew())      # creates it, or renews it
            self.assertTrue(await agent.lease.renew())      # renews it
            code, node = await server.call("GET", f"/api/v1/nodes/{agent.node_name}")
            self.assertEqual(code, 200)
            code, health = await server.call(
                "GET", f"/api/v1/nodes/{agent.node_name}/proxy/healthz")
            self.assertEqual((code, health), (200, "ok"))
        # Each acts as itself, not as the admin.
        code, body = await agents[0].api.request(
            "PATCH", "/api/v1/nodes/apart-sim-1/status", {"status": {}},
            "application/merge-patch+json")
        self.assertEqual(code, 403, body)
        self.assertGreater(nodes.stats.take()[0], 0)
        await nodes.stopService()
        again = SimulatedNodes(simulated_node_settings(config), reactor)
        again.startService()
        self.addCleanup(lambda: again.running and again.stopService())
        for agent in await again.ready:
            await agent.registered
        await again.stopService()
        code, csrs = await server.call(
            "GET", "/apis/certificates.orch.io/v1/certificatesigningrequests")
        self.assertEqual(len(csrs["items"]), 3)
