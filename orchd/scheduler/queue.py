# -*- test-case-name: tests.scheduler.test_queue -*-
"""
The pods waiting for a node, as upstream's scheduling queue keeps them.

A pending pod is in one of three places:

  - I{active}: to be tried next, highest C{spec.priority} first, then the
    one waiting longest;
  - I{backoff}: tried and failed, waiting until its backoff has passed:
    1 s after its first attempt, doubling with each attempt up to 10 s;
  - I{unschedulable}: no node fitted it and nothing has changed since;
    it waits for a change in the cluster (a node added or changed, a pod
    deleted: L{move_all}), or for itself to change (L{update}), and at
    most five minutes.

A pod being tried is in none of them. A failure of a pod during whose
attempt the cluster changed goes to backoff rather than to unschedulable,
since the change may have been what it needed (upstream's move request
cycle). Time comes from the clock given, so tests drive it.
"""

import heapq

from twisted.logger import Logger

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 10.0
#: Upstream's C{podMaxInUnschedulablePodsDuration}, and how often it is checked.
MAX_UNSCHEDULABLE = 300.0
FLUSH_INTERVAL = 30.0

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
IN_FLIGHT = "in-flight"


class _Entry:
    __slots__ = ("key", "priority", "attempts", "last_attempt", "since", "where", "seq")

    def __init__(self, key, priority, now):
        self.key = key
        self.priority = priority
        self.attempts = 0
        self.last_attempt = now
        self.since = now
        self.where = None
        self.seq = 0


class SchedulingQueue:
    """
    @param clock: an C{IReactorTime}.
    @param on_ready: called with no argument whenever a pod becomes active.
    """

    log = Logger()

    def __init__(self, clock, on_ready=None, initial_backoff=INITIAL_BACKOFF,
                 max_backoff=MAX_BACKOFF):
        self._clock = clock
        self._on_ready = on_ready or (lambda: None)
        self._initial = initial_backoff
        self._max = max_backoff
        self._entries = {}
        self._active = []
        self._backoff = []
        self._unschedulable = {}
        self._seq = 0
        self._backoff_timer = None
        self._flush_timer = None
        self._stopped = False
        #: Incremented by every L{pop}: the attempt a failure belongs to.
        self.cycle = 0
        self._move_cycle = -1

    # -- what is where ------------------------------------------------------

    def where(self, key):
        """C{active}, C{backoff}, C{unschedulable}, C{in-flight}, or None when not queued."""
        entry = self._entries.get(key)
        return entry.where if entry is not None else None

    def __contains__(self, key):
        return key in self._entries

    def __len__(self):
        return len(self._entries)

    def has_active(self):
        self._drop_stale_active()
        return bool(self._active)

    def backoff_until(self, key):
        """When C{key}'s backoff ends."""
        entry = self._entries[key]
        return entry.last_attempt + self._backoff_duration(entry)

    # -- changes from the informers -----------------------------------------

    def add(self, key, priority=0):
        """A pending pod appeared: try it soon (a known one only takes the new priority)."""
        if self._stopped:
            return
        entry = self._entries.get(key)
        if entry is not None:
            self._reprioritize(entry, priority)
            return
        entry = self._entries[key] = _Entry(key, priority, self._clock.seconds())
        self._activate(entry)

    def update(self, key, priority=0, changed=True):
        """
        A pending pod changed: one waiting as unschedulable is tried again
        when C{changed} (after its backoff).
        """
        entry = self._entries.get(key)
        if entry is None:
            self.add(key, priority)
            return
        self._reprioritize(entry, priority)
        if changed and entry.where == UNSCHEDULABLE:
            self._requeue(entry)

    def delete(self, key):
        """The pod was bound, deleted or is no longer ours: forget it."""
        entry = self._entries.pop(key, None)
        if entry is not None and entry.where == UNSCHEDULABLE:
            del self._unschedulable[key]

    def move_all(self):
        """The cluster changed: every unschedulable pod is tried again (after its backoff)."""
        self._move_cycle = self.cycle
        waiting = [self._entries[key] for key in self._unschedulable]
        self._unschedulable.clear()
        for entry in waiting:
            entry.where = None
            self._requeue(entry)

    # -- the scheduler's side -----------------------------------------------

    def pop(self):
        """
        The next pod to try, as C{(key, cycle)}, or None when none is active.
        It is in flight until L{done}, L{unschedulable} or L{retry}.
        """
        self._drop_stale_active()
        if not self._active:
            return None
        _, _, key = heapq.heappop(self._active)
        entry = self._entries[key]
        entry.where = IN_FLIGHT
        entry.attempts += 1
        entry.last_attempt = self._clock.seconds()
        self.cycle += 1
        return key, self.cycle

    def done(self, key):
        """The pod found its node: forget it."""
        self._entries.pop(key, None)

    def unschedulable(self, key, cycle):
        """No node fitted the pod in attempt C{cycle}; it waits for a change."""
        entry = self._entries.get(key)
        if entry is None or entry.where != IN_FLIGHT:
            return
        if self._move_cycle >= cycle:
            self._to_backoff(entry)
        else:
            entry.where = UNSCHEDULABLE
            entry.since = self._clock.seconds()
            self._unschedulable[key] = entry
            self._arm_flush()

    def retry(self, key):
        """The attempt failed for another reason (binding): try again after the backoff."""
        entry = self._entries.get(key)
        if entry is not None and entry.where == IN_FLIGHT:
            self._to_backoff(entry)

    def stop(self):
        self._stopped = True
        for timer in (self._backoff_timer, self._flush_timer):
            if timer is not None and timer.active():
                timer.cancel()
        self._backoff_timer = self._flush_timer = None

    # -- internals ----------------------------------------------------------

    def _backoff_duration(self, entry):
        if entry.attempts <= 0:
            return 0.0
        return min(self._initial * 2 ** min(entry.attempts - 1, 62), self._max)

    def _next_seq(self):
        self._seq += 1
        return self._seq

    def _activate(self, entry):
        entry.where = ACTIVE
        entry.seq = self._next_seq()
        entry.since = self._clock.seconds()
        heapq.heappush(self._active, (-entry.priority, entry.seq, entry.key))
        self._on_ready()

    def _reprioritize(self, entry, priority):
        if priority == entry.priority:
            return
        entry.priority = priority
        if entry.where == ACTIVE:
            entry.seq = self._next_seq()
            heapq.heappush(self._active, (-priority, entry.seq, entry.key))

    def _drop_stale_active(self):
        active, entries = self._active, self._entries
        while active:
            _, seq, key = active[0]
            entry = entries.get(key)
            if entry is not None and entry.where == ACTIVE and entry.seq == seq:
                return
            heapq.heappop(active)

    def _requeue(self, entry):
        """To active, or to backoff while the pod's backoff lasts."""
        if entry.where == UNSCHEDULABLE:
            self._unschedulable.pop(entry.key, None)
        if self.backoff_until(entry.key) > self._clock.seconds():
            self._to_backoff(entry)
        else:
            self._activate(entry)

    def _to_backoff(self, entry):
        entry.where = BACKOFF
        entry.seq = self._next_seq()
        until = entry.last_attempt + self._backoff_duration(entry)
        heapq.heappush(self._backoff, (until, entry.seq, entry.key))
        self._arm_backoff()

    def _arm_backoff(self):
        if self._stopped:
            return
        while self._backoff:
            until, seq, key = self._backoff[0]
            entry = self._entries.get(key)
            if entry is not None and entry.where == BACKOFF and entry.seq == seq:
                break
            heapq.heappop(self._backoff)
        if not self._backoff:
            return
        delay = max(0.0, self._backoff[0][0] - self._clock.seconds())
        timer = self._backoff_timer
        if timer is not None and timer.active():
            if timer.getTime() <= self._clock.seconds() + delay:
                return
            timer.cancel()
        self._backoff_timer = self._clock.callLater(delay, self._flush_backoff)

    def _flush_backoff(self):
        self._backoff_timer = None
        now = self._clock.seconds()
        while self._backoff and self._backoff[0][0] <= now:
            _, seq, key = heapq.heappop(self._backoff)
            entry = self._entries.get(key)
            if entry is not None and entry.where == BACKOFF and entry.seq == seq:
                self._activate(entry)
        self._arm_backoff()

    def _arm_flush(self):
        if self._stopped or (self._flush_timer is not None and self._flush_timer.active()):
            return
        self._flush_timer = self._clock.callLater(FLUSH_INTERVAL, self._flush_unschedulable)

    def _flush_unschedulable(self):
        """Pods unschedulable for too long are tried again anyway."""
        self._flush_timer = None
        now = self._clock.seconds()
        stale = [entry for entry in self._unschedulable.values()
                 if now - entry.since >= MAX_UNSCHEDULABLE]
        for entry in stale:
            self._requeue(entry)
        if self._unschedulable:
            self._arm_flush()
