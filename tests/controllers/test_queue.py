"""The work queue: retries after failures, but not once stopped."""

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.errors import StatusError
from orchd.controllers.queue import WorkQueue


class WorkQueueTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.calls = []
        self.pending = []
        self.queue = WorkQueue(self.work, self.clock, base_delay=1.0)

    async def work(self, key):
        self.calls.append(key)
        d = Deferred()
        self.pending.append(d)
        await d

    def test_failure_retried(self):
        """A failed key comes back after the delay; the failure is logged."""
        self.queue.add("k")
        self.pending.pop().errback(RuntimeError("boom"))
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.clock.advance(1)
        self.assertEqual(self.calls, ["k", "k"])

    def test_failure_after_stop_dropped(self):
        """Work that fails once the queue is stopped is neither retried nor logged as an error."""
        self.queue.add("k")
        self.queue.stop()
        self.pending.pop().errback(RuntimeError("store closed"))
        self.assertEqual(self.flushLoggedErrors(RuntimeError), [])
        self.clock.advance(60)
        self.assertEqual(self.calls, ["k"])

    def test_conflict_retried_without_an_error(self):
        """A 409 (another writer came first) is retried after the delay and not logged as an error."""
        self.queue.add("k")
        self.pending.pop().errback(StatusError.conflict("pods", "", "p", "changed"))
        self.assertEqual(self.flushLoggedErrors(StatusError), [])
        self.clock.advance(1)
        self.assertEqual(self.calls, ["k", "k"])
