"""The scheduling queue: order, backoff 1 s doubling to 10 s, and waiting for changes."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.scheduler.queue import (
    ACTIVE, BACKOFF, IN_FLIGHT, UNSCHEDULABLE, SchedulingQueue,
)


class SchedulingQueueTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.woken = []
        self.queue = SchedulingQueue(self.clock, on_ready=lambda: self.woken.append(True))
        self.addCleanup(self.queue.stop)

    def pop_all(self):
        keys = []
        while (item := self.queue.pop()) is not None:
            keys.append(item[0])
        return keys

    def fail(self, key):
        """Pop C{key} and report it unschedulable; the attempt's cycle."""
        popped, cycle = self.queue.pop()
        self.assertEqual(popped, key)
        self.queue.unschedulable(key, cycle)
        return cycle

    def test_priority_then_age(self):
        """Higher priority first, then the pod waiting longest; adding wakes the scheduler."""
        self.queue.add("a", 0)
        self.clock.advance(1)
        self.queue.add("b", 10)
        self.queue.add("c", 0)
        self.queue.add("d", 10)
        self.assertEqual(self.pop_all(), ["b", "d", "a", "c"])
        self.assertEqual(len(self.woken), 4)

    def test_priority_change(self):
        """A pod whose priority rises moves ahead."""
        self.queue.add("a", 0)
        self.queue.add("b", 0)
        self.queue.add("b", 5)
        self.assertEqual(self.pop_all(), ["b", "a"])

    def test_in_flight_until_told(self):
        """A popped pod is in flight; done forgets it."""
        self.queue.add("a")
        self.queue.pop()
        self.assertEqual(self.queue.where("a"), IN_FLIGHT)
        self.queue.done("a")
        self.assertNotIn("a", self.queue)

    def test_unschedulable_waits_for_a_change(self):
        """An unschedulable pod stays put until the cluster changes, then after its backoff."""
        self.queue.add("a")
        self.fail("a")
        self.assertEqual(self.queue.where("a"), UNSCHEDULABLE)
        self.clock.advance(60)
        self.assertIsNone(self.queue.pop())
        self.queue.move_all()
        self.assertEqual(self.queue.where("a"), ACTIVE)

    def test_change_during_backoff(self):
        """A change within the pod's backoff sends it to backoff, active once that passes."""
        self.queue.add("a")
        self.fail("a")
        self.clock.advance(0.5)
        self.queue.move_all()
        self.assertEqual(self.queue.where("a"), BACKOFF)
        self.clock.advance(0.4)
        self.assertEqual(self.queue.where("a"), BACKOFF)
        self.clock.advance(0.1)
        self.assertEqual(self.queue.where("a"), ACTIVE)

    def test_backoff_doubles_to_ten_seconds(self):
        """Backoff is 1 s after the first attempt, then 2, 4, 8 and at most 10 s."""
        self.queue.add("a")
        waits = []
        for _ in range(6):
            started = self.clock.seconds()
            popped, cycle = self.queue.pop()
            self.queue.retry(popped)
            while self.queue.where("a") != ACTIVE:
                self.clock.advance(0.25)
            waits.append(self.clock.seconds() - started)
        self.assertEqual(waits, [1, 2, 4, 8, 10, 10])

    def test_change_during_attempt(self):
        """A pod failing after a change it may not have seen goes to backoff, not to wait."""
        self.queue.add("a")
        popped, cycle = self.queue.pop()
        self.queue.move_all()
        self.queue.unschedulable("a", cycle)
        self.assertEqual(self.queue.where("a"), BACKOFF)
        self.clock.advance(1)
        self.assertEqual(self.queue.where("a"), ACTIVE)

    def test_update_of_the_pod(self):
        """A change of the unschedulable pod itself brings it back; an unchanged update does not."""
        self.queue.add("a")
        self.fail("a")
        self.clock.advance(2)
        self.queue.update("a", changed=False)
        self.assertEqual(self.queue.where("a"), UNSCHEDULABLE)
        self.queue.update("a", changed=True)
        self.assertEqual(self.queue.where("a"), ACTIVE)

    def test_delete(self):
        """A deleted pod leaves whichever place it was in, and its timers do nothing."""
        self.queue.add("a")
        self.queue.add("b")
        self.queue.pop()
        self.queue.retry("a")
        self.queue.delete("a")
        self.queue.delete("b")
        self.clock.advance(10)
        self.assertIsNone(self.queue.pop())
        self.assertEqual(len(self.queue), 0)

    def test_flushed_after_five_minutes(self):
        """An unschedulable pod is tried again after five minutes without any change."""
        self.queue.add("a")
        self.fail("a")
        self.clock.advance(270)
        self.assertEqual(self.queue.where("a"), UNSCHEDULABLE)
        self.clock.advance(30)
        self.assertEqual(self.queue.where("a"), ACTIVE)

    def test_stop(self):
        """After stop, nothing is added and no timer is left."""
        self.queue.add("a")
        self.queue.pop()
        self.queue.retry("a")
        self.queue.stop()
        self.queue.add("b")
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertNotIn("b", self.queue)
