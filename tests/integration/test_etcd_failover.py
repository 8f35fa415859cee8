# -*- test-case-name: tests.integration.test_etcd_failover -*-
"""
Two C{twistd orchd} processes on one etcd; the first (the controllers'
leader, having started first) is killed with SIGKILL. The second keeps
serving writes at once, and its controllers take over once the leader's
Lease has run out (12 s after the last renewal by default), so work that
only controllers do, such as the C{default} ServiceAccount of a new
namespace, happens again.
"""

import os
import signal

from twisted.internet import reactor
from twisted.trial.unittest import TestCase
from twisted.web.client import HTTPConnectionPool

from orchd.client.connect import client_from_orchconfig
from tests.etcdsupport import require_etcd, shared_cluster, unique_prefix
from tests.integration.support import sleep
from tests.integration.test_cli import spawn

LEASE = "/apis/coordination.orch.io/v1/namespaces/orch-system/leases/orch-controller-manager"


class FailoverTests(TestCase):
    timeout = 120

    async def start(self, prefix):
        data_dir = os.path.abspath(self.mktemp())
        child = spawn("--data-dir", data_dir, "--secure-port", "0", "--no-orchlet",
                      "--storage-backend=etcd",
                      "--etcd-servers=" + ",".join(shared_cluster().client_urls),
                      "--etcd-prefix=" + prefix)
        self.addCleanup(self.kill, child)
        url = await child.listening
        pool = HTTPConnectionPool(reactor)
        self.addCleanup(pool.closeCachedConnections)
        client, _ = client_from_orchconfig(os.path.join(data_dir, "admin.orchconfig"),
                                           reactor, pool)
        return child, url, client

    def kill(self, child):
        if not child.ended.called:
            os.kill(child.transport.pid, signal.SIGKILL)
        return child.ended

    async def get(self, client, url, path):
        response = await client.get(url + path)
        body = await response.json() if response.code == 200 else await response.content()
        return response.code, body

    async def poll(self, check, seconds):
        for _ in range(int(seconds / 0.25)):
            if await check():
                return True
            await sleep(0.25)
        return False

    async def test_survivor_takes_over(self):
        require_etcd()
        prefix = unique_prefix("failover")
        first, first_url, first_client = await self.start(prefix)

        async def leading():
            code, lease = await self.get(first_client, first_url, LEASE)
            return code == 200 and bool(lease["spec"].get("holderIdentity"))
        self.assertTrue(await self.poll(leading, 20), "the first server never led")
        second, url, client = await self.start(prefix)

        async def ready():
            response = await client.get(url + "/readyz")
            await response.content()
            return response.code == 200
        self.assertTrue(await self.poll(ready, 30), "the second server never got ready")
        _, before = await self.get(client, url, LEASE)

        os.kill(first.transport.pid, signal.SIGKILL)
        await first.ended
        response = await client.post(url + "/api/v1/namespaces",
                                     json={"metadata": {"name": "after-kill"}})
        await response.content()
        self.assertEqual(response.code, 201)      # writes go on without the leader

        async def default_account():
            code, _ = await self.get(client, url,
                                     "/api/v1/namespaces/after-kill/serviceaccounts/default")
            return code == 200
        self.assertTrue(await self.poll(default_account, 20),
                        "no controller created the default ServiceAccount within 20 s")
        _, after = await self.get(client, url, LEASE)
        self.assertNotEqual(after["spec"]["holderIdentity"], before["spec"]["holderIdentity"])
