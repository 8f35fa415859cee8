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

    def test_scheduled(self):
        """A key asked for later is scheduled until its time comes."""
        self.assertFalse(self.queue.scheduled("k"))
        self.queue.add_after("k", 5)
        self.assertTrue(self.queue.scheduled("k"))
        self.clock.advance(5)
        self.assertFalse(self.queue.scheduled("k"))
        self.assertEqual(self.calls, ["k"])

    def test_later_keys_share_one_timer(self):
        """Keys asked for later come in time order under one reactor timer."""
        self.queue = WorkQueue(self.work_at_once, self.clock)
        for key, delay in [("c", 3), ("a", 1), ("b", 2), ("d", 3)]:
            self.queue.add_after(key, delay)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.assertEqual(self.queue.delayed(), {"a", "b", "c", "d"})
        self.clock.advance(1)
        self.assertEqual(self.calls, ["a"])
        self.clock.advance(1)
        self.assertEqual(self.calls, ["a", "b"])
        self.clock.advance(1)
        self.assertEqual(self.calls, ["a", "b", "c", "d"])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_earlier_request_wins(self):
        """A key asked for sooner comes sooner, once; asked for later, it keeps its time."""
        self.queue = WorkQueue(self.work_at_once, self.clock)
        self.queue.add_after("k", 10)
        self.queue.add_after("k", 20)
        self.queue.add_after("k", 2)
        self.clock.advance(2)
        self.assertEqual(self.calls, ["k"])
        self.assertFalse(self.queue.scheduled("k"))
        self.clock.advance(20)
        self.assertEqual(self.calls, ["k"])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_work_asking_for_later_keys_sets_one_timer(self):
        """Keys due together whose work asks for them again leave one timer, at the earliest."""
        asked = {"a": 5, "b": 3, "c": 4}

        async def again(key):
            self.calls.append(key)
            self.queue.add_after(key, asked[key])
        self.queue = WorkQueue(again, self.clock, concurrency=10)
        for key in asked:
            self.queue.add_after(key, 1)
        made, call_later = [], self.clock.callLater
        self.clock.callLater = lambda *args: made.append(args) or call_later(*args)
        self.clock.advance(1)
        self.assertEqual(sorted(self.calls), ["a", "b", "c"])
        self.assertEqual(len(made), 1)
        [wake] = self.clock.getDelayedCalls()
        self.assertEqual(wake.getTime(), 4)

    def test_stop_cancels_later_keys(self):
        """A stopped queue leaves no timer and takes no later key."""
        self.queue.add_after("k", 5)
        self.queue.stop()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(self.queue.delayed(), set())
        self.queue.add_after("k", 1)
        self.clock.advance(10)
        self.assertEqual(self.calls, [])

    async def work_at_once(self, key):
        self.calls.append(key)

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

    def test_work_done_at_once_does_not_recurse(self):
        """Thousands of keys whose work ends at once are worked in a loop, not a recursion."""
        done, first = [], Deferred()

        async def work(key):
            if key == "first":
                await first
            done.append(key)

        queue = WorkQueue(work, self.clock, concurrency=1)
        queue.add("first")
        for i in range(20_000):
            queue.add(f"k{i}")          # waiting behind the first
        first.callback(None)
        self.assertEqual(len(done), 20_001)
        self.assertEqual(self.flushLoggedErrors(), [])


class WorkQueueMetricsTests(SynchronousTestCase):
    def setUp(self):
        from orchd.controllers.queuemetrics import WorkQueueMetrics
        self.clock = Clock()
        self.pending = []
        self.metrics = WorkQueueMetrics()
        self.queue = WorkQueue(self.work, self.clock, base_delay=1.0, concurrency=1,
                               metrics=self.metrics.for_queue("deployment", self.clock))

    async def work(self, key):
        d = Deferred()
        self.pending.append(d)
        await d

    def value(self, family):
        return self.metrics.registry.get(family).value("deployment")

    def test_adds_depth_and_durations(self):
        """Adds, depth, time waiting and time worked, as client-go's workqueue reports them."""
        self.queue.add("a")          # taken at once
        self.queue.add("b")          # waits behind a (one worker)
        self.queue.add("b")          # already waiting: not another add
        self.assertEqual((self.value("workqueue_adds_total"), self.value("workqueue_depth")),
                         (2, 1))
        self.clock.advance(2)
        scrape = self.metrics.registry.expose().decode()
        self.assertIn('workqueue_unfinished_work_seconds{name="deployment"} 2\n', scrape)
        self.assertIn('workqueue_longest_running_processor_seconds{name="deployment"} 2\n',
                      scrape)
        self.queue.add("a")          # asked for again while worked on: counted, waits
        self.assertEqual(self.value("workqueue_depth"), 2)
        self.pending.pop().callback(None)
        work = self.metrics.work.child("deployment")
        waits = self.metrics.latency.child("deployment")
        self.assertEqual((work.count, work.sum), (1, 2.0))
        self.assertEqual((waits.count, waits.sum), (2, 2.0))
        self.assertEqual(self.value("workqueue_depth"), 1)
        self.pending.pop().callback(None)
        self.pending.pop().callback(None)
        self.assertEqual((self.value("workqueue_adds_total"), self.value("workqueue_depth")),
                         (3, 0))

    def test_retries(self):
        """A failed key counts a retry."""
        self.queue.add("k")
        self.pending.pop().errback(RuntimeError("boom"))
        self.flushLoggedErrors(RuntimeError)
        self.assertEqual(self.value("workqueue_retries_total"), 1)

    def test_stop_empties_depth(self):
        """A stopped queue reports nothing waiting."""
        self.queue.add("a")
        self.queue.add("b")
        self.queue.stop()
        self.assertEqual(self.value("workqueue_depth"), 0)
