"""
nodes/proxy and pods/log against a real server and a fake orchlet over TLS.

The fake orchlet serves with a certificate from the cluster CA and asks for
a client certificate: every request must come as the API server's orchlet
client user, which must not be in system:masters.
"""

import json
import os

from twisted.internet import reactor, utils
from twisted.internet.defer import Deferred
from twisted.internet.protocol import Protocol
from twisted.trial.unittest import SkipTest, TestCase
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from orchd.app.orchletclient import ORCHLET_CLIENT_USER
from orchd.tls.server import server_tls_options
from tests.integration.support import RunningControlPlane, kubectl, sleep

SUMMARY = {"node": {"nodeName": "n1", "startTime": "2024-05-01T10:00:00Z"}, "pods": []}


class FakeOrchlet(Resource):
    isLeaf = True

    def __init__(self):
        super().__init__()
        self.subjects = []
        self.follows = []

    def render_GET(self, request):
        subject = request.transport.getPeerCertificate().get_subject()
        self.subjects.append((subject.CN, tuple(v.decode() for k, v in
                                                subject.get_components() if k == b"O")))
        path = request.path.decode()
        if path == "/stats/summary":
            request.setHeader(b"content-type", b"application/json")
            return json.dumps(SUMMARY).encode()
        if path == "/containerLogs/default/p/c1":
            request.setHeader(b"content-type", b"text/plain")
            if request.args.get(b"follow") == [b"true"]:
                request.write(b"first line\n")
                gone = Deferred()
                request.notifyFinish().addBoth(lambda _: gone.callback(None))
                self.follows.append(gone)
                return NOT_DONE_YET
            return b"hello from c1\n"
        request.setResponseCode(404)
        return b"not found"


class FirstChunk(Protocol):
    """Hands over the first chunk of a body, then drops the connection."""

    def __init__(self, first):
        self.first = first

    def dataReceived(self, data):
        if not self.first.called:
            self.first.callback(data)
            self.transport.stopProducing()


class OrchletMixin:
    """A running control plane, a fake orchlet, node n1 with pod p on it."""

    timeout = 60

    async def setUp(self):
        self.server = await RunningControlPlane(self, no_orchlet=True).start()
        pki = self.server.plane.pki
        cert_pem, key_pem = pki.issue_serving_certificate(["127.0.0.1", "localhost"])
        self.orchlet = FakeOrchlet()
        self.port = reactor.listenSSL(0, Site(self.orchlet),
                                      server_tls_options(cert_pem, key_pem, pki.client_ca_pems),
                                      interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        await self.add_node("n1", self.port.getHost().port)
        code, body = await self.server.call("POST", "/api/v1/namespaces/default/pods", {
            "metadata": {"name": "p"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c1", "image": "img"}]}})
        self.assertEqual(code, 201, body)

    async def add_node(self, name, port):
        code, body = await self.server.call("POST", "/api/v1/nodes", {"metadata": {"name": name}})
        self.assertEqual(code, 201, body)
        code, body = await self.server.call(
            "PATCH", f"/api/v1/nodes/{name}/status",
            {"status": {"addresses": [{"type": "Hostname", "address": "no-such-host.invalid"},
                                      {"type": "InternalIP", "address": "127.0.0.1"}],
                        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}},
            headers={b"content-type": [b"application/merge-patch+json"]})
        self.assertEqual(code, 200, body)

    async def wait_for(self, predicate, seconds=10):
        for _ in range(int(seconds * 20)):
            if predicate():
                return
            await sleep(0.05)
        self.fail("condition not met in time")


class NodeProxyTests(OrchletMixin, TestCase):
    async def test_stats_summary(self):
        """The summary comes through, fetched as the orchlet client user, not a master."""
        code, body = await self.server.call("GET", "/api/v1/nodes/n1/proxy/stats/summary")
        self.assertEqual((code, body), (200, SUMMARY))
        self.assertEqual(self.orchlet.subjects, [(ORCHLET_CLIENT_USER, ())])

    async def test_log(self):
        code, body = await self.server.call("GET", "/api/v1/namespaces/default/pods/p/log")
        self.assertEqual((code, body), (200, "hello from c1\n"))

    async def test_follow_streams_until_client_leaves(self):
        """A followed log arrives before it ends; the orchlet sees the client leave."""
        response = await self.server.client.get(
            self.server.url + "/api/v1/namespaces/default/pods/p/log?follow=true")
        self.assertEqual(response.code, 200)
        first = Deferred()
        response.deliverBody(FirstChunk(first))
        self.assertEqual(await first, b"first line\n")
        await self.wait_for(lambda: self.orchlet.follows and self.orchlet.follows[0].called)

    async def test_unreachable(self):
        """A node whose orchlet does not answer: 503, as upstream words it."""
        await self.add_node("n2", 1)
        code, body = await self.server.call("GET", "/api/v1/nodes/n2/proxy/stats/summary")
        self.assertEqual((code, body["reason"]), (503, "ServiceUnavailable"))
        self.assertIn("error trying to reach service", body["message"])

    async def test_policy_binds_orchlet_client(self):
        """The orchlet client user may use every orchlet API, through RBAC only."""
        for sub in ("proxy", "stats", "log", "spec", "metrics"):
            code, body = await self.server.call(
                "POST", "/apis/authorization.orch.io/v1/subjectaccessreviews",
                {"spec": {"user": ORCHLET_CLIENT_USER,
                          "resourceAttributes": {"verb": "create", "resource": "nodes",
                                                 "subresource": sub, "name": "n1"}}})
            self.assertEqual(code, 201, body)
            self.assertTrue(body["status"]["allowed"], (sub, body))


class KubectlNodeProxyTests(OrchletMixin, TestCase):
    """The same through unmodified kubectl."""

    async def setUp(self):
        if kubectl() is None:
            raise SkipTest("kubectl is not installed")
        await super().setUp()
        self.home = os.path.abspath(self.mktemp())
        os.makedirs(self.home)

    async def kubectl(self, *args):
        argv = ["--kubeconfig", self.server.plane.pki.admin_orchconfig_path, *args]
        env = {"HOME": self.home, "PATH": os.environ.get("PATH", "")}
        out, err, code = await utils.getProcessOutputAndValue(kubectl(), argv, env=env)
        self.assertEqual(code, 0, f"kubectl {' '.join(args)}: {err.decode()}")
        return out.decode()

    async def test_get_raw_summary(self):
        out = await self.kubectl("get", "--raw", "/api/v1/nodes/n1/proxy/stats/summary")
        self.assertEqual(json.loads(out), SUMMARY)

    async def test_logs(self):
        self.assertEqual(await self.kubectl("logs", "p"), "hello from c1\n")
        self.assertEqual(await self.kubectl("logs", "p", "-c", "c1"), "hello from c1\n")
