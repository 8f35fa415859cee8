# -*- test-case-name: tests.timing.test_timers -*-
"""
Many timers on one reactor timer.

A DelayedCall is half a dozen objects the garbage collector tracks (the
call, its attributes, its bound methods). Made by the thousand a second --
a timeout per request, a renewal per node every 10 s, a recheck per node
per grace period -- and living seconds, they outlive the collector's young
generation and are walked again and again in the older ones (a call
cancelled early stays in the reactor's heap until it is due). Here a
timer is a number in a dict and an entry in a heap of plain tuples, under
one DelayedCall:

  - L{TimerHeap}: keys each due at a time, fired in time order;
  - L{Deadlines}: timeouts, swept every L{RESOLUTION} seconds (honoured up
    to that much late), for operations that mostly end in time.
"""

import heapq
from itertools import count
from weakref import WeakKeyDictionary

#: Seconds between two sweeps (the most a timeout runs over).
RESOLUTION = 1.0

#: The timers shared by every user of a clock (L{shared_timers}, L{deadlines_of}).
_SHARED_HEAPS = WeakKeyDictionary()
_SHARED_DEADLINES = WeakKeyDictionary()


class TimerHeap:
    """
    Calls C{fire(key)} for each key whose time has come, in time order.

    @param clock: an C{IReactorTime}.
    """

    def __init__(self, clock, fire):
        self._clock = clock
        self._fire = fire
        self._due = {}              # key -> when
        self._heap = []             # (when, order, key); entries no longer due are skipped
        self._order = count()
        self._wake = None           # the DelayedCall for the heap's earliest entry
        self._firing = False

    def set(self, key, delay):
        """Fire C{key} C{delay} seconds from now (instead of when set before)."""
        when = self._clock.seconds() + delay
        self._due[key] = when
        heapq.heappush(self._heap, (when, next(self._order), key))
        self._set_wake()

    def cancel(self, key):
        """Do not fire C{key} (its entry in the heap is skipped when it comes)."""
        self._due.pop(key, None)
        if not self._due and self._wake is not None:
            # Nothing is due: no call is left waiting (a clean stop).
            self._wake.cancel()
            self._wake = None
            self._heap.clear()

    def when(self, key):
        """When C{key} is to fire, or None."""
        return self._due.get(key)

    def keys(self):
        """The keys set to fire."""
        return set(self._due)

    def stop(self):
        """Fire nothing more."""
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        self._due.clear()
        self._heap.clear()

    def _fire_due(self):
        self._wake = None
        # The call set for the earliest entry may come a hair early (float
        # sums): what is due within a microsecond fires now. Keys fired may
        # be set again at once: the call is set once, at the end.
        now = self._clock.seconds() + 1e-6
        heap, due = self._heap, self._due
        self._firing = True
        try:
            while heap and heap[0][0] <= now:
                when, _, key = heapq.heappop(heap)
                if due.get(key) == when:
                    del due[key]
                    self._fire(key)
        finally:
            self._firing = False
        self._set_wake()

    def _set_wake(self):
        """
        The call at the earliest entry due. Only a new earliest entry moves
        it: a cancelled call waits in the reactor's heap, and moving one
        sooner searches that heap.
        """
        if self._firing:
            return
        heap, due = self._heap, self._due
        while heap and due.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        if not heap:
            return
        first = heap[0][0]
        wake = self._wake
        if wake is not None:
            if wake.getTime() <= first:
                return
            wake.cancel()
        self._wake = self._clock.callLater(max(0.0, first - self._clock.seconds()),
                                           self._fire_due)


def shared_timers(clock):
    """
    The L{TimerHeap} every user of C{clock} shares: its keys are callables,
    each called when its time comes.
    """
    found = _SHARED_HEAPS.get(clock)
    if found is None:
        found = _SHARED_HEAPS[clock] = TimerHeap(clock, _call)
    return found


def _call(key):
    key()


class Deadlines:
    """
    Calls C{expire()} for each C{expire} whose deadline has passed.

    @param clock: an C{IReactorTime}.
    """

    def __init__(self, clock, resolution=RESOLUTION):
        self._clock = clock
        self._resolution = resolution
        self._due = {}          # expire -> when
        self._sweeping = None

    def set(self, expire, timeout):
        """
        Call C{expire()} once C{timeout} seconds have passed, unless cleared
        first (a later C{set} of the same C{expire} replaces this one).
        """
        self._due[expire] = self._clock.seconds() + timeout
        if self._sweeping is None:
            self._sweeping = self._clock.callLater(self._resolution, self._sweep)

    def clear(self, expire):
        """Forget C{expire}'s deadline (its operation ended in time)."""
        self._due.pop(expire, None)

    def idle(self):
        """
        Stop sweeping now if no deadline is set (a user closing down: left
        to itself, the sweep stops at its next turn).
        """
        if not self._due and self._sweeping is not None:
            self._sweeping.cancel()
            self._sweeping = None

    def _sweep(self):
        now = self._clock.seconds()
        passed = [expire for expire, when in self._due.items() if when <= now]
        for expire in passed:
            del self._due[expire]
        self._sweeping = (self._clock.callLater(self._resolution, self._sweep)
                          if self._due else None)
        for expire in passed:
            expire()


def deadlines_of(clock):
    """The L{Deadlines} every user of C{clock} shares (one timer per reactor)."""
    found = _SHARED_DEADLINES.get(clock)
    if found is None:
        found = _SHARED_DEADLINES[clock] = Deadlines(clock)
    return found
