"""
Two control planes' controller sets over one store: one runs at a time.

Each "process" is an API server (its own catalog and watch caches) with the
real controllers behind an L{ElectedControllers}, as L{ControlPlane} wires
them; both share one L{MemoryStore}, as two API servers share etcd.
"""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.elected import ElectedControllers
from orchd.controllers.leaderelection import LEASE_DURATION, RETRY_PERIOD, LeaderElector
from orchd.controllers.manager import ControllerEnvironment, build_controllers
from orchd.storage.memory import MemoryStore
from tests.support import APIHarness

NAMES = ("namespace", "serviceaccount", "garbagecollector")


class Process:
    def __init__(self, store, clock, identity):
        self.api = APIHarness(store=store)
        env = ControllerEnvironment(self.api.catalog, clock)
        self.elector = LeaderElector(self.api.catalog, clock, identity)
        self.service = ElectedControllers(lambda: build_controllers(NAMES, env), self.elector)
        self.service.startService()
        self.service.campaign()

    @property
    def running(self):
        controllers = self.service.controllers
        return controllers is not None and all(c.running for c in controllers)


class LeadershipTests(SynchronousTestCase):

    def setUp(self):
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.store = MemoryStore()

    def tick(self, seconds, step=0.25):
        for _ in range(round(seconds / step)):
            self.clock.advance(step)

    def has_default_account(self, api, namespace):
        code, _, _ = api.call("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
        return code == 200

    def test_one_controller_set_at_a_time(self):
        a = Process(self.store, self.clock, "a")
        b = Process(self.store, self.clock, "b")
        self.assertEqual((a.running, b.running), (True, False))
        self.assertTrue(self.successResultOf(a.service.started))
        self.assertFalse(self.successResultOf(b.service.started))

        # A write through b is acted on by a's controllers.
        b.api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "one"}})
        self.assertTrue(self.has_default_account(b.api, "one"))
        self.tick(30)
        self.assertEqual((a.running, b.running), (True, False))

        # a stops gracefully: b takes over on its next attempt.
        first_set = list(a.service.controllers)
        self.successResultOf(a.service.stopService())
        self.assertFalse(any(c.running for c in first_set))
        self.tick(RETRY_PERIOD)
        self.assertEqual((a.running, b.running), (False, True))
        a.api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "two"}})
        self.assertTrue(self.has_default_account(a.api, "two"))

        # b is killed (no release): c takes over within 15 s.
        c = Process(self.store, self.clock, "c")
        self.assertEqual(c.running, False)
        self.successResultOf(b.elector.stop(release=False))
        self.assertFalse(b.running)
        c.api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "three"}})
        self.assertFalse(self.has_default_account(c.api, "three"))     # nobody leads
        waited = 0.0
        while not c.running:
            self.tick(0.25)
            waited += 0.25
        self.assertGreaterEqual(waited, LEASE_DURATION - RETRY_PERIOD)
        self.assertLessEqual(waited, 15)
        self.assertTrue(self.has_default_account(c.api, "three"))
        self.successResultOf(c.service.stopService())
