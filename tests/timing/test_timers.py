"""Many timers on one reactor timer."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from orchd.timing.timers import Deadlines, TimerHeap, deadlines_of, shared_timers


class DeadlinesTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.deadlines = Deadlines(self.clock, resolution=1.0)
        self.expired = []

    def expire(self, name):
        def expire():
            self.expired.append((name, self.clock.seconds()))
        return expire

    def test_many_on_one_timer(self):
        """Deadlines of many operations expire in their sweep, on one timer."""
        a, b, c = self.expire("a"), self.expire("b"), self.expire("c")
        self.deadlines.set(a, 2)
        self.deadlines.set(b, 2.5)
        self.deadlines.set(c, 5)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.clock.advance(2)
        self.assertEqual(self.expired, [("a", 2)])
        self.clock.advance(1)
        self.assertEqual(self.expired, [("a", 2), ("b", 3)])
        self.deadlines.clear(c)
        self.clock.advance(10)
        self.assertEqual(len(self.expired), 2)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_set_again_moves_on(self):
        """A deadline set again replaces the earlier one."""
        a = self.expire("a")
        self.deadlines.set(a, 3)
        self.clock.advance(2)
        self.deadlines.set(a, 3)
        self.clock.advance(2)
        self.assertEqual(self.expired, [])
        self.clock.advance(1)
        self.assertEqual(self.expired, [("a", 5)])

    def test_no_timer_when_idle(self):
        """With no deadline set the timer stops; a new deadline starts it again."""
        a = self.expire("a")
        self.deadlines.set(a, 1)
        self.deadlines.clear(a)
        self.clock.advance(1)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.deadlines.set(a, 1)
        self.clock.advance(1)
        self.assertEqual(self.expired, [("a", 2)])

    def test_expire_sets_another(self):
        """An expiry may set a deadline (a retry): it is kept for a later sweep."""
        def first():
            self.expired.append("first")
            self.deadlines.set(self.expire("second"), 1)
        self.deadlines.set(first, 1)
        self.clock.advance(1)
        self.clock.advance(1)
        self.assertEqual(self.expired, ["first", ("second", 2)])

    def test_shared_per_clock(self):
        """Users of one clock share one L{Deadlines}; another clock has its own."""
        self.assertIs(deadlines_of(self.clock), deadlines_of(self.clock))
        self.assertIsNot(deadlines_of(self.clock), deadlines_of(Clock()))


class TimerHeapTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.fired = []
        self.timers = TimerHeap(self.clock, lambda key: self.fired.append(
            (key, self.clock.seconds())))

    def test_in_time_order_on_one_call(self):
        """Keys fire at their times, in order, under one reactor call."""
        for key, delay in (("c", 3), ("a", 1), ("b", 2), ("d", 3)):
            self.timers.set(key, delay)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.assertEqual(self.timers.keys(), {"a", "b", "c", "d"})
        self.clock.pump([1, 1, 1])
        self.assertEqual(self.fired, [("a", 1), ("b", 2), ("c", 3), ("d", 3)])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_set_again_and_cancel(self):
        """A key set again fires once, at its new time; a cancelled key does not fire."""
        self.timers.set("a", 5)
        self.timers.set("b", 1)
        self.timers.set("a", 2)
        self.timers.cancel("b")
        self.assertIsNone(self.timers.when("b"))
        self.assertEqual(self.timers.when("a"), 2)
        self.clock.pump([1] * 10)
        self.assertEqual(self.fired, [("a", 2)])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_fired_key_set_again(self):
        """A key set again as it fires (a repeating timer) makes no extra reactor call."""
        made, call_later = [], self.clock.callLater
        self.clock.callLater = lambda *args: made.append(args) or call_later(*args)
        timers = TimerHeap(self.clock, lambda key: (self.fired.append(key),
                                                    timers.set(key, 10)))
        timers.set("a", 10)
        timers.set("b", 10)
        self.clock.pump([10, 10])
        self.assertEqual(self.fired, ["a", "b", "a", "b"])
        self.assertEqual(len(made), 3)

    def test_all_cancelled_leaves_no_call(self):
        """With every key cancelled no reactor call is left waiting."""
        self.timers.set("a", 1)
        self.timers.set("b", 2)
        self.timers.cancel("a")
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.timers.cancel("b")
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_stop(self):
        """A stopped heap leaves no call and fires nothing."""
        self.timers.set("a", 1)
        self.timers.stop()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.clock.advance(5)
        self.assertEqual(self.fired, [])

    def test_shared_heap_calls_its_keys(self):
        """The heap shared per clock calls each key; another clock has its own."""
        timers = shared_timers(self.clock)
        self.assertIs(timers, shared_timers(self.clock))
        self.assertIsNot(timers, shared_timers(Clock()))
        timers.set(lambda: self.fired.append("called"), 1)
        self.clock.advance(1)
        self.assertEqual(self.fired, ["called"])


class DeadlinesIdleTests(SynchronousTestCase):
    def test_idle_stops_the_sweep(self):
        """idle() cancels the sweep when nothing is due, and only then."""
        clock = Clock()
        deadlines = Deadlines(clock)
        first, second = (lambda: None), (lambda: None)
        deadlines.set(first, 5)
        deadlines.set(second, 5)
        deadlines.clear(first)
        deadlines.idle()
        self.assertEqual(len(clock.getDelayedCalls()), 1)
        deadlines.clear(second)
        deadlines.idle()
        self.assertEqual(clock.getDelayedCalls(), [])
