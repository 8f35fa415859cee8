"""
The orchlet's endpoint through its resource, in memory: each authn/authz
mode, each endpoint, followed logs and checkpoints.

StubTreq drives the real resource tree on a Clock. What needs a real TLS
handshake (client certificates) is in L{tests.integration.test_orchlet_endpoint}.
"""

import os
import stat
import tarfile

import orjson
import treq
from treq.testing import StubTreq
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.features import FeatureGates
from orchd.tls.certs import certificate_pem, create_ca, issue_certificate, private_key_pem
from orchd.app.config import Config
from orchd.app.orchletsettings import orchlet_settings
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


class EndpointTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.clock.advance(1_700_000_000)

    def start(self, api=None, gates="", runtime=None, **settings):
        """The endpoint as the node agent builds it, its resource reached through StubTreq."""
        self.root = os.path.abspath(self.mktemp())
        config = orchlet_settings(Config(data_dir=self.mktemp(), orchlet_port=0,
                                         root_dir=self.root,
                                         feature_gates=FeatureGates.parse(gates), **settings))
        self.runtime = runtime or SimulatedRuntime(self.clock, root=self.root)
        self.runtime.sync_pod(pod())
        keys = pki()
        endpoint = OrchletEndpoint(self.clock, config, self.runtime, "n1", *keys["serving"],
                                   [keys["ca"]], api=api)
        self.treq = StubTreq(endpoint.site.resource)

    def request(self, method, path, token=None):
        headers = {b"authorization": [b"Bearer " + token.encode()]} if token else {}
        return self.successResultOf(self.treq.request(method, "https://127.0.0.1:10250" + path,
                                                      headers=headers))

    def call(self, method, path, token=None):
        response = self.request(method, path, token)
        body = self.successResultOf(self.treq.content(response))
        ctype = (response.headers.getRawHeaders(b"content-type") or [b""])[0]
        if ctype.startswith(b"application/json"):
            return response.code, orjson.loads(body)
        return response.code, body.decode()

    # Authentication and authorization

    def test_anonymous_by_default(self):
        """Without credentials a request is anonymous, and anonymous access is on by default."""
        self.start()
        self.assertEqual(self.call("GET", "/healthz"), (200, "ok"))

    def test_anonymous_off(self):
        """With anonymous access off a request without credentials is 401, /healthz too."""
        self.start(orchlet_anonymous_auth=False)
        self.assertEqual(self.call("GET", "/healthz"), (401, "Unauthorized"))
        self.assertEqual(self.call("GET", "/pods", token="t"), (401, "Unauthorized"))

    def test_webhook_denies(self):
        """A denied SubjectAccessReview is a 403 naming the user and the attributes."""
        api = FakeAPI(allowed=False)
        self.start(api=api, orchlet_authorization_mode="Webhook")
        self.assertEqual(self.call("GET", "/pods"), (403, "Forbidden (user=system:anonymous, "
                                                           "verb=get, resource=nodes, "
                                                           "subresource=proxy)"))

    def test_webhook_unreachable(self):
        """An API server that cannot be asked is a 500 naming the attributes, not an allow."""
        self.start(api=FakeAPI(fail=True), orchlet_authorization_mode="Webhook")
        code, text = self.call("GET", "/metrics/resource")
        self.assertEqual(code, 500)
        self.assertIn("Authorization error (user=system:anonymous", text)

    def test_token_webhook(self):
        """A reviewed token is its user; a rejected one is 401 even with anonymous access on."""
        api = FakeAPI(allowed=True, users={"good": {"username": "tina", "groups": ["g"]}})
        self.start(api=api, orchlet_authentication_token_webhook=True,
                   orchlet_authorization_mode="Webhook")
        code, _ = self.call("GET", "/pods", token="good")
        self.assertEqual(code, 200)
        self.assertEqual(api.calls[0][1], "/apis/authentication.orch.io/v1/tokenreviews")
        self.assertEqual(api.calls[1][2]["spec"]["user"], "tina")
        self.assertEqual(self.call("GET", "/pods", token="bad"), (401, "Unauthorized"))

    # Endpoints

    def test_pods(self):
        """/pods lists the runtime's pods with their status, as a v1 PodList."""
        self.start()
        code, body = self.call("GET", "/pods")
        self.assertEqual((code, body["kind"], body["apiVersion"]), (200, "PodList", "v1"))
        self.assertEqual(body["items"][0]["status"]["phase"], "Running")

    def test_stats_and_metrics(self):
        """/stats/summary and /metrics/resource report the node and its containers."""
        self.start()
        code, summary = self.call("GET", "/stats/summary")
        self.assertEqual(summary["node"]["nodeName"], "n1")
        self.assertEqual(summary["pods"][0]["podRef"]["name"], "web")
        code, text = self.call("GET", "/metrics/resource")
        self.assertEqual(code, 200)
        self.assertIn("# TYPE node_cpu_usage_seconds_total counter\n", text)
        self.assertIn('container_memory_working_set_bytes{container="app",namespace="default",'
                      'pod="web"} 8388608 ', text)
        self.assertIn("resource_scrape_error 0\n", text)

    def test_spec_and_logs_dir(self):
        """/spec/ describes the machine; /logs/ lists and serves files, never outside its root."""
        self.start()
        code, spec = self.call("GET", "/spec/")
        self.assertEqual(code, 200)
        self.assertGreater(spec["num_cores"], 0)
        code, listing = self.call("GET", "/logs/")
        self.assertEqual(code, 200)
        self.assertIn('<a href="pods/">pods/</a>', listing)
        code, text = self.call("GET", "/logs/pods/default_web_u1/app/0.log")
        self.assertIn("container app started", text)
        self.assertEqual((self.call("GET", "/logs/../../etc/passwd"))[0], 404)

    def test_container_logs(self):
        """/containerLogs trims by tailLines and limitBytes; unknown pods and containers are 404."""
        self.start()
        self.runtime.sync_pod(pod(containers=("app", "b")))
        code, text = self.call("GET", "/containerLogs/default/web/app?tailLines=1&limitBytes=4")
        self.assertEqual((code, len(text)), (200, 4))
        self.assertEqual(self.call("GET", "/containerLogs/default/nope/app"),
                         (404, 'pod "nope" does not exist'))
        self.assertEqual(self.call("GET", "/containerLogs/default/web/x"),
                         (404, 'container "x" not found in pod "web"'))

    def follow(self, path):
        """A followed log: its chunks so far (a list that grows) and its end."""
        response = self.request("GET", path)
        self.assertEqual(response.code, 200)
        chunks = []
        return chunks, treq.collect(response, chunks.append)

    def pump(self, seconds=logs.FOLLOW_INTERVAL):
        """Let the followed log be read again, and its news reach the client."""
        self.clock.advance(seconds)
        self.treq.flush()

    def test_follow_container_logs(self):
        """C{follow=true} sends the log, then each line the container adds, until it is gone."""
        self.start()
        before = self.runtime.container_logs("default", "web", "app")
        chunks, done = self.follow("/containerLogs/default/web/app?follow=true")
        self.assertEqual(b"".join(chunks), before)
        self.pump(60)
        self.assertEqual(b"".join(chunks), before)
        self.runtime.print_line("default", "web", "app", "hello")
        self.pump()
        self.assertTrue(b"".join(chunks).endswith(b" hello\n"))
        self.assertNoResult(done)
        self.runtime.kill_pod("default", "web")
        self.pump()
        self.successResultOf(done)
        self.assertTrue(b"".join(chunks).startswith(before))

    def test_follow_without_value(self):
        """A bare C{?follow}, which twisted.web alone would drop, follows too."""
        self.start()
        chunks, done = self.follow("/containerLogs/default/web/app?follow")
        self.runtime.print_line("default", "web", "app", "more")
        self.pump()
        self.assertTrue(b"".join(chunks).endswith(b" more\n"))
        self.assertNoResult(done)
        self.runtime.kill_pod("default", "web")
        self.pump()
        self.successResultOf(done)

    def test_follow_false_answers_at_once(self):
        """follow=FALSE, as follow=0, is no follow: the log so far, and the answer ends."""
        self.start()
        before = self.runtime.container_logs("default", "web", "app")
        for query in ("follow=FALSE", "follow=0"):
            self.assertEqual(self.call("GET", "/containerLogs/default/web/app?" + query),
                             (200, before.decode()), query)

    def test_follow_stops_at_limit(self):
        """With C{limitBytes}, a followed log ends once that many bytes are out."""
        self.start()
        size = len(self.runtime.container_logs("default", "web", "app"))
        chunks, done = self.follow(
            f"/containerLogs/default/web/app?follow=true&limitBytes={size + 5}")
        self.assertEqual(len(b"".join(chunks)), size)
        self.runtime.print_line("default", "web", "app", "0123456789")
        self.pump()
        self.successResultOf(done)
        self.assertEqual(len(b"".join(chunks)), size + 5)

    def test_methods_and_unknown_paths(self):
        """Reads take GET and HEAD only (405); an unknown path is 404."""
        self.start()
        self.assertEqual((self.call("POST", "/pods"))[0], 405)
        self.assertEqual((self.call("GET", "/nothing"))[0], 404)

    # Checkpoints

    def test_checkpoint(self):
        """A checkpoint is an owner-only tar in <root>/checkpoints, named as the kubelet does."""
        self.start(gates="ContainerCheckpoint=true")
        code, body = self.call("POST", "/checkpoint/default/web/app?timeout=5")
        self.assertEqual(code, 200, body)
        [path] = body["items"]
        self.assertEqual(os.path.dirname(path), os.path.join(self.root, "checkpoints"))
        self.assertRegex(os.path.basename(path),
                         r"^checkpoint-web_default-app-\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\.tar$")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        with tarfile.open(path) as archive:
            self.assertIn("spec.json", archive.getnames())
        self.assertEqual(os.listdir(os.path.dirname(path)), [os.path.basename(path)])

    def test_checkpoint_gate_off(self):
        """Without the ContainerCheckpoint gate /checkpoint does not exist."""
        self.start()
        self.assertEqual((self.call("POST", "/checkpoint/default/web/app"))[0], 404)

    def test_checkpoint_unknown(self):
        """Unknown pods and containers, and a bad timeout, are 404s that leave no file."""
        self.start(gates="ContainerCheckpoint=true")
        self.assertEqual(self.call("POST", "/checkpoint/default/nope/app"),
                         (404, "pod does not exist"))
        self.assertEqual(self.call("POST", "/checkpoint/default/web/x"),
                         (404, "container x does not exist"))
        self.assertEqual(self.call("POST", "/checkpoint/default/web/app?timeout=x"),
                         (404, "cannot parse value of timeout parameter"))
        self.assertEqual(os.listdir(os.path.join(self.root, "checkpoints")), [])

    def test_checkpoint_unsupported(self):
        """A runtime that cannot checkpoint is a 500 saying so."""
        self.start(gates="ContainerCheckpoint=true")
        self.runtime.supports_checkpoint = False
        code, text = self.call("POST", "/checkpoint/default/web/app")
        self.assertEqual(code, 500)
        self.assertIn("checkpointing of default/web/app failed (runtime simulated://1.0 does "
                      "not support checkpoints)", text)

    def test_checkpoint_runtime_fails(self):
        """A runtime failure is a 500 carrying its reason."""
        class Failing(SimulatedRuntime):
            def checkpoint(self, *args):
                raise RuntimeError_("disk full")
        self.start(gates="ContainerCheckpoint=true", runtime=Failing(self.clock))
        self.assertEqual(self.call("POST", "/checkpoint/default/web/app"),
                         (500, "checkpointing of default/web/app failed (disk full)"))
