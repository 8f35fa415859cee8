# -*- test-case-name: tests.orchlet.test_service,tests.orchlet.test_simnodes -*-
"""
A service whose start is a coroutine: it waits (for the API server in this
process to be ready, for credentials made off the reactor) before it can
build what it runs, and stopping it meanwhile cancels the wait.
"""

from twisted.application.service import MultiService
from twisted.internet.defer import CancelledError, Deferred
from twisted.logger import Logger


class StartingService(MultiService):
    """
    Subclasses define C{async _start()}, wait with L{_wait}, and call
    L{_cancel_waiting} first and L{_cancel_start} later when they stop.

    @cvar what: what starts, for the log (C{"The node agent"}).
    """

    log = Logger()
    what = "The service"

    def __init__(self):
        super().__init__()
        self._waiting = None
        self._work = None

    def startService(self):
        super().startService()
        self._work = Deferred.fromCoroutine(self._start())
        self._work.addErrback(self._failed)

    def _failed(self, failure):
        if not failure.check(CancelledError):
            self.log.failure("{what} could not start", failure, what=self.what)

    async def _wait(self, deferred):
        """Wait for C{deferred} without changing its result for others; cancellable."""
        self._waiting = waiter = Deferred()

        def fire(result):
            if not waiter.called:
                waiter.callback(None)
            return result
        deferred.addBoth(fire)
        try:
            await waiter
        finally:
            self._waiting = None

    def _cancel_waiting(self):
        if self._waiting is not None:
            self._waiting.cancel()

    def _cancel_start(self):
        if self._work is not None and not self._work.called:
            self._work.cancel()
