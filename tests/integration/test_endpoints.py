"""
Endpoints and EndpointSlices against a real server: a pod the in-process
node agent runs (on its simulated runtime) is listed once it reports Ready.
"""

from twisted.trial.unittest import TestCase

from tests.integration.support import RunningControlPlane, sleep
from tests.integration.test_orchlet_agent import orchlet_of

NAMESPACE = "/api/v1/namespaces/default"


class EndpointsIntegrationTests(TestCase):
    timeout = 60

    async def wait_for(self, check):
        for _ in range(300):
            result = await check()
            if result:
                return result
            await sleep(0.1)
        self.fail(f"gave up waiting for {check.__name__}")

    async def test_ready_pod_listed(self):
        server = await RunningControlPlane(self, no_orchlet=False,
                                           hostname_override="node-a").start()
        agent = await orchlet_of(server.top).ready
        await agent.registered
        code, body = await server.call("POST", f"{NAMESPACE}/services", {
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}})
        self.assertEqual(code, 201, body)
        pod = {"metadata": {"name": "web-1", "labels": {"app": "web"}},
               "spec": {"nodeName": "node-a",
                        "containers": [{"name": "c", "image": "busybox"}]}}

        async def pod_created():
            # Admission waits for the namespace's default service account.
            code, body = await server.call("POST", f"{NAMESPACE}/pods", pod)
            return code == 201

        await self.wait_for(pod_created)

        async def pod_ready():
            code, body = await server.call("GET", f"{NAMESPACE}/pods/web-1")
            status = body.get("status") or {}
            ready = [c for c in status.get("conditions") or () if c.get("type") == "Ready"]
            return status.get("podIP") if ready and ready[0]["status"] == "True" else None

        ip = await self.wait_for(pod_ready)

        async def endpoints_listed():
            code, body = await server.call("GET", f"{NAMESPACE}/endpoints/web")
            # The controller may first have seen the pod before it was ready.
            return (code == 200 and body.get("subsets")
                    and all(s.get("addresses") for s in body["subsets"]) and body)

        endpoints = await self.wait_for(endpoints_listed)
        [subset] = endpoints["subsets"]
        self.assertEqual([(a["ip"], a["nodeName"], a["targetRef"]["name"])
                          for a in subset["addresses"]], [(ip, "node-a", "web-1")])
        self.assertEqual(subset["ports"], [{"port": 8080, "protocol": "TCP"}])

        async def slice_listed():
            code, body = await server.call(
                "GET", "/apis/discovery.orch.io/v1/namespaces/default/endpointslices"
                       "?labelSelector=orch.io%2Fservice-name%3Dweb")
            items = body.get("items") if code == 200 else None
            return (items and items[0]["endpoints"]
                    and all(e["conditions"].get("ready") for e in items[0]["endpoints"])
                    and items)

        [endpoint_slice] = await self.wait_for(slice_listed)
        [endpoint] = endpoint_slice["endpoints"]
        self.assertEqual((endpoint["addresses"], endpoint["nodeName"],
                          endpoint["conditions"]["ready"]), ([ip], "node-a", True))
