"""The API server over real TLS and a real LevelDB store, reached with treq."""

import os

from treq.client import HTTPClient
from twisted.internet import reactor
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, HTTPConnectionPool

from orchd.tls.certs import certificate_pem, create_ca, issue_certificate, private_key_pem
from orchd.client.orchconfig import load_orchconfig
from orchd.tls.client import ClientTLSPolicy
from tests.integration.support import RunningControlPlane, sleep

CM = "/api/v1/namespaces/default/configmaps"


class ServerTests(TestCase):
    timeout = 60

    async def setUp(self):
        self.server = await RunningControlPlane(self).start()

    def client_for(self, cert_pem=None, key_pem=None):
        pool = HTTPConnectionPool(reactor, persistent=False)
        ca = load_orchconfig(self.server.plane.pki.admin_orchconfig_path).ca_pem
        policy = ClientTLSPolicy(ca, cert_pem, key_pem)
        return HTTPClient(Agent(reactor, contextFactory=policy, pool=pool))

    async def test_ready_and_admin_files(self):
        """After start readyz passes and the data dir holds the PKI and the admin orchconfig."""
        code, body = await self.server.call("GET", "/readyz?verbose")
        self.assertEqual(code, 200, body)
        self.assertIn("[+]etcd ok", body)
        self.assertIn("[+]poststarthook/start-system-namespaces-controller ok", body)
        for name in ("pki/ca.crt", "pki/ca.key", "pki/apiserver.crt", "pki/apiserver.key",
                     "pki/sa.key", "pki/sa.pub", "admin.orchconfig", "store"):
            self.assertTrue(os.path.exists(os.path.join(self.server.data_dir, name)), name)
        self.assertEqual(os.stat(os.path.join(self.server.data_dir, "pki/ca.key")).st_mode & 0o777,
                         0o600)

    async def test_admin_crud(self):
        """The admin certificate (system:masters) creates, reads and lists objects."""
        code, created = await self.server.call("POST", CM, {"metadata": {"name": "a"},
                                                            "data": {"k": "v"}})
        self.assertEqual(code, 201, created)
        code, got = await self.server.call("GET", CM + "/a")
        self.assertEqual((code, got), (200, created))
        code, listed = await self.server.call("GET", "/api/v1/namespaces")
        self.assertEqual(sorted(i["metadata"]["name"] for i in listed["items"]),
                         ["default", "orch-node-lease", "orch-public", "orch-system"])

    async def test_anonymous(self):
        """Without a certificate a client is anonymous: health and version only."""
        anonymous = self.client_for()
        code, _ = await self.server.call("GET", "/livez", client=anonymous)
        self.assertEqual(code, 200)
        code, version = await self.server.call("GET", "/version", client=anonymous)
        self.assertEqual(version["gitVersion"][:2], "v1")
        code, status = await self.server.call("GET", CM, client=anonymous)
        self.assertEqual(code, 403)
        self.assertIn('User "system:anonymous" cannot list', status["message"])

    async def test_other_user_identity(self):
        """A certificate from the client CA authenticates as its CN and O."""
        cert, key = self.server.plane.pki.issue_client_certificate("carol", ["team"])
        carol = self.client_for(cert, key)
        code, review = await self.server.call(
            "POST", "/apis/authentication.orch.io/v1/selfsubjectreviews", {}, client=carol)
        self.assertEqual(code, 201, review)
        self.assertEqual(review["status"]["userInfo"],
                         {"username": "carol", "groups": ["team", "system:authenticated"]})

    async def test_foreign_ca_refused(self):
        """A certificate signed by another CA is refused at the handshake, never trusted."""
        other_cert, other_key = create_ca("intruder-ca")
        cert, key = issue_certificate(other_cert, other_key, "orch-admin", ["system:masters"],
                                      client=True)
        intruder = self.client_for(certificate_pem(cert), private_key_pem(key))
        with self.assertRaises(Exception) as caught:
            await intruder.get(self.server.url + CM)
        self.assertIn("SSL", repr(caught.exception) + repr(getattr(caught.exception, "reasons", "")))

    async def test_body_too_large(self):
        """A body over 3 MiB is refused with 413."""
        big = b'{"metadata":{"name":"big"},"data":{"k":"' + b"x" * (3 * 1024 * 1024) + b'"}}'
        code, status = await self.server.call("POST", CM, big)
        self.assertEqual((code, status["reason"]), (413, "RequestEntityTooLarge"))
        code, _ = await self.server.call("GET", CM + "/big")
        self.assertEqual(code, 404)

    async def test_discovery_and_openapi(self):
        """Discovery and OpenAPI documents are served."""
        code, apis = await self.server.call("GET", "/apis")
        self.assertIn("apps", [g["name"] for g in apis["groups"]])
        code, resources = await self.server.call("GET", "/apis/apps/v1")
        self.assertIn("controllerrevisions", [r["name"] for r in resources["resources"]])
        code, index = await self.server.call("GET", "/openapi/v3")
        self.assertIn("api/v1", index["paths"])
        code, document = await self.server.call("GET", "/openapi/v2")
        self.assertEqual(document["swagger"], "2.0")


class AnonymousOffTests(TestCase):
    timeout = 60

    async def test_no_credentials_is_401(self):
        """With --anonymous-auth=false a request without credentials is 401, even for health."""
        server = await RunningControlPlane(self, anonymous_auth=False).start()
        pool = HTTPConnectionPool(reactor, persistent=False)
        ca = load_orchconfig(server.plane.pki.admin_orchconfig_path).ca_pem
        anonymous = HTTPClient(Agent(reactor, contextFactory=ClientTLSPolicy(ca), pool=pool))
        code, status = await server.call("GET", "/livez", client=anonymous)
        self.assertEqual((code, status["reason"]), (401, "Unauthorized"))
        self.assertEqual((await server.call("GET", "/livez"))[0], 200)


class LifecycleTests(TestCase):
    timeout = 60

    async def test_restart_reuses_pki_and_data(self):
        """A restart keeps the CA, the admin orchconfig and every stored object."""
        data_dir = self.mktemp()
        first = await RunningControlPlane(self, data_dir).start()
        await first.call("POST", CM, {"metadata": {"name": "kept"}})
        with open(os.path.join(data_dir, "pki/ca.crt"), "rb") as f:
            ca = f.read()
        with open(os.path.join(data_dir, "admin.orchconfig"), "rb") as f:
            admin = load_orchconfig(os.path.join(data_dir, "admin.orchconfig")).client_cert_pem
        await first.stop()
        second = await RunningControlPlane(self, data_dir).start()
        with open(os.path.join(data_dir, "pki/ca.crt"), "rb") as f:
            self.assertEqual(f.read(), ca)
        self.assertEqual(
            load_orchconfig(os.path.join(data_dir, "admin.orchconfig")).client_cert_pem, admin)
        code, obj = await second.call("GET", CM + "/kept")
        self.assertEqual(code, 200)

    async def test_shutdown_delay(self):
        """On shutdown readyz fails first while the listener still answers, then it closes."""
        server = await RunningControlPlane(self, shutdown_delay_duration=1.0).start()
        stopping = server.top.stopService()
        server.stopped = True
        code, body = await server.call("GET", "/readyz")
        self.assertEqual(code, 500)
        self.assertIn("[-]shutdown failed", body)
        self.assertEqual((await server.call("GET", "/livez"))[0], 200)
        await stopping
        await server.pool.closeCachedConnections()
        with self.assertRaises(Exception):
            await server.call("GET", "/livez")
        await sleep(0)
