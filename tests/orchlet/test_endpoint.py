"""The orchlet's HTTPS endpoint over real TLS: each authn/authz mode, each endpoint, checkpoints."""

import os
import stat
import tarfile

import orjson
import treq
from treq.client import HTTPClient
from twisted.internet import reactor
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, HTTPConnectionPool

from orchd.api.features import FeatureGates
from orchd.tls.certs import certificate_pem, create_ca, issue_certificate, private_key_pem
from orchd.app.config import Config
from orchd.app.orchletsettings import orchlet_settings
from orchd.tls.client import ClientTLSPolicy
from orchd.orchlet import logs
from orchd.orchlet.runtime import RuntimeError_
from orchd.orchlet.server import OrchletEndpoint
from orchd.orchlet.simulated import SimulatedRuntime
from tests.orchlet.test_auth import FakeAPI
from tests.orchlet.test_simulated import pod

_PKI = {}


def pki():
    """A CA, the node's serving certificate and a client certificate, made once."""
    if not _PKI:
        ca, ca_key = create_ca("test-ca")
        serving, serving_key = issue_certificate(ca, ca_key, "n1", names=["127.0.0.1"],
                                                 server=True)
        client, client_key = issue_certificate(ca, ca_key, "bob", ["ops"], client=True)
        _PKI.update(ca=certificate_pem(ca), serving=(certificate_pem(serving),
                                                    private_key_pem(serving_key)),
                    client=(certificate_pem(client), private_key_pem(client_key)))
    return _PKI


class EndpointTests(TestCase):
    timeout = 30

    def start(self, api=None, gates="", runtime=None, **settings):
        self.root = os.path.abspath(self.mktemp())
        config = orchlet_settings(Config(data_dir=self.mktemp(), orchlet_port=0, root_dir=self.root,
                                         feature_gates=FeatureGates.parse(gates), **settings))
        self.runtime = runtime or SimulatedRuntime(reactor, root=self.root)
        self.runtime.sync_pod(pod())
        keys = pki()
        self.endpoint = OrchletEndpoint(reactor, config, self.runtime, "n1", *keys["serving"],
                                        [keys["ca"]], api=api)
        self.endpoint.startService()
        self.addCleanup(self.endpoint.stopService)

    async def request(self, method, path, certificate=False, token=None):
        keys = pki()
        cert, key = keys["client"] if certificate else (None, None)
        pool = HTTPConnectionPool(reactor, persistent=False)
        client = HTTPClient(Agent(reactor, contextFactory=ClientTLSPolicy(keys["ca"], cert, key),
                                  pool=pool))
        headers = {b"authorization": [b"Bearer " + token.encode()]} if token else {}
        return await client.request(method, f"https://127.0.0.1:{self.endpoint.port}{path}",
                                    headers=headers)

    async def call(self, method, path, certificate=False, token=None):
        response = await self.request(method, path, certificate, token)
        body = await response.content()
        ctype = (response.headers.getRawHeaders(b"content-type") or [b""])[0]
        if ctype.startswith(b"application/json"):
            return response.code, orjson.loads(body)
        return response.code, body.decode()

    # Authentication and authorization

    async def test_anonymous_by_default(self):
        self.start()
        self.assertEqual(await self.call("GET", "/healthz"), (200, "ok"))

    async def test_anonymous_off(self):
        self.start(orchlet_anonymous_auth=False)
        self.assertEqual(await self.call("GET", "/healthz"), (401, "Unauthorized"))
        self.assertEqual(await self.call("GET", "/healthz", certificate=True), (200, "ok"))

    async def test_x509_user_in_access_review(self):
        api = FakeAPI(allowed=True)
        self.start(api=api, orchlet_authorization_mode="Webhook")
        code, _ = await self.call("GET", "/stats/summary", certificate=True)
        self.assertEqual(code, 200)
        spec = api.calls[0][2]["spec"]
        self.assertEqual((spec["user"], spec["groups"]), ("bob", ["ops", "system:authenticated"]))
        self.assertEqual(spec["resourceAttributes"]["subresource"], "stats")

    async def test_webhook_denies(self):
        api = FakeAPI(allowed=False)
        self.start(api=api, orchlet_authorization_mode="Webhook")
        self.assertEqual(await self.call("GET", "/pods"), (403, "Forbidden (user=system:anonymous, "
                                                           "verb=get, resource=nodes, "
                                                           "subresource=proxy)"))

    async def test_webhook_unreachable(self):
        self.start(api=FakeAPI(fail=True), orchlet_authorization_mode="Webhook")
        code, text = await self.call("GET", "/metrics/resource")
        self.assertEqual(code, 500)
        self.assertIn("Authorization error (user=system:anonymous", text)

    async def test_token_webhook(self):
        """A reviewed token is its user; a rejected one is 401 even with anonymous access on."""
        api = FakeAPI(allowed=True, users={"good": {"username": "tina", "groups": ["g"]}})
        self.start(api=api, orchlet_authentication_token_webhook=True,
                   orchlet_authorization_mode="Webhook")
        code, _ = await self.call("GET", "/pods", token="good")
        self.assertEqual(code, 200)
        self.assertEqual(api.calls[0][1], "/apis/authentication.orch.io/v1/tokenreviews")
        self.assertEqual(api.calls[1][2]["spec"]["user"], "tina")
        self.assertEqual(await self.call("GET", "/pods", token="bad"), (401, "Unauthorized"))

    # Endpoints

    async def test_pods(self):
        self.start()
        code, body = await self.call("GET", "/pods")
        self.assertEqual((code, body["kind"], body["apiVersion"]), (200, "PodList", "v1"))
        self.assertEqual(body["items"][0]["status"]["phase"], "Running")

    async def test_stats_and_metrics(self):
        self.start()
        code, summary = await self.call("GET", "/stats/summary")
        self.assertEqual(summary["node"]["nodeName"], "n1")
        self.assertEqual(summary["pods"][0]["podRef"]["name"], "web")
        code, text = await self.call("GET", "/metrics/resource")
        self.assertEqual(code, 200)
        self.assertIn("# TYPE node_cpu_usage_seconds_total counter\n", text)
        self.assertIn('container_memory_working_set_bytes{container="app",namespace="default",'
                      'pod="web"} 8388608 ', text)
        self.assertIn("resource_scrape_error 0\n", text)

    async def test_spec_and_logs_dir(self):
        self.start()
        code, spec = await self.call("GET", "/spec/")
        self.assertEqual(code, 200)
        self.assertGreater(spec["num_cores"], 0)
        code, listing = await self.call("GET", "/logs/")
        self.assertEqual(code, 200)
        self.assertIn('<a href="pods/">pods/</a>', listing)
        code, text = await self.call("GET", "/logs/pods/default_web_u1/app/0.log")
        self.assertIn("container app started", text)
        self.assertEqual((await self.call("GET", "/logs/../../etc/passwd"))[0], 404)

    async def test_container_logs(self):
        self.start()
        self.runtime.sync_pod(pod(containers=("app", "b")))
        code, text = await self.call("GET", "/containerLogs/default/web/app?tailLines=1&limitBytes=4")
        self.assertEqual((code, len(text)), (200, 4))
        self.assertEqual(await self.call("GET", "/containerLogs/default/nope/app"),
                         (404, 'pod "nope" does not exist'))
        self.assertEqual(await self.call("GET", "/containerLogs/default/web/x"),
                         (404, 'container "x" not found in pod "web"'))

    async def wait_for(self, condition):
        """Poll C{condition()} on the reactor for up to 5 s."""
        for _ in range(250):
            if condition():
                return
            await deferLater(reactor, 0.02, lambda: None)
        self.fail("timed out")

    async def follow(self, path):
        """A followed log: its chunks so far (a list that grows) and its end."""
        self.patch(logs, "FOLLOW_INTERVAL", 0.02)
        response = await self.request("GET", path)
        self.assertEqual(response.code, 200)
        chunks = []
        return chunks, treq.collect(response, chunks.append)

    async def test_follow_container_logs(self):
        """C{follow=true} sends the log, then each line the container adds, until it is gone."""
        self.start()
        before = self.runtime.container_logs("default", "web", "app")
        chunks, done = await self.follow("/containerLogs/default/web/app?follow=true")
        await self.wait_for(lambda: b"".join(chunks) == before)
        self.runtime.print_line("default", "web", "app", "hello")
        await self.wait_for(lambda: b"".join(chunks).endswith(b" hello\n"))
        self.assertFalse(done.called)
        self.runtime.kill_pod("default", "web")
        await done
        self.assertTrue(b"".join(chunks).startswith(before))

    async def test_follow_stops_at_limit(self):
        """With C{limitBytes}, a followed log ends once that many bytes are out."""
        self.start()
        size = len(self.runtime.container_logs("default", "web", "app"))
        chunks, done = await self.follow(
            f"/containerLogs/default/web/app?follow=true&limitBytes={size + 5}")
        await self.wait_for(lambda: len(b"".join(chunks)) == size)
        self.runtime.print_line("default", "web", "app", "0123456789")
        await done
        self.assertEqual(len(b"".join(chunks)), size + 5)

    async def test_methods_and_unknown_paths(self):
        self.start()
        self.assertEqual((await self.call("POST", "/pods"))[0], 405)
        self.assertEqual((await self.call("GET", "/nothing"))[0], 404)

    # Checkpoints

    async def test_checkpoint(self):
        self.start(gates="ContainerCheckpoint=true")
        code, body = await self.call("POST", "/checkpoint/default/web/app?timeout=5")
        self.assertEqual(code, 200, body)
        [path] = body["items"]
        self.assertEqual(os.path.dirname(path), os.path.join(self.root, "checkpoints"))
        self.assertRegex(os.path.basename(path),
                         r"^checkpoint-web_default-app-\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\.tar$")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        with tarfile.open(path) as archive:
            self.assertIn("spec.json", archive.getnames())
        self.assertEqual(os.listdir(os.path.dirname(path)), [os.path.basename(path)])

    async def test_checkpoint_gate_off(self):
        self.start()
        self.assertEqual((await self.call("POST", "/checkpoint/default/web/app"))[0], 404)

    async def test_checkpoint_unknown(self):
        self.start(gates="ContainerCheckpoint=true")
        self.assertEqual(await self.call("POST", "/checkpoint/default/nope/app"),
                         (404, "pod does not exist"))
        self.assertEqual(await self.call("POST", "/checkpoint/default/web/x"),
                         (404, "container x does not exist"))
        self.assertEqual(await self.call("POST", "/checkpoint/default/web/app?timeout=x"),
                         (404, "cannot parse value of timeout parameter"))
        self.assertEqual(os.listdir(os.path.join(self.root, "checkpoints")), [])

    async def test_checkpoint_unsupported(self):
        self.start(gates="ContainerCheckpoint=true")
        self.runtime.supports_checkpoint = False
        code, text = await self.call("POST", "/checkpoint/default/web/app")
        self.assertEqual(code, 500)
        self.assertIn("checkpointing of default/web/app failed (runtime simulated://1.0 does "
                      "not support checkpoints)", text)

    async def test_checkpoint_runtime_fails(self):
        class Failing(SimulatedRuntime):
            def checkpoint(self, *args):
                raise RuntimeError_("disk full")
        self.start(gates="ContainerCheckpoint=true", runtime=Failing(reactor))
        self.assertEqual(await self.call("POST", "/checkpoint/default/web/app"),
                         (500, "checkpointing of default/web/app failed (disk full)"))
