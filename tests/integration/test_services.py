"""Service cluster IPs survive a restart of a real server (LevelDB store)."""

from twisted.trial.unittest import TestCase

from tests.integration.support import RunningControlPlane

SERVICES = "/api/v1/namespaces/default/services"


class ServiceIPRestartTests(TestCase):
    timeout = 60

    async def create(self, server, name):
        return await server.call("POST", SERVICES, {"metadata": {"name": name},
                                                    "spec": {"ports": [{"port": 80}]}})

    async def test_restart_keeps_allocations(self):
        """After a restart, new services get IPs no stored service holds; then the range is full."""
        data_dir = self.mktemp()
        settings = {"service_cluster_ip_range": "10.0.0.0/29"}   # 6 usable addresses
        first = await RunningControlPlane(self, data_dir, **settings).start()
        ips = set()
        for i in range(3):
            code, obj = await self.create(first, f"before-{i}")
            self.assertEqual(code, 201, obj)
            ips.add(obj["spec"]["clusterIP"])
        await first.stop()
        second = await RunningControlPlane(self, data_dir, **settings).start()
        for i in range(3):
            code, obj = await self.create(second, f"after-{i}")
            self.assertEqual(code, 201, obj)
            ips.add(obj["spec"]["clusterIP"])
        self.assertEqual(len(ips), 6)
        code, obj = await self.create(second, "one-too-many")
        self.assertEqual(code, 500, obj)
        self.assertIn("failed to allocate a serviceIP: range is full", obj["message"])
