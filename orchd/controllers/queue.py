# -*- test-case-name: tests.controllers.test_queue -*-
"""
A work queue of keys for controllers: each key is worked on by one worker
at a time, repeated requests for a waiting key collapse into one, and a
failed key comes back after a delay that doubles up to a bound.

Keys asked for later wait in a L{TimerHeap} (one reactor timer): the node
lifecycle controller asks for every node once per grace period.
"""

from collections import deque

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from orchd.api.errors import StatusError
from orchd.timing.timers import TimerHeap


class WorkQueue:
    """
    Runs C{work(key)} (an async function) for queued keys, one at a time per key.

    @param clock: an C{IReactorTime} for retries.
    @param metrics: the L{orchd.controllers.queuemetrics.QueueRecorder} that
        counts this queue's adds, depth, waits, work and retries, if any.
    """

    log = Logger()

    def __init__(self, work, clock, base_delay=0.2, max_delay=30.0, concurrency=4,
                 metrics=None):
        self._work = work
        self._metrics = metrics
        self._clock = clock
        self._base = base_delay
        self._max = max_delay
        self._concurrency = concurrency
        self._waiting = deque()
        self._queued = set()
        self._busy = set()
        self._dirty = set()
        self._failures = {}
        self._later = TimerHeap(clock, self.add)
        self._running = 0
        self._stopped = False
        self._pumping = False

    def add(self, key):
        """Ask for C{key} to be worked on (again) as soon as possible."""
        if self._stopped:
            return
        if key in self._busy:
            if key not in self._dirty:
                self._dirty.add(key)
                if self._metrics is not None:
                    self._metrics.added(key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._waiting.append(key)
            if self._metrics is not None:
                self._metrics.added(key)
        self._pump()

    def add_after(self, key, delay):
        """Ask for C{key} after C{delay} seconds (an earlier request wins)."""
        if self._stopped:
            return
        due = self._later.when(key)
        if due is not None and due <= self._clock.seconds() + delay:
            return
        self._later.set(key, delay)

    def scheduled(self, key):
        """Whether C{key} is asked for later (L{add_after}) and not yet due."""
        return self._later.when(key) is not None

    def delayed(self):
        """The keys asked for later, not yet due."""
        return self._later.keys()

    def _pump(self):
        if self._pumping:
            return          # work that finished at once: the loop below goes on
        self._pumping = True
        try:
            while self._waiting and self._running < self._concurrency and not self._stopped:
                key = self._waiting.popleft()
                self._queued.discard(key)
                if self._metrics is not None:
                    self._metrics.picked(key)
                self._busy.add(key)
                self._running += 1
                d = Deferred.fromCoroutine(self._work(key))
                d.addCallbacks(self._succeeded, self._failed, callbackArgs=(key,),
                               errbackArgs=(key,))
                d.addBoth(self._finished, key)
        finally:
            self._pumping = False

    def _succeeded(self, _, key):
        self._failures.pop(key, None)

    def _failed(self, failure, key):
        if self._stopped:
            # Work caught by the shutdown (its store closing, say) is dropped.
            self.log.info("Work on {key} ended with the queue: {error}", key=key,
                          error=failure.getErrorMessage())
            return
        count = self._failures.get(key, 0) + 1
        self._failures[key] = count
        delay = min(self._base * 2 ** (count - 1), self._max)
        if self._metrics is not None:
            self._metrics.retried()
        if failure.check(StatusError) and failure.value.code == 409:
            # Contention (another writer got there first) is expected, not a bug.
            self.log.info("Work on {key} met a conflict; retrying in {delay:.1f}s: {error}",
                          key=key, delay=delay, error=failure.getErrorMessage())
        else:
            self.log.failure("Work on {key} failed; retrying in {delay:.1f}s", failure,
                             key=key, delay=delay)
        self.add_after(key, delay)

    def _finished(self, _, key):
        self._busy.discard(key)
        self._running -= 1
        if self._metrics is not None:
            self._metrics.done(key)
        if key in self._dirty:
            # Counted as added when it was asked for during its work.
            self._dirty.discard(key)
            if not self._stopped and key not in self._queued:
                self._queued.add(key)
                self._waiting.append(key)
        self._pump()

    def stop(self):
        self._stopped = True
        if self._metrics is not None:
            self._metrics.stopped()
        self._waiting.clear()
        self._queued.clear()
        self._later.stop()
