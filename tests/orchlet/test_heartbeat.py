"""The Lease heartbeat: 10 s rhythm, 0.2 s doubling to 7 s after failures."""

import re

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.orchlet.heartbeat import LEASES, Backoff, LeaseRenewer
from orchd.timing.seconds import micro_time
from tests.orchlet.fakes import FakeAPI

NODE = {"metadata": {"name": "n1", "uid": "u-1"}}


class BackoffTests(SynchronousTestCase):
    def test_sequence(self):
        backoff = Backoff()
        self.assertEqual([backoff.next() for _ in range(8)],
                         [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 7.0, 7.0])
        backoff.reset()
        self.assertEqual(backoff.next(), 0.2)

    def test_micro_time(self):
        self.assertEqual(micro_time(1714557600.123456), "2024-05-01T10:00:00.123456Z")
        self.assertTrue(re.fullmatch(r".*T\d\d:\d\d:\d\d\.\d{6}Z", micro_time(5)))


class LeaseServer:
    """Lease storage behind a L{FakeAPI}; C{failing} makes every request a 500."""

    def __init__(self):
        self.lease = None
        self.failing = False
        self.api = FakeAPI(self.answer)

    def answer(self, method, path, body):
        if self.failing:
            return 500, {"message": "down"}
        if method == "GET":
            return (200, self.lease) if self.lease else (404, {})
        if method == "POST":
            self.lease = dict(body, metadata=dict(body["metadata"], resourceVersion="1"))
            return 201, self.lease
        if method == "PUT":
            self.lease = body
            return 200, body
        return 405, {}


class LeaseRenewerTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.clock.advance(1714557600)
        self.server = LeaseServer()
        self.renewer = LeaseRenewer(self.clock, self.server.api, "n1", owner=NODE,
                                    random=lambda: 0.0)

    def test_create_then_renew_every_10s(self):
        """The Lease is created with its owner, then renewed every 10 s."""
        self.renewer.start()
        self.clock.advance(0)
        lease = self.server.lease
        self.assertEqual(lease["metadata"]["namespace"], "orch-node-lease")
        self.assertEqual(lease["metadata"]["ownerReferences"],
                         [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u-1"}])
        self.assertEqual(lease["spec"], {"holderIdentity": "n1", "leaseDurationSeconds": 40,
                                         "renewTime": "2024-05-01T10:00:00.000000Z"})
        self.clock.advance(9.9)
        self.assertEqual(self.server.api.calls(), [("GET", f"{LEASES}/n1"), ("POST", LEASES)])
        self.clock.advance(0.1)
        self.assertEqual(self.server.api.calls()[-1], ("PUT", f"{LEASES}/n1"))
        self.assertEqual(self.server.lease["spec"]["renewTime"], "2024-05-01T10:00:10.000000Z")
        self.clock.advance(10)
        self.assertEqual(self.renewer.renewals, 3)
        self.assertEqual(list(self.renewer.repeater.delays), [0, 10.0, 10.0, 10.0])

    def test_renewals_jittered(self):
        """Each wait after a success is up to 4% longer at random, as upstream's."""
        draws = iter([0.5, 0.0, 0.999])
        renewer = LeaseRenewer(self.clock, self.server.api, "n1", owner=NODE,
                               random=lambda: next(draws))
        renewer.start()
        for _ in range(3):
            self.clock.advance(renewer.repeater.delays[-1])
        self.assertEqual([round(d, 4) for d in renewer.repeater.delays],
                         [0, 10.2, 10.0, 10.3996])

    def test_backoff_on_failure(self):
        """Failures are retried after 0.2 s doubling to 7 s; a success resets the rhythm."""
        self.server.failing = True
        self.renewer.start()
        for _ in range(9):
            self.clock.advance(self.renewer.repeater.delays[-1])
        self.assertEqual(list(self.renewer.repeater.delays),
                         [0, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 7.0, 7.0, 7.0])
        self.server.failing = False
        self.clock.advance(7.0)
        self.assertEqual(self.renewer.repeater.delays[-1], 10.0)
        self.server.failing = True
        self.clock.advance(10.0)
        self.assertEqual(self.renewer.repeater.delays[-1], 0.2)

    def test_exception_is_a_failure(self):
        def broken(method, path, body):
            raise ConnectionRefusedError("no")
        self.renewer.api = FakeAPI(broken)
        self.renewer.start()
        self.clock.advance(0)
        self.assertEqual(list(self.renewer.repeater.delays), [0, 0.2])

    def test_existing_lease_is_taken_over(self):
        """After a restart the Lease exists: it is updated, not created."""
        self.server.lease = {"metadata": {"name": "n1", "namespace": "orch-node-lease",
                                          "resourceVersion": "7"},
                             "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}}
        self.renewer.start()
        self.clock.advance(0)
        self.assertEqual(self.server.api.calls(), [("GET", f"{LEASES}/n1"),
                                                   ("PUT", f"{LEASES}/n1")])
        self.assertEqual(self.server.lease["metadata"]["resourceVersion"], "7")
        self.assertEqual(self.server.lease["metadata"]["ownerReferences"][0]["uid"], "u-1")

    def test_conflict_rereads(self):
        self.renewer.start()
        self.clock.advance(0)
        self.server.api.answer = lambda method, path, body: (409, {}) if method == "PUT" else (
            LeaseServer.answer(self.server, method, path, body))
        self.clock.advance(10)
        self.assertIsNone(self.renewer.lease)
        self.assertEqual(self.renewer.repeater.delays[-1], 0.2)

    def test_stop(self):
        self.renewer.start()
        self.clock.advance(0)
        d = self.renewer.stop()
        self.successResultOf(d)
        self.assertEqual(self.clock.getDelayedCalls(), [])


class GatedAPI:
    """Requests that wait until the test answers them, in order."""

    def __init__(self):
        self.pending = []

    def request(self, method, path, body=None, content_type="application/json"):
        answer = Deferred()
        self.pending.append((method, answer))
        return answer


class ConcurrentRenewalTests(SynchronousTestCase):
    def test_renewals_do_not_overlap(self):
        """A renewal asked for while one is under way starts only after it: no create race."""
        api = GatedAPI()
        renewer = LeaseRenewer(Clock(), api, "n1", owner=NODE)
        first = Deferred.fromCoroutine(renewer.renew())
        second = Deferred.fromCoroutine(renewer.renew())
        self.assertEqual([m for m, _ in api.pending], ["GET"])
        api.pending.pop(0)[1].callback((404, {}))
        self.assertEqual([m for m, _ in api.pending], ["POST"])
        lease = {"metadata": {"name": "n1", "resourceVersion": "1"}, "spec": {}}
        api.pending.pop(0)[1].callback((201, lease))
        self.assertTrue(self.successResultOf(first))
        self.assertEqual([m for m, _ in api.pending], ["PUT"])
        api.pending.pop(0)[1].callback((200, lease))
        self.assertTrue(self.successResultOf(second))
