"""A real control plane holds the controllers' Lease, and releases it on stop."""

from twisted.trial.unittest import TestCase

from tests.integration.support import RunningControlPlane, sleep

LEASE = "/apis/coordination.orch.io/v1/namespaces/orch-system/leases/orch-controller-manager"


class LeaderElectionTests(TestCase):

    async def test_single_server_leads_at_once(self):
        """One API server leads from its first attempt; a restart leads again at once."""
        data_dir = self.mktemp()
        server = await RunningControlPlane(self, data_dir=data_dir).start()
        elector = server.plane.controllers.elector
        self.assertTrue(elector.leading)
        code, lease = await server.call("GET", LEASE)
        self.assertEqual(code, 200)
        spec = lease["spec"]
        self.assertEqual((spec["holderIdentity"], spec["leaseDurationSeconds"],
                          spec["leaseTransitions"]), (elector.identity, 12, 0))
        code, text = await server.call("GET", "/readyz?verbose")
        self.assertEqual(code, 200, text)
        self.assertIn("[+]poststarthook/start-orch-controllers ok", text)
        await server.stop()
        self.assertFalse(elector.leading)

        again = await RunningControlPlane(self, data_dir=data_dir).start()
        code, lease = await again.call("GET", LEASE)
        spec = lease["spec"]
        self.assertEqual((spec["holderIdentity"], spec["leaseTransitions"]),
                         (again.plane.controllers.elector.identity, 1))

    async def test_without_leader_election(self):
        """C{--leader-elect=false}: no Lease, the controllers run all the same."""
        server = await RunningControlPlane(self, leader_elect=False).start()
        self.assertIsNone(server.plane.controllers.elector)
        self.assertTrue(all(c.running for c in server.plane.controllers.controllers))
        code, _ = await server.call("GET", LEASE)
        self.assertEqual(code, 404)
        for _ in range(50):     # the serviceaccount controller fills namespaces
            code, _ = await server.call(
                "GET", "/api/v1/namespaces/default/serviceaccounts/default")
            if code == 200:
                break
            await sleep(0.1)
        self.assertEqual(code, 200)
