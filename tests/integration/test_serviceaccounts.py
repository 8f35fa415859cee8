"""Service accounts in a real server: default accounts, root CA maps, tokens, pod volumes."""

import base64

from twisted.trial.unittest import TestCase

from tests.integration.support import RunningControlPlane, sleep

NS = "/api/v1/namespaces"


class ServiceAccountsTests(TestCase):
    timeout = 60

    async def setUp(self):
        self.server = await RunningControlPlane(self).start()

    async def eventually(self, path, ready=lambda obj: True):
        """The object at C{path} once it exists and C{ready(obj)}; fails after ~10 s."""
        for _ in range(100):
            code, obj = await self.server.call("GET", path)
            if code == 200 and ready(obj):
                return obj
            await sleep(0.1)
        self.fail(f"{path} never became ready (last answer {code}: {obj})")

    async def test_namespace_token_and_pod(self):
        """A new namespace gets its account and CA map; tokens and pod volumes follow."""
        code, _ = await self.server.call("POST", NS, {"metadata": {"name": "team-a"}})
        self.assertEqual(code, 201)
        await self.eventually(f"{NS}/team-a/serviceaccounts/default")
        ca_map = await self.eventually(f"{NS}/team-a/configmaps/orch-root-ca.crt")
        self.assertEqual(ca_map["data"]["ca.crt"], self.server.plane.pki.server_ca_pem.decode())

        code, _ = await self.server.call("POST", f"{NS}/team-a/secrets", {
            "metadata": {"name": "default-token",
                         "annotations": {"orch.io/service-account.name": "default"}},
            "type": "orch.io/service-account-token"})
        self.assertEqual(code, 201)
        secret = await self.eventually(f"{NS}/team-a/secrets/default-token",
                                       lambda obj: (obj.get("data") or {}).get("token"))
        self.assertEqual(base64.b64decode(secret["data"]["namespace"]), b"team-a")

        code, created = await self.server.call("POST", f"{NS}/team-a/pods", {
            "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
        self.assertEqual(code, 201, created)
        spec = created["spec"]
        self.assertEqual(spec["serviceAccountName"], "default")
        [volume] = spec["volumes"]
        self.assertTrue(volume["name"].startswith("orch-api-access-"))
        self.assertEqual(spec["containers"][0]["volumeMounts"][0]["mountPath"],
                         "/var/run/secrets/orch.io/serviceaccount")

        code, status = await self.server.call("POST", f"{NS}/team-a/pods", {
            "metadata": {"name": "q"},
            "spec": {"serviceAccountName": "nobody",
                     "containers": [{"name": "c", "image": "i"}]}})
        self.assertEqual(code, 403)
        self.assertIn('serviceaccount "nobody" not found', status["message"])
