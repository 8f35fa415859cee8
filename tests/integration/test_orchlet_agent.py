"""
The node agent against a real API server: in-process with its own client
certificate, and joining from another "machine" with a bootstrap token.
"""

import os
import stat

from cryptography import x509
from treq.client import HTTPClient
from twisted.internet import reactor
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, HTTPConnectionPool

from orchd.tls.certs import issued_by
from orchd.app.config import Config
from orchd.app.service import make_service
from orchd.tls.client import ClientTLSPolicy
from orchd.orchlet.heartbeat import LEASES
from tests.auth.bootstraptokens import SECRETS, TOKEN, token_secret
from tests.csrsupport import CSRS
from tests.integration.support import RunningControlPlane, sleep

#: The logs of container c of pod p in namespace default, on the node agent.
LOGS = "/containerLogs/default/p/c"


def orchlet_of(top):
    from orchd.orchlet.service import OrchletService
    return [service for service in top if isinstance(service, OrchletService)][0]



async def renew(agent, attempts=3):
    """One renewal of the agent's Lease; retried, since its own heartbeat may race it."""
    for _ in range(attempts):
        if await agent.lease.renew():
            return True
    return False

class InProcessOrchletTests(TestCase):
    timeout = 60

    async def test_registers_and_renews(self):
        server = await RunningControlPlane(self, no_orchlet=False,
                                           hostname_override="node-a").start()
        agent = await orchlet_of(server.top).ready
        await agent.registered
        code, node = await server.call("GET", "/api/v1/nodes/node-a")
        self.assertEqual(code, 200, node)
        labels = node["metadata"]["labels"]
        self.assertEqual(labels["orch.io/hostname"], "node-a")
        self.assertIn("orch.io/os", labels)
        self.assertIn("orch.io/arch", labels)
        conditions = {c["type"]: c for c in node["status"]["conditions"]}
        self.assertEqual((conditions["Ready"]["status"], conditions["Ready"]["reason"]),
                         ("True", "OrchletReady"))
        self.assertEqual(conditions["MemoryPressure"]["reason"], "OrchletHasSufficientMemory")
        self.assertEqual(node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
                         orchlet_of(server.top).port())
        self.assertEqual(node["status"]["capacity"]["pods"], "110")
        # The endpoint named there answers, with a serving certificate from the cluster CA.
        code, body = await agent.api.request(
            "GET", f"https://127.0.0.1:{orchlet_of(server.top).port()}/healthz")
        self.assertEqual((code, body), (200, "ok"))

        # The Lease: created by the agent, owned by the Node, renewed.
        self.assertTrue(await renew(agent))
        code, lease = await server.call("GET", f"{LEASES}/node-a")
        self.assertEqual(code, 200, lease)
        self.assertEqual(lease["spec"]["leaseDurationSeconds"], 40)
        self.assertEqual(lease["metadata"]["ownerReferences"][0]["uid"], node["metadata"]["uid"])
        first = lease["spec"]["renewTime"]
        self.assertTrue(await renew(agent))
        code, lease = await server.call("GET", f"{LEASES}/node-a")
        self.assertGreater(lease["spec"]["renewTime"], first)

        # The Node authorizer: its own node yes, another's no.
        code, _ = await agent.api.request("PATCH", "/api/v1/nodes/node-a/status",
                                          {"status": {}}, "application/merge-patch+json")
        self.assertEqual(code, 200)
        code, body = await agent.api.request("PATCH", "/api/v1/nodes/other/status",
                                             {"status": {}}, "application/merge-patch+json")
        self.assertEqual(code, 403, body)


class AnonymousAccessTests(TestCase):
    """A process that turns anonymous access off finds its node agent closed too."""

    timeout = 60

    async def start(self, **settings):
        """A control plane with its node agent, pod p (container c) running on it."""
        server = await RunningControlPlane(self, no_orchlet=False, hostname_override="node-a",
                                           anonymous_auth=False, **settings).start()
        service = orchlet_of(server.top)
        agent = await service.ready
        await agent.registered
        code, body = await server.call("POST", "/api/v1/namespaces/default/pods", {
            "metadata": {"name": "p"},
            "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "img"}]}})
        self.assertEqual(code, 201, body)
        self.base = f"https://127.0.0.1:{service.port()}"
        self.anonymous = HTTPClient(Agent(reactor, contextFactory=ClientTLSPolicy(
            server.plane.pki.ca_pem), pool=HTTPConnectionPool(reactor, persistent=False)))
        for _ in range(200):
            response = await server.client.get(self.base + LOGS)
            await response.content()
            if response.code == 200:
                break
            await sleep(0.05)
        return server

    async def codes(self, client):
        """The answers to GET of the pod's logs and of the stats summary."""
        codes = []
        for path in (LOGS, "/stats/summary"):
            response = await client.get(self.base + path)
            await response.content()
            codes.append(response.code)
        return codes

    async def test_anonymous_auth_false_closes_the_orchlet(self):
        """With --anonymous-auth=false alone, logs and stats need credentials; the admin's work."""
        server = await self.start()
        self.assertEqual(await self.codes(self.anonymous), [401, 401])
        self.assertEqual(await self.codes(server.client), [200, 200])

    async def test_orchlet_anonymous_auth_given_reopens_it(self):
        """An explicit --orchlet-anonymous-auth=true keeps the node agent open, not the API."""
        server = await self.start(orchlet_anonymous_auth=True)
        self.assertEqual(await self.codes(self.anonymous), [200, 200])
        response = await self.anonymous.get(server.url + "/api/v1/namespaces")
        await response.content()
        self.assertEqual(response.code, 401)


class JoinTests(TestCase):
    timeout = 60

    async def test_join_with_bootstrap_token(self):
        server = await RunningControlPlane(self, enable_bootstrap_token_auth=True,
                                           controllers=("*", "bootstrapsigner")).start()
        code, _ = await server.call("POST", SECRETS, token_secret())
        self.assertEqual(code, 201)
        config = Config(data_dir=self.mktemp(), orchlet_only=True, bootstrap_token=TOKEN,
                        server=server.url, hostname_override="joiner", orchlet_port=0)
        top = make_service(config, reactor)
        top.startService()
        # Whichever service tree runs last (the test restarts it) is stopped.
        self.addCleanup(lambda: top.stopService() if top.running else None)
        agent = await orchlet_of(top).ready
        await agent.registered
        code, node = await server.call("GET", "/api/v1/nodes/joiner")
        self.assertEqual(code, 200, node)
        self.assertEqual(node["metadata"]["labels"]["orch.io/hostname"], "joiner")
        self.assertEqual(node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
                         orchlet_of(top).port())
        for name in ("orchlet.orchconfig", "pki/orchlet-client.key", "pki/orchlet-client.crt",
                     "pki/orchlet.key", "pki/orchlet.crt"):
            mode = os.stat(os.path.join(config.root_dir, name)).st_mode
            self.assertEqual(stat.S_IMODE(mode), 0o600, name)

        # Its serving certificate came from the cluster CA through a CSR the node made
        # for itself, auto-approved, so the API server's node proxy reaches it.
        code, body = await server.call("GET", "/api/v1/nodes/joiner/proxy/healthz")
        self.assertEqual((code, body), (200, "ok"))
        with open(os.path.join(config.root_dir, "pki", "orchlet.crt"), "rb") as stream:
            served = x509.load_pem_x509_certificates(stream.read())
        self.assertEqual(len(served), 1)
        self.assertTrue(issued_by(served[0], server.plane.pki.ca_certificate))
        self.assertEqual(served[0].subject.rfc4514_string(),
                         "CN=system:node:joiner,O=system:nodes")
        code, csrs = await server.call("GET", CSRS)
        serving = [csr for csr in csrs["items"]
                   if csr["spec"]["signerName"] == "orch.io/orchlet-serving"]
        self.assertEqual([csr["spec"]["username"] for csr in serving], ["system:node:joiner"])
        self.assertEqual([c["reason"] for c in serving[0]["status"]["conditions"]],
                         ["AutoApproved"])

        # A restart reuses the stored certificates: no new request, the proxy still works.
        await top.stopService()
        top = make_service(config, reactor)
        top.startService()
        agent = await orchlet_of(top).ready
        with open(os.path.join(config.root_dir, "pki", "orchlet.crt"), "rb") as stream:
            self.assertEqual(x509.load_pem_x509_certificates(stream.read()), served)
        await agent.registered
        code, csrs = await server.call("GET", CSRS)
        self.assertEqual(len(csrs["items"]), 2)
        code, body = await server.call("GET", "/api/v1/nodes/joiner/proxy/healthz")
        self.assertEqual((code, body), (200, "ok"))
