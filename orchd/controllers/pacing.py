# -*- test-case-name: tests.controllers.test_garbagecollector -*-
"""
A budget of work per reactor turn, so that a controller with much to do
never holds the reactor for long.

L{TurnPacer} sits in front of a L{WorkQueue}: keys wait in a pending set
and reach the queue a bounded amount per turn, and only while fewer than
C{concurrency} are being worked on.  Workers count each registry call
with L{TurnPacer.tick}; once the turn's budget is spent, the call waits
for the next turn.
"""

from twisted.internet.defer import Deferred, succeed

from orchd.controllers.queue import WorkQueue


class TurnPacer:
    """
    Runs C{work(key)} (an async function) for added keys, paced by turns.

    Nothing is handed to the queue before L{start}.

    @param clock: an C{IReactorTime}.
    @param ops_per_turn: registry calls (and queue feeds) per reactor turn.
    @param concurrency: keys worked on at once.
    """

    def __init__(self, work, clock, ops_per_turn, concurrency, metrics=None):
        self._work = work
        self._clock = clock
        self._ops_per_turn = ops_per_turn
        self._concurrency = concurrency
        self._queue = WorkQueue(self._run, clock, concurrency=concurrency, metrics=metrics)
        self._pending = {}
        self._in_flight = 0
        self._started = False
        self._stopped = False
        self._feed_call = None
        self._ops = 0
        self._turn_call = None
        self._waiters = []

    def start(self):
        """Begin handing pending work to the queue."""
        self._started = True
        self._schedule_feed()

    def stop(self):
        """Stop the queue and forget pending work and waiting workers."""
        self._stopped = True
        self._queue.stop()
        for call in (self._feed_call, self._turn_call):
            if call is not None and call.active():
                call.cancel()
        self._feed_call = self._turn_call = None
        self._waiters = []
        self._pending.clear()

    def add(self, key):
        """Ask for C{key} to be worked on; repeated requests collapse into one."""
        self._pending[key] = None
        self._schedule_feed()

    def _schedule_feed(self):
        if self._feed_call is None and self._started and not self._stopped and self._pending:
            self._feed_call = self._clock.callLater(0, self._feed)

    def _feed(self):
        """Hand pending work to the queue while workers and this turn's budget allow."""
        self._feed_call = None
        fed = 0
        while (self._pending and self._in_flight < self._concurrency
               and fed < self._ops_per_turn and self._ops < self._ops_per_turn
               and not self._stopped):
            key = next(iter(self._pending))
            del self._pending[key]
            fed += 1
            self._queue.add(key)
        if self._in_flight < self._concurrency:
            self._schedule_feed()

    def tick(self):
        """Count one registry call; past the turn's budget, wait for the next turn."""
        self._ops += 1
        if self._turn_call is None:
            self._turn_call = self._clock.callLater(0, self._next_turn)
        if self._ops <= self._ops_per_turn:
            return succeed(None)
        waiter = Deferred()
        self._waiters.append(waiter)
        return waiter

    def _next_turn(self):
        self._turn_call = None
        self._ops = 0
        waiters, self._waiters = self._waiters, []
        resumed = 0
        while resumed < len(waiters) and self._ops < self._ops_per_turn and not self._stopped:
            self._ops += 1
            resumed += 1
            waiters[resumed - 1].callback(None)
        self._waiters = waiters[resumed:] + self._waiters
        if (self._ops or self._waiters) and self._turn_call is None and not self._stopped:
            self._turn_call = self._clock.callLater(0, self._next_turn)

    async def _run(self, key):
        self._in_flight += 1
        try:
            await self.tick()
            if self._stopped:
                return
            await self._work(key)
        finally:
            self._in_flight -= 1
            self._schedule_feed()
