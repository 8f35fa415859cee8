# -*- test-case-name: tests.testing.test_units -*-
"""
A reactor whose timers run on a test clock while its network stays real.

With C{ControlPlane(clock=True)} the control plane's components get a
L{ClockedReactor}: every C{callLater} with a positive delay (controller
resyncs, CronJob schedules, token expiry checks, grace periods) waits for
the test to L{Clock.advance} the clock, and C{seconds()} reads it; sockets,
threads and zero-delay calls go to the real reactor, so requests are served
as usual.
"""

from zope.interface import directlyProvides, providedBy


class ClockedReactor:
    """The real C{reactor} with C{clock}'s time and delayed calls."""

    def __init__(self, reactor, clock):
        self._reactor = reactor
        self._clock = clock
        directlyProvides(self, *providedBy(reactor))

    def seconds(self):
        return self._clock.seconds()

    def callLater(self, delay, function, *args, **kwargs):
        if delay <= 0:
            return self._reactor.callLater(0, function, *args, **kwargs)
        return self._clock.callLater(delay, function, *args, **kwargs)

    def getDelayedCalls(self):
        return self._clock.getDelayedCalls()

    def __getattr__(self, name):
        return getattr(self._reactor, name)
