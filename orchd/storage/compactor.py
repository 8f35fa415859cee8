# -*- test-case-name: tests.storage.test_compactor -*-
"""
Periodic compaction: the store keeps about one interval of change history.

Each tick compacts to the revision the store had at the previous tick, so
a watch or a paged list can always resume from anything seen within the
last interval, and the event log stays bounded.
"""

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger


class Compactor(Service):
    """
    @param store: the L{orchd.storage.interfaces.IStore} to compact.
    @param clock: an C{IReactorTime}.
    @param interval: seconds between compactions; 0 turns compaction off.
    """

    log = Logger()

    def __init__(self, store, clock, interval):
        self._store = store
        self._interval = interval
        self._previous = None
        self._loop = LoopingCall(lambda: Deferred.fromCoroutine(self._tick()))
        self._loop.clock = clock

    def startService(self):
        super().startService()
        if self._interval > 0:
            self._loop.start(self._interval, now=True).addErrback(
                lambda f: self.log.failure("Compaction stopped", f))

    def stopService(self):
        if self._loop.running:
            self._loop.stop()
        return super().stopService()

    async def _tick(self):
        current = await self._store.current_revision()
        target, self._previous = self._previous, current
        if target:
            try:
                await self._store.compact(target)
            except Exception as e:
                self.log.warn("Compacting to revision {revision} failed: {error}",
                              revision=target, error=e)
                return
            self.log.debug("Compacted history up to revision {revision}", revision=target)
