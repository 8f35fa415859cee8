"""Leader election over the Lease C{orch-system/orch-controller-manager}."""

import datetime
import re

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.controllers.leaderelection import (
    LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD, LeaderElector, default_identity,
)
from tests.support import APIHarness

LEASE = "/apis/coordination.orch.io/v1/namespaces/orch-system/leases/orch-controller-manager"
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def seconds(micro_time):
    moment = datetime.datetime.strptime(micro_time, "%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.replace(tzinfo=datetime.timezone.utc).timestamp()


class Events:
    """Records an elector's callbacks."""

    def __init__(self):
        self.log = []

    def started(self):
        self.log.append("started")

    def stopped(self):
        self.log.append("stopped")


class ElectionTests(SynchronousTestCase):

    def setUp(self):
        self.api = APIHarness()
        self.clock = Clock()
        self.clock.advance(1_700_000_000)

    def elector(self, identity, api=None, **kwargs):
        events = Events()
        elector = LeaderElector((api or self.api).catalog, self.clock, identity,
                                on_started_leading=events.started,
                                on_stopped_leading=events.stopped, **kwargs)
        elector.events = events
        return elector

    def lease(self):
        code, body, _ = self.api.call("GET", LEASE)
        return body if code == 200 else None

    def tick(self, seconds, step=0.25):
        """Advance in small steps (L{Clock.advance} runs every due call at the end time)."""
        for _ in range(round(seconds / step)):
            self.clock.advance(step)

    def advance_until(self, predicate, limit, step=0.5):
        """Advance the clock until C{predicate()}; the seconds it took."""
        start = self.clock.seconds()
        while not predicate():
            self.assertLess(self.clock.seconds() - start, limit, "gave up waiting")
            self.clock.advance(step)
        return self.clock.seconds() - start

    def test_defaults_and_identity(self):
        """Lease 12 s, renew deadline 8 s, retry 2 s; identities are <hostname>_<uuid4>."""
        self.assertEqual((LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD), (12, 8, 2))
        self.assertRegex(default_identity(), r"^.+_[0-9a-f-]{36}$")
        self.assertNotEqual(default_identity(), default_identity())
        with self.assertRaises(ValueError):
            self.elector("a", lease_duration=8, renew_deadline=8)

    def test_first_candidate_acquires(self):
        """With no Lease, the first attempt creates it and leads."""
        a = self.elector("a")
        a.start()
        self.assertTrue(a.leading)
        self.assertEqual(a.events.log, ["started"])
        self.assertTrue(self.successResultOf(a.settled))
        spec = self.lease()["spec"]
        self.assertEqual((spec["holderIdentity"], spec["leaseDurationSeconds"],
                          spec["leaseTransitions"]), ("a", 12, 0))
        self.assertRegex(spec["renewTime"], MICRO)
        self.assertEqual(spec["acquireTime"], spec["renewTime"])

    def test_second_candidate_waits(self):
        """A valid Lease held by another keeps a candidate following."""
        a, b = self.elector("a"), self.elector("b")
        a.start()
        b.start()
        self.assertFalse(b.leading)
        self.assertFalse(self.successResultOf(b.settled))
        self.assertEqual(b.leader, "a")
        for _ in range(60):
            self.tick(0.5)
        self.assertTrue(a.leading)
        self.assertEqual((a.events.log, b.events.log), (["started"], []))
        self.assertEqual(self.lease()["spec"]["holderIdentity"], "a")

    def test_leader_renews_every_retry_period(self):
        """Each retry period writes a new renewTime; acquireTime stays."""
        a = self.elector("a")
        a.start()
        first = self.lease()
        renewals = set()
        for _ in range(5):
            self.tick(RETRY_PERIOD)
            spec = self.lease()["spec"]
            renewals.add(spec["renewTime"])
            self.assertEqual(spec["acquireTime"], first["spec"]["acquireTime"])
            self.assertEqual(spec["leaseTransitions"], 0)
        self.assertEqual(len(renewals), 5)
        self.assertGreater(int(self.lease()["metadata"]["resourceVersion"]),
                           int(first["metadata"]["resourceVersion"]))

    def test_killed_leader_replaced_within_15s(self):
        """
        A leader that stops renewing (killed: no release) is replaced once
        the lease duration has passed since another candidate saw its last
        renewal: at least 12 s and at most 14 s after that renewal, whatever
        the phase between the two candidates' attempts.
        """
        for offset in (0.0, 0.5, 1.0, 1.5, 1.75):
            self.api = APIHarness()
            a, b = self.elector("a"), self.elector("b")
            a.start()
            self.tick(offset)
            b.start()
            self.tick(7)
            self.successResultOf(a.stop(release=False))
            spec = self.lease()["spec"]
            self.assertEqual(spec["holderIdentity"], "a")
            last_renewal = seconds(spec["renewTime"])
            self.advance_until(lambda: b.leading, 20, step=0.25)
            since_renewal = self.clock.seconds() - last_renewal
            self.assertGreaterEqual(since_renewal, LEASE_DURATION, offset)
            self.assertLessEqual(since_renewal, LEASE_DURATION + RETRY_PERIOD, offset)
            spec = self.lease()["spec"]
            self.assertEqual((spec["holderIdentity"], spec["leaseTransitions"]), ("b", 1))

    def test_graceful_stop_releases(self):
        """Stopping releases the Lease, so another candidate takes it on its next attempt."""
        a, b = self.elector("a"), self.elector("b")
        a.start()
        self.tick(1)
        b.start()
        self.successResultOf(a.stop())
        self.assertEqual(a.events.log, ["started", "stopped"])
        spec = self.lease()["spec"]
        self.assertEqual((spec["holderIdentity"], spec["leaseDurationSeconds"]), ("", 1))
        self.tick(RETRY_PERIOD)
        self.assertTrue(b.leading)
        self.assertEqual(self.lease()["spec"]["leaseTransitions"], 1)

    def test_failing_renewals_step_down(self):
        """
        A leader whose renewals fail (store errors, then CAS conflicts) steps
        down once the renew deadline has passed since its last renewal began,
        before the Lease could expire for anyone else.
        """
        for error in (RuntimeError("store unavailable"),
                      StatusError.conflict("leases", "coordination.orch.io", "x", "stale")):
            self.api = APIHarness()
            a = self.elector("a")
            a.start()
            self.tick(4)        # the last good renewal, at 4 s

            def failing(*args, error=error, **kwargs):
                raise error
            self.patch(a._leases, "update", failing)
            self.tick(RENEW_DEADLINE - 0.5)
            self.assertTrue(a.leading)
            self.tick(0.5)
            self.assertFalse(a.leading)
            self.assertEqual(a.events.log, ["started", "stopped"])

    def test_hung_renewal_steps_down(self):
        """A renewal that never answers does not keep a leader leading."""
        a = self.elector("a")
        a.start()
        self.patch(a._leases, "find", lambda ctx, name: Deferred())
        self.tick(RENEW_DEADLINE)
        self.assertFalse(a.leading)
        self.assertEqual(a.events.log, ["started", "stopped"])
        stopping = a.stop()
        self.assertNoResult(stopping)       # waits for the attempt, up to the deadline
        self.tick(RENEW_DEADLINE)
        self.successResultOf(stopping)

    def test_leader_seeing_another_holder_steps_down(self):
        """A leader that reads another valid holder stops at once."""
        a = self.elector("a")
        a.start()
        lease = self.lease()
        lease["spec"]["holderIdentity"] = "intruder"
        self.assertEqual(self.api.call("PUT", LEASE, lease)[0], 200)
        self.tick(RETRY_PERIOD)
        self.assertFalse(a.leading)
        self.assertEqual(a.leader, "intruder")

    def test_two_candidates_racing_one_wins(self):
        """Both read an expired Lease; the compare-and-swap lets only the first write win."""
        self.api.call("POST", LEASE.rsplit("/", 1)[0], {
            "metadata": {"name": "orch-controller-manager"},
            "spec": {"holderIdentity": "dead", "leaseDurationSeconds": 12}})
        a, b = self.elector("a", sole=True), self.elector("b", sole=True)
        find = b._leases.find

        async def find_then_a_wins(ctx, name):
            lease = await find(ctx, name)
            self.patch(b._leases, "find", find)
            a.start()                   # a writes between b's read and b's write
            return lease
        self.patch(b._leases, "find", find_then_a_wins)
        b.start()
        self.assertTrue(a.leading)
        self.assertFalse(b.leading)
        self.assertEqual(self.lease()["spec"]["holderIdentity"], "a")

    def test_sole_holder_keeps_leading_through_late_renewals(self):
        """With a store of its own, a renewal late past the deadline keeps the controllers."""
        a = self.elector("a", sole=True)
        find, late = a._leases.find, []

        def slow_find(ctx, name):
            answer = Deferred()
            late.append((answer, ctx, name))
            return answer
        a.start()
        self.tick(4)
        self.patch(a._leases, "find", slow_find)
        self.tick(RENEW_DEADLINE + 1)          # the reactor was busy elsewhere
        self.assertTrue(a.leading)
        self.patch(a._leases, "find", find)
        answer, ctx, name = late.pop()
        Deferred.fromCoroutine(find(ctx, name)).chainDeferred(answer)   # late, but through
        self.tick(RETRY_PERIOD)
        self.assertTrue(a.leading)
        self.assertEqual(a.events.log, ["started"])
        self.assertEqual(self.lease()["spec"]["holderIdentity"], "a")

    def test_sole_store_takes_a_dead_predecessors_lease(self):
        """With a store locked to this process, an old holder's Lease is taken at once."""
        a = self.elector("a")
        a.start()
        self.successResultOf(a.stop(release=False))
        b = self.elector("b", sole=True)
        b.start()
        self.assertTrue(b.leading)
