"""The controllers as a service that runs them only while leading."""

from twisted.application.service import Service
from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.elected import ElectedControllers
from orchd.controllers.leaderelection import RENEW_DEADLINE, RETRY_PERIOD, LeaderElector
from orchd.storage.memory import MemoryStore
from tests.support import APIHarness


class FakeController(Service):
    def __init__(self, started):
        self.started = started


class ElectedControllersTests(SynchronousTestCase):
    """The controllers run only while their process leads."""

    def setUp(self):
        self.clock = Clock()
        self.store = MemoryStore()
        self.builds = []

    def process(self, identity, build=None):
        api = APIHarness(store=self.store)
        elector = LeaderElector(api.catalog, self.clock, identity)
        service = ElectedControllers(build or self.build, elector)
        service.startService()
        return service

    def build(self):
        controllers = [FakeController(succeed(None)), FakeController(succeed(None))]
        self.builds.append(controllers)
        return controllers

    def tick(self, seconds, step=0.25):
        for _ in range(round(seconds / step)):
            self.clock.advance(step)

    def running(self, *services):
        return [s.controllers is not None and all(c.running for c in s.controllers)
                for s in services]

    def test_without_election(self):
        """Without an elector the controllers run from start to stop."""
        service = ElectedControllers(self.build)
        service.startService()
        self.assertEqual(self.running(service), [True])
        self.assertTrue(self.successResultOf(service.started))
        self.successResultOf(service.stopService())
        self.assertFalse(any(c.running for c in self.builds[0]))

    def test_started_waits_for_first_sync(self):
        """As leader, C{started} fires once every controller has its first listing."""
        first = Deferred()
        service = self.process("a", lambda: [FakeController(first)])
        service.campaign()
        self.assertNoResult(service.started)
        first.callback(None)
        self.assertTrue(self.successResultOf(service.started))

    def test_one_set_at_a_time(self):
        """
        Two processes over one store: only the leader's controllers run; a
        graceful stop hands over on the next attempt, a kill within 15 s,
        and a process that lost the Lease stops its set.
        """
        a, b = self.process("a"), self.process("b")
        a.campaign()
        b.campaign()
        self.assertEqual(self.running(a, b), [True, False])
        self.assertFalse(self.successResultOf(b.started))   # a follower seeing a leader
        for _ in range(40):
            self.tick(0.5)
            self.assertEqual(self.running(a, b), [True, False])
        self.successResultOf(a.stopService())
        self.assertFalse(any(c.running for c in self.builds[0]))
        self.tick(RETRY_PERIOD)
        self.assertEqual(self.running(b), [True])
        # b is killed: its elector stops without releasing, its set dies with it.
        c = self.process("c")
        c.campaign()
        self.successResultOf(b.elector.stop(release=False))
        self.assertFalse(any(c.running for c in self.builds[1]))
        waited = 0.0
        while not self.running(c)[0]:
            self.tick(0.5)
            waited += 0.5
        self.assertLessEqual(waited, 15)
        self.assertEqual(len(self.builds), 3)

    def test_lost_lease_stops_controllers(self):
        """A leader that cannot renew stops its set, then leads again when it can."""
        a = self.process("a")
        a.campaign()
        update = a.elector._leases.update

        def failing(*args, **kwargs):
            raise RuntimeError("store unavailable")
        self.patch(a.elector._leases, "update", failing)
        self.tick(RENEW_DEADLINE)
        self.assertIsNone(a.controllers)
        self.assertFalse(any(c.running for c in self.builds[0]))
        self.patch(a.elector._leases, "update", update)
        self.tick(RETRY_PERIOD)
        self.assertEqual(self.running(a), [True])
        self.assertEqual(len(self.builds), 2)
